//! The packet-rate sink: receive-only, counting datagrams and bytes per worker and per CPU,
//! the user-space side of the Red Hat article on UDP receive (its udp_sink, with the same
//! receive calls: recv, recvfrom, recvmsg, recvmmsg) plus AF_PACKET's TPACKET_V3 ring with
//! PACKET_FANOUT across workers, the NFV testing and tuning sheet's raw path, and AF_XDP
//! ([`xdp`](mod@xdp)): the redirect program steers the listen port's UDP into one socket per
//! rx queue.
//!
//! [`Sink::start`] opens every socket or ring before any thread runs, so a refusal (an
//! address in use, AF_PACKET without CAP_NET_RAW, a ring size the kernel rejects) comes
//! back as an error naming the call and errno. Workers publish their counters with plain
//! stores after each receive call; [`Sink::snapshot`] reads them at any time. The socket
//! modes block with no timeout, like udp_sink; [`Sink::stop`] wakes them with
//! shutdown(SHUT_RD).
//! [`drops`](mod@drops) reads the host's drop counters around a run.

pub mod document;
pub mod drops;
mod worker;
mod xdp;

use firehose_sys::af_packet::{self, Fanout, PacketSock, RxRing, RxRingConfig};
use firehose_sys::socket::UdpSock;
use firehose_sys::supervise::{Health, Label, WorkerFailure, Workers};
use firehose_sys::uring::UringSetup;
use firehose_sys::xdp::queue::XdpQueue;
use firehose_sys::xdp::setup::{Steered, XdpOptions};
use firehose_sys::{Setting, SetupError, SysError};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The receive call a sink worker makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkIo {
    /// recv(): one datagram, no sender address.
    Recv,
    /// recvfrom(): one datagram and its sender.
    Recvfrom,
    /// recvmsg(): one datagram through a msghdr (udp_sink's `--recvmsg`, the article's).
    Recvmsg,
    /// recvmmsg(): up to `--batch` datagrams per call.
    Recvmmsg,
    /// io_uring: one multishot IORING_OP_RECVMSG per worker over a provided-buffer ring.
    Uring,
    /// AF_PACKET TPACKET_V3 ring on the interface, fanout across workers.
    Packet,
    /// AF_XDP: one socket per rx queue of the interface, the listen port's UDP redirected to
    /// them by an XDP program; one worker per queue.
    Xdp,
}

impl SinkIo {
    /// Every mode, in the order reports list them (the lab iterates over this: a new mode
    /// belongs here too).
    pub const ALL: &'static [SinkIo] = &[
        SinkIo::Recv,
        SinkIo::Recvfrom,
        SinkIo::Recvmsg,
        SinkIo::Recvmmsg,
        SinkIo::Uring,
        SinkIo::Packet,
        SinkIo::Xdp,
    ];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            SinkIo::Recv => "recv",
            SinkIo::Recvfrom => "recvfrom",
            SinkIo::Recvmsg => "recvmsg",
            SinkIo::Recvmmsg => "recvmmsg",
            SinkIo::Uring => "uring",
            SinkIo::Packet => "packet",
            SinkIo::Xdp => "xdp",
        }
    }

    /// What the mode is, for the command line's help (the plain receive calls need none).
    pub fn help(self) -> &'static str {
        match self {
            SinkIo::Recv | SinkIo::Recvfrom | SinkIo::Recvmsg | SinkIo::Recvmmsg => "",
            SinkIo::Uring => {
                "io_uring: multishot IORING_OP_RECVMSG over a provided-buffer ring, per worker"
            }
            SinkIo::Packet => {
                "AF_PACKET TPACKET_V3 ring, PACKET_FANOUT across workers (needs CAP_NET_RAW)"
            }
            SinkIo::Xdp => {
                "AF_XDP: an XDP program redirects --listen's UDP to one socket per rx queue of \
                 --iface, one worker each (root)"
            }
        }
    }
}

/// What a sink is asked to do.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Address and port to receive on.
    pub listen: SocketAddr,
    /// The receive call.
    pub io: SinkIo,
    /// Receiving threads. Xdp mode runs one per queue of `xdp.queues`: 0 takes the count
    /// from the queues, any other value must equal it.
    pub workers: usize,
    /// Worker i is pinned to `cpus[i]` when given.
    pub cpus: Option<Vec<usize>>,
    /// Datagrams per recvmmsg call.
    pub batch: usize,
    /// SO_BUSY_POLL microseconds on each socket.
    pub busy_poll_us: Option<u32>,
    /// SO_RCVBUF (SO_RCVBUFFORCE when permitted) bytes.
    pub rcvbuf: Option<usize>,
    /// One SO_REUSEPORT socket per worker (else one socket shared by all workers).
    pub reuseport: bool,
    /// Packet and xdp modes: the interface to open (default: the one holding the listen
    /// address).
    pub interface: Option<String>,
    /// Packet mode: how the fanout group spreads frames over workers.
    pub fanout: Fanout,
    /// Packet mode: the receive ring of each worker.
    pub ring: RxRingConfig,
    /// Uring mode: the IORING_SETUP_* options of each worker's ring.
    pub uring: UringSetup,
    /// Xdp mode: queues, attach mode, zero-copy, rings, busy polling.
    pub xdp: XdpOptions,
}

/// One worker's counters, written by the worker only.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub syscalls: AtomicU64,
    /// Packet mode: frames dropped by the ring (PACKET_STATISTICS), and ring freezes.
    pub ring_drops: AtomicU64,
    pub ring_freezes: AtomicU64,
    /// Xdp mode: the socket's XDP_STATISTICS (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs) as last read.
    pub xsk_rx_dropped: AtomicU64,
    pub xsk_rx_ring_full: AtomicU64,
    pub xsk_fill_ring_empty: AtomicU64,
    /// Packets counted while running on each CPU.
    pub per_cpu: Vec<AtomicU64>,
}

/// A worker's figures at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerSnapshot {
    pub worker: usize,
    /// The CPU it is pinned to, if any.
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub cpu: Option<usize>,
    pub packets: u64,
    pub bytes: u64,
    pub syscalls: u64,
    /// Datagrams its socket dropped (SO_MEMINFO); 0 for a shared socket but worker 0's.
    pub socket_drops: u64,
    /// Packet mode: frames its ring dropped, and times the ring froze.
    pub ring_drops: u64,
    pub ring_freezes: u64,
    /// Xdp mode: its queue, and its socket's drops: frames the kernel could not put on the
    /// rx ring (rx_dropped, rx_ring_full) or found no fill-ring frame for.
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub queue: Option<u32>,
    pub xsk_rx_dropped: u64,
    pub xsk_rx_ring_full: u64,
    pub xsk_fill_ring_empty: u64,
}

/// All workers at one moment, plus packets counted per CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    pub workers: Vec<WorkerSnapshot>,
    /// (cpu, packets) for each CPU that counted any.
    pub per_cpu: Vec<(usize, u64)>,
}

impl Snapshot {
    /// Sum over workers of one field.
    pub fn total(&self, f: impl Fn(&WorkerSnapshot) -> u64) -> u64 {
        self.workers.iter().map(f).sum()
    }
}

/// A running sink.
pub struct Sink {
    stop: Arc<AtomicBool>,
    counters: Arc<Vec<Counters>>,
    workers: Workers<(), SysError>,
    sockets: Vec<Arc<UdpSock>>,
    /// Packet mode: a UDP socket holding the port with a drop-all filter, so the kernel
    /// neither queues the datagrams nor answers them with port-unreachable.
    holder: Option<UdpSock>,
    cpus: Vec<Option<usize>>,
    /// Xdp mode: worker i's queue.
    queues: Option<Vec<u32>>,
    local: SocketAddr,
    /// Packet and xdp modes: the interface the rings are on.
    pub interface: Option<String>,
    /// Xdp mode: the attached program and what the kernel granted; dropping it detaches.
    pub xdp: Option<Steered>,
    /// The receive buffer the kernel granted, per socket.
    pub rcvbuf_granted: Option<i32>,
    /// Workers block in recv/recvfrom/recvmsg/recvmmsg on `sockets` (stop shuts them down).
    blocking: bool,
}

/// What a worker receives from.
pub(crate) enum Source {
    Socket(Arc<UdpSock>),
    /// Uring mode: the ring is made on the worker's thread (SINGLE_ISSUER binds it there).
    Uring(Arc<UdpSock>, UringSetup),
    Ring(Box<RxRing>),
    /// Xdp mode: a queue's driver, its fill ring stocked.
    Xsk(Box<XdpQueue>),
}

impl Sink {
    /// Opens the sockets or rings and starts the workers.
    pub fn start(cfg: &SinkConfig) -> Result<Sink, SetupError> {
        if (cfg.workers == 0 && cfg.io != SinkIo::Xdp) || cfg.batch == 0 {
            let s = if cfg.batch == 0 {
                Setting::Batch
            } else {
                Setting::Workers
            };
            return Err(SetupError::usage(
                s,
                format!(
                    "{} and {} must be at least 1",
                    Setting::Workers.r(),
                    Setting::Batch.r()
                ),
            ));
        }
        if let Some(c) = &cfg.cpus {
            if c.len() < cfg.workers {
                return Err(SetupError::usage(
                    Setting::Cpus,
                    format!(
                        "{} workers but {} CPUs given: give a CPU per worker",
                        cfg.workers,
                        c.len()
                    ),
                ));
            }
        }
        let ncpu = firehose_sys::cpu::allowed_cpus()?
            .into_iter()
            .max()
            .unwrap_or(0)
            .max(cfg.cpus.iter().flatten().copied().max().unwrap_or(0))
            + 1;
        let mut sockets = Vec::new();
        let mut sources = Vec::new();
        let mut holder = None;
        let mut interface = None;
        let mut rcvbuf_granted = None;
        let mut local = cfg.listen;
        let mut steered = None;
        if cfg.io == SinkIo::Xdp {
            let hold = port_holder(cfg)?;
            local = hold.local_addr()?;
            let (s, drivers, name) = xdp::open(cfg, &local)?;
            sources.extend(drivers.into_iter().map(|q| Source::Xsk(Box::new(q))));
            steered = Some(s);
            holder = Some(hold);
            interface = Some(name);
        } else if cfg.io == SinkIo::Packet {
            let hold = port_holder(cfg)?;
            local = hold.local_addr()?;
            let (ifindex, name) = packet_interface(cfg)?;
            let group = (std::process::id() as u16) ^ 0x5eed;
            for _ in 0..cfg.workers {
                let ring = RxRing::new(PacketSock::open(ifindex)?, cfg.ring)?;
                ring.sock()
                    .attach_filter(&af_packet::udp_port_filter(local.port()))?;
                ring.sock().bind()?;
                if cfg.workers > 1 {
                    ring.sock().join_fanout(group, cfg.fanout)?;
                }
                sources.push(Source::Ring(Box::new(ring)));
            }
            holder = Some(hold);
            interface = Some(name);
        } else {
            if cfg.io == SinkIo::Uring {
                // Refusals (sysctl, flags, a kernel without multishot RECVMSG) surface here,
                // before any worker runs.
                cfg.uring.check("recvmsg")?;
            }
            let n = if cfg.reuseport { cfg.workers } else { 1 };
            for _ in 0..n {
                let s = udp_socket(cfg, cfg.reuseport)?;
                s.bind(&local)?;
                local = s.local_addr()?;
                rcvbuf_granted = Some(s.rcvbuf()?);
                sockets.push(Arc::new(s));
            }
            for i in 0..cfg.workers {
                let s = sockets[i % sockets.len()].clone();
                sources.push(match cfg.io {
                    SinkIo::Uring => Source::Uring(s, cfg.uring),
                    _ => Source::Socket(s),
                });
            }
        }
        let workers = sources.len();
        let counters: Arc<Vec<Counters>> = Arc::new(
            (0..workers)
                .map(|_| Counters {
                    per_cpu: (0..ncpu).map(|_| AtomicU64::new(0)).collect(),
                    ..Counters::default()
                })
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        if let Some(c) = cfg.cpus.as_ref().filter(|c| c.len() < workers) {
            return Err(SetupError::usage(
                Setting::Cpus,
                format!(
                    "{workers} workers (one per queue) but {} CPUs given: give a CPU per worker",
                    c.len()
                ),
            ));
        }
        let cpus: Vec<Option<usize>> = (0..workers)
            .map(|i| cfg.cpus.as_ref().map(|c| c[i]))
            .collect();
        let queues = steered.as_ref().map(|s| s.granted.queues.clone());
        let mut threads = Workers::new(true);
        for (i, src) in sources.into_iter().enumerate() {
            let w = worker::Worker {
                index: i,
                cpu: cpus[i],
                io: cfg.io,
                batch: cfg.batch,
                counters: counters.clone(),
                stop: stop.clone(),
            };
            let h = std::thread::Builder::new()
                .name(format!("sink-{i}"))
                .spawn(move || w.run(src))
                .map_err(|e| SysError {
                    what: "spawning a sink worker".into(),
                    source: e,
                })?;
            let queue = queues.as_ref().and_then(|q| q.get(i).copied());
            threads.push(Label::new("sink worker", i).queue(queue).cpu(cpus[i]), h);
        }
        Ok(Sink {
            stop,
            counters,
            workers: threads,
            sockets,
            holder,
            cpus,
            queues,
            local,
            interface,
            xdp: steered,
            rcvbuf_granted,
            blocking: matches!(
                cfg.io,
                SinkIo::Recv | SinkIo::Recvfrom | SinkIo::Recvmsg | SinkIo::Recvmmsg
            ),
        })
    }

    /// Worker threads running (xdp mode: one per queue).
    pub fn workers(&self) -> usize {
        self.cpus.len()
    }

    /// The address the sink is bound to (the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let mut per_cpu: Vec<u64> = Vec::new();
        let workers = self
            .counters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if per_cpu.len() < c.per_cpu.len() {
                    per_cpu.resize(c.per_cpu.len(), 0);
                }
                for (k, v) in c.per_cpu.iter().enumerate() {
                    per_cpu[k] += v.load(Ordering::Relaxed);
                }
                let socket_drops = if i < self.sockets.len() {
                    self.sockets[i].drops().map(u64::from).unwrap_or(0)
                } else {
                    0
                };
                WorkerSnapshot {
                    worker: i,
                    cpu: self.cpus[i],
                    packets: c.packets.load(Ordering::Relaxed),
                    bytes: c.bytes.load(Ordering::Relaxed),
                    syscalls: c.syscalls.load(Ordering::Relaxed),
                    socket_drops,
                    ring_drops: c.ring_drops.load(Ordering::Relaxed),
                    ring_freezes: c.ring_freezes.load(Ordering::Relaxed),
                    queue: self.queues.as_ref().map(|q| q[i]),
                    xsk_rx_dropped: c.xsk_rx_dropped.load(Ordering::Relaxed),
                    xsk_rx_ring_full: c.xsk_rx_ring_full.load(Ordering::Relaxed),
                    xsk_fill_ring_empty: c.xsk_fill_ring_empty.load(Ordering::Relaxed),
                }
            })
            .collect();
        Snapshot {
            workers,
            per_cpu: per_cpu
                .into_iter()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .collect(),
        }
    }

    /// Packet and xdp modes: datagrams the port-holding socket's drop-all filter discarded
    /// (the kernel counts them in Udp InErrors too, so a report subtracts them). In xdp mode
    /// these are the listen port's datagrams the program passed to the kernel (a queue
    /// without a socket, fragments, IP options).
    pub fn held_port_drops(&self) -> u64 {
        self.holder
            .as_ref()
            .and_then(|h| h.drops().ok())
            .map(u64::from)
            .unwrap_or(0)
    }

    /// The workers' state: a worker that panicked, failed or returned is a failure (they
    /// run until stopped).
    pub fn health(&mut self) -> Health {
        self.workers.health(self.stop.load(Ordering::Relaxed))
    }

    /// Packets received so far by all workers: what a caller polls often (no system call,
    /// unlike [`Sink::snapshot`], which reads each socket's drop counter).
    pub fn packets(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.packets.load(Ordering::Relaxed))
            .sum()
    }

    /// Tells the workers to stop and wakes those blocked in a receive (socket modes block
    /// with no timeout, as udp_sink does: a timeout would arm a timer on every sleep).
    fn wake_to_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.blocking {
            for s in &self.sockets {
                // A socket that cannot be shut down leaves its worker blocked; nothing
                // else would wake it, so the error is not worth more than the attempt.
                let _ = s.shutdown_read();
            }
        }
    }

    /// Stops the workers and returns the final counters, or the first worker's failure.
    pub fn stop(mut self) -> Result<Snapshot, WorkerFailure> {
        self.wake_to_stop();
        std::mem::replace(&mut self.workers, Workers::new(true)).join()?;
        Ok(self.snapshot())
    }
}

impl Drop for Sink {
    /// A sink dropped without [`Sink::stop`] still ends its workers.
    fn drop(&mut self) {
        self.wake_to_stop();
    }
}

/// A UDP socket bound to the listen address with a drop-all filter: it holds the port (the
/// kernel neither queues what reaches it nor answers with port-unreachable) while packet or
/// xdp mode receive below the socket layer.
fn port_holder(cfg: &SinkConfig) -> Result<UdpSock, SysError> {
    let hold = udp_socket(cfg, false)?;
    firehose_sys::bpf::attach_cbpf(hold.as_raw_fd(), &firehose_sys::bpf::cbpf_drop_all())?;
    hold.bind(&cfg.listen)?;
    Ok(hold)
}

/// A UDP socket with the sink's options, not yet bound.
fn udp_socket(cfg: &SinkConfig, reuseport: bool) -> Result<UdpSock, SysError> {
    let s = UdpSock::new_for(&cfg.listen)?;
    if cfg.listen.is_ipv6() {
        s.set_v6only(true)?;
    }
    if reuseport {
        s.set_reuseport(true)?;
    }
    if let Some(b) = cfg.rcvbuf {
        let b = b.min(i32::MAX as usize) as i32;
        if s.set_rcvbuf(b, true).is_err() {
            s.set_rcvbuf(b, false)?;
        }
    }
    if let Some(us) = cfg.busy_poll_us {
        s.set_busy_poll(us as i32)?;
    }
    Ok(s)
}

/// The interface for packet and xdp modes: as given, or the one holding the listen address.
fn packet_interface(cfg: &SinkConfig) -> Result<(u32, String), SetupError> {
    if let Some(name) = &cfg.interface {
        let idx = af_packet::ifindex(name).map_err(|_| {
            SetupError::usage(
                Setting::Iface,
                format!(
                    "{} {name}: no such interface here (see `ip link`)",
                    Setting::Iface.r()
                ),
            )
        })?;
        return Ok((idx, name.clone()));
    }
    let ip = cfg.listen.ip();
    if ip.is_unspecified() {
        return Err(SetupError::usage(
            Setting::Iface,
            format!(
                "{} {} on {ip} needs {} NAME: its rings are opened on one interface",
                Setting::Io.r(),
                cfg.io.name(),
                Setting::Iface.r()
            ),
        ));
    }
    firehose_sys::ifaddr::interface_of(ip)?.ok_or_else(|| {
        SetupError::usage(
            Setting::Listen,
            format!(
                "{} {ip} is not an address of this host, so no interface to open rings on; give a local address or {} NAME",
                Setting::Listen.r(),
                Setting::Iface.r()
            ),
        )
    })
}

#[cfg(test)]
mod tests;
