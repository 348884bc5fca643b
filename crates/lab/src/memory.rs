//! Memory of a server's whole process tree. A server may keep its data in a child: NSD's
//! first process becomes its zone-transfer daemon (about 11 MiB) and forks "main", which
//! loads the zone and forks the servers; the started process's own peak says nothing about
//! the zone. So the tree is sampled: every process descending from the started one, its
//! VmRSS from /proc/PID/status (two counters, cheap enough to read every few milliseconds
//! while the server loads), summed; the peak is the largest sum seen.
//!
//! A summed RSS counts a page shared by several processes once per process (NSD's forked
//! servers share the zone with their parent until they write to it), so it is an upper
//! bound for such a tree. Its exact footprint is the sum of each process's proportional set
//! size (PSS, /proc/PID/smaps_rollup: a page shared by n processes counts 1/n to each),
//! read once the server has settled: reading it walks the page tables, too slow to sample
//! while the load is being timed.
//!
//! cgroup v2's memory.peak would give the tree's peak exactly, but only where the memory
//! controller is in the unified hierarchy; [`cgroup2_memory`] says whether it is (on a host
//! where memory is a cgroup v1 controller it is not, and v1's max_usage_in_bytes counts the
//! page cache the zone file was read into).

use crate::cputime;
use crate::LabResult;
use firehose_host::procfs::{self, pidstatus};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the samples of a tree showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TreeMemory {
    /// The largest sum of VmRSS over the tree seen in one sample, KiB.
    pub peak_rss_kib: u64,
    /// The most processes the tree had in one sample.
    pub processes: usize,
    /// The started process's own VmHWM (its peak alone, what a one-process view reads).
    pub root_hwm_kib: u64,
    pub samples: u64,
}

/// The sum of VmRSS over the tree of `root` and how many processes it has now.
pub fn tree_rss_kib(root: u32) -> (u64, usize) {
    let tree = cputime::process_tree(root);
    let n = tree.len();
    let sum = tree
        .into_iter()
        // A process may exit between listing and reading: it no longer counts.
        .filter_map(|p| procfs::read(&format!("/proc/{p}/status"), pidstatus::parse).ok())
        .map(|m| m.rss_kib)
        .sum();
    (sum, n)
}

/// The sum of the proportional set sizes over the tree of `root`, KiB; `None` when a
/// process's smaps_rollup cannot be read (it needs the right to trace the process).
pub fn tree_pss_kib(root: u32) -> Option<u64> {
    let mut sum = 0;
    for p in cputime::process_tree(root) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")) else {
            // Gone since the listing, or not ours to read.
            if std::path::Path::new(&format!("/proc/{p}")).exists() {
                return None;
            }
            continue;
        };
        sum += pss_kib(&text)?;
    }
    Some(sum)
}

/// The `Pss:` line of /proc/PID/smaps_rollup, KiB.
pub fn pss_kib(smaps_rollup: &str) -> Option<u64> {
    smaps_rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Samples the tree of a process in a thread until [`Sampler::finish`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<TreeMemory>,
}

impl Sampler {
    /// Starts sampling the tree of `root` every `every`.
    pub fn start(root: u32, every: Duration) -> LabResult<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("fh-lab-mem".into())
            .spawn(move || {
                let mut m = TreeMemory::default();
                loop {
                    let (kib, n) = tree_rss_kib(root);
                    m.peak_rss_kib = m.peak_rss_kib.max(kib);
                    m.processes = m.processes.max(n);
                    m.samples += 1;
                    if let Ok(s) = procfs::read(&format!("/proc/{root}/status"), pidstatus::parse) {
                        m.root_hwm_kib = m.root_hwm_kib.max(s.hwm_kib);
                    }
                    if flag.load(Ordering::Relaxed) {
                        return m;
                    }
                    std::thread::sleep(every);
                }
            })
            .map_err(|e| crate::LabError::io("starting the memory sampler", e))?;
        Ok(Sampler { stop, handle })
    }

    /// Takes one last sample and returns what the samples showed.
    pub fn finish(self) -> TreeMemory {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Whether cgroup v2's memory controller is available to this process: the unified
/// hierarchy's root lists `memory` among its controllers. Returns what it lists.
pub fn cgroup2_memory() -> (bool, String) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let Some(root) = mounts.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        post.starts_with("cgroup2 ")
            .then(|| pre.split_whitespace().nth(4).map(str::to_string))?
    }) else {
        return (false, "no cgroup2 mount".into());
    };
    let controllers =
        std::fs::read_to_string(format!("{root}/cgroup.controllers")).unwrap_or_default();
    let c = controllers.trim().to_string();
    (c.split_whitespace().any(|x| x == "memory"), c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::Proc;
    use std::process::Command;
    use std::time::Instant;

    #[test]
    fn pss_line() {
        let t = "55d0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  87000 kB\nPss:  58117 kB\n\
                 Pss_Anon: 50000 kB\n";
        assert_eq!(pss_kib(t), Some(58117));
        assert_eq!(pss_kib("Rss: 1 kB\n"), None);
    }

    #[test]
    fn the_tree_counts_what_a_child_holds() {
        // The started shell holds little; its child dd fills a 64 MiB buffer from /dev/zero
        // and then blocks writing it into a pipe nobody reads, holding the buffer.
        let dir = crate::workdir::WorkDir::new("test-mem").unwrap();
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "dd if=/dev/zero bs=64M count=1 2>/dev/null | sleep 30",
        ]);
        let p = Proc::spawn(c, "tree", &dir).unwrap();
        let s = Sampler::start(p.pid(), Duration::from_millis(10)).unwrap();
        let by = Instant::now() + Duration::from_secs(20);
        while tree_rss_kib(p.pid()).0 < 64 << 10 && Instant::now() < by {
            std::thread::sleep(Duration::from_millis(20));
        }
        let m = s.finish();
        let pss = tree_pss_kib(p.pid());
        drop(p);
        assert!(m.peak_rss_kib >= 64 << 10, "the child's 64 MiB: {m:?}");
        assert!(m.root_hwm_kib < 16 << 10, "the shell alone: {m:?}");
        assert!(m.processes >= 3, "sh, dd and sleep: {m:?}");
        if let Some(pss) = pss {
            // Nearly all of it: a page or two of the buffer may be out of the sample.
            assert!(pss >= 60 << 10, "PSS holds the buffer too: {pss}");
        }
    }

    #[test]
    fn cgroup2_check_reads_the_controllers() {
        let (memory, listed) = cgroup2_memory();
        assert_eq!(memory, listed.split_whitespace().any(|c| c == "memory"));
    }
}
