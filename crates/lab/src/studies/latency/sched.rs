//! How the server's busy thread was scheduled over one trial, from /proc: how often it
//! slept (voluntary context switches), how often something else took its CPU while it could
//! still run (involuntary ones), and how long it waited on the run queue (schedstat's run
//! delay). A tail that comes from pauses of the server shows here as preemptions and run
//! delay (another task or kernel thread on its CPU) or as sleeps (each one a wake-up on the
//! next request); a tail with none of them is not the server's scheduling (issue 25).

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One reading of a thread's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub sleeps: u64,
    pub preempted: u64,
    pub run_delay_ns: u64,
}

/// The thread's scheduling over a trial, per second of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sched {
    /// Voluntary context switches per second: the thread slept (a busy-polling worker's
    /// epoll wait, a blocking read).
    pub sleeps_per_s: f64,
    /// Involuntary context switches per second: it lost its CPU while runnable.
    pub preempted_per_s: f64,
    /// Microseconds per second it spent runnable but waiting for its CPU.
    pub run_delay_us_per_s: f64,
}

/// The task directory of `pid`'s thread named `name` (its `comm`), or of its main thread
/// when `name` is `None`.
pub fn thread_dir(pid: u32, name: Option<&str>) -> Option<PathBuf> {
    let Some(name) = name else {
        return Some(PathBuf::from(format!("/proc/{pid}/task/{pid}")));
    };
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|d| std::fs::read_to_string(d.join("comm")).is_ok_and(|c| c.trim_end() == name))
}

/// The counters of the thread at `dir` (a /proc/PID/task/TID directory).
pub fn read(dir: &Path) -> Option<Counts> {
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
    };
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    Some(Counts {
        sleeps: field("voluntary_ctxt_switches:")?,
        preempted: field("nonvoluntary_ctxt_switches:")?,
        run_delay_ns: schedstat.split_whitespace().nth(1)?.parse().ok()?,
    })
}

/// Reads a thread before and after something runs and gives its scheduling in between.
pub struct Watch {
    dir: PathBuf,
    first: Counts,
    since: Instant,
}

impl Watch {
    /// Starts watching `pid`'s thread `name` (the main thread for `None`); `None` when it
    /// cannot be read (gone, or /proc not mounted).
    /// A new thread names itself as it starts, so a named thread is looked for until it
    /// shows (2 s at most).
    pub fn start(pid: u32, name: Option<&str>) -> Option<Watch> {
        let by = Instant::now() + Duration::from_secs(2);
        let dir = loop {
            match thread_dir(pid, name) {
                Some(d) => break d,
                None if Instant::now() < by && Path::new(&format!("/proc/{pid}")).exists() => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                None => return None,
            }
        };
        let first = read(&dir)?;
        Some(Watch {
            dir,
            first,
            since: Instant::now(),
        })
    }

    /// The thread's scheduling since [`Watch::start`]; `None` when it can no longer be read.
    pub fn finish(self) -> Option<Sched> {
        let last = read(&self.dir)?;
        Some(per_second(self.first, last, self.since.elapsed()))
    }
}

/// The counters' growth from `a` to `b` over `over`, per second.
pub fn per_second(a: Counts, b: Counts, over: Duration) -> Sched {
    let s = over.as_secs_f64().max(1e-9);
    Sched {
        sleeps_per_s: b.sleeps.saturating_sub(a.sleeps) as f64 / s,
        preempted_per_s: b.preempted.saturating_sub(a.preempted) as f64 / s,
        run_delay_us_per_s: b.run_delay_ns.saturating_sub(a.run_delay_ns) as f64 / 1e3 / s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A thread that sleeps 20 times shows 20 sleeps more, read from the kernel; a thread
    /// that is not there gives no watch.
    #[test]
    fn a_watch_counts_a_named_threads_sleeps_from_proc() {
        let (go, wait) = mpsc::channel::<()>();
        let (ready, is_ready) = mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("fh-sched-test".into())
            .spawn(move || {
                // The new thread sets its own name as it starts: say when that is done.
                ready.send(()).unwrap();
                wait.recv().unwrap();
                for _ in 0..20 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                wait.recv().unwrap();
            })
            .unwrap();
        is_ready.recv().unwrap();
        let pid = std::process::id();
        let outer = Instant::now();
        let w = Watch::start(pid, Some("fh-sched-test")).expect("the thread is in /proc");
        let dir = thread_dir(pid, Some("fh-sched-test")).unwrap();
        let before = read(&dir).unwrap();
        go.send(()).unwrap();
        // Its 20 sleeps are done once it sleeps a 21st time, on the second recv: wait for
        // that count, not for a time.
        let by = Instant::now() + Duration::from_secs(30);
        let mut after = read(&dir).unwrap();
        while after.sleeps - before.sleeps < 21 && Instant::now() < by {
            std::thread::sleep(Duration::from_millis(5));
            after = read(&dir).unwrap();
        }
        let s = w.finish().expect("still readable");
        let took = outer.elapsed().as_secs_f64();
        go.send(()).unwrap();
        t.join().unwrap();
        assert!(after.sleeps - before.sleeps >= 20, "{before:?} {after:?}");
        assert!(s.sleeps_per_s * took >= 20.0, "{s:?} over {took} s");
        assert!(Watch::start(pid, Some("no-such-thread")).is_none());
        assert!(read(&thread_dir(pid, None).unwrap()).is_some());
    }

    #[test]
    fn per_second_divides_the_growth_by_the_time() {
        let a = Counts {
            sleeps: 10,
            preempted: 5,
            run_delay_ns: 1_000_000,
        };
        let b = Counts {
            sleeps: 30,
            preempted: 9,
            run_delay_ns: 5_000_000,
        };
        let s = per_second(a, b, Duration::from_secs(2));
        assert_eq!(
            s,
            Sched {
                sleeps_per_s: 10.0,
                preempted_per_s: 2.0,
                run_delay_us_per_s: 2000.0
            }
        );
    }
}
