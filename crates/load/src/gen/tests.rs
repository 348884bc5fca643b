//! The generator's loop over a path that answers at once and logs every call: which flow
//! each send went to, which flow each read asked and whether it had anything to read.

use super::*;
use crate::io::{Datagram, Flushed, PathStats, SendShape};
use crate::pace::Arrivals;
use crate::workload::EchoWorkload;
use std::collections::VecDeque;
use std::sync::Mutex;

/// What the generator asked of the path.
#[derive(Default)]
struct Log {
    /// (flow, requests, shape) of each send.
    sends: Vec<(usize, usize, SendShape)>,
    /// (flow, answers waiting) at each read.
    reads: Vec<(usize, usize)>,
    /// Polls: one per turn of the loop (a wake-up, when paced).
    polls: u64,
    syscalls: u64,
    /// Sleeps in the path's own call ([`FlowIo::sleep`]), each of which sent what was
    /// queued.
    path_sleeps: u64,
    /// Sends (`s`) and reads (`r`) in the order the generator made them.
    order: String,
}

/// A socket-like path (a source per flow, arrivals stamped, every flow listed at each
/// poll) whose server answers every request as it is sent.
struct Instant {
    log: Arc<Mutex<Log>>,
    tx: Vec<Vec<u8>>,
    lens: Vec<usize>,
    waiting: Vec<VecDeque<Vec<u8>>>,
    read: Vec<Vec<u8>>,
    read_flow: usize,
    read_at: u64,
    /// Sleeps in its own call, sending there what `send` queued (as the io_uring path).
    sleeps_itself: bool,
    /// How long each read takes (a read held up, as by an interrupt or a preemption).
    read_takes: Duration,
}

impl Instant {
    fn new(flows: usize, log: Arc<Mutex<Log>>) -> Self {
        Instant {
            log,
            tx: vec![vec![0; 2048]; 64],
            lens: vec![0; 64],
            waiting: vec![VecDeque::new(); flows],
            read: Vec::new(),
            read_flow: 0,
            read_at: 0,
            sleeps_itself: false,
            read_takes: Duration::ZERO,
        }
    }
}

impl FlowIo for Instant {
    fn caps(&self) -> Caps {
        Caps {
            path: "socket",
            source_per_flow: true,
            rx_timestamps: true,
            tx_timestamps: false,
            polls_every_source: true,
        }
    }
    fn flows(&self) -> usize {
        self.waiting.len()
    }
    fn tx_capacity(&mut self) -> usize {
        self.tx.len()
    }
    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        &mut self.tx[k]
    }
    fn queue(&mut self, k: usize, len: usize) {
        self.lens[k] = len;
    }
    fn send(&mut self, flow: usize, shape: SendShape) -> Flushed {
        // The generator fills slots 0..n before each send; the first unset length ends them.
        let n = self.lens.iter().take_while(|&&l| l > 0).count();
        for k in 0..n {
            self.waiting[flow].push_back(self.tx[k][..self.lens[k]].to_vec());
            self.lens[k] = 0;
        }
        let mut log = self.log.lock().unwrap();
        log.sends.push((flow, n, shape));
        log.order.push('s');
        // A path that sleeps itself sends in that call.
        let calls = usize::from(!self.sleeps_itself);
        log.syscalls += calls as u64;
        Flushed {
            sent: n,
            syscalls: calls,
            ..Flushed::default()
        }
    }
    fn sleep(&mut self, wait: Duration) -> Result<bool, SetupError> {
        if !self.sleeps_itself {
            return Ok(false);
        }
        std::thread::sleep(wait);
        let mut log = self.log.lock().unwrap();
        log.path_sleeps += 1;
        log.syscalls += 1;
        Ok(true)
    }
    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        std::thread::sleep(wait);
        self.log.lock().unwrap().polls += 1;
        Ok(self.waiting.len())
    }
    fn source(&self, i: usize) -> usize {
        i
    }
    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError> {
        std::thread::sleep(self.read_takes);
        let mut log = self.log.lock().unwrap();
        log.reads.push((s, self.waiting[s].len()));
        log.order.push('r');
        log.syscalls += 1;
        let n = max.min(self.waiting[s].len());
        self.read = self.waiting[s].drain(..n).collect();
        self.read_flow = s;
        self.read_at = stamps::realtime_ns() as u64;
        Ok(n)
    }
    fn datagram(&self, i: usize) -> Datagram<'_> {
        Datagram {
            flow: self.read_flow as u32,
            data: &self.read[i],
            rx_time_ns: Some(self.read_at),
        }
    }
    fn stats(&self) -> PathStats {
        PathStats {
            syscalls: self.log.lock().unwrap().syscalls,
            gso_refusal: None,
        }
    }
}

fn paced(flows: usize, rate: f64, warmup_ms: u64, ms: u64) -> LoadConfig {
    LoadConfig {
        target: "127.0.0.1:9".parse().unwrap(),
        flows,
        window: 0,
        rate: Some(rate),
        threads: 1,
        cpus: None,
        length: Length::Duration(Duration::from_millis(ms)),
        warmup: Duration::from_millis(warmup_ms),
        timeout: Duration::from_secs(1),
        batch: 64,
        spin: false,
        gso: false,
        per_wake: None,
        tx_stamps: false,
        arrivals: Arrivals::Uniform,
    }
}

/// Runs `cfg` over the answering path; the thread's result and the path's log.
fn run_paced(cfg: &LoadConfig) -> (ThreadResult, Log) {
    run_over(cfg, false)
}

/// As [`run_paced`], over a path that sleeps in its own call when `sleeps_itself`.
fn run_over(cfg: &LoadConfig, sleeps_itself: bool) -> (ThreadResult, Log) {
    run_with(cfg, sleeps_itself, Duration::ZERO)
}

/// As [`run_over`], over a path whose every read takes `read_takes`.
fn run_with(cfg: &LoadConfig, sleeps_itself: bool, read_takes: Duration) -> (ThreadResult, Log) {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut io = Instant::new(cfg.flows, log.clone());
    io.sleeps_itself = sleeps_itself;
    io.read_takes = read_takes;
    let run = start_with(cfg, |_| EchoWorkload::new(100).unwrap(), vec![io]).unwrap();
    let mut results = run.join().unwrap_or_else(|e| panic!("{e}"));
    let log = std::mem::take(&mut *log.lock().unwrap());
    (results.remove(0), log)
}

#[test]
fn each_wake_up_sends_on_one_flow_and_reads_only_flows_with_requests_outstanding() {
    // 20,000/s: two requests per wake-up, one wake-up per 100 µs, over 4 flows.
    let (r, log) = run_paced(&paced(4, 20_000.0, 0, 300));
    assert!(
        r.completed > 1000 && r.lost == 0,
        "{} completed",
        r.completed
    );
    // A wake-up's requests leave in one send (a late wake-up's catch-up burst too), and
    // the flows take the sends in turn: every flow its share, so the server sees 4 ports.
    let mut per_flow = [0usize; 4];
    for &(f, _, _) in &log.sends {
        per_flow[f] += 1;
    }
    let (lo, hi) = (
        per_flow.iter().min().unwrap(),
        per_flow.iter().max().unwrap(),
    );
    assert!(hi - lo <= 1, "send calls per flow {per_flow:?}");
    let requests: usize = log.sends.iter().map(|s| s.1).sum();
    assert!(
        log.sends.len() * 3 / 2 < requests,
        "{requests} requests in {} sends: not a wake-up's worth each",
        log.sends.len()
    );
    // Each wake-up reads the flow its last send went to (answered by now), not every
    // flow: no read finds nothing, and there is about one read per send.
    let empty = log.reads.iter().filter(|r| r.1 == 0).count();
    assert_eq!(
        empty,
        0,
        "{empty} of {} reads found nothing",
        log.reads.len()
    );
    assert!(
        log.reads.len() <= log.sends.len() + 1,
        "{} reads",
        log.reads.len()
    );
}

#[test]
fn system_calls_are_the_windows_and_about_three_per_wake_up() {
    // Warm-up 300 ms, window 200 ms: the report counts the window's calls only.
    let (r, log) = run_paced(&paced(4, 20_000.0, 300, 200));
    assert!(
        r.syscalls < log.syscalls,
        "{} system calls reported, {} made by the path over the whole run (warm-up and drain included)",
        r.syscalls,
        log.syscalls
    );
    // A wake-up: its sleep, one read, one send (the path's calls and at most one sleep per
    // turn of the loop, over the whole run).
    let per_wake = (log.syscalls + log.polls) as f64 / log.polls as f64;
    assert!(
        per_wake <= 3.0,
        "{per_wake:.2} system calls per wake-up: {} sends, {} reads, {} wake-ups",
        log.sends.len(),
        log.reads.len(),
        log.polls
    );
    eprintln!(
        "{per_wake:.2} system calls per wake-up: {} sends, {} reads, {} wake-ups",
        log.sends.len(),
        log.reads.len(),
        log.polls
    );
}

#[test]
fn a_paced_run_reports_the_windows_wake_ups_and_a_spinning_one_none() {
    // Warm-up 300 ms, window 200 ms, one wake-up per 80 µs at most.
    let (r, log) = run_paced(&paced(1, 20_000.0, 300, 200));
    let late = r.wake_late_ns.expect("a paced run measures its wake-ups");
    let n = late.len();
    assert!(
        n > 0 && n < log.polls && n <= 200_000 / 80 + 1,
        "{n} wake-ups in a 200 ms window, {} over the whole run",
        log.polls
    );
    // A sleep never ends early: each lateness is at least the histogram's floor of 1 ns,
    // and none is beyond the run.
    assert!(late.min() >= 1 && late.max() < 1_000_000_000, "{late:?}");
    let spin = LoadConfig {
        spin: true,
        ..paced(1, 20_000.0, 50, 50)
    };
    assert!(run_paced(&spin).0.wake_late_ns.is_none());
}

#[test]
fn a_path_that_sleeps_in_its_own_call_makes_a_wake_up_two_system_calls() {
    // As the io_uring path: the sleep is the path's (an io_uring_enter that also submits
    // the wake-up's sends), so a wake-up is that call and one read, and the thread never
    // sleeps by itself.
    let (r, log) = run_over(&paced(1, 20_000.0, 100, 200), true);
    assert!(
        r.completed > 1000 && r.lost == 0,
        "{} completed",
        r.completed
    );
    assert!(
        log.path_sleeps + 1 >= log.polls && log.path_sleeps <= log.polls,
        "{} sleeps in the path for {} wake-ups",
        log.path_sleeps,
        log.polls
    );
    let per_wake = log.syscalls as f64 / log.polls as f64;
    assert!(
        per_wake <= 2.0,
        "{per_wake:.2} system calls per wake-up: {} reads, {} path sleeps, {} wake-ups",
        log.reads.len(),
        log.path_sleeps,
        log.polls
    );
    // The window's calls are the path's alone: none of the thread's own sleeps.
    let wakes = r.wake_late_ns.as_ref().expect("paced").len();
    assert!(
        r.syscalls <= 2 * wakes + 2,
        "{} system calls in the window for {wakes} wake-ups",
        r.syscalls
    );
}

/// A generator thread over `io` with `cfg`'s first plan, driven by hand (no loop, no
/// clock): the test chooses each wake-up's `now`.
fn with_thread<I: FlowIo, T>(
    cfg: &LoadConfig,
    io: I,
    f: impl FnOnce(&mut Thread<'_, EchoWorkload, I>) -> T,
) -> T {
    let live = Live::default();
    let stop = AtomicBool::new(false);
    let work = EchoWorkload::new(100).unwrap();
    let plan = ThreadPlan::new(cfg, 0);
    let mut th = Thread::new(plan, io, work, &live, &stop, std::time::Instant::now()).unwrap();
    f(&mut th)
}

/// The sends of threads made by `drive`, each over an answering path of its own with
/// `cfg`'s flows, logged in one log.
fn sends_of(drive: impl FnOnce(&dyn Fn(&LoadConfig) -> Instant)) -> Vec<(usize, usize, SendShape)> {
    let log = Arc::new(Mutex::new(Log::default()));
    drive(&|cfg: &LoadConfig| Instant::new(cfg.flows, log.clone()));
    let sends = std::mem::take(&mut log.lock().unwrap().sends);
    sends
}

#[test]
fn a_wake_up_on_schedule_sends_apart_one_behind_together() {
    // 50k/s: 4 per wake-up, one wake-up per 80 µs.
    let sends = sends_of(|path| {
        let cfg = paced(1, 50_000.0, 0, 1000);
        with_thread(&cfg, path(&cfg), |th| {
            th.send_paced(0);
            // 10 µs late: one request already due, the other 3 of the period ahead.
            th.send_paced(80_000 + 10_000);
            // 5 ms late: 250 requests due, more than a wake-up's worth: a bounded burst
            // of the oldest.
            th.send_paced(5_000_000);
        })
    });
    assert_eq!(
        sends,
        vec![
            (0, 4, SendShape::Apart),
            (0, 4, SendShape::Apart),
            (0, 16, SendShape::Together)
        ]
    );
}

#[test]
fn a_spinning_sender_sends_the_one_due_apart_and_what_it_owes_together() {
    let sends = sends_of(|path| {
        let cfg = LoadConfig {
            spin: true,
            ..paced(1, 150_000.0, 0, 1000)
        };
        with_thread(&cfg, path(&cfg), |th| {
            let p = th.plan.pace.clone().unwrap();
            // On time: the one request due.
            th.send_paced(p.intended(0));
            // Three due at once (two periods late): behind, caught up in one send.
            th.send_paced(p.intended(3));
        })
    });
    assert_eq!(
        sends,
        vec![(0, 1, SendShape::Apart), (0, 3, SendShape::Together)]
    );
}

#[test]
fn bursts_and_closed_loop_refills_send_together() {
    let sends = sends_of(|path| {
        let burst = LoadConfig {
            arrivals: Arrivals::Burst(8),
            ..paced(1, 50_000.0, 0, 1000)
        };
        with_thread(&burst, path(&burst), |th| th.send_paced(0));
        let closed = LoadConfig {
            rate: None,
            window: 8,
            ..paced(2, 50_000.0, 0, 1000)
        };
        with_thread(&closed, path(&closed), |th| th.send_due(0));
    });
    assert_eq!(
        sends,
        vec![
            (0, 8, SendShape::Together),
            (0, 8, SendShape::Together),
            (1, 8, SendShape::Together)
        ]
    );
}

/// Over a real stamped loopback socket: a wake-up on schedule sends its 4 requests by
/// one sendmmsg, 4 datagrams with 4 stamps (each request has its own departure); a
/// wake-up behind sends its burst of 16 as one GSO send that shares one stamp.
#[test]
fn over_a_real_socket_on_schedule_is_one_stamp_per_request_and_behind_one_per_send() {
    let (srv, io) = crate::io::tests::stamped_flow();
    if !io.keyed_sends() {
        eprintln!("skipped: this kernel takes no stamp key in a send");
        return;
    }
    let cfg = LoadConfig {
        tx_stamps: true,
        gso: true,
        ..paced(1, 50_000.0, 0, 1000)
    };
    let mut sink = firehose_sys::mmsg::Batch::new(64, 2048);
    let mut arrived = |n: usize| {
        let mut got = 0;
        while got < n {
            got += sink.recv(&srv, 64, 0).unwrap();
        }
        got
    };
    with_thread(&cfg, io, |th| {
        for (now, n, gso, stamps) in [(0, 4, 0, 4), (5_000_000, 16, 1, 1)] {
            let calls = th.io.stats().syscalls;
            let departed = th.stamps.as_ref().unwrap().last_departure;
            th.send_paced(now);
            assert_eq!(th.sent_total, if gso == 0 { 4 } else { 20 }, "at {now}");
            assert_eq!(th.gso_sends, gso, "at {now}");
            // One send call and one read of the error queue.
            assert_eq!(th.io.stats().syscalls - calls, 2, "at {now}");
            // Every request of the send has its departure, from `stamps` stamps.
            let st = th.stamps.as_ref().unwrap();
            assert!(st.sent[0].is_empty(), "at {now}: requests without a stamp");
            assert_eq!(st.figures.unmatched, 0);
            assert!(st.last_departure > departed);
            // The wake-up's error-queue read: one stamp per datagram, each its own key.
            let mut keys: Vec<u32> = st.read.iter().map(|s| s.key).collect();
            keys.dedup();
            assert_eq!((st.read.len(), keys.len()), (stamps, stamps), "at {now}");
            assert_eq!(arrived(n), n, "at {now}");
        }
    });
}

#[test]
fn a_spinning_sender_sends_what_is_due_before_reading_another_flow() {
    // One request per 100 us over 4 flows of one request in flight each, and every read
    // takes 300 us: after any read the next request is due, and a late pass's requests go
    // to several flows. A receive pass then stops and the send goes first, so no two
    // reads follow each other while sending (the drain at the end reads every flow).
    let spin = LoadConfig {
        spin: true,
        window: 1,
        ..paced(4, 10_000.0, 0, 100)
    };
    let (r, log) = run_with(&spin, false, Duration::from_micros(300));
    let sending = &log.order[..log.order.rfind('s').expect("sent")];
    assert!(
        !sending.contains("rr"),
        "two reads in a row while a send was due: {sending}"
    );
    // Each pass still reads: every request is answered and none is lost.
    assert!(
        r.completed > 0 && r.lost == 0,
        "{} completed, {} lost",
        r.completed,
        r.lost
    );
    assert!(
        log.reads.iter().filter(|x| x.1 > 0).count() * 2 >= log.reads.len(),
        "{} reads",
        log.reads.len()
    );
    // Several flows had answers waiting at once: the passes took turns over them.
    let mut per_flow = [0usize; 4];
    for &(f, _) in &log.reads {
        per_flow[f] += 1;
    }
    assert!(
        per_flow.iter().all(|&n| n > 0),
        "reads per flow {per_flow:?}"
    );
}
