//! The transaction generator: flows, windows, open-loop schedules, loss accounting.
//!
//! Each thread owns a share of the flows (one connected socket per flow, so each flow
//! has its own source port and RSS/reuseport spread them), one [`Table`] of outstanding
//! requests, and batches for sendmmsg/recvmmsg. Threads share nothing but a stop flag
//! and their live counters.
//!
//! Accounting: a request counts when its intended send time falls in the measurement
//! window (after warm-up). Every counted request ends exactly once, as completed or
//! lost (unanswered within the timeout, or still unanswered when the run drains).

use crate::interval::IntervalSlot;
use crate::report::{new_histogram, HIST_MAX_NS};
use crate::table::{Answer, Ended, Table};
use crate::workload::Workload;
use firehose_sys::epoll::Epoll;
use firehose_sys::mmsg::{Batch, SendMode};
use firehose_sys::socket::{is_would_block, UdpSock, ECONNREFUSED, MSG_DONTWAIT};
use firehose_sys::{cpu, SysError};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest datagram a slot must hold.
const SLOT: usize = 65536;
/// Open loop: requests due within this much of now leave together in one sendmmsg, so
/// the generator wakes at most every 50 µs instead of once per request. An early request
/// is timed from its actual send; a late one from its intended time (coordinated omission).
const SEND_AHEAD_NS: u64 = 50_000;

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
    /// Send runs of equal-sized requests as UDP GSO super-datagrams (UDP_SEGMENT), which
    /// pass the sender's IP stack once per run; falls back to sendmmsg if refused.
    pub gso: bool,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Kernel(#[from] SysError),
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
    pub syscalls: u64,
    /// sendmsg calls that carried a UDP GSO super-datagram.
    pub gso_sends: u64,
    /// Why GSO was abandoned, if the kernel refused it.
    pub gso_error: Option<String>,
    pub codes: BTreeMap<u16, u64>,
    pub latency_ns: Histogram<u64>,
    /// This thread's CPU time during the measurement window.
    pub cpu_time: Duration,
    /// Length of the measurement window this thread saw.
    pub window: Duration,
}

/// A running or finished load.
pub struct Run {
    pub live: Arc<Vec<Live>>,
    pub stop: Arc<AtomicBool>,
    pub started: Instant,
    handles: Vec<std::thread::JoinHandle<Result<ThreadResult, LoadError>>>,
}

impl Run {
    /// True once every generator thread has returned.
    pub fn handles_finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Waits for every thread.
    pub fn join(self) -> Result<Vec<ThreadResult>, LoadError> {
        let mut out = Vec::new();
        for h in self.handles {
            match h.join() {
                Ok(r) => out.push(r?),
                Err(_) => return Err(LoadError::Config("a generator thread panicked".into())),
            }
        }
        Ok(out)
    }
}

/// Checks a configuration before anything starts.
pub fn validate(cfg: &LoadConfig) -> Result<(), LoadError> {
    let bad = |m: String| Err(LoadError::Config(m));
    if cfg.threads == 0 {
        return bad("--threads must be at least 1".into());
    }
    if cfg.flows < cfg.threads {
        return bad(format!(
            "--flows {} is fewer than --threads {}: each thread needs at least one flow",
            cfg.flows, cfg.threads
        ));
    }
    if cfg.window == 0 && cfg.rate.is_none() {
        return bad("--window must be at least 1".into());
    }
    if cfg.batch == 0 || cfg.batch > 1024 {
        return bad(format!(
            "--batch {} is out of range; use 1 to 1024",
            cfg.batch
        ));
    }
    if let Some(r) = cfg.rate {
        if !(r > 0.0 && r.is_finite()) {
            return bad(format!(
                "--rate {r} must be a positive number of transactions per second"
            ));
        }
    }
    match cfg.length {
        Length::Duration(d) if d.is_zero() => {
            return bad("--duration must be greater than zero".into())
        }
        Length::Requests(0) => return bad("--requests must be at least 1".into()),
        _ => {}
    }
    if cfg.timeout.is_zero() {
        return bad("--timeout must be greater than zero".into());
    }
    if let Some(cpus) = &cfg.cpus {
        let allowed = cpu::allowed_cpus()?;
        if cpus.len() < cfg.threads {
            return bad(format!(
                "--cpus lists {} CPUs for {} threads; give one CPU per thread",
                cpus.len(),
                cfg.threads
            ));
        }
        if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
            return bad(format!(
                "CPU {c} in --cpus does not exist or is not allowed for this process (allowed: {allowed:?})"
            ));
        }
    }
    if cfg.target.port() == 0 {
        return bad(format!(
            "--target {} has port 0; name the server's port",
            cfg.target
        ));
    }
    Ok(())
}

/// Starts the generator threads; `make` builds one workload per thread.
pub fn start<W, F>(cfg: &LoadConfig, make: F) -> Result<Run, LoadError>
where
    W: Workload + 'static,
    F: Fn(usize) -> W,
{
    validate(cfg)?;
    let stop = Arc::new(AtomicBool::new(false));
    let live: Arc<Vec<Live>> = Arc::new((0..cfg.threads).map(|_| Live::default()).collect());
    let started = Instant::now();
    // Open all sockets first, so a bad target or missing route fails before any thread runs.
    let mut per_thread: Vec<Vec<UdpSock>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    for f in 0..cfg.flows {
        per_thread[f % cfg.threads].push(open_flow(&cfg.target)?);
    }
    let mut handles = Vec::new();
    for (t, socks) in per_thread.into_iter().enumerate() {
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
                let mut th = Thread::new(plan, socks, workload, &live[t], &stop, started)?;
                th.cpu = cpu_choice;
                th.run()
            })
            .map_err(|e| LoadError::Config(format!("could not start thread {t}: {e}")))?;
        handles.push(h);
    }
    Ok(Run {
        live,
        stop,
        started,
        handles,
    })
}

fn open_flow(target: &SocketAddr) -> Result<UdpSock, LoadError> {
    let s = UdpSock::new_for(target)?;
    let any: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    s.bind(&any)?;
    s.connect(target)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// One thread's share of the schedule, in ns since the run started.
#[derive(Debug, Clone)]
struct ThreadPlan {
    index: usize,
    window: usize,
    batch: usize,
    spin: bool,
    gso: bool,
    timeout_ns: u64,
    measure_from_ns: u64,
    /// Stop sending at this time (duration mode).
    send_until_ns: Option<u64>,
    /// Stop sending after this many requests (requests mode).
    send_count: Option<u64>,
    /// ns between sends, open loop.
    interval_ns: Option<f64>,
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
        ThreadPlan {
            index: t,
            window: cfg.window,
            batch: cfg.batch,
            spin: cfg.spin,
            gso: cfg.gso,
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
    sock: UdpSock,
    outstanding: usize,
}

struct Thread<'a, W: Workload> {
    plan: ThreadPlan,
    flows: Vec<Flow>,
    workload: W,
    live: &'a Live,
    stop: &'a AtomicBool,
    started: Instant,
    table: Table,
    epoll: Option<Epoll>,
    rx: Batch,
    tx: Batch,
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
    syscalls: u64,
    gso_sends: u64,
    gso_error: Option<String>,
    next_flow: usize,
    /// Open loop: index of the next scheduled send.
    next_seq: u64,
    cpu_at_start: Option<Duration>,
    wall_at_start: Option<u64>,
    cpu_at_end: Option<Duration>,
    wall_at_end: Option<u64>,
}

impl<'a, W: Workload> Thread<'a, W> {
    fn new(
        plan: ThreadPlan,
        socks: Vec<UdpSock>,
        workload: W,
        live: &'a Live,
        stop: &'a AtomicBool,
        started: Instant,
    ) -> Result<Self, LoadError> {
        let bits = workload.id_bits();
        let max_ids = if bits >= 32 {
            u32::MAX as usize
        } else {
            1usize << bits
        };
        // Closed loop needs every window slot; open loop only sizes its table from the
        // rate and the timeout, and counts as unsent what does not fit.
        if plan.interval_ns.is_none() && plan.in_flight > max_ids {
            return Err(LoadError::Config(format!(
                "thread {} would keep up to {} requests in flight but this protocol's ids only distinguish {}; lower --window/--flows/--timeout or add --threads",
                plan.index, plan.in_flight, max_ids
            )));
        }
        // Spare slots delay reuse, so a late duplicate still finds its finished request.
        let capacity = (plan.in_flight * 4).max(4096).min(max_ids);
        // Spinning polls every flow itself; one flow in closed loop blocks in recvmmsg
        // (one syscall fewer per wake-up); everything else waits in epoll.
        let blocking_single = socks.len() == 1 && plan.interval_ns.is_none() && !plan.spin;
        let epoll = if !plan.spin && !blocking_single {
            let ep = Epoll::new(socks.len().min(256))?;
            for (i, s) in socks.iter().enumerate() {
                ep.add_readable(s.as_raw_fd(), i as u64)?;
            }
            Some(ep)
        } else {
            None
        };
        if blocking_single {
            socks[0].set_nonblocking(false)?;
            // Wake at least every 2 ms to expire losses and check the clock.
            socks[0].set_recv_timeout(Duration::from_millis(2))?;
        }
        Ok(Thread {
            table: Table::new(capacity, bits >= 64),
            rx: Batch::new(plan.batch, SLOT),
            tx: Batch::new(plan.batch.max(plan.window.clamp(1, 1024)), SLOT).with_send(
                if plan.gso {
                    SendMode::Gso
                } else {
                    SendMode::Batch
                },
            ),
            flows: socks
                .into_iter()
                .map(|sock| Flow {
                    sock,
                    outstanding: 0,
                })
                .collect(),
            plan,
            workload,
            live,
            stop,
            started,
            epoll,
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
            syscalls: 0,
            gso_sends: 0,
            gso_error: None,
            next_flow: 0,
            next_seq: 0,
            cpu_at_start: None,
            wall_at_start: None,
            cpu_at_end: None,
            wall_at_end: None,
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
        }
    }

    fn run(mut self) -> Result<ThreadResult, LoadError> {
        let mut drain_until: Option<u64> = None;
        loop {
            let now = self.now_ns();
            self.mark_window(now);
            self.live
                .interval
                .poll(&mut self.interval_seen, &mut self.hist, &mut self.total);
            let done_sending = self.sending_done(now);
            if done_sending && self.wall_at_end.is_none() {
                self.wall_at_end = Some(now);
                self.cpu_at_end = cpu::thread_cpu_time().ok();
                drain_until = Some(now + self.plan.timeout_ns);
            }
            if let Some(until) = drain_until {
                if self.table.pending() == 0 || now >= until {
                    break;
                }
            } else {
                self.send_due(now);
            }
            let wait = self.wait_budget(now, drain_until);
            self.receive(wait)?;
            let now = self.now_ns();
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
        let next = match (drain_until, self.plan.interval_ns) {
            (Some(u), _) => u.saturating_sub(now),
            (None, Some(iv)) => {
                let due = (self.next_seq as f64 * iv) as u64;
                if self.table.free_slots() == 0 {
                    cap
                } else {
                    due.saturating_sub(now)
                }
            }
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
                        self.send_on(f, room, now, now);
                    }
                }
            }
            Some(iv) => {
                let scheduled = ((now + SEND_AHEAD_NS) as f64 / iv).floor() as u64 + 1;
                let mut due = scheduled.saturating_sub(self.next_seq);
                if let Some(n) = self.plan.send_count {
                    due = due.min(n.saturating_sub(self.sent_total));
                }
                let mut left = due;
                let flows = self.flows.len();
                let mut tried = 0;
                while left > 0 && tried < flows {
                    let f = self.next_flow;
                    self.next_flow = (self.next_flow + 1) % flows;
                    tried += 1;
                    let room = (self.room(f) as u64).min(self.plan.batch as u64).min(left) as usize;
                    if room == 0 {
                        continue;
                    }
                    let first = self.next_seq + (due - left);
                    let intended = (first as f64 * iv) as u64;
                    let sent = self.send_on(f, room, now, intended);
                    left -= sent as u64;
                    if sent < room {
                        break;
                    }
                }
                // Requests the schedule wanted but no flow had room for are counted, not
                // queued: queueing them would hide the server's slowness (coordinated omission).
                if left > 0 && ((self.next_seq as f64 * iv) as u64) >= self.plan.measure_from_ns {
                    self.unsent += left;
                }
                self.next_seq += due;
            }
        }
    }

    /// How many more requests flow `f` may have outstanding.
    fn room(&self, f: usize) -> usize {
        match self.plan.window {
            0 => usize::MAX,
            w => w.saturating_sub(self.flows[f].outstanding),
        }
    }

    /// Sends up to `n` requests on flow `f`; returns how many went out.
    fn send_on(&mut self, f: usize, n: usize, now: u64, first_intended: u64) -> usize {
        let n = n.min(self.tx.capacity());
        let iv = self.plan.interval_ns;
        let mut queued = 0;
        let mut counted_sends = 0u64;
        for k in 0..n {
            if let Some(limit) = self.plan.send_count {
                if self.sent_total + queued as u64 >= limit {
                    break;
                }
            }
            let intended = match iv {
                Some(iv) => first_intended + (k as f64 * iv) as u64,
                None => now,
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
                .write_request(id, intended, self.tx.slot_mut(k));
            self.tx.queue_send(k, len);
            queued += 1;
            counted_sends += u64::from(counted);
        }
        if queued == 0 {
            return 0;
        }
        let sock = &self.flows[f].sock;
        let res = self.tx.flush(sock, 0);
        if res.gso_unavailable && self.gso_error.is_none() {
            // The kernel or path cannot do GSO: the batch fell back to sendmmsg; say why once.
            self.gso_error = sock.gso_unavailable().map(str::to_string);
        }
        self.gso_sends += res.gso_sends as u64;
        self.syscalls += res.syscalls as u64;
        // Requests the kernel refused stay in the table and will be counted lost at their
        // timeout, which is what they are from the server's point of view.
        self.send_errors += res.failed as u64;
        self.flows[f].outstanding += queued;
        self.sent_total += queued as u64;
        self.sent += counted_sends;
        self.live.sent.fetch_add(queued as u64, Ordering::Relaxed);
        queued
    }

    fn receive(&mut self, wait: Duration) -> Result<(), LoadError> {
        match self.epoll.as_mut() {
            None => {
                for f in 0..self.flows.len() {
                    self.drain_flow(f)?;
                }
                Ok(())
            }
            Some(ep) => {
                let mut ready = [0usize; 256];
                let mut n = 0;
                self.syscalls += 1;
                for token in ep.wait(wait)? {
                    if n < ready.len() {
                        ready[n] = token as usize;
                        n += 1;
                    }
                }
                for &f in &ready[..n] {
                    self.drain_flow(f)?;
                }
                Ok(())
            }
        }
    }

    fn drain_flow(&mut self, f: usize) -> Result<(), LoadError> {
        let flags = if self.epoll.is_some() || self.plan.spin {
            MSG_DONTWAIT
        } else {
            0
        };
        self.syscalls += 1;
        let got = match self.rx.recv(&self.flows[f].sock, self.plan.batch, flags) {
            Ok(n) => n,
            Err(e) if is_would_block(&e) => return Ok(()),
            // ECONNREFUSED: the target port is closed (ICMP port unreachable). The request
            // stays pending and is counted lost at its timeout.
            Err(e) if e.errno() == Some(ECONNREFUSED) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let now = self.now_ns();
        let mut completed_now = 0;
        for i in 0..got {
            let data = self.rx.data(i);
            let Some((id, code)) = self.workload.response_id(data) else {
                self.stray += 1;
                self.live.stray.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let matches = self.table.pending_flow(id).is_some() && self.workload.matches(id, data);
            let answer = if matches {
                self.table.answer(id, f as u32)
            } else if self.table.pending_flow(id).is_some() {
                Answer::Stray
            } else {
                // Not pending: a duplicate if it answers a finished request, else stray.
                self.table.answer(id, f as u32)
            };
            match answer {
                Answer::Completes(e) => {
                    self.flows[f].outstanding -= 1;
                    completed_now += 1;
                    if e.counted {
                        self.completed += 1;
                        let lat = now.saturating_sub(e.intended_ns).max(1);
                        let _ = self.hist.record(lat.min(HIST_MAX_NS));
                        *self.codes.entry(code).or_insert(0) += 1;
                    }
                }
                Answer::Duplicate => {
                    self.dup += 1;
                    self.live.dup.fetch_add(1, Ordering::Relaxed);
                }
                Answer::Stray => {
                    self.stray += 1;
                    self.live.stray.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.live
            .completed
            .fetch_add(completed_now, Ordering::Relaxed);
        Ok(())
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
        self.live.lost.fetch_add(lost_all, Ordering::Relaxed);
    }

    fn finish(mut self) -> Result<ThreadResult, LoadError> {
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
            syscalls: self.syscalls,
            gso_sends: self.gso_sends,
            gso_error: self.gso_error,
            codes: self.codes,
            latency_ns: self.total,
            cpu_time,
            window,
        })
    }
}
