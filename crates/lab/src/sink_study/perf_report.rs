//! Where the receiving CPU spends its time: `perf record -e cpu-clock -C CPU` over the
//! measured window (a software clock: this kind of VM has no hardware counters), then
//! `perf report --stdio --sort sym` parsed into the top kernel symbols, as the Red Hat
//! article on UDP receive reads its profiles to name the lock or copy behind a plateau.

use crate::cmd;
use crate::proc::Proc;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

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
        let mut c = Command::new("perf");
        c.args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-C",
            &cpu.to_string(),
            "-o",
        ]);
        c.arg(&data);
        c.args(["--", "sleep", &window.as_secs_f64().to_string()]);
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

    /// `perf report --stdio --sort sym --no-children` of one CPU of this project's build
    /// host while a recvfrom loop ran (lines cut to 100 columns).
    const SAMPLE: &str = include_str!("perf_report_sample.txt");

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
