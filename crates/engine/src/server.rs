//! Socket set-up and the worker loop.

use crate::config::{Pin, PmtuDisc, ServeConfig, SocketMode, Steer};
use crate::handler::{Handler, Peer, Verdict};
use crate::stats::{SocketStats, WorkerCounters, WorkerStats};
use firehose_sys::mmsg::{recv_some, Batch};
use firehose_sys::socket::{consts, pmtudisc_name, UdpSock};
use firehose_sys::{bpf, cpu, SysError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Largest UDP payload over IPv4, plus room: every slot can hold any datagram.
pub const SLOT_SIZE: usize = 65536;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is inconsistent (bad usage).
    #[error("{0}")]
    Config(String),
    /// The kernel refused a call or option; the message names it and the errno.
    #[error("{0}")]
    Kernel(#[from] SysError),
}

/// One socket as the kernel configured it, read back with getsockopt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppliedSocket {
    pub index: usize,
    pub local: String,
    pub reuseport: bool,
    pub steering: String,
    pub rcvbuf: i32,
    pub sndbuf: i32,
    pub mtu_discover: String,
    pub busy_poll_us: i32,
    pub prefer_busy_poll: Option<bool>,
    pub busy_poll_budget: Option<i32>,
    pub rxq_ovfl: bool,
}

/// The configuration in force once the server runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Applied {
    pub listen: String,
    pub workers: usize,
    pub sockets: SocketMode,
    pub steer: Steer,
    pub batch: usize,
    pub busy_poll: bool,
    /// CPU of each worker, `None` when unpinned.
    pub worker_cpus: Vec<Option<usize>>,
    /// Socket each worker reads.
    pub worker_sockets: Vec<usize>,
    pub socket_detail: Vec<AppliedSocket>,
    /// Notes on choices made at run time (e.g. an option the kernel lacks).
    pub notes: Vec<String>,
}

/// A running server.
pub struct Server {
    stop: Arc<AtomicBool>,
    sockets: Vec<Arc<UdpSock>>,
    counters: Arc<Vec<WorkerCounters>>,
    threads: Vec<JoinHandle<Vec<(&'static str, u64)>>>,
    applied: Applied,
    local: SocketAddr,
}

fn resolve_cpus(cfg: &ServeConfig) -> Result<Vec<Option<usize>>, ServeError> {
    let allowed = cpu::allowed_cpus()?;
    let list = match &cfg.pin {
        Pin::None => return Ok(vec![None; cfg.workers]),
        Pin::Auto => {
            if cfg.workers > allowed.len() {
                return Err(ServeError::Config(format!(
                    "--pin auto needs a CPU per worker: {} workers but only {} allowed CPUs ({:?}); lower --workers or use --pin none",
                    cfg.workers,
                    allowed.len(),
                    allowed
                )));
            }
            allowed[..cfg.workers].to_vec()
        }
        Pin::List(l) => {
            if l.len() < cfg.workers {
                return Err(ServeError::Config(format!(
                    "--pin lists {} CPUs for {} workers; give one CPU per worker",
                    l.len(),
                    cfg.workers
                )));
            }
            for c in l {
                if !allowed.contains(c) {
                    return Err(ServeError::Config(format!(
                        "CPU {c} in --pin does not exist or is not allowed for this process (allowed: {allowed:?})"
                    )));
                }
            }
            l[..cfg.workers].to_vec()
        }
    };
    Ok(list.into_iter().map(Some).collect())
}

/// Orders workers so that socket `j` (bind order) is read by the worker pinned to a CPU
/// `c` with `c % n == j`: the steering program sends a packet received on CPU `c` to
/// socket `c % n`, so each packet is read on the CPU that received it.
fn order_for_steering(cpus: &[Option<usize>]) -> Result<Vec<Option<usize>>, ServeError> {
    let n = cpus.len();
    if cpus.iter().any(|c| c.is_none()) {
        return Ok(cpus.to_vec());
    }
    let mut ordered = vec![None; n];
    for c in cpus.iter().flatten() {
        let j = c % n;
        if ordered[j].is_some() {
            return Err(ServeError::Config(format!(
                "CPU steering maps CPU c to socket c % workers, so pinned CPUs must differ modulo {n}; {:?} do not (choose CPUs such as 0-{})",
                cpus.iter().flatten().collect::<Vec<_>>(),
                n - 1
            )));
        }
        ordered[j] = Some(*c);
    }
    Ok(ordered)
}

fn open_socket(cfg: &ServeConfig, reuseport: bool) -> Result<UdpSock, ServeError> {
    let s = UdpSock::new_for(&cfg.listen)?;
    if s.is_v6() {
        s.set_v6only(true)?;
    }
    if reuseport {
        s.set_reuseport(true)?;
    }
    let force = cpu::is_root();
    if let Some(b) = cfg.rcvbuf {
        s.set_rcvbuf(clamp_i32(b), force)?;
    }
    if let Some(b) = cfg.sndbuf {
        s.set_sndbuf(clamp_i32(b), force)?;
    }
    match cfg.pmtudisc {
        PmtuDisc::Default => {}
        PmtuDisc::Dont => s.set_mtu_discover(consts::IP_PMTUDISC_DONT)?,
        PmtuDisc::Do => s.set_mtu_discover(consts::IP_PMTUDISC_DO)?,
        PmtuDisc::Omit => s.set_mtu_discover(consts::IP_PMTUDISC_OMIT)?,
    }
    if let Some(us) = cfg.busy_poll {
        s.set_busy_poll(us.min(i32::MAX as u32) as i32)?;
    }
    if cfg.rxq_ovfl {
        s.set_rxq_ovfl(true)?;
    }
    Ok(s)
}

fn clamp_i32(v: usize) -> i32 {
    v.min(i32::MAX as usize / 2) as i32
}

fn read_back(
    s: &UdpSock,
    index: usize,
    steering: &'static str,
    busy: bool,
) -> Result<AppliedSocket, ServeError> {
    let opt = |r: Result<i32, SysError>| r.ok();
    Ok(AppliedSocket {
        index,
        local: s.local_addr()?.to_string(),
        reuseport: s.reuseport()?,
        steering: steering.to_string(),
        rcvbuf: s.rcvbuf()?,
        sndbuf: s.sndbuf()?,
        mtu_discover: pmtudisc_name(s.mtu_discover()?).to_string(),
        busy_poll_us: s.busy_poll()?,
        prefer_busy_poll: if busy {
            s.prefer_busy_poll().ok()
        } else {
            None
        },
        busy_poll_budget: if busy {
            opt(s.busy_poll_budget())
        } else {
            None
        },
        rxq_ovfl: s.rxq_ovfl()?,
    })
}

impl Server {
    /// Opens the sockets, applies every option, and starts the workers. `make` builds
    /// one handler per worker (called with the worker index).
    pub fn start<H, F>(cfg: &ServeConfig, make: F) -> Result<Server, ServeError>
    where
        H: Handler + 'static,
        F: Fn(usize) -> H,
    {
        if cfg.workers == 0 {
            return Err(ServeError::Config("--workers must be at least 1".into()));
        }
        if cfg.batch == 0 || cfg.batch > 1024 {
            return Err(ServeError::Config(format!(
                "--batch {} is out of range; use 1 (recvfrom/sendto) to 1024",
                cfg.batch
            )));
        }
        if cfg.steer != Steer::None && cfg.sockets != SocketMode::Reuseport {
            return Err(ServeError::Config(
                "--steer needs --sockets reuseport (steering picks among a reuseport group)".into(),
            ));
        }
        let mut cpus = resolve_cpus(cfg)?;
        if cfg.steer != Steer::None {
            cpus = order_for_steering(&cpus)?;
        }
        let mut notes = Vec::new();
        let n_sockets = match cfg.sockets {
            SocketMode::Shared => 1,
            SocketMode::Reuseport => cfg.workers,
        };
        let reuseport = cfg.sockets == SocketMode::Reuseport;
        if reuseport && cfg.listen.port() != 0 {
            // A reuseport bind silently joins another process's group on the same port
            // (same uid); probe with a plain bind first so "port in use" is an error.
            let probe = UdpSock::new_for(&cfg.listen)?;
            if probe.is_v6() {
                probe.set_v6only(true)?;
            }
            probe.bind(&cfg.listen)?;
        }
        let mut sockets = Vec::with_capacity(n_sockets);
        let mut listen = cfg.listen;
        for i in 0..n_sockets {
            let s = open_socket(cfg, reuseport)?;
            if cfg.busy_poll.is_some() {
                if let Err(e) = s.set_prefer_busy_poll(true) {
                    notes.push(format!("SO_PREFER_BUSY_POLL not applied: {e}"));
                }
                // The default budget is 8; ask for the batch size, which needs CAP_NET_ADMIN above 8.
                let want = (cfg.batch as i32).max(8);
                if let Err(e) = s.set_busy_poll_budget(want) {
                    notes.push(format!("SO_BUSY_POLL_BUDGET={want} not applied: {e}"));
                }
            }
            s.bind(&listen)?;
            if i == 0 {
                // With port 0, every later socket joins the port the first one got.
                listen = s.local_addr()?;
            }
            sockets.push(s);
        }
        let steering: &'static str = match cfg.steer {
            Steer::None => "none",
            Steer::Cpu => {
                sockets[0].attach_reuseport_cbpf_cpu(n_sockets as u32)?;
                "cbpf: cpu % n"
            }
            Steer::CpuEbpf => {
                let prog = bpf::load_cpu_steering(n_sockets as u32)?;
                sockets[0].attach_reuseport_ebpf(&prog)?;
                // The reuseport group holds its own reference; our fd can close.
                "ebpf: cpu % n"
            }
        };
        let busy = cfg.busy_poll.is_some();
        let mut detail = Vec::new();
        for (i, s) in sockets.iter().enumerate() {
            detail.push(read_back(s, i, steering, busy)?);
            if !busy {
                s.set_recv_timeout(Duration::from_millis(100))?;
            }
        }
        if busy {
            for s in &sockets {
                s.set_nonblocking(true)?;
            }
        }
        dedup_notes(&mut notes);

        let sockets: Vec<Arc<UdpSock>> = sockets.into_iter().map(Arc::new).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let counters: Arc<Vec<WorkerCounters>> = Arc::new(
            (0..cfg.workers)
                .map(|_| WorkerCounters::default())
                .collect(),
        );
        let worker_sockets: Vec<usize> = (0..cfg.workers).map(|i| i % n_sockets).collect();
        let mut threads = Vec::new();
        for (i, cpu_choice) in cpus.iter().enumerate() {
            let sock = sockets[worker_sockets[i]].clone();
            let stop = stop.clone();
            let counters = counters.clone();
            let handler = make(i);
            let cpu_choice = *cpu_choice;
            let batch = cfg.batch;
            let rxq_ovfl = cfg.rxq_ovfl;
            let t = std::thread::Builder::new()
                .name(format!("fh-worker-{i}"))
                .spawn(move || {
                    if let Some(c) = cpu_choice {
                        // Checked against the allowed set above; a failure here is a race
                        // with a cpuset change, and the worker runs unpinned rather than die.
                        let _ = cpu::pin_current_thread(c);
                    }
                    worker_loop(&sock, handler, &counters[i], &stop, batch, busy, rxq_ovfl)
                })
                .map_err(|e| {
                    ServeError::Config(format!("could not start worker thread {i}: {e}"))
                })?;
            threads.push(t);
        }
        let applied = Applied {
            listen: listen.to_string(),
            workers: cfg.workers,
            sockets: cfg.sockets,
            steer: cfg.steer,
            batch: cfg.batch,
            busy_poll: busy,
            worker_cpus: cpus,
            worker_sockets,
            socket_detail: detail,
            notes,
        };
        Ok(Server {
            stop,
            sockets,
            counters,
            threads,
            applied,
            local: listen,
        })
    }

    /// The address the server listens on (with the real port if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The server's sockets, in bind order, for reading options back independently.
    pub fn sockets(&self) -> &[Arc<UdpSock>] {
        &self.sockets
    }

    /// The configuration as applied.
    pub fn applied(&self) -> &Applied {
        &self.applied
    }

    /// Current per-worker counters.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.counters
            .iter()
            .enumerate()
            .map(|(i, c)| c.snapshot(i, self.applied.worker_cpus[i]))
            .collect()
    }

    /// Current per-socket kernel drop counters (SO_MEMINFO).
    pub fn socket_stats(&self) -> Vec<SocketStats> {
        self.sockets
            .iter()
            .enumerate()
            .map(|(i, s)| SocketStats {
                index: i,
                kernel_drops: s.drops().map(u64::from).unwrap_or(0),
                incoming_cpu: s.incoming_cpu().ok().filter(|c| *c >= 0),
            })
            .collect()
    }

    /// Asks workers to stop and waits for them; returns the handlers' own counters summed.
    pub fn shutdown(mut self) -> Vec<(&'static str, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut sums: Vec<(&'static str, u64)> = Vec::new();
        for t in self.threads.drain(..) {
            if let Ok(cs) = t.join() {
                for (k, v) in cs {
                    match sums.iter_mut().find(|(n, _)| *n == k) {
                        Some(e) => e.1 += v,
                        None => sums.push((k, v)),
                    }
                }
            }
        }
        sums
    }
}

fn dedup_notes(notes: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
}

/// The hot loop: receive a batch, handle each request in place, send the replies.
fn worker_loop<H: Handler>(
    sock: &UdpSock,
    mut handler: H,
    c: &WorkerCounters,
    stop: &AtomicBool,
    batch_size: usize,
    busy: bool,
    rxq_ovfl: bool,
) -> Vec<(&'static str, u64)> {
    let one_by_one = batch_size == 1;
    let mut batch = Batch::new(batch_size, SLOT_SIZE, !one_by_one && rxq_ovfl);
    let flags = if busy { libc_dontwait() } else { 0 };
    while !stop.load(Ordering::Relaxed) {
        let n = match recv_some(&mut batch, sock, batch_size, flags, one_by_one) {
            Ok(n) => n,
            Err(_) => {
                c.add(&c.recv_errors, 1);
                c.add(&c.syscalls, 1);
                continue;
            }
        };
        c.add(&c.syscalls, 1);
        if n == 0 {
            if busy {
                std::hint::spin_loop();
            }
            continue;
        }
        let mut bytes_in = 0;
        let mut errors = 0;
        let mut drops = 0;
        for i in 0..n {
            let len = batch.len(i);
            bytes_in += len as u64;
            if batch.truncated(i) {
                errors += 1;
                continue;
            }
            let verdict = {
                // The handler gets the whole slot; it reads buf[..len] and writes in place.
                let (slot, peer) = batch.slot_and_peer(i);
                handler.handle(slot, len, &Peer::new(peer))
            };
            match verdict {
                Verdict::Reply(out) => batch.queue_reply(i, out),
                Verdict::Drop => drops += 1,
                Verdict::Error => errors += 1,
            }
        }
        if let Some(ovfl) = batch.rxq_ovfl(n - 1) {
            c.rxq_ovfl.store(ovfl as u64, Ordering::Relaxed);
        }
        // Count the requests before replying, so whoever sees a reply also sees it counted.
        c.add(&c.packets_in, n as u64);
        c.add(&c.bytes_in, bytes_in);
        let f = batch.flush(sock, 0, one_by_one);
        c.add(&c.packets_out, f.sent as u64);
        c.add(&c.send_errors, f.failed as u64);
        c.add(&c.syscalls, f.syscalls as u64);
        c.add(&c.batches, 1);
        c.add(&c.handler_errors, errors);
        c.add(&c.handler_drops, drops);
    }
    handler.counters()
}

fn libc_dontwait() -> i32 {
    firehose_sys::socket::MSG_DONTWAIT
}
