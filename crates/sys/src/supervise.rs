//! Supervision of a run's threads, the one policy of serve, load, sink, flood and stream: a
//! worker that panics, fails, or ends while it should still run is never silent. The run stops
//! at once and says which worker (its index, queue and CPU) and why ([`WorkerFailure`]); the
//! cli exits non-zero with that line. No worker is restarted: a restarted AF_XDP worker would
//! miss the frames the kernel put on its rings meanwhile, and a figure from a run that lost a
//! worker is not the figure asked for.
//!
//! [`Workers`] owns the threads and turns each join (a panic's message included) into a
//! result; [`Supervisor::run`] is the one loop that waits for a signal (the `stop` flag), the
//! run's duration, the workers' end or a failure, and calls the caller back at every progress
//! interval.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which thread: its role and index, and the queue and CPU it serves, when it has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// "worker", "generator thread", "sink worker", "flood thread", "flow"...
    pub role: &'static str,
    pub index: usize,
    pub queue: Option<u32>,
    pub cpu: Option<usize>,
}

impl Label {
    /// `role` number `index`, with no queue or CPU yet.
    pub fn new(role: &'static str, index: usize) -> Label {
        Label {
            role,
            index,
            queue: None,
            cpu: None,
        }
    }

    /// The same, serving rx queue `q`.
    pub fn queue(mut self, q: Option<u32>) -> Label {
        self.queue = q;
        self
    }

    /// The same, pinned to CPU `c`.
    pub fn cpu(mut self, c: Option<usize>) -> Label {
        self.cpu = c;
        self
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.role, self.index)?;
        let cpu = match self.cpu {
            Some(c) => format!("CPU {c}"),
            None => "not pinned".into(),
        };
        match self.queue {
            Some(q) => write!(f, " (queue {q}, {cpu})"),
            None => write!(f, " ({cpu})"),
        }
    }
}

/// Why a thread ended before its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// It panicked, with this message.
    Panicked(String),
    /// It returned this error.
    Failed(String),
    /// It returned while the run still needed it.
    Ended,
}

/// A thread that panicked, failed, or ended while the run needed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFailure {
    pub label: Label,
    pub cause: Cause,
}

impl fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Panicked(m) => write!(f, "{} panicked: {m}", self.label),
            Cause::Failed(e) => write!(f, "{} failed: {e}", self.label),
            Cause::Ended => write!(f, "{} stopped on its own", self.label),
        }
    }
}

impl std::error::Error for WorkerFailure {}

/// The message a panic carried (`panic!("...")` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with no message".into()
    }
}

/// One thread and, once joined, its result.
struct Slot<T, E> {
    label: Label,
    handle: Option<JoinHandle<Result<T, E>>>,
    result: Option<Result<T, WorkerFailure>>,
}

/// The threads of a run. `until_stopped`: the threads run until the run's stop flag is set
/// (server and sink workers), so one that returns earlier has failed even without an error;
/// otherwise they end on their own when their work is done (generators, floods).
pub struct Workers<T, E> {
    until_stopped: bool,
    slots: Vec<Slot<T, E>>,
}

impl<T, E: fmt::Display> Workers<T, E> {
    /// No threads yet.
    pub fn new(until_stopped: bool) -> Self {
        Workers {
            until_stopped,
            slots: Vec::new(),
        }
    }

    /// Adds a started thread.
    pub fn push(&mut self, label: Label, handle: JoinHandle<Result<T, E>>) {
        self.slots.push(Slot {
            label,
            handle: Some(handle),
            result: None,
        });
    }

    /// How many threads there are.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True with no threads.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// True once every thread has returned (or panicked).
    pub fn all_finished(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.handle.as_ref().is_none_or(JoinHandle::is_finished))
    }

    /// Joins the threads that have ended and returns the first failure among them: a
    /// panic, an error, or (with `until_stopped`, while `stopping` is false) a return.
    pub fn check(&mut self, stopping: bool) -> Option<WorkerFailure> {
        let early = self.until_stopped && !stopping;
        for s in &mut self.slots {
            if s.handle.as_ref().is_some_and(JoinHandle::is_finished) {
                let h = s.handle.take().expect("checked above");
                s.result = Some(joined(&s.label, h, early));
            }
        }
        self.slots.iter().find_map(|s| match &s.result {
            Some(Err(f)) => Some(f.clone()),
            _ => None,
        })
    }

    /// What the supervisor loop wants to know: a failure, all done, or still running.
    pub fn health(&mut self, stopping: bool) -> Health {
        match self.check(stopping) {
            Some(f) => Health::Failed(f),
            None if self.all_finished() => Health::Done,
            None => Health::Running,
        }
    }

    /// Waits for every thread (the caller has asked them to stop): their results in
    /// order, or the first failure.
    pub fn join(self) -> Result<Vec<T>, WorkerFailure> {
        let mut out = Vec::with_capacity(self.slots.len());
        let mut first = None;
        for s in self.slots {
            let r = match (s.result, s.handle) {
                (Some(r), _) => r,
                (None, Some(h)) => joined(&s.label, h, false),
                (None, None) => unreachable!("a slot holds a handle until it holds a result"),
            };
            match r {
                Ok(v) => out.push(v),
                Err(f) => {
                    first.get_or_insert(f);
                }
            }
        }
        first.map_or(Ok(out), Err)
    }
}

/// A thread's result from its join: `early` turns a normal return into [`Cause::Ended`].
fn joined<T, E: fmt::Display>(
    label: &Label,
    h: JoinHandle<Result<T, E>>,
    early: bool,
) -> Result<T, WorkerFailure> {
    let fail = |cause| WorkerFailure {
        label: label.clone(),
        cause,
    };
    match h.join() {
        Ok(Ok(_)) if early => Err(fail(Cause::Ended)),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(fail(Cause::Failed(e.to_string()))),
        Err(p) => Err(fail(Cause::Panicked(panic_message(p.as_ref())))),
    }
}

/// The workers' state, as the loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Running,
    /// Every worker finished its work (a generator's request count, a flood's count).
    Done,
    Failed(WorkerFailure),
}

/// Why a supervised run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The stop flag was set (SIGINT or SIGTERM).
    Signal,
    /// The run's duration passed.
    Duration,
    /// The workers finished their work.
    Done,
    Failed(WorkerFailure),
}

/// The loop that watches a run.
#[derive(Debug, Clone)]
pub struct Supervisor<'a> {
    /// Set by a signal handler (the cli registers SIGINT and SIGTERM) to end the run.
    pub stop: &'a AtomicBool,
    /// The run ends after this long, counted from `started`.
    pub duration: Option<Duration>,
    /// A progress tick every this long (interval lines, interval records).
    pub interval: Option<Duration>,
    /// How often the loop wakes. It may share a CPU with the workers, so it only reads
    /// counters; finer only where a figure needs it (a sink timing `--count` rounds).
    pub poll: Duration,
    /// On a signal, wait for the workers to finish rather than end at once: a generator
    /// sees the same flag, stops sending and still counts the answers in flight.
    pub drain: bool,
    /// More instants to wake at (and call `watch`), counted from `started`: each
    /// `(first, every)` is first, first + every, ... (`every` zero: first alone). What
    /// `watch` does at an edge (a measured window's first reading, an interval line) then
    /// happens on time however long `poll` is.
    pub wakes: Vec<(Duration, Duration)>,
}

/// The first instant of the grid `(first, every)` from `started` that is later than `now`.
fn next_wake(
    started: Instant,
    now: Instant,
    (first, every): (Duration, Duration),
) -> Option<Instant> {
    let first = started + first;
    if first > now {
        return Some(first);
    }
    if every.is_zero() {
        return None;
    }
    let past = now.duration_since(first).as_nanos() / every.as_nanos();
    let k = u32::try_from(past + 1).ok()?;
    Some(first + every.checked_mul(k)?)
}

/// The loop's wake-up period unless a role needs finer timing.
pub const POLL: Duration = Duration::from_millis(10);

/// The wake-up period of a main thread that may share a CPU with a worker it must not
/// disturb: a server's worker that busy-polls, a generator whose sends are timed. Each
/// wake-up preempts that worker (at 10 ms, about 100 preemptions a second, half of what the
/// `latency` profile's worker saw). A signal, a failed worker or a SIGHUP is still seen
/// within this; ticks, wakes and the duration do not wait for it.
pub const QUIET_POLL: Duration = Duration::from_millis(100);

impl<'a> Supervisor<'a> {
    /// A supervisor of runs that end on `stop`, with no duration or ticks yet.
    pub fn new(stop: &'a AtomicBool) -> Supervisor<'a> {
        Supervisor {
            stop,
            duration: None,
            interval: None,
            poll: POLL,
            drain: false,
            wakes: Vec::new(),
        }
    }

    /// Loops until a signal (with `drain`, until the workers end after it), the duration,
    /// the workers' end or a failure. Every wake-up
    /// calls `watch(now)` (the workers' health, and whatever the role checks often);
    /// every `interval` since `started` calls `tick(now)`. A failure wins over the other
    /// endings seen at the same wake-up.
    pub fn run<E>(
        &self,
        started: Instant,
        mut watch: impl FnMut(Instant) -> Result<Health, E>,
        mut tick: impl FnMut(Instant) -> Result<(), E>,
    ) -> Result<Ended, E> {
        let mut next_tick = self.interval.map(|i| started + i);
        let end = self.duration.map(|d| started + d);
        loop {
            // Until the next poll, or sooner when a tick or the end falls before it: a long
            // poll keeps ticks on their grid and the duration exact.
            let now = Instant::now();
            let mut wake = now + self.poll;
            let edges = self
                .wakes
                .iter()
                .filter_map(|&g| next_wake(started, now, g));
            for t in [next_tick, end].into_iter().flatten().chain(edges) {
                wake = wake.min(t);
            }
            std::thread::sleep(wake.saturating_duration_since(now));
            let now = Instant::now();
            let signalled = self.stop.load(Ordering::Relaxed);
            match watch(now)? {
                Health::Failed(f) => return Ok(Ended::Failed(f)),
                Health::Done if signalled => return Ok(Ended::Signal),
                Health::Done => return Ok(Ended::Done),
                Health::Running => {}
            }
            if signalled && !self.drain {
                return Ok(Ended::Signal);
            }
            if end.is_some_and(|e| now >= e) {
                return Ok(Ended::Duration);
            }
            if let (Some(t), Some(iv)) = (next_tick, self.interval) {
                if now >= t {
                    tick(now)?;
                    // Ticks stay on the interval's grid even after a slow one.
                    let mut n = t + iv;
                    while n <= now {
                        n += iv;
                    }
                    next_tick = Some(n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start<T: Send + 'static>(
        w: &mut Workers<T, String>,
        i: usize,
        f: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) {
        let h = std::thread::spawn(f);
        w.push(
            Label::new("worker", i).queue(Some(i as u32)).cpu(Some(i)),
            h,
        );
    }

    fn wait_finished<T, E: fmt::Display>(w: &Workers<T, E>, n: usize) {
        let by = Instant::now() + Duration::from_secs(10);
        while w
            .slots
            .iter()
            .filter(|s| s.handle.as_ref().is_none_or(JoinHandle::is_finished))
            .count()
            < n
        {
            assert!(Instant::now() < by, "threads did not finish");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    use std::sync::Arc;

    #[test]
    fn a_panic_names_the_worker_its_queue_cpu_and_message() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut w = Workers::<u32, String>::new(true);
        let s = stop.clone();
        start(&mut w, 0, move || {
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(7)
        });
        start(&mut w, 1, || panic!("frame too short"));
        wait_finished(&w, 1);
        let f = w
            .check(false)
            .expect("the panic is seen while the run goes on");
        assert_eq!(f.label.index, 1);
        assert_eq!(
            f.to_string(),
            "worker 1 (queue 1, CPU 1) panicked: frame too short"
        );
        stop.store(true, Ordering::Relaxed);
        assert_eq!(w.join().unwrap_err(), f);
    }

    #[test]
    fn an_error_or_an_early_return_is_a_failure_a_return_after_stop_is_not() {
        let mut w = Workers::<u32, String>::new(true);
        start(&mut w, 0, || Err("recv: ENETDOWN".into()));
        wait_finished(&w, 1);
        let f = w.check(false).unwrap();
        assert_eq!(f.cause, Cause::Failed("recv: ENETDOWN".into()));
        let mut w = Workers::<u32, String>::new(true);
        start(&mut w, 0, || Ok(1));
        wait_finished(&w, 1);
        assert_eq!(w.check(false).unwrap().cause, Cause::Ended);
        let mut w = Workers::<u32, String>::new(true);
        start(&mut w, 0, || Ok(1));
        wait_finished(&w, 1);
        assert_eq!(w.check(true), None);
        assert_eq!(w.join().unwrap(), vec![1]);
        // Generators end on their own: a return is their work done.
        let mut w = Workers::<u32, String>::new(false);
        start(&mut w, 0, || Ok(1));
        start(&mut w, 1, || Ok(2));
        wait_finished(&w, 2);
        assert_eq!(w.health(false), Health::Done);
        assert_eq!(w.join().unwrap(), vec![1, 2]);
    }

    #[test]
    fn ticks_and_the_duration_do_not_wait_for_a_long_poll() {
        let stop = AtomicBool::new(false);
        let mut sv = Supervisor::new(&stop);
        sv.poll = Duration::from_secs(30);
        sv.interval = Some(Duration::from_millis(20));
        sv.duration = Some(Duration::from_millis(200));
        let (mut watches, mut ticks) = (0, 0);
        let ended = sv
            .run(
                Instant::now(),
                |_| {
                    watches += 1;
                    Ok::<_, String>(Health::Running)
                },
                |_| {
                    ticks += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert!(matches!(ended, Ended::Duration), "{ended:?}");
        // One wake-up per tick and one at the end, none at the 30 s poll (a busy host may
        // skip a late tick, never add one).
        assert!((2..=10).contains(&ticks), "{ticks} ticks");
        assert!(watches <= ticks + 2, "{watches} wake-ups for {ticks} ticks");
    }

    #[test]
    fn wakes_come_on_time_however_long_the_poll() {
        let stop = AtomicBool::new(false);
        let mut sv = Supervisor::new(&stop);
        sv.poll = Duration::from_secs(30);
        sv.duration = Some(Duration::from_millis(300));
        // A window's edge at 50 ms, and a grid from 100 ms every 80 ms (100, 180, 260).
        sv.wakes = vec![
            (Duration::from_millis(50), Duration::ZERO),
            (Duration::from_millis(100), Duration::from_millis(80)),
        ];
        let t0 = Instant::now();
        let mut at = Vec::new();
        let ended = sv
            .run(
                t0,
                |now| {
                    at.push(now.duration_since(t0));
                    Ok::<_, String>(Health::Running)
                },
                |_| Ok(()),
            )
            .unwrap();
        assert!(matches!(ended, Ended::Duration), "{ended:?}");
        // Never before an edge; one wake-up each, and one at the end (a busy host may wake
        // late, past a later edge, never early).
        let edges = [50, 100, 180, 260, 300].map(Duration::from_millis);
        assert!((1..=edges.len()).contains(&at.len()), "{at:?}");
        for (w, e) in at.iter().zip(edges) {
            assert!(*w >= e, "woken before an edge: {at:?}");
        }
        assert!(*at.last().unwrap() >= edges[4], "{at:?}");
    }

    #[test]
    fn the_next_wake_of_a_grid_is_after_now() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let at = |now: u64, g: (u64, u64)| next_wake(t0, t0 + ms(now), (ms(g.0), ms(g.1)));
        assert_eq!(at(0, (50, 0)), Some(t0 + ms(50)));
        assert_eq!(at(50, (50, 0)), None);
        assert_eq!(at(10, (100, 80)), Some(t0 + ms(100)));
        assert_eq!(at(100, (100, 80)), Some(t0 + ms(180)));
        assert_eq!(at(179, (100, 80)), Some(t0 + ms(180)));
        assert_eq!(at(181, (100, 80)), Some(t0 + ms(260)));
    }

    #[test]
    fn the_loop_ends_on_failure_signal_duration_or_done_and_ticks_between() {
        let stop = AtomicBool::new(false);
        let mut sv = Supervisor::new(&stop);
        sv.poll = Duration::from_millis(1);
        sv.interval = Some(Duration::from_millis(5));
        sv.duration = Some(Duration::from_millis(40));
        let t0 = Instant::now();
        let mut ticks = 0;
        let end = sv
            .run::<()>(
                t0,
                |_| Ok(Health::Running),
                |_| {
                    ticks += 1;
                    Ok(())
                },
            )
            .unwrap();
        assert_eq!(end, Ended::Duration);
        assert!(t0.elapsed() >= Duration::from_millis(40));
        assert!(ticks >= 1, "{ticks}");
        let f = WorkerFailure {
            label: Label::new("worker", 3),
            cause: Cause::Ended,
        };
        let end = sv
            .run::<()>(
                Instant::now(),
                |_| Ok(Health::Failed(f.clone())),
                |_| Ok(()),
            )
            .unwrap();
        assert_eq!(end, Ended::Failed(f));
        let end = sv
            .run::<()>(Instant::now(), |_| Ok(Health::Done), |_| Ok(()))
            .unwrap();
        assert_eq!(end, Ended::Done);
        stop.store(true, Ordering::Relaxed);
        sv.duration = None;
        let end = sv
            .run::<()>(Instant::now(), |_| Ok(Health::Running), |_| Ok(()))
            .unwrap();
        assert_eq!(end, Ended::Signal);
        // Draining: the signal ends the run once the workers are done.
        sv.drain = true;
        let mut polls = 0;
        let end = sv
            .run::<()>(
                Instant::now(),
                |_| {
                    polls += 1;
                    Ok(if polls < 3 {
                        Health::Running
                    } else {
                        Health::Done
                    })
                },
                |_| Ok(()),
            )
            .unwrap();
        assert_eq!((end, polls), (Ended::Signal, 3));
        let err = sv.run(Instant::now(), |_| Err("disk full"), |_| Ok(()));
        assert_eq!(err, Err("disk full"));
    }
}
