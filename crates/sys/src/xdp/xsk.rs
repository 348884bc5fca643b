//! An AF_XDP socket bound to one queue of one interface, with its own UMEM and four rings.
//!
//! Setup follows the kernel's order: register the UMEM, size the rings, read their mmap
//! offsets, map them, bind. Zero-copy is probed by binding a fresh socket with XDP_ZEROCOPY
//! and, under `auto`, falling back to a new socket in copy mode; what the kernel granted is
//! read back with XDP_OPTIONS rather than assumed.

use super::ring::{Desc, Ring};
use super::umem::Umem;
use crate::socket::{get_int_opt, set_int_opt};
use crate::{cvt, SysError, SysResult};
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Frames one copy-mode transmit call moves by default (TX_BATCH_SIZE in net/xdp/xsk.c);
/// the kernel answers EAGAIN while more remain.
pub const COPY_TX_BATCH: u32 = 32;
/// The socket option that raises [`COPY_TX_BATCH`] for one socket, from 32 up to the tx
/// ring's size (linux/if_xdp.h, Linux 6.17; not in the libc crate yet). The kernel offers no
/// getsockopt for it (EOPNOTSUPP): what it granted shows in how many frames a kick moves.
pub const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

/// Zero-copy request: probe, insist, or never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopy {
    Auto,
    On,
    Off,
}

impl ZeroCopy {
    /// Every choice, the default first.
    pub const ALL: &'static [ZeroCopy] = &[ZeroCopy::Auto, ZeroCopy::On, ZeroCopy::Off];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            ZeroCopy::Auto => "auto",
            ZeroCopy::On => "on",
            ZeroCopy::Off => "off",
        }
    }
}

/// What to build: ring sizes (a power of two, the same for all four), frames and wakeups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskConfig {
    pub ring: u32,
    pub frame_size: u32,
    pub frames: u32,
    pub zerocopy: ZeroCopy,
    pub need_wakeup: bool,
}

impl Default for XskConfig {
    /// Rings of 2048, twice as many 4096-byte frames, zero-copy probed, need_wakeup on.
    fn default() -> Self {
        XskConfig {
            ring: 2048,
            frame_size: 4096,
            frames: 4096,
            zerocopy: ZeroCopy::Auto,
            need_wakeup: true,
        }
    }
}

/// Kernel counters of one socket (XDP_STATISTICS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStats {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

/// Busy-polling values as the kernel reports them after setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyPoll {
    pub prefer: bool,
    pub usec: i32,
    /// None when the kernel has no read-back for SO_BUSY_POLL_BUDGET (ENOPROTOOPT); the
    /// setsockopt itself succeeded.
    pub budget: Option<i32>,
}

/// A bound AF_XDP socket. The fields are public so a caller can hold the UMEM mutably while
/// it walks a ring.
pub struct Xsk {
    fd: OwnedFd,
    pub umem: Umem,
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub rx: Ring<Desc>,
    pub tx: Ring<Desc>,
    zerocopy: bool,
    need_wakeup: bool,
    /// Why zero-copy is off when it was probed and refused.
    zerocopy_refusal: Option<String>,
    /// Frames one copy-mode transmit call moves.
    tx_budget: u32,
    /// The errno name when XDP_MAX_TX_SKB_BUDGET was refused.
    tx_budget_refusal: Option<&'static str>,
}

impl AsRawFd for Xsk {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

struct Bound {
    fd: OwnedFd,
    fill: Ring<u64>,
    comp: Ring<u64>,
    rx: Ring<Desc>,
    tx: Ring<Desc>,
}

fn set_ring(fd: RawFd, opt: i32, size: u32, name: &str) -> SysResult<()> {
    set_int_opt(fd, libc::SOL_XDP, opt, size as i32, name)
}

fn open_bound(
    ifindex: u32,
    queue: u32,
    cfg: &XskConfig,
    umem: &Umem,
    zc: bool,
) -> SysResult<Bound> {
    // SAFETY: socket() takes no pointers; the result is checked before use.
    let raw = cvt(
        unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) },
        || "socket(AF_XDP)".into(),
    )?;
    // SAFETY: a fresh fd from socket(), owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let reg = libc::xdp_umem_reg {
        addr: umem.base(),
        len: umem.len() as u64,
        chunk_size: umem.frame_size(),
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    // SAFETY: the kernel reads size_of(reg) bytes from a live local; it pins the pages of
    // the UMEM mapping, which outlives this socket (the Xsk owns both, socket dropped first).
    let ret = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_UMEM_REG,
            &reg as *const _ as *const libc::c_void,
            mem::size_of::<libc::xdp_umem_reg>() as libc::socklen_t,
        )
    };
    cvt(ret, || "setsockopt(XDP_UMEM_REG)".into())?;
    set_ring(
        raw,
        libc::XDP_UMEM_FILL_RING,
        cfg.ring,
        "XDP_UMEM_FILL_RING",
    )?;
    set_ring(
        raw,
        libc::XDP_UMEM_COMPLETION_RING,
        cfg.ring,
        "XDP_UMEM_COMPLETION_RING",
    )?;
    set_ring(raw, libc::XDP_RX_RING, cfg.ring, "XDP_RX_RING")?;
    set_ring(raw, libc::XDP_TX_RING, cfg.ring, "XDP_TX_RING")?;

    // SAFETY: xdp_mmap_offsets is plain integers; all-zero is a valid value.
    let mut off: libc::xdp_mmap_offsets = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into a live local.
    let ret = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut off as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    cvt(ret, || "getsockopt(XDP_MMAP_OFFSETS)".into())?;
    if (len as usize) < mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(SysError {
            what: "getsockopt(XDP_MMAP_OFFSETS): kernel without ring flags (need Linux >= 5.4)"
                .into(),
            source: std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
        });
    }
    let fill = Ring::map(
        raw,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        &off.fr,
        cfg.ring,
        true,
        "fill",
    )?;
    let comp = Ring::map(
        raw,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        &off.cr,
        cfg.ring,
        false,
        "completion",
    )?;
    let rx = Ring::map(
        raw,
        libc::XDP_PGOFF_RX_RING as u64,
        &off.rx,
        cfg.ring,
        false,
        "rx",
    )?;
    let tx = Ring::map(
        raw,
        libc::XDP_PGOFF_TX_RING as u64 & 0xffff_ffff,
        &off.tx,
        cfg.ring,
        true,
        "tx",
    )?;

    let mut flags = if zc {
        libc::XDP_ZEROCOPY
    } else {
        libc::XDP_COPY
    };
    if cfg.need_wakeup {
        flags |= libc::XDP_USE_NEED_WAKEUP;
    }
    let sa = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: the kernel reads size_of(sa) bytes from a live local.
    let ret = unsafe {
        libc::bind(
            raw,
            &sa as *const _ as *const libc::sockaddr,
            mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    let mode = if zc { "XDP_ZEROCOPY" } else { "XDP_COPY" };
    cvt(ret, || {
        format!("bind(AF_XDP, ifindex {ifindex}, queue {queue}, {mode})")
    })?;
    Ok(Bound {
        fd,
        fill,
        comp,
        rx,
        tx,
    })
}

/// The result of a zero-length kick: busy, no-buffer, try-again and link-down answers mean
/// "later" and are not errors.
fn kicked(ret: isize, what: &str) -> SysResult<()> {
    match cvt(ret, || what.into()) {
        Err(e)
            if matches!(
                e.errno(),
                Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN)
            ) =>
        {
            Ok(())
        }
        r => r.map(|_| ()),
    }
}

impl Xsk {
    /// Creates a socket on `queue` of interface `ifindex`, probing zero-copy as asked.
    pub fn open(ifindex: u32, queue: u32, cfg: &XskConfig) -> SysResult<Xsk> {
        let umem = Umem::new(cfg.frames, cfg.frame_size)?;
        let (bound, refusal) = match cfg.zerocopy {
            ZeroCopy::On => (open_bound(ifindex, queue, cfg, &umem, true)?, None),
            ZeroCopy::Off => (open_bound(ifindex, queue, cfg, &umem, false)?, None),
            ZeroCopy::Auto => match open_bound(ifindex, queue, cfg, &umem, true) {
                Ok(b) => (b, None),
                Err(zc) => {
                    let why = zc
                        .source
                        .raw_os_error()
                        .map(crate::errno_name)
                        .unwrap_or("?");
                    (
                        open_bound(ifindex, queue, cfg, &umem, false)?,
                        Some(why.to_string()),
                    )
                }
            },
        };
        // SAFETY: xdp_options is one integer; zero is valid.
        let mut opts: libc::xdp_options = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into a live local.
        let ret = unsafe {
            libc::getsockopt(
                bound.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut opts as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        cvt(ret, || "getsockopt(XDP_OPTIONS)".into())?;
        let zerocopy = opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0;
        // Copy mode: one transmit call may move the whole tx ring instead of 32 frames,
        // so a batch of replies needs one kick, not one per 32.
        let (tx_budget, tx_budget_refusal) = if zerocopy || cfg.ring <= COPY_TX_BATCH {
            (COPY_TX_BATCH, None)
        } else {
            let fd = bound.fd.as_raw_fd();
            let budget = i32::try_from(cfg.ring).unwrap_or(i32::MAX);
            match set_int_opt(
                fd,
                libc::SOL_XDP,
                XDP_MAX_TX_SKB_BUDGET,
                budget,
                "XDP_MAX_TX_SKB_BUDGET",
            ) {
                Ok(()) => (cfg.ring, None),
                Err(e) => (
                    COPY_TX_BATCH,
                    Some(
                        e.source
                            .raw_os_error()
                            .map(crate::errno_name)
                            .unwrap_or("?"),
                    ),
                ),
            }
        };
        Ok(Xsk {
            fd: bound.fd,
            umem,
            fill: bound.fill,
            comp: bound.comp,
            rx: bound.rx,
            tx: bound.tx,
            zerocopy,
            need_wakeup: cfg.need_wakeup,
            zerocopy_refusal: refusal,
            tx_budget,
            tx_budget_refusal,
        })
    }

    /// Frames one copy-mode transmit call moves: the tx ring's size when the kernel took
    /// XDP_MAX_TX_SKB_BUDGET, else [`COPY_TX_BATCH`].
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
    }

    /// The errno name of a refused XDP_MAX_TX_SKB_BUDGET (a kernel before 6.17).
    pub fn tx_budget_refusal(&self) -> Option<&str> {
        self.tx_budget_refusal
    }

    /// True when the kernel granted zero-copy (read back, not assumed).
    pub fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// The errno name of a refused zero-copy probe (under `auto`).
    pub fn zerocopy_refusal(&self) -> Option<&str> {
        self.zerocopy_refusal.as_deref()
    }

    /// True when bound with XDP_USE_NEED_WAKEUP.
    pub fn uses_need_wakeup(&self) -> bool {
        self.need_wakeup
    }

    /// Tells the kernel to transmit what is on the tx ring (a zero-length sendto).
    pub fn kick_tx(&self) -> SysResult<()> {
        // SAFETY: no buffers are passed; the kernel only looks at the socket.
        let ret = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        kicked(ret, "sendto(AF_XDP kick)")
    }

    /// Drives receive processing from this thread (a zero-length recvfrom): needed when the
    /// fill ring asks for a wakeup, and the busy-poll entry point.
    pub fn kick_rx(&self) -> SysResult<()> {
        // SAFETY: no buffers are passed; the kernel only looks at the socket.
        let ret = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        kicked(ret, "recvfrom(AF_XDP kick)")
    }

    /// The kernel's counters for this socket.
    pub fn stats(&self) -> SysResult<XskStats> {
        // SAFETY: plain integers; zero is valid.
        let mut s: libc::xdp_statistics = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into a live local.
        let ret = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut s as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        cvt(ret, || "getsockopt(XDP_STATISTICS)".into())?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }

    /// Preferred busy polling on this socket: SO_PREFER_BUSY_POLL, SO_BUSY_POLL (µs) and
    /// SO_BUSY_POLL_BUDGET, each read back after setting.
    pub fn set_busy_poll(&self, usec: i32, budget: i32) -> SysResult<BusyPoll> {
        let fd = self.fd.as_raw_fd();
        set_int_opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PREFER_BUSY_POLL,
            1,
            "SO_PREFER_BUSY_POLL",
        )?;
        set_int_opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            usec,
            "SO_BUSY_POLL",
        )?;
        set_int_opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL_BUDGET,
            budget,
            "SO_BUSY_POLL_BUDGET",
        )?;
        Ok(BusyPoll {
            prefer: get_int_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PREFER_BUSY_POLL,
                "SO_PREFER_BUSY_POLL",
            )? != 0,
            usec: get_int_opt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, "SO_BUSY_POLL")?,
            budget: match get_int_opt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL_BUDGET,
                "SO_BUSY_POLL_BUDGET",
            ) {
                Ok(b) => Some(b),
                Err(e) if e.errno() == Some(libc::ENOPROTOOPT) => None,
                Err(e) => return Err(e),
            },
        })
    }
}
