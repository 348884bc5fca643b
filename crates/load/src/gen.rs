//! The transaction generator: flows, windows, open-loop schedules, loss accounting.
//!
//! Each thread owns a share of the flows (each flow its own source port, so RSS/reuseport
//! spread them), one [`Table`] of outstanding requests, and its [`FlowIo`]: one connected
//! socket per flow with sendmmsg/recvmmsg batches ([`SocketFlows`]), or AF_XDP rings
//! ([`crate::xdp`]). Threads share nothing but a stop flag and their live counters.
//!
//! Accounting: a request counts when its intended send time falls in the measurement
//! window (after warm-up). Every counted request ends exactly once, as completed or
//! lost (unanswered within the timeout, or still unanswered when the run drains).

mod paced;
mod stamps;
#[cfg(test)]
mod tests;

use crate::interval::IntervalSlot;
use crate::io::{open_flow, Caps, FlowIo, SendShape, SocketFlows};
use crate::pace::Pace;
use crate::report::{new_histogram, HIST_MAX_NS};
use crate::table::{Answer, Ended, Table};
use crate::workload::Workload;
use firehose_sys::socket::UdpSock;
use firehose_sys::supervise::{Health, Label, WorkerFailure, Workers};
use firehose_sys::{cpu, Setting, SetupError, SysError, Usage};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Open loop on a path without receive stamps (not spinning): requests due within this
/// much of now leave together, so the thread wakes at most every 50 µs to send.
const UNPACED_AHEAD_NS: u64 = 50_000;

/// Adds to a live counter. Only its own thread writes it, so a load and a store are
/// exact, without a locked read-modify-write on every request.
#[inline]
fn bump(c: &AtomicU64, v: u64) {
    if v != 0 {
        c.store(c.load(Ordering::Relaxed) + v, Ordering::Relaxed);
    }
}

/// How long to run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Length {
    /// Measure for this long after warm-up.
    Duration(Duration),
    /// Send exactly this many requests (across all threads), then drain.
    Requests(u64),
}

/// Everything the generator needs.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: SocketAddr,
    pub flows: usize,
    /// Outstanding requests per flow (closed loop); caps in-flight requests per flow in
    /// open loop, where 0 means no cap beyond the timeout's worth.
    pub window: usize,
    /// Transactions per second across all flows; `None` is closed loop.
    pub rate: Option<f64>,
    pub threads: usize,
    /// CPU of each thread, `None` to leave placement to the scheduler.
    pub cpus: Option<Vec<usize>>,
    pub length: Length,
    pub warmup: Duration,
    pub timeout: Duration,
    /// Datagrams per sendmmsg/recvmmsg.
    pub batch: usize,
    /// Poll sockets without sleeping: lowest latency, one busy CPU per thread.
    pub spin: bool,
    /// Send runs of equal-sized requests that leave together ([`SendShape::Together`]) as
    /// UDP GSO super-datagrams (UDP_SEGMENT), which pass the sender's IP stack once per
    /// run; falls back to sendmmsg if refused.
    pub gso: bool,
    /// Open loop: requests per wake-up; `None`: as many as the wake-up budget needs
    /// ([`crate::pace::WAKE_BUDGET_NS`]). Fewer make a smoother schedule at more CPU per
    /// request.
    pub per_wake: Option<usize>,
    /// Stamp every request as the kernel sends it and every response as it arrives
    /// (socket path), and take latency apart ([`crate::decompose`]); sends keep their
    /// shape where the kernel takes a stamp's key in the send, else go by sendmmsg
    /// ([`SocketFlows::with_tx_stamps`]).
    pub tx_stamps: bool,
    /// Open loop: the shape of the schedule.
    pub arrivals: crate::pace::Arrivals,
}

/// Live counters of one thread, readable while it runs (for interval lines).
#[derive(Default)]
pub struct Live {
    pub sent: AtomicU64,
    pub completed: AtomicU64,
    pub lost: AtomicU64,
    pub stray: AtomicU64,
    pub dup: AtomicU64,
    /// Where the thread hands over its interval histograms (`--hdr-log`).
    pub interval: IntervalSlot,
    /// The same for the parts of latency, with `--stamps` (rtt, send_lag, recv_lag:
    /// [`crate::decompose::PART_TAGS`]).
    pub parts: [IntervalSlot; 3],
}

/// What one thread measured.
pub struct ThreadResult {
    pub thread: usize,
    pub cpu: Option<usize>,
    pub flows: usize,
    pub sent: u64,
    pub completed: u64,
    pub lost: u64,
    pub stray: u64,
    pub dup: u64,
    /// Requests the schedule wanted sent but the window/table had no room for.
    pub unsent: u64,
    pub send_errors: u64,
    /// System calls during the measurement window (the path's and the sleeps).
    pub syscalls: u64,
    /// sendmsg calls that carried a UDP GSO super-datagram.
    pub gso_sends: u64,
    /// The send/receive path: "socket", "io_uring" or "af_xdp" ([`crate::io::Caps::path`]).
    pub io: &'static str,
    /// Why GSO was abandoned, if the kernel refused it.
    pub gso_error: Option<String>,
    pub codes: BTreeMap<u16, u64>,
    /// The workload's failed checks by reason ([`Workload::invalid`]).
    pub invalid: Vec<(&'static str, u64)>,
    /// The workload's measurements beyond latency ([`Workload::measures`]).
    pub measures: Vec<(&'static str, crate::measure::SignedHistogram)>,
    pub latency_ns: Histogram<u64>,
    /// Latency taken apart by kernel timestamps, on a path that stamps.
    pub parts: Option<crate::decompose::Decomposition>,
    /// This thread's CPU time during the measurement window.
    pub cpu_time: Duration,
    /// Its involuntary context switches during the window.
    pub preempted: u64,
    /// How long it waited on the run queue during the window (schedstat): with
    /// `preempted`, what others took from it (a spinning sender leaves late by as much).
    pub run_delay: Duration,
    /// Paced open loop: how late each of the window's wake-ups came after the time its
    /// sleep asked for (ns): the timer's precision as this run met it.
    pub wake_late_ns: Option<Histogram<u64>>,
    /// Length of the measurement window this thread saw.
    pub window: Duration,
}

/// A running or finished load.
pub struct Run {
    pub live: Arc<Vec<Live>>,
    pub stop: Arc<AtomicBool>,
    pub started: Instant,
    handles: Workers<ThreadResult, SetupError>,
}

impl Run {
    /// The threads' state: done once every one has returned its results; a thread that
    /// panicked or failed is a failure.
    pub fn health(&mut self) -> Health {
        self.handles.health(self.stop.load(Ordering::Relaxed))
    }

    /// Waits for every thread: their results, or the first that failed.
    pub fn join(self) -> Result<Vec<ThreadResult>, WorkerFailure> {
        self.handles.join()
    }
}

/// Checks a configuration before anything starts.
pub fn validate(cfg: &LoadConfig) -> Result<(), SetupError> {
    let bad = |s: Setting, m: String| Err(Usage::new(s, m).into());
    use Setting as S;
    if cfg.threads == 0 {
        return bad(S::Threads, format!("{} must be at least 1", S::Threads.r()));
    }
    if cfg.flows < cfg.threads {
        return bad(
            S::Flows,
            format!(
                "{} {} is fewer than {} {}: each thread needs at least one flow",
                S::Flows.r(),
                cfg.flows,
                S::Threads.r(),
                cfg.threads
            ),
        );
    }
    if cfg.window == 0 && cfg.rate.is_none() {
        return bad(S::Window, format!("{} must be at least 1", S::Window.r()));
    }
    let per_wake = cfg.per_wake.map(|v| (S::PerWake, v));
    for (s, v) in per_wake.into_iter().chain([(S::Batch, cfg.batch)]) {
        if !(1..=1024).contains(&v) {
            return bad(s, format!("{} {v} is out of range; use 1 to 1024", s.r()));
        }
    }
    if let Some(r) = cfg.rate {
        if !(r > 0.0 && r.is_finite()) {
            return bad(
                S::Rate,
                format!(
                    "{} {r} must be a positive number of transactions per second",
                    S::Rate.r()
                ),
            );
        }
    }
    match cfg.length {
        Length::Duration(d) if d.is_zero() => {
            return bad(
                S::Duration,
                format!("{} must be greater than zero", S::Duration.r()),
            )
        }
        Length::Requests(0) => {
            return bad(
                S::Requests,
                format!("{} must be at least 1", S::Requests.r()),
            )
        }
        _ => {}
    }
    if cfg.timeout.is_zero() {
        return bad(
            S::Timeout,
            format!("{} must be greater than zero", S::Timeout.r()),
        );
    }
    if let Some(cpus) = &cfg.cpus {
        let allowed = cpu::allowed_cpus()?;
        if cpus.len() < cfg.threads {
            return bad(
                S::Cpus,
                format!(
                    "{} lists {} CPUs for {} threads; give one CPU per thread",
                    S::Cpus.r(),
                    cpus.len(),
                    cfg.threads
                ),
            );
        }
        if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
            return bad(
                S::Cpus,
                format!(
                    "CPU {c} in {} does not exist or is not allowed for this process (allowed: {allowed:?})",
                    S::Cpus.r()
                ),
            );
        }
    }
    if cfg.target.port() == 0 {
        return bad(
            S::Target,
            format!(
                "{} {} has port 0; name the server's port",
                S::Target.r(),
                cfg.target
            ),
        );
    }
    Ok(())
}

/// Starts the generator threads over kernel sockets; `make` builds one workload per thread.
pub fn start<W, F>(cfg: &LoadConfig, make: F) -> Result<Run, SetupError>
where
    W: Workload + 'static,
    F: Fn(usize) -> W,
{
    start_with(cfg, make, socket_flows(cfg)?)
}

/// Each thread's flows over kernel sockets, for [`start_with`].
pub fn socket_flows(cfg: &LoadConfig) -> Result<Vec<SocketFlows>, SetupError> {
    validate(cfg)?;
    let tx_slots = cfg.batch.max(cfg.window.clamp(1, 1024));
    let open_loop = cfg.rate.is_some();
    open_flows(cfg)?
        .into_iter()
        .map(|socks| {
            let io = SocketFlows::new(socks, cfg.batch, tx_slots, cfg.gso, cfg.spin, open_loop)?;
            if cfg.tx_stamps {
                io.with_tx_stamps()
            } else {
                Ok(io)
            }
        })
        .collect()
}

/// Opens every flow's connected socket, dealt to the threads in turn: all before any thread
/// runs, so a bad target or a missing route fails first.
pub fn open_flows(cfg: &LoadConfig) -> Result<Vec<Vec<UdpSock>>, SetupError> {
    let mut per_thread: Vec<Vec<_>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    for f in 0..cfg.flows {
        per_thread[f % cfg.threads].push(open_flow(&cfg.target)?);
    }
    Ok(per_thread)
}

/// How many requests ids of `bits` bits tell apart.
fn max_ids(bits: u32) -> usize {
    if bits >= 32 {
        u32::MAX as usize
    } else {
        1usize << bits
    }
}

/// Refuses a plan that promises more requests in flight on one thread than the protocol's
/// ids tell apart (the ids are one space per thread: one table of outstanding requests,
/// shared by its flows). Closed loop keeps `--window` on each of the thread's flows; open
/// loop caps each at `--window` (0: no cap, and what the ids cannot hold is counted as
/// unsent), so a cap above the ids would be a promise silently broken.
fn check_ids(cfg: &LoadConfig, t: usize, bits: u32) -> Result<(), SetupError> {
    let max_ids = max_ids(bits);
    let flows_here = (cfg.flows + cfg.threads - 1 - t) / cfg.threads;
    let promised = flows_here.saturating_mul(cfg.window);
    if promised > max_ids {
        return Err(Usage::new(
            Setting::Window,
            format!(
                "thread {t} would keep up to {promised} requests in flight ({flows_here} flow(s) x {} {}) but this protocol's ids only distinguish {max_ids} per thread; lower {}/{} or add {}",
                Setting::Window.r(),
                cfg.window,
                Setting::Window.r(),
                Setting::Flows.r(),
                Setting::Threads.r()
            ),
        )
        .into());
    }
    Ok(())
}

/// Starts one generator thread per `ios` entry (`cfg.threads` of them), each sending and
/// receiving through its own path.
pub fn start_with<W, F, I>(cfg: &LoadConfig, make: F, ios: Vec<I>) -> Result<Run, SetupError>
where
    W: Workload + 'static,
    F: Fn(usize) -> W,
    I: FlowIo + 'static,
{
    validate(cfg)?;
    // Every thread's plan is checked before any thread starts.
    let bits = make(0).id_bits();
    for t in 0..cfg.threads {
        check_ids(cfg, t, bits)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let live: Arc<Vec<Live>> = Arc::new((0..cfg.threads).map(|_| Live::default()).collect());
    let started = Instant::now();
    let mut handles = Workers::new(false);
    for (t, io) in ios.into_iter().enumerate() {
        let plan = ThreadPlan::new(cfg, t);
        let workload = make(t);
        let stop = stop.clone();
        let live = live.clone();
        let cpu_choice = cfg.cpus.as_ref().map(|c| c[t]);
        let h = std::thread::Builder::new()
            .name(format!("fh-load-{t}"))
            .spawn(move || {
                if let Some(c) = cpu_choice {
                    cpu::pin_current_thread(c)?;
                }
                let _ = cpu::set_timer_slack_ns(1);
                let mut io = io;
                io.start()?;
                let mut th = Thread::new(plan, io, workload, &live[t], &stop, started)?;
                th.cpu = cpu_choice;
                th.run()
            })
            .map_err(|e| SysError {
                what: format!("starting generator thread {t}"),
                source: e,
            })?;
        handles.push(Label::new("generator thread", t).cpu(cpu_choice), h);
    }
    Ok(Run {
        live,
        stop,
        started,
        handles,
    })
}

/// How the first thread paces an open loop while sleeping between wake-ups (what the
/// `pacing:` line and the document report): `None` in closed loop or spinning.
pub fn pacing(cfg: &LoadConfig) -> Option<Pace> {
    if cfg.spin {
        return None;
    }
    ThreadPlan::new(cfg, 0).pace
}

/// One thread's share of the schedule, in ns since the run started.
#[derive(Debug, Clone)]
struct ThreadPlan {
    index: usize,
    window: usize,
    batch: usize,
    spin: bool,
    timeout_ns: u64,
    measure_from_ns: u64,
    /// Stop sending at this time (duration mode).
    send_until_ns: Option<u64>,
    /// Stop sending after this many requests (requests mode).
    send_count: Option<u64>,
    /// ns between sends, open loop.
    interval_ns: Option<f64>,
    /// How the open-loop schedule is spent per wake-up.
    pace: Option<Pace>,
    /// The most requests this thread may have outstanding.
    in_flight: usize,
}

impl ThreadPlan {
    fn new(cfg: &LoadConfig, t: usize) -> Self {
        let flows_here = (cfg.flows + cfg.threads - 1 - t) / cfg.threads;
        let warm = cfg.warmup.as_nanos() as u64;
        let (send_until_ns, send_count) = match cfg.length {
            Length::Duration(d) => (Some(warm + d.as_nanos() as u64), None),
            Length::Requests(n) => {
                let share = n / cfg.threads as u64 + u64::from((t as u64) < n % cfg.threads as u64);
                (None, Some(share))
            }
        };
        let interval_ns = cfg.rate.map(|r| 1e9 * cfg.threads as f64 / r);
        let timeout_ns = cfg.timeout.as_nanos() as u64;
        let in_flight = match interval_ns {
            None => flows_here * cfg.window,
            // Enough room for everything sent within one timeout, twice over.
            Some(iv) => ((timeout_ns as f64 / iv) * 2.0) as usize + flows_here * cfg.window,
        };
        let pace = interval_ns.map(|iv| {
            let cap = if cfg.window == 0 {
                0
            } else {
                (flows_here * cfg.window) as u64
            };
            // Each thread its own Poisson pattern.
            let per_wake = cfg.per_wake.map(|n| n as u64);
            Pace::shaped(iv, cap, per_wake, &cfg.arrivals, t as u64 + 1)
        });
        ThreadPlan {
            pace,
            index: t,
            window: cfg.window,
            batch: cfg.batch,
            spin: cfg.spin,
            timeout_ns,
            measure_from_ns: warm,
            send_until_ns,
            send_count,
            interval_ns,
            in_flight,
        }
    }
}

struct Flow {
    outstanding: usize,
}

struct Thread<'a, W: Workload, I: FlowIo> {
    plan: ThreadPlan,
    flows: Vec<Flow>,
    workload: W,
    live: &'a Live,
    stop: &'a AtomicBool,
    started: Instant,
    table: Table,
    io: I,
    /// What the path can do (read once: it does not change).
    caps: Caps,
    /// Latencies since the last interval handover; folded into `total` at each.
    hist: Histogram<u64>,
    total: Histogram<u64>,
    /// The last interval the driver asked for.
    interval_seen: u64,
    codes: BTreeMap<u16, u64>,
    cpu: Option<usize>,
    sent_total: u64,
    sent: u64,
    completed: u64,
    lost: u64,
    stray: u64,
    dup: u64,
    unsent: u64,
    send_errors: u64,
    gso_sends: u64,
    next_flow: usize,
    /// Open loop: index of the next scheduled send.
    next_seq: u64,
    /// Spinning open loop: the source a receive pass starts from (one that stopped early
    /// for a due send resumes where it stopped, so no flow waits behind the others).
    next_source: usize,
    /// Open loop over a path that stamps arrivals: sleep between wake-ups (responses do
    /// not wake the thread) and time each response from its kernel receive time.
    paced: bool,
    /// CLOCK_REALTIME minus this thread's clock, read at the last wake-up, to bring
    /// kernel receive times onto the run's clock.
    realtime_offset_ns: i128,
    /// Sleeps between wake-ups (system calls the path does not count).
    sleeps: u64,
    /// Paced: lateness of the window's wake-ups.
    wake_late: Option<Histogram<u64>>,
    /// Transmit-stamp bookkeeping, on a path that stamps sends.
    stamps: Option<stamps::Stamps>,
    cpu_at_start: Option<Duration>,
    wall_at_start: Option<u64>,
    cpu_at_end: Option<Duration>,
    wall_at_end: Option<u64>,
    /// Involuntary context switches at the window's start and end.
    preempted: [Option<u64>; 2],
    /// Run-queue wait at the window's start and end.
    run_delay: [Option<Duration>; 2],
    /// System calls made by the window's start and end: the report counts the window's
    /// (per completed transaction, like CPU), not the warm-up's or the drain's.
    syscalls_at: [Option<u64>; 2],
}

impl<'a, W: Workload, I: FlowIo> Thread<'a, W, I> {
    fn new(
        plan: ThreadPlan,
        io: I,
        workload: W,
        live: &'a Live,
        stop: &'a AtomicBool,
        started: Instant,
    ) -> Result<Self, SetupError> {
        let bits = workload.id_bits();
        let max_ids = max_ids(bits);
        // Spare slots delay reuse, so a late duplicate still finds its finished request.
        let capacity = (plan.in_flight * 4).max(4096).min(max_ids);
        let caps = io.caps();
        let paced = plan.pace.is_some() && !plan.spin && caps.rx_timestamps;
        let mut plan = plan;
        if let (false, Some(p)) = (paced, plan.pace.as_mut()) {
            if plan.spin {
                p.spinning();
            } else {
                // Without receive stamps every arrival wakes the thread anyway: send only
                // what is due within 50 µs, timed close to the schedule.
                p.ahead_ns = p.ahead_ns.min(UNPACED_AHEAD_NS);
            }
        }
        Ok(Thread {
            paced,
            realtime_offset_ns: 0,
            sleeps: 0,
            wake_late: paced.then(new_histogram),
            stamps: caps
                .tx_timestamps
                .then(|| stamps::Stamps::new(io.flows(), capacity)),
            table: Table::new(capacity, bits >= 64),
            flows: (0..io.flows()).map(|_| Flow { outstanding: 0 }).collect(),
            io,
            caps,
            plan,
            workload,
            live,
            stop,
            started,
            hist: new_histogram(),
            total: new_histogram(),
            interval_seen: 0,
            codes: BTreeMap::new(),
            cpu: None,
            sent_total: 0,
            sent: 0,
            completed: 0,
            lost: 0,
            stray: 0,
            dup: 0,
            unsent: 0,
            send_errors: 0,
            gso_sends: 0,
            next_flow: 0,
            next_seq: 0,
            next_source: 0,
            cpu_at_start: None,
            wall_at_start: None,
            cpu_at_end: None,
            wall_at_end: None,
            preempted: [None; 2],
            run_delay: [None; 2],
            syscalls_at: [None; 2],
        })
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn sending_done(&self, now: u64) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        if let Some(n) = self.plan.send_count {
            return self.sent_total >= n;
        }
        self.plan.send_until_ns.is_some_and(|u| now >= u)
    }

    fn mark_window(&mut self, now: u64) {
        if self.wall_at_start.is_none() && now >= self.plan.measure_from_ns {
            self.wall_at_start = Some(now);
            self.cpu_at_start = cpu::thread_cpu_time().ok();
            self.preempted[0] = cpu::thread_preemptions().ok();
            self.run_delay[0] = cpu::thread_run_delay().ok();
            self.syscalls_at[0] = Some(self.syscalls_so_far());
        }
    }

    /// System calls this thread made so far: its path's and its sleeps.
    fn syscalls_so_far(&self) -> u64 {
        self.io.stats().syscalls + self.sleeps
    }

    fn run(mut self) -> Result<ThreadResult, SetupError> {
        let mut drain_until: Option<u64> = None;
        loop {
            let now = self.now_ns();
            self.mark_window(now);
            // The parts first: an interval that has latency has its parts.
            self.hand_over_parts(false);
            self.live
                .interval
                .poll(&mut self.interval_seen, &mut self.hist, &mut self.total);
            let done_sending = self.sending_done(now);
            if done_sending && self.wall_at_end.is_none() {
                self.wall_at_end = Some(now);
                self.cpu_at_end = cpu::thread_cpu_time().ok();
                self.preempted[1] = cpu::thread_preemptions().ok();
                self.run_delay[1] = cpu::thread_run_delay().ok();
                self.syscalls_at[1] = Some(self.syscalls_so_far());
                drain_until = Some(now + self.plan.timeout_ns);
                self.give_up_owed(now);
            }
            if let Some(until) = drain_until {
                if self.table.pending() == 0 || now >= until {
                    break;
                }
            } else {
                self.send_due(now);
                self.send_errors += self.io.flush() as u64;
                self.stamp_failure()?;
            }
            let wait = self.wait_budget(now, drain_until);
            let now = if self.paced {
                self.sleep_and_drain(wait)?
            } else {
                // An empty poll reads no clock: the one taken above is recent enough.
                let send_first = drain_until.is_none();
                self.receive(wait, send_first)?.unwrap_or(now)
            };
            self.expire(now.saturating_sub(self.plan.timeout_ns));
        }
        // Whatever is still pending at the end of the drain is lost.
        self.expire(u64::MAX);
        self.finish()
    }

    /// How long receive may wait before something else needs doing.
    fn wait_budget(&self, now: u64, drain_until: Option<u64>) -> Duration {
        if self.plan.spin {
            return Duration::ZERO;
        }
        let cap = 2_000_000u64; // re-check losses and the clock at least every 2 ms
        let next = match (drain_until, &self.plan.pace) {
            (Some(u), _) => u.saturating_sub(now),
            (None, Some(_)) if self.table.free_slots() == 0 => cap,
            (None, Some(pace)) => pace.wait_ns(now, self.next_seq),
            (None, None) => cap,
        };
        Duration::from_nanos(next.min(cap))
    }

    fn send_due(&mut self, now: u64) {
        match self.plan.interval_ns {
            None => {
                for f in 0..self.flows.len() {
                    let room = self.room(f);
                    if room > 0 {
                        // A closed loop's refill is intended now, all of it.
                        self.send_on(f, room, now, None, SendShape::Together);
                    }
                }
            }
            Some(_) => self.send_paced(now),
        }
    }

    /// How many more requests flow `f` may have outstanding.
    fn room(&self, f: usize) -> usize {
        match self.plan.window {
            0 => usize::MAX,
            w => w.saturating_sub(self.flows[f].outstanding),
        }
    }

    /// Sends up to `n` requests on flow `f` in `shape`, the first of them request
    /// `first_seq` of the open-loop schedule (closed loop: `None`, each intended now);
    /// returns how many went out.
    fn send_on(
        &mut self,
        f: usize,
        n: usize,
        now: u64,
        first_seq: Option<u64>,
        shape: SendShape,
    ) -> usize {
        let n = n.min(self.io.tx_capacity());
        let mut queued = 0;
        let mut counted_sends = 0u64;
        for k in 0..n {
            if let Some(limit) = self.plan.send_count {
                if self.sent_total + queued as u64 >= limit {
                    break;
                }
            }
            let intended = match (first_seq, &self.plan.pace) {
                (Some(s), Some(p)) => p.intended(s + k as u64),
                _ => now,
            };
            let counted = intended >= self.plan.measure_from_ns;
            // Time a request from when it really left if it left early, else from when it
            // should have left.
            let reference = intended.min(now);
            let Some(id) = self.table.take(f as u32, reference, counted) else {
                break;
            };
            let len = self
                .workload
                .write_request(id, intended, self.io.tx_slot(k));
            self.io.queue(k, len);
            self.stamp_queued(k, id);
            queued += 1;
            counted_sends += u64::from(counted);
        }
        if queued == 0 {
            return 0;
        }
        let res = self.io.send(f, shape);
        self.stamp_sent(f);
        self.gso_sends += res.gso_sends as u64;
        // Requests the kernel refused stay in the table and will be counted lost at their
        // timeout, which is what they are from the server's point of view.
        self.send_errors += res.failed as u64;
        self.flows[f].outstanding += queued;
        self.sent_total += queued as u64;
        self.sent += counted_sends;
        bump(&self.live.sent, queued as u64);
        queued
    }

    /// Reads what arrived; returns the clock read after the last read that got something,
    /// or `None` when nothing came and nothing may have slept (spinning).
    ///
    /// Spinning in open loop with `send_first`, a pass stops between two reads once the
    /// schedule's next request is due, so it leaves now rather than after a read of every
    /// other flow (a system call each); the next pass resumes at the flow it stopped at.
    /// Each pass still reads at least one flow, so a send that cannot go (no room) never
    /// keeps responses unread.
    fn receive(&mut self, wait: Duration, send_first: bool) -> Result<Option<u64>, SetupError> {
        let ready = self.io.poll(wait)?;
        let send_first = send_first && self.plan.spin && self.plan.pace.is_some();
        let first = if send_first && ready > 0 {
            self.next_source % ready
        } else {
            0
        };
        let mut last = None;
        let mut reads = 0;
        for i in 0..ready {
            let r = (first + i) % ready;
            let src = self.io.source(r);
            if !self.worth_reading(src) {
                continue;
            }
            if send_first && reads > 0 {
                let now = self.now_ns();
                if self.send_waiting(now) {
                    self.next_source = r;
                    return Ok(Some(last.unwrap_or(now)));
                }
            }
            reads += 1;
            let max = self.read_max(src);
            let got = self.io.recv(src, max)?;
            if got > 0 {
                let now = self.now_ns();
                self.take_responses(got, now);
                last = Some(now);
            }
        }
        // A wait (epoll, or a blocking receive) may have slept: read the clock again.
        Ok(last.or_else(|| (!self.plan.spin).then(|| self.now_ns())))
    }

    /// Open loop: whether the schedule's next request is due at `now`.
    fn send_waiting(&self, now: u64) -> bool {
        self.plan
            .pace
            .as_ref()
            .is_some_and(|p| p.intended(self.next_seq) <= now)
    }

    /// Whether to read source `src` now: on a path that lists every source without asking
    /// the kernel, a flow with nothing outstanding has nothing to wait for (a late
    /// duplicate or a stray waits until the flow is sent on again, which the turnover of
    /// flows between sends makes soon).
    pub(super) fn worth_reading(&self, src: usize) -> bool {
        !(self.caps.polls_every_source
            && self.caps.source_per_flow
            && self.flows.get(src).is_some_and(|f| f.outstanding == 0))
    }

    /// How many datagrams to ask source `src` for: a flow's own socket no more than the
    /// flow has outstanding (at least one, for a late duplicate: with one outstanding,
    /// recvfrom does what recvmmsg would), any other source a batch.
    pub(super) fn read_max(&self, src: usize) -> usize {
        if self.caps.source_per_flow {
            self.plan.batch.min(self.flows[src].outstanding.max(1))
        } else {
            self.plan.batch
        }
    }

    /// Matches the `got` datagrams of the last read to their requests. Each arrived at
    /// `now` (read just after the read), or, on a paced path, at its kernel receive time.
    fn take_responses(&mut self, got: usize, now: u64) {
        let mut completed_now = 0;
        // With stamps: when the batch was read, and the kernel's clock against ours.
        let (read, offset) = match self.stamps {
            Some(_) => {
                let read = self.now_ns();
                (read, stamps::realtime_ns() - i128::from(read))
            }
            None => (now, 0),
        };
        // Departures still to be read: the error queue was read right after each send, so
        // usually none, and no response needs looking at twice.
        let unread = self.stamps.as_ref().is_some_and(|st| st.unread());
        for i in 0..got {
            if unread {
                // Its request's departure, read first if it is not there yet.
                let crate::io::Datagram { flow: f, data, .. } = self.io.datagram(i);
                if let Some((id, _)) = self.workload.response_id(data) {
                    self.stamp_before_answer(id, f as usize);
                }
            }
            let crate::io::Datagram {
                flow: f,
                data,
                rx_time_ns,
            } = self.io.datagram(i);
            let (answer, code) =
                crate::table::classify(&mut self.table, &mut self.workload, data, f, rx_time_ns);
            match answer {
                Answer::Completes(e) => {
                    self.flows[e.flow as usize].outstanding -= 1;
                    completed_now += 1;
                    if e.counted {
                        self.completed += 1;
                        let lat = self
                            .arrival(rx_time_ns, now)
                            .saturating_sub(e.intended_ns)
                            .max(1);
                        let _ = self.hist.record(lat.min(HIST_MAX_NS));
                        *self.codes.entry(code).or_insert(0) += 1;
                        self.stamp_completed(
                            e.intended_ns,
                            e.departed_ns,
                            rx_time_ns,
                            read,
                            offset,
                        );
                    }
                }
                Answer::Duplicate => {
                    self.dup += 1;
                    bump(&self.live.dup, 1);
                }
                Answer::Stray => {
                    self.stray += 1;
                    bump(&self.live.stray, 1);
                }
            }
        }
        bump(&self.live.completed, completed_now);
    }

    fn expire(&mut self, deadline: u64) {
        let mut lost_counted = 0u64;
        let mut lost_all = 0u64;
        let flows = &mut self.flows;
        self.table.expire(deadline, |e: Ended| {
            flows[e.flow as usize].outstanding -= 1;
            lost_all += 1;
            if e.counted {
                lost_counted += 1;
            }
        });
        self.lost += lost_counted;
        bump(&self.live.lost, lost_all);
    }

    fn finish(mut self) -> Result<ThreadResult, SetupError> {
        let path = self.io.stats();
        self.hand_over_parts(true);
        self.live.interval.finish(&mut self.hist, &mut self.total);
        let cpu_time = match (self.cpu_at_start, self.cpu_at_end) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        let window = match (self.wall_at_start, self.wall_at_end) {
            (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
            _ => Duration::ZERO,
        };
        Ok(ThreadResult {
            thread: self.plan.index,
            cpu: self.cpu,
            flows: self.flows.len(),
            sent: self.sent,
            completed: self.completed,
            lost: self.lost,
            stray: self.stray,
            dup: self.dup,
            unsent: self.unsent,
            send_errors: self.send_errors,
            syscalls: match self.syscalls_at {
                [Some(a), Some(b)] => b.saturating_sub(a),
                _ => path.syscalls + self.sleeps,
            },
            gso_sends: self.gso_sends,
            io: self.caps.path,
            gso_error: path.gso_refusal,
            codes: self.codes,
            invalid: self.workload.invalid(),
            measures: self.workload.measures(),
            latency_ns: self.total,
            parts: self.stamps.map(|s| s.figures),
            cpu_time,
            preempted: match self.preempted {
                [Some(a), Some(b)] => b.saturating_sub(a),
                _ => 0,
            },
            run_delay: match self.run_delay {
                [Some(a), Some(b)] => b.saturating_sub(a),
                _ => Duration::ZERO,
            },
            wake_late_ns: self.wake_late,
            window,
        })
    }
}
