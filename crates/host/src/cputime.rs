//! CPU time of processes, read from /proc: one reader for every experiment. A cost is
//! always the difference of two readings taken around the measured window, never the time
//! since a process started.

use crate::procfs::{self, pidstat, ReadError};

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

/// Busy CPU seconds of the whole host so far (all CPUs, /proc/stat: everything but idle,
/// iowait and steal): the difference over a window is what the server, the generator and
/// the kernel's work for both cost, wherever it ran.
pub fn host_busy_s() -> Result<f64, ReadError> {
    let s = procfs::read("/proc/stat", procfs::stat::parse)?;
    Ok(ticks_to_s(busy_ticks(&s.total)))
}

/// Ticks a CPU spent busy: everything but idle, iowait and steal.
pub fn busy_ticks(t: &procfs::stat::CpuTimes) -> u64 {
    t.user + t.nice + t.system + t.irq + t.softirq
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
    use std::time::{Duration, Instant};

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
