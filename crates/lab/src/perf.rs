//! Syscall counting of a peer server with perf: the raw_syscalls:sys_enter tracepoint over
//! the measured window (`perf stat -e raw_syscalls:sys_enter -p PIDS`). Our own server counts
//! its syscalls itself; a peer's are known only this way, and "unknown" without perf.

use crate::cmd;
use crate::proc::Proc;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The tracepoint every syscall entry passes.
pub const EVENT: &str = "raw_syscalls:sys_enter";

/// A `perf stat` counting syscalls of some processes for a fixed time.
pub struct SyscallCounter {
    proc: Proc,
    out: PathBuf,
    started: Instant,
}

/// What perf counted, and over how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyscallCount {
    pub syscalls: u64,
    /// From the start of perf to its exit: the window the count covers.
    pub seconds: f64,
}

impl SyscallCounter {
    /// Starts counting the syscalls of `pids` for `window`; `None` without perf (or when it
    /// cannot start). Its output goes to `logs/TAG-perf.*`.
    pub fn start(pids: &[u32], window: Duration, logs: &Path, tag: &str) -> Option<Self> {
        if pids.is_empty() || !cmd::installed("perf") {
            return None;
        }
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        let out = logs.join(format!("{tag}-perf.csv"));
        let mut c = Command::new("perf");
        c.args(["stat", "-x,", "-e", EVENT, "-p", &list.join(","), "-o"]);
        c.arg(&out);
        c.args(["--", "sleep", &window.as_secs_f64().to_string()]);
        let proc = Proc::spawn(c, &format!("{tag}-perf"), logs).ok()?;
        Some(SyscallCounter {
            proc,
            out,
            started: Instant::now(),
        })
    }

    /// Waits for perf to end its window; `None` when it could not count (no permission for
    /// the tracepoint, the event missing, ...).
    pub fn finish(mut self) -> Option<SyscallCount> {
        let by = Instant::now() + Duration::from_secs(10);
        let status = self.proc.wait_until(by, None).ok()??;
        let seconds = self.started.elapsed().as_secs_f64();
        if !status.success() {
            return None;
        }
        let syscalls = parse_count(&std::fs::read_to_string(&self.out).ok()?)?;
        Some(SyscallCount { syscalls, seconds })
    }
}

/// The count of `perf stat -x,` output's event line (`12345,,raw_syscalls:sys_enter,...`);
/// `None` for "<not counted>", "<not supported>" or no such line.
pub fn parse_count(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains(EVENT))?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_csv_lines() {
        let csv = "# started on Sun\n\n123456,,raw_syscalls:sys_enter,404277485,100.00,,\n";
        assert_eq!(parse_count(csv), Some(123456));
        assert_eq!(
            parse_count("175107652,,raw_syscalls:sys_enter,1424413,100.00,,\n"),
            Some(175107652)
        );
        for bad in [
            "<not supported>,,raw_syscalls:sys_enter,0,0,,\n",
            "<not counted>,,raw_syscalls:sys_enter,0,0.00,,\n",
            "event syntax error: 'raw_syscalls:sys_enter'",
            "",
        ] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }

    #[test]
    fn counts_a_busy_process_when_perf_can() {
        if !cmd::installed("perf") || !firehose_sys::cpu::is_root() {
            eprintln!("skipped: counting another process's syscalls needs perf and root");
            return;
        }
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let mut c = Command::new("sh");
        c.args(["-c", "while :; do cat /dev/null; done"]);
        let busy = Proc::spawn(c, "busy", &dir).unwrap();
        let n = SyscallCounter::start(&[busy.pid()], Duration::from_millis(300), &dir, "t")
            .unwrap()
            .finish();
        drop(busy);
        let n = n.expect("perf counted");
        assert!(n.syscalls > 0 && n.seconds >= 0.3, "{n:?}");
    }
}
