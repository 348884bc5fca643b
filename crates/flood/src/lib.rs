//! The packet-rate generator: send-only, pktgen's job in user space, over the socket send
//! calls (sendto, sendmmsg, UDP GSO).
//!
//! Each flow is a socket of its own, bound to its own source port and connected to the
//! target, so `--flows` distinct source ports spread the traffic over RSS queues and
//! reuseport sockets. Threads share the flows out. A datagram the kernel refuses (ENOBUFS
//! from a full device queue, ECONNREFUSED after a port-unreachable) is counted by errno and
//! sent again, so `--count` is the number that left, exactly. IP_RECVERR is set on every
//! socket: without it the kernel reports a queue drop as a success.
//!
//! `packet` mode sends the same flows' frames through an AF_PACKET TX ring instead
//! ([`af_packet`](mod@af_packet)), and `xdp` mode through one AF_XDP socket per thread
//! ([`xdp`](mod@xdp)); their sockets only hold the source ports.

mod af_packet;
pub mod document;
mod xdp;

use firehose_sys::mmsg::{Batch, SendMode};
use firehose_sys::socket::UdpSock;
use firehose_sys::supervise::{Health, Label, WorkerFailure, Workers};
use firehose_sys::uring::{DgramConfig, DgramRing, UringSetup};
use firehose_sys::xdp::setup::XdpApplied;
use firehose_sys::xdp::xsk::XskConfig;
use firehose_sys::{Setting, SetupError, SysError};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The send call a flood thread makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodIo {
    /// sendto(): one datagram per call.
    Sendto,
    /// sendmmsg(): a batch per call.
    Sendmmsg,
    /// UDP GSO: a batch as one UDP_SEGMENT super-datagram (sendmmsg where refused).
    Gso,
    /// io_uring: a batch of IORING_OP_SEND, one io_uring_enter.
    Uring,
    /// AF_PACKET TPACKET TX ring with PACKET_QDISC_BYPASS, frames built here.
    Packet,
    /// AF_XDP TX: one socket per thread on its own queue, frames built once in the UMEM.
    Xdp,
}

impl FloodIo {
    /// Every mode, in the order reports list them (the lab iterates over this: a new mode
    /// belongs here too).
    pub const ALL: &'static [FloodIo] = &[
        FloodIo::Sendto,
        FloodIo::Sendmmsg,
        FloodIo::Gso,
        FloodIo::Uring,
        FloodIo::Packet,
        FloodIo::Xdp,
    ];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            FloodIo::Sendto => "sendto",
            FloodIo::Sendmmsg => "sendmmsg",
            FloodIo::Gso => "gso",
            FloodIo::Uring => "uring",
            FloodIo::Packet => "packet",
            FloodIo::Xdp => "xdp",
        }
    }

    /// What the mode is, for the command line's help (the plain send calls need none).
    pub fn help(self) -> &'static str {
        match self {
            FloodIo::Sendto | FloodIo::Sendmmsg => "",
            FloodIo::Gso => {
                "UDP GSO (UDP_SEGMENT) super-datagrams, sendmmsg where the kernel refuses"
            }
            FloodIo::Uring => "io_uring: --batch IORING_OP_SEND per io_uring_enter",
            FloodIo::Packet => {
                "AF_PACKET TX ring with PACKET_QDISC_BYPASS (needs CAP_NET_RAW and a target \
                 behind a real interface, e.g. a veth peer)"
            }
            FloodIo::Xdp => {
                "AF_XDP TX: one socket per thread on its own queue of the interface toward the \
                 target (root; the target behind a real interface, e.g. a veth peer)"
            }
        }
    }
}

/// What a flood is asked to do.
#[derive(Debug, Clone)]
pub struct FloodConfig {
    pub target: SocketAddr,
    pub io: FloodIo,
    /// UDP payload bytes per datagram.
    pub payload: usize,
    /// Distinct source ports (one socket each).
    pub flows: usize,
    pub threads: usize,
    /// Thread i is pinned to `cpus[i]` when given.
    pub cpus: Option<Vec<usize>>,
    /// Datagrams per second across all threads; flat out when None.
    pub rate: Option<f64>,
    /// Datagrams to send in all; until stopped when None.
    pub count: Option<u64>,
    /// Datagrams per send call (sendmmsg, GSO, io_uring enter).
    pub batch: usize,
    /// Uring mode: the IORING_SETUP_* options of each thread's ring.
    pub uring: UringSetup,
    /// Xdp mode: each thread's socket (ring size, UMEM frames, zero-copy, need_wakeup).
    pub xsk: XskConfig,
}

#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    syscalls: AtomicU64,
    enobufs: AtomicU64,
    other_errors: AtomicU64,
    last_errno: AtomicU64,
    xdp_tx_ring_full: AtomicU64,
    xdp_uncompleted: AtomicU64,
    done: AtomicBool,
}

/// The figures at one moment, summed over threads.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FloodSnapshot {
    pub sent: u64,
    pub syscalls: u64,
    /// Sends refused with ENOBUFS (device or qdisc queue full); the datagrams went later.
    pub enobufs: u64,
    /// Sends refused with another errno (the last in `last_errno`).
    pub other_errors: u64,
    pub last_errno: Option<i32>,
    /// Xdp mode: sends cut short by a full tx ring (or every frame in flight), retried.
    pub xdp_tx_ring_full: u64,
    /// Xdp mode: frames handed to the kernel that never completed (the thread stopped).
    pub xdp_uncompleted: u64,
    /// Per thread: datagrams sent.
    pub per_thread: Vec<u64>,
}

/// A running flood.
pub struct Flood {
    stop: Arc<AtomicBool>,
    counters: Arc<Vec<Counters>>,
    workers: Workers<(), SysError>,
    /// The source ports in use, one per flow.
    pub source_ports: Vec<u16>,
    /// Xdp mode: what the kernel granted (interface, queues, zero-copy, ...) and notes.
    pub xdp: Option<XdpApplied>,
}

impl Flood {
    /// Opens a socket per flow and starts the threads.
    pub fn start(cfg: &FloodConfig) -> Result<Flood, SetupError> {
        if cfg.threads == 0 || cfg.flows == 0 || cfg.batch == 0 {
            let s = if cfg.threads == 0 {
                Setting::Threads
            } else if cfg.flows == 0 {
                Setting::Flows
            } else {
                Setting::Batch
            };
            return Err(SetupError::usage(
                s,
                format!(
                    "{}, {} and {} must be at least 1",
                    Setting::Threads.r(),
                    Setting::Flows.r(),
                    Setting::Batch.r()
                ),
            ));
        }
        if cfg.flows < cfg.threads {
            return Err(SetupError::usage(
                Setting::Flows,
                format!(
                    "{} threads need at least as many flows (each thread sends on its own sockets); raise {} to {}",
                    cfg.threads,
                    Setting::Flows.r(),
                    cfg.threads
                ),
            ));
        }
        if let Some(c) = &cfg.cpus {
            if c.len() < cfg.threads {
                return Err(SetupError::usage(
                    Setting::Cpus,
                    format!(
                        "{} threads but {} CPUs given: give a CPU per thread",
                        cfg.threads,
                        c.len()
                    ),
                ));
            }
        }
        if cfg.io == FloodIo::Uring {
            cfg.uring.check("send")?;
        }
        let any: SocketAddr = match cfg.target.ip() {
            IpAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
            IpAddr::V6(_) => "[::]:0".parse().expect("literal"),
        };
        let mut per_thread: Vec<Vec<UdpSock>> = (0..cfg.threads).map(|_| Vec::new()).collect();
        let mut source_ports = Vec::new();
        for f in 0..cfg.flows {
            let s = UdpSock::new_for(&cfg.target)?;
            s.bind(&any)?;
            s.connect(&cfg.target)?;
            s.set_recverr(true)?;
            source_ports.push(s.local_addr()?.port());
            per_thread[f % cfg.threads].push(s);
        }
        let mut senders: Vec<Option<Framer>> = Vec::new();
        let mut applied = None;
        if cfg.io == FloodIo::Packet || cfg.io == FloodIo::Xdp {
            let path = af_packet::resolve(&per_thread[0][0], cfg.target, cfg.io.name())?;
            let ports = per_thread
                .iter()
                .map(|socks| {
                    socks
                        .iter()
                        .map(|s| s.local_addr().map(|a| a.port()))
                        .collect::<Result<Vec<u16>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            if cfg.io == FloodIo::Xdp {
                let (s, a) = xdp_senders(cfg, &path, &ports)?;
                senders = s
                    .into_iter()
                    .map(|x| Some(Framer::Xdp(Box::new(x))))
                    .collect();
                applied = Some(a);
            } else {
                for p in &ports {
                    let s = af_packet::PacketSender::new(&path, p, cfg.payload)?;
                    senders.push(Some(Framer::Packet(s)));
                }
            }
        }
        senders.resize_with(cfg.threads, || None);
        let counters: Arc<Vec<Counters>> =
            Arc::new((0..cfg.threads).map(|_| Counters::default()).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Workers::new(false);
        for (i, (socks, ring)) in per_thread.into_iter().zip(senders).enumerate() {
            let quota = cfg
                .count
                .map(|n| n / cfg.threads as u64 + u64::from((i as u64) < n % cfg.threads as u64));
            let cpu = cfg.cpus.as_ref().map(|c| c[i]);
            let t = Thread {
                index: i,
                cpu,
                io: cfg.io,
                payload: cfg.payload,
                batch: cfg.batch,
                uring: cfg.uring,
                rate: cfg.rate.map(|r| r / cfg.threads as f64),
                quota,
                counters: counters.clone(),
                stop: stop.clone(),
            };
            let h = std::thread::Builder::new()
                .name(format!("flood-{i}"))
                .spawn(move || t.run(socks, ring))
                .map_err(|e| SysError {
                    what: "spawning a flood thread".into(),
                    source: e,
                })?;
            threads.push(Label::new("flood thread", i).cpu(cpu), h);
        }
        Ok(Flood {
            stop,
            counters,
            workers: threads,
            source_ports,
            xdp: applied,
        })
    }

    /// The counters now.
    pub fn snapshot(&self) -> FloodSnapshot {
        let mut s = FloodSnapshot::default();
        for c in self.counters.iter() {
            let sent = c.sent.load(Ordering::Relaxed);
            s.sent += sent;
            s.per_thread.push(sent);
            s.syscalls += c.syscalls.load(Ordering::Relaxed);
            s.enobufs += c.enobufs.load(Ordering::Relaxed);
            s.other_errors += c.other_errors.load(Ordering::Relaxed);
            s.xdp_tx_ring_full += c.xdp_tx_ring_full.load(Ordering::Relaxed);
            s.xdp_uncompleted += c.xdp_uncompleted.load(Ordering::Relaxed);
            match c.last_errno.load(Ordering::Relaxed) {
                0 => {}
                e => s.last_errno = Some(e as i32),
            }
        }
        s
    }

    /// The threads' state: done when every thread has sent its share of `--count`; a
    /// thread that panicked or failed is a failure.
    pub fn health(&mut self) -> Health {
        match self.workers.health(self.stop.load(Ordering::Relaxed)) {
            Health::Running if self.counters.iter().all(|c| c.done.load(Ordering::Relaxed)) => {
                Health::Done
            }
            h => h,
        }
    }

    /// Stops the threads; the final counters, or the first thread's failure.
    pub fn stop(mut self) -> Result<FloodSnapshot, WorkerFailure> {
        self.stop.store(true, Ordering::Relaxed);
        std::mem::replace(&mut self.workers, Workers::new(false)).join()?;
        Ok(self.snapshot())
    }
}

struct Thread {
    index: usize,
    cpu: Option<usize>,
    io: FloodIo,
    payload: usize,
    batch: usize,
    uring: UringSetup,
    rate: Option<f64>,
    quota: Option<u64>,
    counters: Arc<Vec<Counters>>,
    stop: Arc<AtomicBool>,
}

impl Thread {
    fn run(self, socks: Vec<UdpSock>, mut ring: Option<Framer>) -> Result<(), SysError> {
        if let Some(c) = self.cpu {
            firehose_sys::cpu::pin_current_thread(c)?;
        }
        let c = &self.counters[self.index];
        let mode = match self.io {
            FloodIo::Sendto => SendMode::Single,
            FloodIo::Sendmmsg => SendMode::Batch,
            FloodIo::Gso => SendMode::Gso,
            FloodIo::Uring | FloodIo::Packet | FloodIo::Xdp => SendMode::Batch,
        };
        let batch_n = if self.io == FloodIo::Sendto {
            1
        } else {
            self.batch
        };
        let mut b = Batch::new(batch_n, self.payload.max(1)).with_send(mode);
        for i in 0..batch_n {
            for (k, byte) in b.slot_mut(i).iter_mut().enumerate() {
                *byte = (k % 251) as u8;
            }
        }
        // Uring mode: the thread's flows on one send-only ring, the payload written once
        // into each of its slots; a batch of SENDs per io_uring_enter.
        let mut uring = match self.io {
            FloodIo::Uring => {
                let cfg = DgramConfig {
                    receive: false,
                    sends: batch_n,
                    tx_slots: batch_n,
                    tx_slot_size: self.payload.max(1),
                    ..DgramConfig::default()
                };
                let fds = socks.iter().map(|s| s.as_raw_fd()).collect();
                let mut r = DgramRing::new(fds, &cfg, &self.uring)?;
                for k in 0..batch_n {
                    r.tx_slot(k)
                        .copy_from_slice(&b.slot_mut(0)[..cfg.tx_slot_size]);
                }
                Some(r)
            }
            _ => None,
        };
        let lens = vec![self.payload; batch_n];
        let (mut sent, mut syscalls, mut enobufs, mut other) = (0u64, 0u64, 0u64, 0u64);
        let start = Instant::now();
        let mut flow = 0;
        // Packet mode marks as much of its ring as is free before each send(), trafgen's
        // way: the frames are already in the slots, so a kick costs one system call for
        // up to a ring of frames.
        let kick = match ring.as_ref() {
            Some(Framer::Packet(p)) => p.capacity(),
            _ => batch_n,
        };
        while !self.stop.load(Ordering::Relaxed) {
            let mut n = kick as u64;
            // Packet mode: frames already in the ring count against the quota.
            let pending = ring.as_ref().map_or(0, |r| r.pending() as u64);
            if let Some(q) = self.quota {
                n = n.min(q - sent - pending);
                if n == 0 && pending == 0 {
                    break;
                }
            }
            if let Some(r) = self.rate {
                let allowed = (start.elapsed().as_secs_f64() * r) as u64;
                if allowed <= sent + pending && pending == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                }
                n = n.min(allowed.saturating_sub(sent + pending));
            }
            let f = match (uring.as_mut(), ring.as_mut()) {
                (Some(r), _) => {
                    r.queue_sends(flow, &lens[..n as usize]);
                    r.flush()?
                }
                (_, Some(r)) => r.send(n as usize)?,
                _ => {
                    for i in 0..n as usize {
                        b.queue_send(i, self.payload);
                    }
                    b.flush(&socks[flow], 0)
                }
            };
            flow = (flow + 1) % socks.len();
            sent += f.sent as u64;
            syscalls += f.syscalls as u64;
            if f.failed > 0 {
                match f.last_error {
                    Some(firehose_sys::socket::ENOBUFS) => enobufs += f.failed as u64,
                    e => {
                        other += f.failed as u64;
                        c.last_errno.store(e.unwrap_or(0) as u64, Ordering::Relaxed);
                    }
                }
            }
            c.sent.store(sent, Ordering::Relaxed);
            c.syscalls.store(syscalls, Ordering::Relaxed);
            c.enobufs.store(enobufs, Ordering::Relaxed);
            c.other_errors.store(other, Ordering::Relaxed);
            if let Some(Framer::Xdp(x)) = ring.as_ref() {
                c.xdp_tx_ring_full.store(x.tx_ring_full, Ordering::Relaxed);
                c.xdp_uncompleted.store(x.uncompleted, Ordering::Relaxed);
                if x.gave_up() {
                    break;
                }
            }
        }
        // Xdp mode: frames still in flight when stopped count once they complete.
        if let Some(Framer::Xdp(x)) = ring.as_mut() {
            let until = Instant::now() + xdp::STALL;
            while x.pending() > 0 && !x.gave_up() && Instant::now() < until {
                sent += x.send(0)?.sent as u64;
            }
            c.sent.store(sent, Ordering::Relaxed);
            c.xdp_tx_ring_full.store(x.tx_ring_full, Ordering::Relaxed);
            c.xdp_uncompleted
                .store(x.uncompleted + x.pending() as u64, Ordering::Relaxed);
        }
        c.done.store(true, Ordering::Relaxed);
        Ok(())
    }
}

/// A thread's framed sender: an AF_PACKET TX ring or an AF_XDP socket.
enum Framer {
    Packet(af_packet::PacketSender),
    Xdp(Box<xdp::XdpSender>),
}

impl Framer {
    fn pending(&self) -> usize {
        match self {
            Framer::Packet(p) => p.pending(),
            Framer::Xdp(x) => x.pending(),
        }
    }

    fn send(&mut self, n: usize) -> Result<firehose_sys::mmsg::Flushed, SysError> {
        match self {
            Framer::Packet(p) => p.send(n),
            Framer::Xdp(x) => x.send(n),
        }
    }
}

/// Xdp mode: one socket per thread, thread i on queue i of the route's interface.
fn xdp_senders(
    cfg: &FloodConfig,
    path: &af_packet::Path,
    ports: &[Vec<u16>],
) -> Result<(Vec<xdp::XdpSender>, XdpApplied), SetupError> {
    use firehose_sys::xdp::setup::{self, Granted, Iface};
    setup::require_root("sendmmsg")?;
    setup::check_ring(cfg.xsk.ring)?;
    let iface = Iface::open(&path.interface)?;
    if cfg.threads > iface.rx_queues {
        return Err(SetupError::usage(
            Setting::Threads,
            format!(
                "{} xdp runs one socket per thread on its own queue: {} has {} queue(s) for {} \
                 threads; lower {}",
                Setting::Io.r(),
                iface.name,
                iface.rx_queues,
                cfg.threads,
                Setting::Threads.r()
            ),
        ));
    }
    let mut notes = Vec::new();
    let mut senders = Vec::new();
    for (q, p) in ports.iter().enumerate() {
        let x = xdp::XdpSender::new(&iface, q as u32, path, p, cfg.payload, &cfg.xsk, &mut notes)?;
        senders.push(x);
    }
    let (zerocopy, refusal) = senders[0].zerocopy();
    if let Some(why) = refusal {
        notes.push(format!(
            "zero-copy refused by {} ({why}): copy mode",
            iface.name
        ));
    }
    let granted = Granted {
        iface: iface.name.clone(),
        queues: (0..senders.len() as u32).collect(),
        program: None,
        zerocopy,
        need_wakeup: cfg.xsk.need_wakeup,
        ring: cfg.xsk.ring,
        frame_size: cfg.xsk.frame_size,
        frames_per_queue: senders[0].frames(),
        busy_poll: None,
        notes: Vec::new(),
    };
    let mut s = granted.settings();
    s.insert("source".into(), path.endpoints.src.ip().to_string());
    s.insert(
        "dst_mac".into(),
        firehose_frame::mac_text(&path.endpoints.dst_mac),
    );
    Ok((senders, XdpApplied { settings: s, notes }))
}

/// Whether a flood to `ip` from this network namespace (where the socket routes from)
/// stays on this host: loopback; an address of this namespace (the kernel routes it as
/// local); or an address reached straight out of a veth (no gateway) that the veth's other
/// end holds, in a namespace bound under /run/netns (the lab's). An address that another
/// namespace holds but that this one would reach through a gateway or another interface
/// is not local: the flood would go wherever that route leads. `Err` only when the route
/// or the interface could not be read.
pub fn is_local_target(ip: IpAddr) -> Result<bool, SysError> {
    use firehose_sys::{ifaddr, route};
    if ip.is_loopback() {
        return Ok(true);
    }
    let Some(r) = route::route_to(ip)? else {
        return Ok(false);
    };
    if r.local {
        return Ok(true);
    }
    let (true, Some(oif), None) = (r.unicast, r.oif, r.gateway) else {
        return Ok(false);
    };
    let out = route::link(oif)?;
    let (Some("veth"), Some(peer)) = (out.kind.as_deref(), out.link) else {
        return Ok(false);
    };
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Ok(false);
    };
    for e in dir.flatten() {
        // The namespace whose interface `peer` holds `ip` and is linked back to ours.
        let holds = ifaddr::in_netns(&e.path(), || {
            let on_peer = ifaddr::addresses()?
                .iter()
                .any(|a| a.ip == ip && a.ifindex == peer);
            Ok(on_peer && route::link(peer)?.link == Some(oif))
        });
        if holds.unwrap_or(false) {
            return Ok(true);
        }
    }
    Ok(false)
}
