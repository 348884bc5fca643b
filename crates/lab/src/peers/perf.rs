//! perf, two ways. Syscall counting of a peer server: the raw_syscalls:sys_enter tracepoint
//! over the measured window (`perf stat -e raw_syscalls:sys_enter -p PIDS`); our own server
//! counts its syscalls itself, a peer's are known only this way, and "unknown" without perf.
//! And where a CPU spends its time: `perf record -e cpu-clock -C CPU` over the window (a
//! software clock: this kind of VM has no hardware counters), then `perf report --stdio
//! --sort sym` parsed into the top kernel symbols, as the Red Hat article on UDP receive
//! reads its profiles to name the lock or copy behind a plateau.

use crate::cmd;
use crate::proc::Proc;
use serde::Serialize;
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

/// One line of the profile: a symbol and its share of the samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Symbol {
    pub percent: f64,
    pub symbol: String,
}

/// The kernel symbols (`[k]`) of `perf report --stdio --sort sym --no-children` output,
/// highest share first, at most `top`.
pub fn kernel_symbols(report: &str, top: usize) -> Vec<Symbol> {
    let mut out: Vec<Symbol> = report
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let (pct, rest) = l.trim().split_once('%')?;
            let percent: f64 = pct.trim().parse().ok()?;
            let symbol = rest.trim().strip_prefix("[k]")?.trim();
            (!symbol.is_empty()).then(|| Symbol {
                percent,
                symbol: symbol.to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    out.truncate(top);
    out
}

/// The `perf record` of `cpu` for `window` into `data`.
fn record_command(cpu: usize, window: Duration, data: &Path) -> Command {
    let mut c = Command::new("perf");
    // --no-buildid-cache: without it perf copies every sampled binary (the kernel, firehose
    // with its debug info) into ~/.debug on each run; a day of lab runs filled this
    // project's build host's disk that way.
    c.args([
        "record",
        "--no-buildid-cache",
        "-q",
        "-e",
        "cpu-clock",
        "-C",
        &cpu.to_string(),
        "-o",
    ]);
    c.arg(data);
    c.args(["--", "sleep", &window.as_secs_f64().to_string()]);
    c
}

/// A `perf record` of one CPU for a fixed time.
pub struct Recording {
    proc: Proc,
    data: PathBuf,
    logs: PathBuf,
    tag: String,
}

impl Recording {
    /// Starts sampling `cpu` for `window`; `None` without perf.
    pub fn start(cpu: usize, window: Duration, logs: &Path, tag: &str) -> Option<Recording> {
        if !cmd::installed("perf") {
            return None;
        }
        let data = logs.join(format!("{tag}.perf.data"));
        let c = record_command(cpu, window, &data);
        let proc = Proc::spawn(c, &format!("{tag}-perf-record"), logs).ok()?;
        Some(Recording {
            proc,
            data,
            logs: logs.to_path_buf(),
            tag: tag.to_string(),
        })
    }

    /// Waits for the recording to end and reports it: the top kernel symbols, or why not.
    pub fn finish(mut self, top: usize) -> Result<Vec<Symbol>, String> {
        let by = Instant::now() + Duration::from_secs(30);
        match self.proc.wait_until(by, None) {
            Ok(Some(s)) if s.success() => {}
            _ => return Err(format!("perf record failed: {}", self.proc.stderr_tail())),
        }
        let mut c = Command::new("perf");
        c.args(["report", "--stdio", "--sort", "sym", "--no-children", "-i"]);
        c.arg(&self.data);
        let name = format!("{}-perf-report", self.tag);
        let mut p = Proc::spawn(c, &name, &self.logs).map_err(|e| e.to_string())?;
        match p.wait_until(Instant::now() + Duration::from_secs(60), None) {
            Ok(Some(s)) if s.success() => {}
            _ => return Err(format!("perf report failed: {}", p.stderr_tail())),
        }
        let _ = std::fs::remove_file(&self.data);
        let syms = kernel_symbols(&p.stdout(), top);
        if syms.is_empty() {
            return Err("perf recorded no kernel samples on the receiving CPU".into());
        }
        Ok(syms)
    }
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

    #[test]
    fn a_recording_leaves_no_build_id_cache_in_home() {
        if !cmd::installed("perf") || !firehose_sys::cpu::is_root() {
            eprintln!("skipped: recording a CPU needs perf and root");
            return;
        }
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let home = dir.join("home");
        std::fs::create_dir(&home).unwrap();
        let mut c = record_command(0, Duration::from_millis(200), &dir.join("t.perf.data"));
        let status = c
            .env("HOME", &home)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "perf record failed: {status}");
        assert!(dir.join("t.perf.data").exists());
        assert!(!home.join(".debug").exists(), "perf filled $HOME/.debug");
    }

    /// `perf report --stdio --sort sym --no-children` of one CPU of this project's build
    /// host while a recvfrom loop ran (lines cut to 100 columns).
    const SAMPLE: &str = include_str!("../../tests/samples/perf_report.txt");

    #[test]
    fn the_captured_report_gives_its_kernel_symbols_in_order() {
        let k = kernel_symbols(SAMPLE, 5);
        let names: Vec<&str> = k.iter().map(|s| s.symbol.as_str()).collect();
        assert_eq!(
            names,
            [
                "do_syscall_64",
                "__sys_recvfrom",
                "sock_recvmsg",
                "__skb_recv_udp",
                "udp_recvmsg"
            ]
        );
        assert_eq!(k[0].percent, 4.51);
        assert_eq!(k[4].percent, 1.40);
    }

    #[test]
    fn user_symbols_headers_and_junk_are_not_kernel_symbols() {
        let text = "# Overhead  Symbol\n#\n    12.00%  [.] main\n     3.50%  [k] _raw_spin_lock\n\
                    bogus line\n  x%  [k] nope\n     1.00%  [k] \n";
        assert_eq!(
            kernel_symbols(text, 10),
            vec![Symbol {
                percent: 3.5,
                symbol: "_raw_spin_lock".into()
            }]
        );
        assert!(kernel_symbols("", 3).is_empty());
    }
}
