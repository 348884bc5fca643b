//! A server: configuration checked, workers placed, sockets opened, one thread per
//! worker running the loop over its backend.

use crate::backend::{BackendApplied, Io, WorkerSeat};
use crate::config::{ServeConfig, SocketMode, Steer};
use crate::handler::Handler;
use crate::placement::{order_for_steering, resolve_cpus};
use crate::socket_io::SocketIo;
use crate::sockets::{AppliedSocket, SocketSet};
use crate::stats::{SocketStats, WorkerCounters, WorkerStats};
use firehose_sys::socket::UdpSock;
use firehose_sys::supervise::{Health, Label, WorkerFailure, Workers};
use firehose_sys::{cpu, Setting, SetupError, SysError, Usage};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

/// The configuration in force once the server runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Applied {
    pub listen: String,
    pub workers: usize,
    pub sockets: SocketMode,
    pub steer: Steer,
    pub batch: usize,
    /// Replies per send call at most, when less than a received batch (NTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_batch: Option<usize>,
    pub busy_poll: bool,
    /// CPU of each worker, `None` when unpinned.
    pub worker_cpus: Vec<Option<usize>>,
    /// Socket each worker reads.
    pub worker_sockets: Vec<usize>,
    pub socket_detail: Vec<AppliedSocket>,
    /// Notes on choices made at run time (e.g. an option the kernel lacks).
    pub notes: Vec<String>,
    /// The epoll busy-poll parameters read back (EPIOCGPARAMS) from the epoll a
    /// busy-polling worker waits in once its socket has stayed empty for the busy-poll
    /// time; absent when not busy-polling or refused (the refusal is in `notes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoll_busy_poll: Option<firehose_sys::epoll::EpollParams>,
    /// What a backend other than the socket path set up; absent for the socket path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendApplied>,
}

/// What a worker thread hands back when it ends: its handler's counters.
type Finished = Vec<(&'static str, u64)>;

/// A running server.
pub struct Server {
    stop: Arc<AtomicBool>,
    sockets: Vec<Arc<UdpSock>>,
    counters: Arc<Vec<WorkerCounters>>,
    threads: Workers<Finished, Infallible>,
    applied: Applied,
    local: SocketAddr,
}

/// Rejects configurations that cannot work, with a message naming the setting.
fn validate(cfg: &ServeConfig) -> Result<(), SetupError> {
    if cfg.workers == 0 {
        return Err(Usage::new(
            Setting::Workers,
            format!("{} must be at least 1", Setting::Workers.r()),
        )
        .into());
    }
    if cfg.batch == 0 || cfg.batch > 1024 {
        return Err(Usage::new(
            Setting::Batch,
            format!(
                "{} {} is out of range; use 1 (recvfrom/sendto) to 1024",
                Setting::Batch.r(),
                cfg.batch
            ),
        )
        .into());
    }
    if cfg.steer != Steer::None && cfg.sockets != SocketMode::Reuseport {
        return Err(Usage::new(
            Setting::Steer,
            format!(
                "{} needs {} reuseport (steering picks among a reuseport group)",
                Setting::Steer.r(),
                Setting::Sockets.r()
            ),
        )
        .into());
    }
    Ok(())
}

impl Server {
    /// Opens the sockets, applies every option, and starts the workers on the socket
    /// path. `make` builds one handler per worker (called with the worker index).
    pub fn start<H, F>(cfg: &ServeConfig, make: F) -> Result<Server, SetupError>
    where
        H: Handler + 'static,
        F: Fn(usize) -> H,
    {
        Self::start_with(cfg, SocketIo::new(cfg), make)
    }

    /// As [`Self::start`], with the workers' I/O through `io` (see [`crate::backend`]).
    /// The sockets are opened and configured as for the socket path either way.
    pub fn start_with<I, H, F>(cfg: &ServeConfig, io: I, make: F) -> Result<Server, SetupError>
    where
        I: Io,
        H: Handler + 'static,
        F: Fn(usize) -> H,
    {
        validate(cfg)?;
        let mut cpus = resolve_cpus(cfg)?;
        if cfg.steer != Steer::None {
            cpus = order_for_steering(&cpus)?;
        }
        let set = SocketSet::open(cfg)?;
        let sockets: Vec<Arc<UdpSock>> = set.sockets.into_iter().map(Arc::new).collect();
        let worker_sockets: Vec<usize> = (0..cfg.workers).map(|i| i % sockets.len()).collect();
        let seats: Vec<WorkerSeat> = cpus
            .iter()
            .enumerate()
            .map(|(index, &cpu)| WorkerSeat {
                index,
                cpu,
                socket: sockets[worker_sockets[index]].clone(),
                epoll: set.epoll,
            })
            .collect();
        let applied = Applied {
            listen: set.listen.to_string(),
            workers: cfg.workers,
            sockets: cfg.sockets,
            steer: cfg.steer,
            batch: cfg.batch,
            send_batch: cfg.send_batch,
            busy_poll: cfg.busy_poll.is_some(),
            worker_cpus: cpus,
            worker_sockets,
            socket_detail: set.detail,
            epoll_busy_poll: set.epoll,
            notes: set.notes,
            backend: io.applied(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let counters: Arc<Vec<WorkerCounters>> =
            Arc::new(seats.iter().map(|_| WorkerCounters::default()).collect());
        let send_every = cfg.send_batch.unwrap_or(usize::MAX);
        let threads = spawn_workers(Arc::new(io), seats, make, &counters, &stop, send_every)?;
        Ok(Server {
            stop,
            sockets,
            counters,
            threads,
            applied,
            local: set.listen,
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

    /// What a metrics scrape reads: shared handles to the counters and sockets, usable from
    /// another thread while the server runs.
    pub fn metrics_source(&self, proto: &'static str) -> crate::metrics::MetricsSource {
        crate::metrics::MetricsSource::new(
            proto,
            self.counters.clone(),
            self.sockets.clone(),
            self.applied.worker_cpus.clone(),
        )
    }

    /// The workers' state. They run until stopped, so one that panicked or returned is a
    /// failure: the caller stops the server and says so (docs/serve.md, "When a worker
    /// fails").
    pub fn health(&mut self) -> Health {
        self.threads.health(self.stop.load(Ordering::Relaxed))
    }

    /// Asks workers to stop and waits for them; returns the handlers' own counters summed,
    /// or the first worker that failed.
    pub fn shutdown(mut self) -> Result<Vec<(&'static str, u64)>, WorkerFailure> {
        self.join_workers()
    }

    /// [`Server::shutdown`] that keeps the server: once the workers are joined their
    /// counters are final, so [`Server::worker_stats`] read after it adds up (a worker
    /// counts a batch's requests before it replies to them, and one read while it runs
    /// may hold requests whose replies are not yet counted). The sockets stay open until
    /// the server is dropped. A second call finds no workers and returns nothing.
    pub fn join_workers(&mut self) -> Result<Vec<(&'static str, u64)>, WorkerFailure> {
        let mut sums = Vec::new();
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::replace(&mut self.threads, Workers::new(true));
        for cs in threads.join()? {
            for (k, v) in cs {
                match sums.iter_mut().find(|(n, _)| *n == k) {
                    Some(e) => e.1 += v,
                    None => sums.push((k, v)),
                }
            }
        }
        Ok(sums)
    }
}

/// Starts one thread per seat: pin, open the backend, report ready, run the loop. Returns
/// once every worker has opened its backend, or with the first worker's error (after
/// stopping the others).
fn spawn_workers<I, H, F>(
    io: Arc<I>,
    seats: Vec<WorkerSeat>,
    make: F,
    counters: &Arc<Vec<WorkerCounters>>,
    stop: &Arc<AtomicBool>,
    send_every: usize,
) -> Result<Workers<Finished, Infallible>, SetupError>
where
    I: Io,
    H: Handler + 'static,
    F: Fn(usize) -> H,
{
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), SetupError>>();
    let mut threads = Workers::new(true);
    for seat in seats {
        let i = seat.index;
        let label = Label::new("worker", i).queue(io.queue(i)).cpu(seat.cpu);
        let (io, quit, counters, ready) =
            (io.clone(), stop.clone(), counters.clone(), ready_tx.clone());
        let mut handler = make(i);
        let spawned = std::thread::Builder::new()
            .name(format!("fh-worker-{i}"))
            .spawn(move || {
                if let Some(c) = seat.cpu {
                    // Checked against the allowed set above; a failure here is a race
                    // with a cpuset change, and the worker runs unpinned rather than die.
                    let _ = cpu::pin_current_thread(c);
                }
                let mut backend = match io.open(&seat) {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return Ok(Vec::new());
                    }
                };
                let _ = ready.send(Ok(()));
                crate::worker::run(&mut backend, &mut handler, &counters[i], &quit, send_every);
                Ok(handler.counters().to_vec())
            });
        match spawned {
            Ok(t) => threads.push(label, t),
            Err(e) => {
                stop_and_join(stop, threads);
                return Err(SysError {
                    what: format!("starting worker thread {i}"),
                    source: e,
                }
                .into());
            }
        }
    }
    drop(ready_tx);
    let mut first_err = None;
    for _ in 0..threads.len() {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => break,
        }
    }
    match first_err {
        None => Ok(threads),
        Some(e) => {
            stop_and_join(stop, threads);
            Err(e)
        }
    }
}

/// Sets the stop flag and waits for the workers of a start that failed: the start's own
/// error is the one reported.
fn stop_and_join(stop: &AtomicBool, threads: Workers<Finished, Infallible>) {
    stop.store(true, Ordering::Relaxed);
    let _ = threads.join();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::BackendApplied;
    use crate::config::Profile;
    use crate::socket_io::SocketBackend;
    use crate::Verdict;

    struct Echo;
    impl Handler for Echo {
        fn handle(&mut self, req: &mut crate::Request<'_>) -> Verdict {
            Verdict::Reply(req.len())
        }
    }

    /// The socket path, except that worker `fail` cannot open its backend.
    struct Failing {
        inner: SocketIo,
        fail: usize,
    }
    impl Io for Failing {
        type Backend = SocketBackend;
        fn open(&self, seat: &WorkerSeat) -> Result<SocketBackend, SetupError> {
            if seat.index == self.fail {
                return Err(Usage::host(format!("queue {} is busy", seat.index)).into());
            }
            self.inner.open(seat)
        }
        fn applied(&self) -> Option<BackendApplied> {
            Some(BackendApplied {
                name: "failing".into(),
                ..BackendApplied::default()
            })
        }
    }

    #[test]
    fn a_worker_that_cannot_open_its_backend_stops_the_start() {
        let cfg = ServeConfig::profile(Profile::Reuseport, "127.0.0.1:0".parse().unwrap(), 3);
        let io = Failing {
            inner: SocketIo::new(&cfg),
            fail: 2,
        };
        let err = Server::start_with(&cfg, io, |_| Echo)
            .err()
            .expect("must fail");
        assert_eq!(err.to_string(), "queue 2 is busy");
    }

    #[test]
    fn a_backend_description_is_part_of_the_applied_configuration() {
        let cfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 1);
        let io = Failing {
            inner: SocketIo::new(&cfg),
            fail: usize::MAX,
        };
        let srv = Server::start_with(&cfg, io, |_| Echo).unwrap();
        assert_eq!(srv.applied().backend.as_ref().unwrap().name, "failing");
        srv.shutdown().expect("no worker failed");
        let plain = Server::start(&cfg, |_| Echo).unwrap();
        assert!(plain.applied().backend.is_none());
        plain.shutdown().expect("no worker failed");
    }

    /// A handler that takes `ms` over each request, as a slow zone lookup would.
    struct Slow {
        ms: u64,
    }
    impl Handler for Slow {
        fn handle(&mut self, req: &mut crate::Request<'_>) -> Verdict {
            std::thread::sleep(std::time::Duration::from_millis(self.ms));
            let (_, len, _) = req.parts();
            Verdict::Reply(len)
        }
    }

    #[test]
    fn counters_read_after_the_workers_are_joined_add_up() {
        let cfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 1);
        let mut srv = Server::start(&cfg, |_| Slow { ms: 300 }).unwrap();
        let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        c.send_to(b"slow", srv.local_addr()).unwrap();
        // The worker has counted the request and is inside the handler.
        let by = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while srv.worker_stats()[0].packets_in == 0 {
            assert!(std::time::Instant::now() < by, "the request never arrived");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let running = &srv.worker_stats()[0];
        assert_eq!((running.packets_in, running.packets_out), (1, 0));
        // Stopped mid-request, the worker still answers it before it ends.
        srv.join_workers().expect("no worker failed");
        let last = &srv.worker_stats()[0];
        assert_eq!((last.packets_in, last.packets_out), (1, 1));
        assert!(srv.join_workers().unwrap().is_empty());
        srv.shutdown().expect("no worker failed");
    }

    /// A handler that panics on the request "boom", as a protocol bug would.
    struct Fragile;
    impl Handler for Fragile {
        fn handle(&mut self, req: &mut crate::Request<'_>) -> Verdict {
            let (buf, len, _) = req.parts();
            assert!(&buf[..len] != b"boom", "cannot parse 'boom'");
            Verdict::Reply(len)
        }
    }

    #[test]
    fn a_worker_that_panics_is_reported_with_its_cpu_and_message_and_never_dropped() {
        let cfg = ServeConfig::profile(Profile::Reuseport, "127.0.0.1:0".parse().unwrap(), 2);
        let mut srv = Server::start(&cfg, |_| Fragile).unwrap();
        assert_eq!(srv.health(), Health::Running);
        let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        // An ordinary request is answered first: the server works until the bad one.
        c.send_to(b"hi", srv.local_addr()).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(
            firehose_sys::retry_interrupted(|| c.recv(&mut buf)).unwrap(),
            2
        );
        c.send_to(b"boom", srv.local_addr()).unwrap();
        let by = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let f = loop {
            if let Health::Failed(f) = srv.health() {
                break f;
            }
            assert!(std::time::Instant::now() < by, "the panic was never seen");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(f.label.role, "worker");
        assert!(
            matches!(&f.cause, firehose_sys::supervise::Cause::Panicked(m) if m.contains("cannot parse 'boom'")),
            "{f}"
        );
        // Stopping the server still reports it: the panicked worker's result is not lost.
        assert_eq!(srv.shutdown().unwrap_err(), f);
    }
}
