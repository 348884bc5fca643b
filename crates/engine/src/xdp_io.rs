//! The AF_XDP backend's setup: checks of the interface, queues and whatever XDP program is
//! already attached, then one AF_XDP socket per rx queue, the XSKMAP, the redirect program and
//! its BPF link. The sockets are opened here, before the workers start, so that what the
//! kernel granted (zero-copy, native or generic mode) is known for the applied
//! configuration and a refusal stops the start with one line; each worker then takes its
//! queue's socket (see [`crate::xdp_backend`]).
//!
//! Cleanup is by ownership: the link (and with it the program on the interface), the map and
//! the sockets close when the last worker and the server have dropped this value, which
//! happens on normal exit, on a failed start and on a panic. After a SIGKILL the kernel closes
//! the link fd itself, so the program leaves with the process.

use crate::backend::{BackendApplied, Io, WorkerSeat};
use crate::server::ServeError;
use crate::xdp_backend::XdpBackend;
use firehose_sys::ethtool::Ethtool;
use firehose_sys::xdp::attach::{prog_info, XdpLink, XdpMode, XdpProg, XskMap};
use firehose_sys::xdp::prog::{AddrMatch, UdpMatch};
use firehose_sys::xdp::xsk::{BusyPoll, Xsk, XskConfig, ZeroCopy};
use firehose_sys::xdp::{iface_addrs, ifindex, netlink};
use firehose_sys::{cpu, errno_name, SysError};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Mutex;

/// Where to attach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeChoice {
    /// Native where the driver has it, else generic.
    Auto,
    Native,
    Generic,
}

/// Which rx queues to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queues {
    All,
    List(Vec<u32>),
}

/// The AF_XDP switches of `serve --io xdp`.
#[derive(Debug, Clone)]
pub struct XdpConfig {
    pub iface: String,
    pub queues: Queues,
    pub mode: ModeChoice,
    pub zerocopy: ZeroCopy,
    /// Entries of each of the four rings (a power of two).
    pub ring: u32,
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    pub need_wakeup: bool,
    /// Preferred busy polling: (SO_BUSY_POLL µs, SO_BUSY_POLL_BUDGET).
    pub busy_poll: Option<(i32, i32)>,
    /// Replace a foreign XDP program.
    pub force: bool,
    /// Most requests per batch.
    pub batch: usize,
}

/// IFF_UP in the interface flags.
const IFF_UP: u32 = 1;

/// A queue's socket and the frames not on its fill ring.
type Stocked = (Xsk, Vec<u64>);

/// The AF_XDP path of a server, shared by its workers.
pub struct XdpIo {
    queues: Vec<u32>,
    /// Each queue's socket with its free frames (the rest already on its fill ring).
    xsks: Mutex<Vec<Option<Stocked>>>,
    cfg: XdpConfig,
    mtu: usize,
    applied: BackendApplied,
    // Dropped after the sockets: detaches the program, then the map goes.
    _link: XdpLink,
    _prog: XdpProg,
    _map: XskMap,
}

fn usage(msg: String) -> ServeError {
    ServeError::Config(msg)
}

fn kernel(e: SysError) -> ServeError {
    ServeError::Kernel(e)
}

/// The interface exists, is up, carries `listen`'s address, and has the asked queues.
fn check_iface(cfg: &XdpConfig, listen: &SocketAddr) -> Result<(u32, Vec<u32>, usize), ServeError> {
    let iface = &cfg.iface;
    let idx = ifindex(iface).map_err(|_| {
        usage(format!(
            "--iface {iface}: no such interface here (see `ip link`)"
        ))
    })?;
    // Asked through ioctls, not /sys, so the answer is about this thread's namespace.
    let et = Ethtool::new().map_err(kernel)?;
    let flags = et.if_flags(iface).map_err(kernel)?;
    if flags & IFF_UP == 0 {
        return Err(usage(format!(
            "--iface {iface} is down: bring it up with `ip link set {iface} up`"
        )));
    }
    if !listen.ip().is_unspecified() {
        let addrs = iface_addrs(iface).map_err(kernel)?;
        if !addrs.contains(&listen.ip()) {
            return Err(usage(format!(
                "--listen {} is not an address of {iface} (it has {}): listen on one of its \
                 addresses or on the unspecified address",
                listen.ip(),
                if addrs.is_empty() {
                    "none".to_string()
                } else {
                    addrs
                        .iter()
                        .map(IpAddr::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
        }
    }
    let count = et.rx_queues(iface);
    let queues = match &cfg.queues {
        Queues::All => (0..count as u32).collect(),
        Queues::List(l) => l.clone(),
    };
    if let Some(q) = queues.iter().find(|&&q| q as usize >= count) {
        return Err(usage(format!(
            "--queues: queue {q} is out of range, {iface} has {count} rx queue(s) (0-{})",
            count - 1
        )));
    }
    let mtu = et.mtu(iface).map_err(kernel)? as usize;
    Ok((idx, queues, mtu))
}

/// Refuses a foreign program (unless forced) and removes a leftover of ours. A program held
/// by a BPF link belongs to a live process and is never removed.
fn clear_attached(cfg: &XdpConfig, idx: u32) -> Result<Vec<String>, ServeError> {
    let iface = &cfg.iface;
    let now = netlink::query(idx).map_err(kernel)?;
    let mut notes = Vec::new();
    if now.native == 0 && now.generic == 0 && now.any != 0 {
        return Err(usage(format!(
            "{iface} runs an offloaded XDP program (id {}): remove it with `ip link set dev {iface} xdpoffload off`",
            now.any
        )));
    }
    for (id, generic) in [(now.native, false), (now.generic, true)] {
        if id == 0 {
            continue;
        }
        let info = prog_info(id).map_err(kernel)?;
        if !info.is_ours() && !cfg.force {
            return Err(usage(format!(
                "{iface} already runs a foreign XDP program '{}' (id {id}): remove it \
                 (`ip link set dev {iface} xdp off`) or pass --force to replace it",
                info.name
            )));
        }
        match netlink::detach(idx, generic) {
            Ok(()) => notes.push(format!(
                "removed XDP program '{}' (id {id}) from {iface}",
                info.name
            )),
            Err(e) if e.errno() == Some(firehose_sys::xdp::EBUSY) => {
                let whose = if info.is_ours() {
                    "another firehose serve"
                } else {
                    "another process"
                };
                return Err(usage(format!(
                    "{iface} runs XDP program '{}' (id {id}) held by a BPF link of {whose}: \
                     stop that process first",
                    info.name
                )));
            }
            Err(e) => return Err(kernel(e)),
        }
    }
    Ok(notes)
}

/// What the program matches, from the listen address.
fn udp_match(listen: &SocketAddr) -> UdpMatch {
    let port = listen.port();
    match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => UdpMatch::to(port, AddrMatch::Any, AddrMatch::Off),
        IpAddr::V4(a) => UdpMatch::to(port, AddrMatch::Is(a), AddrMatch::Off),
        // The server's IPv6 sockets are IPV6_V6ONLY: `[::]` serves IPv6 alone.
        IpAddr::V6(a) if a.is_unspecified() => UdpMatch::to(port, AddrMatch::Off, AddrMatch::Any),
        IpAddr::V6(a) => UdpMatch::to(port, AddrMatch::Off, AddrMatch::Is(a)),
    }
}

impl XdpIo {
    /// Checks, opens and attaches everything for serving `listen` on `cfg.iface`. The
    /// listen socket itself (the fallback path) is opened by the server as usual.
    pub fn new(cfg: XdpConfig, listen: SocketAddr) -> Result<XdpIo, ServeError> {
        if !cpu::is_root() {
            return Err(usage(
                "--io xdp needs root (CAP_NET_ADMIN and CAP_BPF): run as root, or use --io socket"
                    .into(),
            ));
        }
        if !cfg.ring.is_power_of_two() || !(64..=16384).contains(&cfg.ring) {
            return Err(usage(format!(
                "--ring {}: use a power of two from 64 to 16384",
                cfg.ring
            )));
        }
        if listen.port() == 0 {
            return Err(usage(
                "--io xdp needs a fixed --listen port (the program matches it)".into(),
            ));
        }
        let (idx, queues, mtu) = check_iface(&cfg, &listen)?;
        let mut notes = clear_attached(&cfg, idx)?;
        let max_q = queues.iter().copied().max().unwrap_or(0);
        let map = XskMap::new(max_q + 1).map_err(kernel)?;
        let prog = XdpProg::load(&udp_match(&listen), &map).map_err(kernel)?;
        let xcfg = XskConfig {
            ring: cfg.ring,
            frame_size: cfg.frame_size,
            frames: cfg.ring * 2,
            zerocopy: cfg.zerocopy,
            need_wakeup: cfg.need_wakeup,
        };
        let mut xsks = Vec::with_capacity(queues.len());
        let mut busy: Option<BusyPoll> = None;
        for &q in &queues {
            let xsk = open_xsk(idx, q, &xcfg, &cfg, &mut notes)?;
            map.set(q, xsk.as_raw_fd()).map_err(kernel)?;
            if let Some((usec, budget)) = cfg.busy_poll {
                busy = Some(xsk.set_busy_poll(usec, budget).map_err(kernel)?);
            }
            // Stock the fill ring now: once the program is attached, a packet that finds
            // it empty is dropped.
            let mut free = xsk.all_frames();
            let mut xsk = xsk;
            xsk.refill(&mut free);
            xsks.push(Some((xsk, free)));
        }
        let (link, mode) = attach(&prog, idx, &cfg, &mut notes)?;
        let first = &xsks[0].as_ref().expect("opened above").0;
        if let Some(why) = first.zerocopy_refusal() {
            notes.push(format!(
                "zero-copy refused by {} ({why}): copy mode",
                cfg.iface
            ));
        }
        let mut s = BTreeMap::new();
        s.insert("iface".into(), cfg.iface.clone());
        s.insert(
            "queues".into(),
            queues
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        s.insert("xdp_mode".into(), mode.name().into());
        s.insert(
            "zerocopy".into(),
            if first.zerocopy() { "on" } else { "off" }.into(),
        );
        s.insert("need_wakeup".into(), cfg.need_wakeup.to_string());
        s.insert("ring".into(), cfg.ring.to_string());
        s.insert("frame_size".into(), cfg.frame_size.to_string());
        s.insert("frames_per_queue".into(), xcfg.frames.to_string());
        s.insert("batch".into(), cfg.batch.to_string());
        s.insert("mtu".into(), mtu.to_string());
        s.insert("prog_id".into(), prog.id().map_err(kernel)?.to_string());
        s.insert(
            "busy_poll".into(),
            match busy {
                Some(b) => format!(
                    "prefer={} usec={} budget={}",
                    b.prefer,
                    b.usec,
                    b.budget
                        .map_or("set(no read-back)".to_string(), |v| v.to_string())
                ),
                None => "off".into(),
            },
        );
        s.insert("fallback".into(), format!("kernel UDP socket on {listen}"));
        Ok(XdpIo {
            queues,
            xsks: Mutex::new(xsks),
            cfg,
            mtu,
            applied: BackendApplied {
                name: "af_xdp".into(),
                settings: s,
                notes,
            },
            _link: link,
            _prog: prog,
            _map: map,
        })
    }

    /// The queues served, one worker each in this order.
    pub fn queues(&self) -> &[u32] {
        &self.queues
    }
}

/// Opens queue `q`'s socket. A queue stays busy (EBUSY) for a moment after a previous
/// owner died, while the kernel releases its socket; that wait is bounded and noted.
fn open_xsk(
    idx: u32,
    q: u32,
    xcfg: &XskConfig,
    cfg: &XdpConfig,
    notes: &mut Vec<String>,
) -> Result<Xsk, ServeError> {
    let started = std::time::Instant::now();
    let mut waited = false;
    loop {
        match Xsk::open(idx, q, xcfg) {
            Ok(x) => {
                if waited {
                    notes.push(format!(
                        "queue {q} was busy for {} ms (a previous socket closing)",
                        started.elapsed().as_millis()
                    ));
                }
                return Ok(x);
            }
            Err(e) if e.errno() == Some(firehose_sys::xdp::EBUSY) && started.elapsed() < BUSY_WAIT => {
                waited = true;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) if e.errno() == Some(firehose_sys::xdp::EBUSY) => {
                return Err(usage(format!(
                    "queue {q} of {} is in use by another AF_XDP socket ({e}): stop the program using it",
                    cfg.iface
                )))
            }
            Err(e) if cfg.zerocopy == ZeroCopy::On => {
                return Err(usage(format!(
                    "--zerocopy on: {} refused zero-copy on queue {q} ({e}); use --zerocopy auto",
                    cfg.iface
                )))
            }
            Err(e) => return Err(kernel(e)),
        }
    }
}

/// How long a busy queue is waited for.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Attaches in the asked mode; under `auto`, native first and generic when refused.
fn attach(
    prog: &XdpProg,
    idx: u32,
    cfg: &XdpConfig,
    notes: &mut Vec<String>,
) -> Result<(XdpLink, XdpMode), ServeError> {
    let refused = |mode: XdpMode, e: SysError| {
        let errno = e.errno().map(errno_name).unwrap_or("?");
        usage(format!(
            "--xdp-mode {}: {} refused {} XDP ({e}, {errno}); try --xdp-mode auto",
            mode.name(),
            cfg.iface,
            mode.name()
        ))
    };
    match cfg.mode {
        ModeChoice::Native => Ok((
            prog.attach(idx, XdpMode::Native)
                .map_err(|e| refused(XdpMode::Native, e))?,
            XdpMode::Native,
        )),
        ModeChoice::Generic => Ok((
            prog.attach(idx, XdpMode::Generic)
                .map_err(|e| refused(XdpMode::Generic, e))?,
            XdpMode::Generic,
        )),
        ModeChoice::Auto => match prog.attach(idx, XdpMode::Native) {
            Ok(l) => Ok((l, XdpMode::Native)),
            Err(native) => {
                let l = prog.attach(idx, XdpMode::Generic).map_err(kernel)?;
                let errno = native.errno().map(errno_name).unwrap_or("?");
                notes.push(format!(
                    "native XDP refused by {} ({errno}): generic mode",
                    cfg.iface
                ));
                Ok((l, XdpMode::Generic))
            }
        },
    }
}

impl Io for XdpIo {
    type Backend = XdpBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<XdpBackend, ServeError> {
        let Some(&queue) = self.queues.get(seat.index) else {
            return Err(usage(format!(
                "worker {} has no queue: --io xdp runs one worker per queue ({} queues)",
                seat.index,
                self.queues.len()
            )));
        };
        let (xsk, free) = self
            .xsks
            .lock()
            .map_err(|_| usage("a worker panicked during start".into()))?[seat.index]
            .take()
            .ok_or_else(|| usage(format!("queue {queue} opened twice")))?;
        Ok(XdpBackend::new(
            xsk,
            free,
            seat.socket.clone(),
            &self.cfg,
            self.mtu,
        ))
    }

    fn applied(&self) -> Option<BackendApplied> {
        Some(self.applied.clone())
    }
}
