//! Kernel objects around the XDP program: the XSKMAP, the loaded program, the BPF link that
//! attaches it, and the look-up of a program by id (to tell ours from a foreign one).
//!
//! The program is attached through a BPF link (BPF_LINK_CREATE, attach type BPF_XDP): the link
//! lives as long as its fd, so the program leaves the interface when the process exits for
//! any reason, SIGKILL included. A link cannot be replaced through netlink, which is also what
//! keeps a second server from silently taking over a running one's interface.

use super::prog::{drop_all, pass_all, udp_redirect, UdpMatch, DROP_PROG_NAME, PROG_NAME};
use crate::bpf::{bpf_call, prog_load};
use crate::bpf_map::{ElemAttr as MapElemAttr, MapCreateAttr};
use crate::{SysError, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_PROG_GET_FD_BY_ID: i32 = 13;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_LINK_CREATE: i32 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

/// XDP attach mode flags (XDP_FLAGS_* in linux/if_link.h).
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Where the program runs: in the driver (native) or on the generic skb path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    Native,
    Generic,
}

impl XdpMode {
    /// The attach flag for this mode.
    pub fn flag(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

fn owned(fd: i64) -> OwnedFd {
    // SAFETY: fd was just returned by the kernel for us and is owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// An XSKMAP: AF_XDP sockets indexed by rx queue id.
pub struct XskMap {
    fd: OwnedFd,
}

impl AsRawFd for XskMap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl XskMap {
    /// A map with room for queues `0..entries`.
    pub fn new(entries: u32) -> SysResult<Self> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries.max(1),
            ..Default::default()
        };
        attr.map_name[..7].copy_from_slice(b"fh_xsks");
        let fd = bpf_call(BPF_MAP_CREATE, &mut attr, || {
            "bpf(BPF_MAP_CREATE, XSKMAP)".into()
        })?;
        Ok(XskMap { fd: owned(fd) })
    }

    /// Puts the socket `xsk_fd` at `queue`.
    pub fn set(&self, queue: u32, xsk_fd: RawFd) -> SysResult<()> {
        let key = queue;
        let value = xsk_fd as u32;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..Default::default()
        };
        bpf_call(BPF_MAP_UPDATE_ELEM, &mut attr, || {
            format!("bpf(BPF_MAP_UPDATE_ELEM, XSKMAP[{queue}])")
        })
        .map(|_| ())
    }
}

/// The loaded redirect program (not yet attached).
pub struct XdpProg {
    fd: OwnedFd,
}

impl XdpProg {
    /// Builds and loads the program for `m` over `map`.
    pub fn load(m: &UdpMatch, map: &XskMap) -> SysResult<Self> {
        let insns = udp_redirect(m, map.as_raw_fd());
        let fd = prog_load(BPF_PROG_TYPE_XDP, BPF_XDP, &insns, PROG_NAME, "XDP")?;
        Ok(XdpProg { fd })
    }

    /// A program named `name` that passes every packet: what another tool's program looks
    /// like to [`prog_info`], for tests of the foreign-program rules.
    pub fn load_pass(name: &str) -> SysResult<Self> {
        let fd = prog_load(BPF_PROG_TYPE_XDP, BPF_XDP, &pass_all(), name, "XDP")?;
        Ok(XdpProg { fd })
    }

    /// The discard program ([`drop_all`]), named [`DROP_PROG_NAME`].
    pub fn load_drop() -> SysResult<Self> {
        let fd = prog_load(
            BPF_PROG_TYPE_XDP,
            BPF_XDP,
            &drop_all(),
            DROP_PROG_NAME,
            "XDP",
        )?;
        Ok(XdpProg { fd })
    }

    /// Attaches to `ifindex` in `mode` through a BPF link; the link detaches on drop (and on
    /// process death).
    pub fn attach(&self, ifindex: u32, mode: XdpMode) -> SysResult<XdpLink> {
        #[repr(C)]
        #[derive(Default)]
        struct LinkCreateAttr {
            prog_fd: u32,
            target_ifindex: u32,
            attach_type: u32,
            flags: u32,
            _rest: [u64; 4],
        }
        let mut attr = LinkCreateAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flag(),
            ..Default::default()
        };
        let fd = bpf_call(BPF_LINK_CREATE, &mut attr, || {
            format!(
                "bpf(BPF_LINK_CREATE, XDP {} on ifindex {ifindex})",
                mode.name()
            )
        })?;
        Ok(XdpLink { _fd: owned(fd) })
    }

    /// The kernel's id for this program.
    pub fn id(&self) -> SysResult<u32> {
        Ok(info_of(self.fd.as_raw_fd())?.0)
    }
}

impl AsRawFd for XdpProg {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An attachment of the program to an interface; dropping it detaches the program.
pub struct XdpLink {
    _fd: OwnedFd,
}

/// A program found attached to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    pub id: u32,
    pub name: String,
}

impl ProgInfo {
    /// True for a program this crate built (recognised by name).
    pub fn is_ours(&self) -> bool {
        self.name == PROG_NAME
    }
}

/// `(id, name)` of the program behind `fd` (BPF_OBJ_GET_INFO_BY_FD).
fn info_of(fd: RawFd) -> SysResult<(u32, String)> {
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    // The prefix of struct bpf_prog_info up to and including `name` (80 bytes).
    let mut info = [0u8; 80];
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: info.len() as u32,
        info: info.as_mut_ptr() as u64,
    };
    bpf_call(BPF_OBJ_GET_INFO_BY_FD, &mut attr, || {
        "bpf(BPF_OBJ_GET_INFO_BY_FD)".into()
    })?;
    let id = u32::from_ne_bytes([info[4], info[5], info[6], info[7]]);
    let name = &info[64..80];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok((id, String::from_utf8_lossy(&name[..end]).into_owned()))
}

/// Looks up program `id` (BPF_PROG_GET_FD_BY_ID, then its info).
pub fn prog_info(id: u32) -> SysResult<ProgInfo> {
    #[repr(C)]
    #[derive(Default)]
    struct GetFdAttr {
        prog_id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let mut attr = GetFdAttr {
        prog_id: id,
        ..Default::default()
    };
    let fd = owned(bpf_call(BPF_PROG_GET_FD_BY_ID, &mut attr, || {
        format!("bpf(BPF_PROG_GET_FD_BY_ID, {id})")
    })?);
    let (id, name) = info_of(fd.as_raw_fd())?;
    Ok(ProgInfo { id, name })
}

/// An error value for conditions found by inspection rather than returned by a call.
pub(crate) fn refused(what: String, errno: i32) -> SysError {
    SysError {
        what,
        source: std::io::Error::from_raw_os_error(errno),
    }
}
