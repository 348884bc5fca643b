//! Results of a lab run: one [`Row`] per configuration (medians with min-max over the
//! repetitions), the environment, and every trial; written as JSON, printed as a table, and
//! with `--report DIR` also as Markdown and a self-contained HTML page with SVG charts.

pub mod charts;
pub mod html;
pub mod markdown;
pub mod table;

use crate::env::Environment;
use crate::experiment::Cell;
use crate::runner::{Generator, Latency, LoadSpec, Placement, Trial};
use crate::sample::{CpuRow, SoftnetDelta};
use crate::stats::{effect, gain, Effect, Summary};
use crate::topology::KnobState;
use crate::{LabError, LabResult};
use serde::Serialize;
use std::path::Path;

/// One configuration over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub describe: String,
    pub generator: Generator,
    pub repetitions: usize,
    pub tps: Option<Summary>,
    pub mbps: Option<Summary>,
    /// Median tps over the previous row's (ladder) or the baseline's (compare).
    pub gain: Option<f64>,
    pub verdict: Effect,
    /// Ladder: the step hurt and was left out of every later step (tried and reverted).
    pub reverted: bool,
    /// The figure the verdict judges: "tps" (closed loop), or "server CPU us/txn" when
    /// every configuration runs at the same open-loop rate.
    pub verdict_on: String,
    pub server_cpu_us_per_txn: Option<Summary>,
    pub client_cpu_us_per_txn: Option<Summary>,
    /// Busy CPU of the whole host per transaction (all CPUs, /proc/stat).
    pub host_cpu_us_per_txn: Option<Summary>,
    pub syscalls_per_txn: Option<Summary>,
    pub syscalls_source: String,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    /// Requests the generator gave up on.
    pub lost: Option<Summary>,
    /// Kernel drops: server socket drops + softnet backlog drops + UDP SndbufErrors.
    pub kernel_drops: Option<Summary>,
    /// True when any repetition was client-bound.
    pub client_bound: bool,
    /// Per-CPU split, softnet counters, window length and latency of the repetition whose
    /// tps is the median.
    pub cpus: Vec<CpuRow>,
    pub softnet: Vec<SoftnetDelta>,
    pub window_s: f64,
    pub latency_us: Latency,
    pub knobs: Option<KnobState>,
}

impl Row {
    /// Summarises the trials of one cell.
    pub fn from_trials(cell: &Cell, trials: &[&Trial]) -> Row {
        let sum =
            |f: &dyn Fn(&Trial) -> Option<f64>| Summary::of(trials.iter().filter_map(|t| f(t)));
        let tps = sum(&|t| Some(t.tps));
        let median_trial = tps.and_then(|s| {
            trials.iter().min_by(|a, b| {
                (a.tps - s.median)
                    .abs()
                    .total_cmp(&(b.tps - s.median).abs())
            })
        });
        Row {
            name: cell.name.clone(),
            describe: cell.describe.clone(),
            generator: cell.generator,
            repetitions: trials.len(),
            tps,
            mbps: sum(&|t| Some(t.metrics.mbps)),
            gain: None,
            verdict: Effect::Baseline,
            reverted: false,
            verdict_on: "tps".into(),
            server_cpu_us_per_txn: sum(&|t| t.metrics.server_cpu_us_per_txn),
            client_cpu_us_per_txn: sum(&|t| t.metrics.client_cpu_us_per_txn),
            host_cpu_us_per_txn: sum(&|t| t.metrics.host_cpu_us_per_txn),
            syscalls_per_txn: sum(&|t| t.metrics.syscalls_per_txn),
            syscalls_source: trials
                .first()
                .map_or("unknown".into(), |t| t.metrics.syscalls_source.clone()),
            p50_us: sum(&|t| t.latency_us.p50),
            p99_us: sum(&|t| t.latency_us.p99),
            lost: sum(&|t| Some(t.lost as f64)),
            kernel_drops: sum(&|t| {
                let d = &t.metrics.drops;
                Some((d.socket + d.softnet_dropped + d.sndbuf_errors) as f64)
            }),
            client_bound: trials.iter().any(|t| t.metrics.client_bound),
            cpus: median_trial
                .map(|t| t.window.cpus.clone())
                .unwrap_or_default(),
            softnet: median_trial
                .map(|t| t.window.softnet.clone())
                .unwrap_or_default(),
            window_s: median_trial.map_or(0.0, |t| t.window.seconds),
            latency_us: median_trial
                .map(|t| t.latency_us.clone())
                .unwrap_or_default(),
            knobs: median_trial.and_then(|t| t.knobs.clone()),
        }
    }

    /// Sets gain (of tps) and a verdict on tps against `before`.
    pub fn compare_with(&mut self, before: &Row) {
        if let (Some(b), Some(a)) = (&before.tps, &self.tps) {
            self.gain = gain(b, a);
            self.verdict = effect(b, a, true);
        }
    }

    /// Sets gain (of tps) and a verdict on server CPU per transaction against `before`:
    /// at a fixed rate every server reaches the same tps, and what differs is the cost.
    pub fn compare_cost_with(&mut self, before: &Row) {
        if let (Some(b), Some(a)) = (&before.tps, &self.tps) {
            self.gain = gain(b, a);
        }
        if let (Some(b), Some(a)) = (&before.server_cpu_us_per_txn, &self.server_cpu_us_per_txn) {
            self.verdict = effect(b, a, false);
            self.verdict_on = "server CPU us/txn".into();
        }
    }
}

/// A configuration that was not run, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// A ratio printed by `compare`.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// What is compared, e.g. "tps" or "client CPU us/txn".
    pub what: String,
    pub a: String,
    pub b: String,
    /// a / b, medians.
    pub value: f64,
}

/// Everything one `lab ladder` or `lab compare` run produced.
#[derive(Debug, Clone, Serialize)]
pub struct LabReport {
    /// "ladder" or "compare".
    pub kind: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    pub topology: String,
    pub queues: usize,
    pub workers: usize,
    pub repetitions: usize,
    pub placement: Placement,
    pub load: LoadSpec,
    pub environment: Environment,
    pub rows: Vec<Row>,
    pub skipped: Vec<Skipped>,
    pub ratios: Vec<Ratio>,
    pub notes: Vec<String>,
    pub trials: Vec<Trial>,
}

/// Groups trials by cell (in plan order) into rows.
pub fn rows(cells: &[Cell], trials: &[Trial]) -> Vec<Row> {
    cells
        .iter()
        .map(|c| {
            let mine: Vec<&Trial> = trials
                .iter()
                .filter(|t| t.config == c.name && t.generator == c.generator)
                .collect();
            Row::from_trials(c, &mine)
        })
        .collect()
}

fn write(path: &Path, text: &str) -> LabResult<()> {
    std::fs::write(path, text).map_err(|e| LabError::io(path.display(), e))
}

/// Writes `report.md` and `report.html` into `dir` (created if needed).
pub fn write_pages(dir: &Path, markdown: &str, html: &str) -> LabResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir.display(), e))?;
    write(&dir.join("report.md"), markdown)?;
    write(&dir.join("report.html"), html)
}

impl LabReport {
    /// The JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// Writes the JSON to `path`.
    pub fn write_json(&self, path: &Path) -> LabResult<()> {
        write(path, &self.to_json())
    }

    /// Writes `results.json`, `report.md` and `report.html` into `dir` (created if needed).
    pub fn write_dir(&self, dir: &Path) -> LabResult<()> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir.display(), e))?;
        self.write_json(&dir.join("results.json"))?;
        write(&dir.join("report.md"), &markdown::render(self))?;
        write(&dir.join("report.html"), &html::render(self)?)?;
        Ok(())
    }
}

/// Formats a rate with a unit suffix (1.23M, 456k).
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// `median (min-max)` with a formatter, or "-" when absent.
pub fn range(s: &Option<Summary>, f: &dyn Fn(f64) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 || s.min == s.max => f(s.median),
        Some(s) => format!("{} ({}-{})", f(s.median), f(s.min), f(s.max)),
    }
}

/// Short figure with 2 significant decimals for small numbers.
pub fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `c0 1/40/55` per CPU: usr/sys/soft percent (the NTT talk's sar columns that matter).
pub fn cpu_split(cpus: &[CpuRow]) -> String {
    cpus.iter()
        .map(|c| {
            let s = &c.split;
            format!("c{} {:.0}/{:.0}/{:.0}", c.cpu, s.usr, s.sys, s.soft + s.irq)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
pub(crate) mod tests;
