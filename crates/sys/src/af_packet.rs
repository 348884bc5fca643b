//! AF_PACKET: raw frames through memory-mapped rings, the fast raw path of the NFV testing
//! and tuning sheet (PACKET_MMAP, PACKET_FANOUT, PACKET_QDISC_BYPASS as EtherateMT uses them).
//! The one AF_PACKET driver: sink's packet mode reads [`RxRing`]s (one per worker, joined in
//! a fanout group), flood's packet mode writes [`TxRing`]s (one per thread); neither makes
//! an AF_PACKET call of its own.
//!
//! - [`PacketSock`]: a SOCK_RAW packet socket bound to one interface, with the options a
//!   generator or sink turns: a classic BPF filter, a fanout group ([`Fanout`]: hash, cpu,
//!   lb, qm), PACKET_QDISC_BYPASS, and the kernel's receive statistics (PACKET_STATISTICS).
//! - [`RxRing`] (rx.rs): a TPACKET_V3 receive ring. The kernel fills whole blocks and hands a
//!   block over when it is full or its retire timeout expires; one poll() can yield hundreds of
//!   frames. A block is given back when the [`RxBlock`] view of it is dropped.
//! - [`TxRing`] (tx.rs): a TPACKET_V2 transmit ring. Frames are written in place, marked for
//!   sending, and one send() hands the kernel every marked frame.
//!
//! Every refusal carries the errno: EPERM without CAP_NET_RAW, EINVAL for a ring geometry
//! the kernel rejects (block size not a multiple of the page size, frame not aligned to
//! TPACKET_ALIGNMENT, frames not filling blocks), ENODEV for a missing interface.

mod rx;
mod tx;

pub use rx::{RxBlock, RxFrame, RxRing, RxRingConfig};
pub use tx::{TxRing, TxRingConfig, TxSent};

use crate::{cvt, SysError, SysResult};
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// `sll_pkttype` of a frame this host sent (seen by a packet socket on the way out).
pub const PKTTYPE_OUTGOING: u8 = libc::PACKET_OUTGOING;

/// How a fanout group picks the socket for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    /// By flow hash (the default): a flow stays on one socket.
    Hash,
    /// By the CPU that received the frame.
    Cpu,
    /// Round robin.
    Lb,
    /// By the frame's receive queue (skb queue mapping).
    Qm,
}

impl Fanout {
    /// The PACKET_FANOUT_* mode number.
    fn mode(self) -> u32 {
        match self {
            Fanout::Hash => libc::PACKET_FANOUT_HASH,
            Fanout::Cpu => libc::PACKET_FANOUT_CPU,
            Fanout::Lb => libc::PACKET_FANOUT_LB,
            Fanout::Qm => libc::PACKET_FANOUT_QM,
        }
    }

    /// Every mode, the default first.
    pub const ALL: &'static [Fanout] = &[Fanout::Hash, Fanout::Cpu, Fanout::Lb, Fanout::Qm];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Fanout::Hash => "hash",
            Fanout::Cpu => "cpu",
            Fanout::Lb => "lb",
            Fanout::Qm => "qm",
        }
    }
}

/// The kernel's receive counters of a packet socket (PACKET_STATISTICS, TPACKET_V3 layout).
/// Reading them resets them, so callers add up successive reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames that passed the filter (delivered or dropped).
    pub packets: u64,
    /// Of those, frames dropped because the ring (or receive buffer) was full.
    pub drops: u64,
    /// Times the ring was frozen because no block was free.
    pub freeze_q: u64,
}

/// A SOCK_RAW AF_PACKET socket bound to one interface.
#[derive(Debug)]
pub struct PacketSock {
    fd: OwnedFd,
    ifindex: u32,
}

impl AsRawFd for PacketSock {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl PacketSock {
    /// Opens a packet socket for interface `ifindex`. It receives nothing until
    /// [`Self::bind`] (protocol 0 at creation: a socket created with ETH_P_ALL would take
    /// frames from every interface at once, before its filter is attached). Needs
    /// CAP_NET_RAW (EPERM otherwise).
    pub fn open(ifindex: u32) -> SysResult<Self> {
        // SAFETY: socket() takes no pointers; the fd is checked before use.
        let fd = cvt(
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) },
            || "socket(AF_PACKET, SOCK_RAW)".into(),
        )?;
        // SAFETY: fd was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let s = PacketSock { fd, ifindex };
        Ok(s)
    }

    /// Binds to the interface given at open time, for every protocol (ETH_P_ALL). Done
    /// after the ring and filter are set up, so that no frame arrives before them.
    pub fn bind(&self) -> SysResult<()> {
        // SAFETY: sockaddr_ll is plain data; all-zero is valid before the fields are set.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = self.ifindex as i32;
        // SAFETY: the kernel reads a sockaddr_ll of the size given from a live local.
        let ret = unsafe {
            libc::bind(
                self.as_raw_fd(),
                &sll as *const _ as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        cvt(ret, || format!("bind(AF_PACKET, ifindex {})", self.ifindex)).map(|_| ())
    }

    /// The interface index this socket is for.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Sets an integer SOL_PACKET option.
    fn set_int(&self, name: i32, value: i32, label: &str) -> SysResult<()> {
        crate::socket::set_int_opt(self.as_raw_fd(), libc::SOL_PACKET, name, value, label)
    }

    /// Reads an integer SOL_PACKET option.
    fn get_int(&self, name: i32, label: &str) -> SysResult<i32> {
        crate::socket::get_int_opt(self.as_raw_fd(), libc::SOL_PACKET, name, label)
    }

    /// Attaches a classic BPF filter (SO_ATTACH_FILTER): frames it rejects never reach
    /// the ring and are not counted in [`PacketStats`].
    pub fn attach_filter(&self, prog: &[libc::sock_filter]) -> SysResult<()> {
        crate::bpf::attach_cbpf(self.as_raw_fd(), prog)
    }

    /// Joins fanout group `group` (an id shared by the sockets of one process) in `mode`.
    /// All members must be bound to the same interface and use the same mode. The group
    /// ignores frames this host sends (PACKET_FANOUT_FLAG_IGNORE_OUTGOING, kernel 6.9+):
    /// on lo every datagram passes twice, out and in, and round robin would otherwise
    /// hand every incoming copy to the same member. Older kernels refuse the flag
    /// (EINVAL) and join without it.
    pub fn join_fanout(&self, group: u16, mode: Fanout) -> SysResult<()> {
        let label = format!("PACKET_FANOUT {} group {group}", mode.name());
        let arg = group as u32 | (mode.mode() << 16);
        let flagged = arg | (libc::PACKET_FANOUT_FLAG_IGNORE_OUTGOING << 16);
        match self.set_int(libc::PACKET_FANOUT, flagged as i32, &label) {
            Err(e) if e.errno() == Some(libc::EINVAL) => {
                self.set_int(libc::PACKET_FANOUT, arg as i32, &label)
            }
            r => r,
        }
    }

    /// The fanout setting read back: (group id, mode number), or None outside a group.
    pub fn fanout(&self) -> SysResult<Option<(u16, u32)>> {
        let v = self.get_int(libc::PACKET_FANOUT, "PACKET_FANOUT")? as u32;
        Ok((v != 0).then_some(((v & 0xffff) as u16, (v >> 16) & 0xff)))
    }

    /// PACKET_QDISC_BYPASS: frames sent go straight to the driver, skipping the qdisc
    /// layer (no queueing: a busy device queue drops instead).
    pub fn set_qdisc_bypass(&self, on: bool) -> SysResult<()> {
        self.set_int(libc::PACKET_QDISC_BYPASS, on as i32, "PACKET_QDISC_BYPASS")
    }

    /// Whether PACKET_QDISC_BYPASS is set.
    pub fn qdisc_bypass(&self) -> SysResult<bool> {
        Ok(self.get_int(libc::PACKET_QDISC_BYPASS, "PACKET_QDISC_BYPASS")? != 0)
    }

    /// PACKET_VNET_HDR: each frame sent is preceded by a `struct virtio_net_hdr`
    /// ([`VNET_HDR_LEN`] bytes; see [`vnet_hdr_linear`]). On a TX ring its `hdr_len` is how
    /// many leading bytes the kernel copies into the socket buffer's linear area; without
    /// it the frame past the link header is attached as ring pages, which a veth or any
    /// receive path on this host must copy again.
    pub fn set_vnet_hdr(&self, on: bool) -> SysResult<()> {
        self.set_int(libc::PACKET_VNET_HDR, on as i32, "PACKET_VNET_HDR")
    }

    /// Whether PACKET_VNET_HDR is set.
    pub fn vnet_hdr(&self) -> SysResult<bool> {
        Ok(self.get_int(libc::PACKET_VNET_HDR, "PACKET_VNET_HDR")? != 0)
    }

    /// PACKET_IGNORE_OUTGOING: do not see frames this host sends (kernel 4.20+).
    pub fn set_ignore_outgoing(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::PACKET_IGNORE_OUTGOING,
            on as i32,
            "PACKET_IGNORE_OUTGOING",
        )
    }

    /// Reads (and thereby resets) the receive counters. Valid for a TPACKET_V3 socket;
    /// for other versions the kernel leaves `freeze_q` at zero.
    pub fn take_stats(&self) -> SysResult<PacketStats> {
        let st: libc::tpacket_stats_v3 = crate::sockopt::get(
            self.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            "PACKET_STATISTICS",
        )?;
        Ok(PacketStats {
            packets: st.tp_packets as u64,
            drops: st.tp_drops as u64,
            freeze_q: st.tp_freeze_q_cnt as u64,
        })
    }

    /// Waits until the socket is readable (or writable with `out`), at most `timeout`.
    /// Returns false on timeout or EINTR.
    pub fn poll(&self, out: bool, timeout: Duration) -> SysResult<bool> {
        let mut pfd = libc::pollfd {
            fd: self.as_raw_fd(),
            events: if out { libc::POLLOUT } else { libc::POLLIN },
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one live pollfd.
        let ret = unsafe { libc::poll(&mut pfd, 1, ms) };
        match cvt(ret, || "poll(AF_PACKET)".into()) {
            Ok(n) if n > 0 && pfd.revents & libc::POLLERR != 0 => Err(self.pending_error()),
            Ok(n) => Ok(n > 0),
            Err(e) if e.errno() == Some(libc::EINTR) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The error the kernel left on the socket (SO_ERROR, which reading clears): ENETDOWN
    /// once the interface went down or away. Without this, a ring whose interface is gone
    /// polls as ready forever and its reader spins with nothing to read.
    fn pending_error(&self) -> SysError {
        let what = || "poll(AF_PACKET): the socket reports an error".to_string();
        match crate::sockopt::get_int(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            "SO_ERROR",
        ) {
            Ok(errno) if errno != 0 => SysError {
                what: what(),
                source: io::Error::from_raw_os_error(errno),
            },
            Ok(_) => SysError {
                what: what(),
                source: io::Error::other("POLLERR with no error set"),
            },
            Err(e) => e,
        }
    }
}

pub use crate::ifaddr::ifindex;

/// A shared memory mapping of a packet ring, unmapped on drop.
#[derive(Debug)]
struct RingMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by one ring, which one thread uses at a time.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Maps the ring(s) the kernel allocated for `fd`, locked in memory where the
    /// RLIMIT_MEMLOCK allows (an unprivileged user may not lock: then unlocked).
    fn new(fd: RawFd, len: usize, what: &str) -> SysResult<Self> {
        let what = || format!("mmap({what}, {len} bytes)");
        let ptr = crate::map_shared(fd, len, 0, libc::MAP_LOCKED, what)
            .or_else(|_| crate::map_shared(fd, len, 0, 0, what))?;
        Ok(RingMap { ptr, len })
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in new(); no view into it outlives the ring.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// The system page size.
fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// The classic BPF program a UDP sink on `port` attaches: accept an IPv4 (unfragmented or
/// first fragment) or IPv6 (UDP as the first next header) frame to that UDP port that this
/// host did not send, drop everything else.
pub fn udp_port_filter(port: u16) -> Vec<libc::sock_filter> {
    let ins = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    use libc::{
        BPF_ABS, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_LDX,
        BPF_MSH, BPF_RET, BPF_W,
    };
    let p = port as u32;
    // Jumps are relative (target = index + 1 + offset); indices are noted to check them.
    let (drop, accept) = (16u8, 17u8);
    let to = |from: u8, target: u8| target - from - 1;
    vec![
        /* 0 */
        ins(
            BPF_LD | BPF_W | BPF_ABS,
            0,
            0,
            (libc::SKF_AD_OFF + libc::SKF_AD_PKTTYPE) as u32,
        ),
        /* 1 */
        ins(
            BPF_JMP | BPF_JEQ | BPF_K,
            to(1, drop),
            0,
            PKTTYPE_OUTGOING as u32,
        ),
        /* 2 */ ins(BPF_LD | BPF_H | BPF_ABS, 0, 0, 12),
        /* 3 */ ins(BPF_JMP | BPF_JEQ | BPF_K, 0, to(3, 11), 0x0800),
        /* 4 */ ins(BPF_LD | BPF_B | BPF_ABS, 0, 0, 23),
        /* 5 */ ins(BPF_JMP | BPF_JEQ | BPF_K, 0, to(5, drop), 17),
        /* 6 */ ins(BPF_LD | BPF_H | BPF_ABS, 0, 0, 20),
        /* 7 */ ins(BPF_JMP | BPF_JSET | BPF_K, to(7, drop), 0, 0x1fff),
        /* 8 */ ins(BPF_LDX | BPF_B | BPF_MSH, 0, 0, 14),
        /* 9 */ ins(BPF_LD | BPF_H | BPF_IND, 0, 0, 16),
        /* 10 */ ins(BPF_JMP | BPF_JEQ | BPF_K, to(10, accept), to(10, drop), p),
        /* 11 */ ins(BPF_JMP | BPF_JEQ | BPF_K, 0, to(11, drop), 0x86dd),
        /* 12 */ ins(BPF_LD | BPF_B | BPF_ABS, 0, 0, 20),
        /* 13 */ ins(BPF_JMP | BPF_JEQ | BPF_K, 0, to(13, drop), 17),
        /* 14 */ ins(BPF_LD | BPF_H | BPF_ABS, 0, 0, 56),
        /* 15 */ ins(BPF_JMP | BPF_JEQ | BPF_K, to(15, accept), to(15, drop), p),
        /* 16 */ ins(BPF_RET | BPF_K, 0, 0, 0),
        /* 17 */ ins(BPF_RET | BPF_K, 0, 0, u32::MAX),
    ]
}

/// Size of the `struct virtio_net_hdr` that PACKET_VNET_HDR puts before each frame.
pub const VNET_HDR_LEN: usize = 10;

/// A `struct virtio_net_hdr` asking for nothing (no checksum offload, no segmentation)
/// but that the first `linear` bytes of the frame go into the linear area (`hdr_len`, in
/// the host's byte order as the kernel reads it on little-endian hosts; modern virtio is
/// little-endian).
pub fn vnet_hdr_linear(linear: u16) -> [u8; VNET_HDR_LEN] {
    let mut h = [0u8; VNET_HDR_LEN];
    h[2..4].copy_from_slice(&linear.to_le_bytes());
    h
}

#[cfg(test)]
mod tests;
