//! CPU time of processes, read from /proc: one reader for every experiment. A cost is
//! always the difference of two readings taken around the measured window, never the time
//! since a process started.

use crate::procfs::stat::{CpuSplit, CpuTimes, Stat};
use crate::procfs::{self, pidstat, ReadError};
use std::time::{Duration, Instant};

/// Whose CPU time to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every thread of the process.
    Process,
    /// The process and every process descending from it (NSD forks its servers).
    Tree,
    /// The children the process has waited for (cutime + cstime): read on ourselves before
    /// and after reaping a child, the difference is that child's CPU time, to its exit.
    Reaped,
}

/// CPU seconds used so far by `pid` in `scope`.
pub fn seconds(pid: u32, scope: Scope) -> Result<f64, ReadError> {
    match scope {
        Scope::Process => process_s(pid),
        Scope::Tree => Ok(process_tree(pid)
            .into_iter()
            // A process may exit between listing and reading: it no longer counts.
            .filter_map(|p| process_s(p).ok())
            .sum()),
        Scope::Reaped => {
            let s = procfs::read(&format!("/proc/{pid}/stat"), pidstat::parse)?;
            Ok(ticks_to_s(s.cutime + s.cstime))
        }
    }
}

/// One reading of /proc/stat and the moment it was taken (`Instant` is CLOCK_MONOTONIC, the
/// clock of the kernel's idle accounting): two of them around a window give the host's busy
/// CPU time over it ([`StatReading::busy_s_until`]).
#[derive(Debug, Clone)]
pub struct StatReading {
    pub at: Instant,
    pub stat: Stat,
}

impl StatReading {
    /// Reads /proc/stat now; the time is the middle of the read, which is when the kernel
    /// computed the idle times it prints.
    pub fn now() -> Result<StatReading, ReadError> {
        let t0 = Instant::now();
        let stat = procfs::read("/proc/stat", procfs::stat::parse)?;
        let t1 = Instant::now();
        Ok(StatReading {
            at: t0 + (t1 - t0) / 2,
            stat,
        })
    }

    /// Busy CPU seconds of all online CPUs from this reading to `later` ([`busy_s`]):
    /// the server, the generator and the kernel's work for both, wherever it ran.
    pub fn busy_s_until(&self, later: &StatReading) -> Option<f64> {
        busy_s(
            &self.stat,
            &later.stat,
            later.at.saturating_duration_since(self.at),
            firehose_sys::cpu::clock_ticks_per_sec(),
            &[],
        )
    }
}

/// Busy CPU seconds between two readings of /proc/stat taken `wall` apart: wall time x CPUs
/// less idle, iowait and steal, on `cpus` (every online CPU when empty). `None` when a CPU
/// counted went on- or offline between the readings (its wall time is then unknown).
///
/// Why not the busy columns (user+nice+system+irq+softirq): with tick-based accounting
/// (CONFIG_TICK_CPU_ACCOUNTING, the usual kernel) they are *sampled*: each scheduler tick
/// charges the whole tick to whatever the CPU is doing at that instant, so a paced load that
/// runs between two ticks and is idle at each is never charged, and one that straddles every
/// tick is charged every tick (the `tick_aliasing` example of this crate shows both). The
/// idle and iowait columns, with NO_HZ (CONFIG_NO_HZ_IDLE or _FULL, the usual kernel), are not
/// sampled: fs/proc/stat.c `get_idle_time()` prints `get_cpu_idle_time_us()` for an online
/// CPU, whose comment in kernel/time/tick-sched.c says "This time is measured via accounting
/// rather than sampling, and is as accurate as ktime_get() is" (the idle loop's entry and
/// exit times; an interrupt taken in idle, and the softirq run on its exit, stop the idle
/// clock, so they count as busy). Without NO_HZ the idle columns are sampled like the
/// others and this figure is no worse than theirs. Idle and iowait may each go backwards
/// (the same comment); their sum does not, and a window's result is clamped to
/// [0, wall x CPUs]. Steal (time a hypervisor ran something else) is not this host's work
/// and is left out; it is reported on its own. The resolution is one USER_HZ tick per line
/// read, hence the aggregate `cpu` line (one rounding) when all CPUs are counted.
pub fn busy_s(a: &Stat, b: &Stat, wall: Duration, ticks_per_s: u64, cpus: &[usize]) -> Option<f64> {
    let ids = |s: &Stat| s.cpus.iter().map(|c| c.0).collect::<Vec<_>>();
    let (n, ta, tb) = if cpus.is_empty() {
        if ids(a) != ids(b) {
            return None;
        }
        (ids(b).len(), a.total.clone(), b.total.clone())
    } else {
        let sum = |s: &Stat| -> Option<CpuTimes> {
            let mut t = CpuTimes::default();
            for c in cpus {
                let x = &s.cpus.iter().find(|(id, _)| id == c)?.1;
                t.idle += x.idle;
                t.iowait += x.iowait;
                t.steal += x.steal;
            }
            Some(t)
        };
        (cpus.len(), sum(a)?, sum(b)?)
    };
    let not_busy = |t: &CpuTimes| (t.idle + t.iowait + t.steal) as f64;
    let capacity = wall.as_secs_f64() * n as f64;
    let busy = capacity - (not_busy(&tb) - not_busy(&ta)) / ticks_per_s.max(1) as f64;
    Some(busy.clamp(0.0, capacity))
}

/// One CPU's time between two readings of /proc/stat taken `wall` apart, in percent of
/// `wall`, by the rule of [`busy_s`]: idle (with iowait) from the kernel's idle clock, steal
/// apart, busy the rest (`CpuSplit::busy`). The busy modes (usr with nice, sys, irq, soft)
/// are the ticks sampled in each over the wall time: with tick-based accounting they may
/// add up to less or more than the busy time (a paced load hides between ticks, or
/// straddles each), so they say where busy time went, never how much there was. `None`
/// when `cpu` is in neither reading or went on- or offline between them. Every view of a
/// CPU's time (`firehose top`, the doctor's busy CPUs, the lab's per-CPU rows) is this.
pub fn cpu_split(
    a: &Stat,
    b: &Stat,
    cpu: usize,
    wall: Duration,
    ticks_per_s: u64,
) -> Option<CpuSplit> {
    fn times(s: &Stat, cpu: usize) -> Option<&CpuTimes> {
        s.cpus.iter().find(|(id, _)| *id == cpu).map(|(_, t)| t)
    }
    let (ta, tb) = (times(a, cpu)?, times(b, cpu)?);
    let busy = busy_s(a, b, wall, ticks_per_s, &[cpu])?;
    let secs = wall.as_secs_f64();
    if secs <= 0.0 {
        return Some(CpuSplit::default());
    }
    let pct = |f: fn(&CpuTimes) -> u64| {
        f(tb).saturating_sub(f(ta)) as f64 * 100.0 / (secs * ticks_per_s.max(1) as f64)
    };
    let steal = pct(|t| t.steal).min(100.0);
    Some(CpuSplit {
        usr: pct(|t| t.user + t.nice),
        sys: pct(|t| t.system),
        irq: pct(|t| t.irq),
        soft: pct(|t| t.softirq),
        idle: (100.0 - busy * 100.0 / secs - steal).max(0.0),
        steal,
    })
}

fn ticks_to_s(ticks: u64) -> f64 {
    ticks as f64 / firehose_sys::cpu::clock_ticks_per_sec().max(1) as f64
}

/// CPU seconds of all threads of `pid`, exited threads included: the process CPU clock
/// (nanoseconds, monotonic). Summing per-thread schedstat would go backwards when a thread
/// exits between two readings; /proc/<pid>/stat (utime + stime) counts 10 ms ticks, too
/// coarse for a few thousand transactions, so it is only the fallback.
fn process_s(pid: u32) -> Result<f64, ReadError> {
    if let Ok(d) = firehose_sys::cpu::process_cpu_time_of(pid) {
        return Ok(d.as_secs_f64());
    }
    let s = procfs::read(&format!("/proc/{pid}/stat"), pidstat::parse)?;
    Ok(ticks_to_s(s.utime + s.stime))
}

/// `root` and every process descending from it, `root` first: from each thread's
/// `/proc/PID/task/TID/children` (cheap enough to read every few milliseconds), or from the
/// parent pid of every process in /proc on a kernel without that file.
pub fn process_tree(root: u32) -> Vec<u32> {
    let children_of = |pid: u32| -> Option<Vec<u32>> {
        let mut out = Vec::new();
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
        {
            let text = std::fs::read_to_string(t.path().join("children")).ok()?;
            out.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        Some(out)
    };
    if std::path::Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        let mut tree = vec![root];
        let mut i = 0;
        while i < tree.len() {
            // A process that exits meanwhile has no children left to list.
            let kids = children_of(tree[i]).unwrap_or_default();
            tree.extend(kids);
            i += 1;
        }
        return tree;
    }
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| pidstat::parse(&t).ok());
            if let Some(st) = stat {
                parent.push((pid, st.ppid));
            }
        }
    }
    descendants(root, &parent)
}

/// `root` and its descendants in a (pid, parent pid) table.
pub fn descendants(root: u32, parent: &[(u32, u32)]) -> Vec<u32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
        i += 1;
    }
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) {
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < d {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn a_thread_that_exits_still_counts() {
        let me = std::process::id();
        let a = seconds(me, Scope::Process).unwrap();
        // The thread burns 30 ms of its own CPU time (not wall time: the host may be busy).
        let burnt = std::thread::spawn(|| {
            let cpu = firehose_sys::cpu::thread_cpu_time;
            let start = cpu().unwrap();
            while cpu().unwrap() - start < Duration::from_millis(30) {}
            (cpu().unwrap() - start).as_secs_f64()
        })
        .join()
        .unwrap();
        let b = seconds(me, Scope::Process).unwrap();
        assert!(
            b - a >= burnt,
            "the exited thread's {burnt} s are kept: {a} -> {b}"
        );
    }

    /// /proc/stat text with the aggregate line and two CPUs, from
    /// [user, nice, system, idle, iowait, irq, softirq, steal] per CPU.
    fn stat_of(cpus: [[u64; 8]; 2]) -> Stat {
        let line = |label: &str, v: [u64; 8]| {
            let cols: Vec<String> = v.iter().map(u64::to_string).collect();
            format!("{label} {} 0 0\n", cols.join(" "))
        };
        let total: [u64; 8] = std::array::from_fn(|k| cpus[0][k] + cpus[1][k]);
        let text = line("cpu ", total) + &line("cpu0", cpus[0]) + &line("cpu1", cpus[1]);
        procfs::stat::parse(&text).unwrap()
    }

    /// The first reading of each pair: this host's /proc/stat at 02:37 in session 4.
    const BASE: [[u64; 8]; 2] = [
        [1816401, 862097, 543319, 456811, 6993, 0, 58028, 32558],
        [1845203, 905832, 597084, 287249, 9020, 0, 110646, 32391],
    ];

    fn plus(d: [[u64; 8]; 2]) -> Stat {
        stat_of(std::array::from_fn(|c| {
            std::array::from_fn(|k| BASE[c][k] + d[c][k])
        }))
    }

    fn old_busy_ticks_s(a: &Stat, b: &Stat) -> f64 {
        let t =
            |s: &Stat| s.total.user + s.total.nice + s.total.system + s.total.irq + s.total.softirq;
        (t(b) - t(a)) as f64 / 100.0
    }

    #[test]
    fn a_load_paced_between_ticks_is_counted() {
        // The quiet-host bench-io of session 4, compare-uring after, round 3, tuned/firehose:
        // 10k transactions/s for 5 s on 2 CPUs; the server used 0.345 s of CPU, the
        // generator 0.300 s, and /proc/stat's deltas over the window (from the run's JSON:
        // its split and its busy ticks) were 2 user, 3 system, 1 softirq, 922 idle and
        // 1 steal tick. The busy ticks say 0.06 s, below the two processes' own 0.645 s.
        let a = plus([[0; 8]; 2]);
        let b = plus([[1, 0, 2, 461, 0, 0, 1, 1], [1, 0, 1, 461, 0, 0, 0, 0]]);
        let wall = Duration::from_secs_f64(4.999_884_48);
        let processes = 0.345_094_625 + 0.300_073_165;
        let busy = busy_s(&a, &b, wall, 100, &[]).unwrap();
        assert!(
            busy >= processes,
            "{busy} s busy, the processes alone {processes} s"
        );
        // 10 CPU seconds less 9.22 idle and 0.01 steal.
        assert!((busy - (2.0 * 4.999_884_48 - 9.23)).abs() < 1e-9, "{busy}");
        assert!(
            old_busy_ticks_s(&a, &b) < processes,
            "the bug this replaces"
        );
    }

    #[test]
    fn a_load_straddling_the_ticks_is_not_over_counted() {
        // Round 1 of the same run: the ticks charged 23 user, 99 system and 13 softirq
        // (1.35 s) where the processes used 0.754 s; idle 908 and steal 5 ticks in 5 s.
        let a = plus([[0; 8]; 2]);
        let b = plus([[2, 0, 5, 452, 0, 0, 5, 2], [21, 0, 94, 456, 0, 0, 8, 3]]);
        let wall = Duration::from_secs_f64(5.000_031_686);
        let busy = busy_s(&a, &b, wall, 100, &[]).unwrap();
        assert!((busy - (2.0 * 5.000_031_686 - 9.13)).abs() < 1e-9, "{busy}");
        assert!(busy >= 0.424_225_592 + 0.329_819_304 && busy < old_busy_ticks_s(&a, &b));
    }

    #[test]
    fn a_subset_of_cpus_and_the_edges() {
        let a = plus([[0; 8]; 2]);
        // 1 s: CPU 0 idle 40 ticks + iowait 10, CPU 1 idle all along.
        let b = plus([[0, 0, 0, 40, 10, 0, 0, 0], [0, 0, 0, 100, 0, 0, 0, 0]]);
        let s = Duration::from_secs(1);
        assert!((busy_s(&a, &b, s, 100, &[0]).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(busy_s(&a, &b, s, 100, &[1]), Some(0.0));
        assert!((busy_s(&a, &b, s, 100, &[]).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(busy_s(&a, &b, s, 100, &[2]), None, "no CPU 2");
        // Idle read a tick ahead of the wall time (rounding): never below zero.
        let b = plus([[0, 0, 0, 101, 0, 0, 0, 0], [0, 0, 0, 100, 0, 0, 0, 0]]);
        assert_eq!(busy_s(&a, &b, s, 100, &[]), Some(0.0));
        // Idle may go backwards (the kernel's comment): never above the CPUs' wall time.
        assert_eq!(busy_s(&b, &a, s, 100, &[]), Some(2.0));
        // A CPU went offline: its wall time is unknown.
        let mut c = b.clone();
        c.cpus.pop();
        assert_eq!(busy_s(&a, &c, s, 100, &[]), None);
    }

    #[test]
    fn a_cpus_split_takes_its_busy_time_from_idle() {
        let a = plus([[0; 8]; 2]);
        let s = Duration::from_secs(1);
        // CPU 0 paced between the ticks: idle 50 of 100 ticks, no busy tick sampled. CPU 1
        // straddling them: 80 user and 40 system ticks charged beside 40 idle.
        let b = plus([[0, 0, 0, 50, 0, 0, 0, 0], [80, 0, 40, 40, 0, 0, 0, 0]]);
        let c0 = cpu_split(&a, &b, 0, s, 100).unwrap();
        assert_eq!((c0.idle, c0.busy(), c0.usr), (50.0, 50.0, 0.0), "{c0:?}");
        let c1 = cpu_split(&a, &b, 1, s, 100).unwrap();
        assert_eq!((c1.idle, c1.busy()), (40.0, 60.0), "{c1:?}");
        // The busy columns are the ticks sampled over the wall time.
        assert_eq!((c1.usr, c1.sys, c1.soft, c1.irq), (80.0, 40.0, 0.0, 0.0));
        // The same rule as the host's busy time.
        let busy = busy_s(&a, &b, s, 100, &[1]).unwrap();
        assert!((c1.busy() - busy * 100.0).abs() < 1e-9);
        // The bug this replaces: shares of the ticks counted call CPU 0 all idle, CPU 1
        // 75% busy.
        let ticks = |c: usize| procfs::stat::split(&a.cpus[c].1, &b.cpus[c].1);
        assert_eq!((ticks(0).idle, ticks(1).idle), (100.0, 25.0));
        // Steal is apart from both; no CPU 2; no time.
        let b = plus([[0, 0, 0, 50, 0, 0, 0, 20], [0; 8]]);
        let c0 = cpu_split(&a, &b, 0, s, 100).unwrap();
        assert_eq!((c0.idle, c0.steal, c0.busy()), (50.0, 20.0, 30.0));
        assert_eq!(cpu_split(&a, &b, 2, s, 100), None);
        assert_eq!(
            cpu_split(&a, &b, 0, Duration::ZERO, 100),
            Some(CpuSplit::default())
        );
    }

    #[test]
    fn a_live_reading_pair_is_within_the_wall_time() {
        let a = StatReading::now().unwrap();
        spin(Duration::from_millis(30));
        let b = StatReading::now().unwrap();
        let busy = a.busy_s_until(&b).unwrap();
        let cap = b.at.duration_since(a.at).as_secs_f64() * b.stat.cpus.len() as f64;
        assert!((0.0..=cap).contains(&busy), "{busy} of {cap}");
    }

    #[test]
    fn descendants_of_a_table() {
        let t = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 10)];
        assert_eq!(descendants(10, &t), vec![10, 11, 14, 12]);
        assert_eq!(descendants(13, &t), vec![13]);
    }

    #[test]
    fn two_readings_around_work_differ_by_it() {
        let me = std::process::id();
        assert_eq!(process_tree(me)[0], me);
        let a = seconds(me, Scope::Process).unwrap();
        spin(Duration::from_millis(30));
        let b = seconds(me, Scope::Process).unwrap();
        assert!(b > a, "Process: {a} -> {b}");
        // The tree of a busy child of its own (this process's tree also holds other tests'
        // children, which may exit between two readings and take their time with them).
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let a = seconds(pid, Scope::Tree).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let b = seconds(pid, Scope::Tree).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(b > a, "Tree: {a} -> {b}");
    }

    #[test]
    fn a_reaped_child_shows_in_the_reaped_scope() {
        let me = std::process::id();
        let before = seconds(me, Scope::Reaped).unwrap();
        // The child burns well over one 10 ms tick of CPU before it exits.
        let st = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(st.success());
        let after = seconds(me, Scope::Reaped).unwrap();
        assert!(after > before, "{before} -> {after}");
    }
}
