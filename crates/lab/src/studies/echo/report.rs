//! The rows of `lab ladder` and `lab compare` (medians with min-max over the repetitions,
//! gains and verdicts) and their page: the table, the NTT talk's per-CPU `sar` view with
//! NET_RX and softnet beside it, the OS knobs as read back, ratios, and the charts (tps
//! per configuration, the per-CPU usr/sys/soft stack, latency percentiles).

use super::{Cell, Echo, Generator, Trial};
use crate::metrics::Latency;
use crate::report::charts::Chart;
use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::report::{cpu_split, num, range, si};
use crate::sample::{CpuRow, SoftnetDelta};
use crate::stats::{effect, gain, Effect, Summary};
use crate::study::{CellRun, Ran};
use crate::topology::{Kind, KnobState};
use firehose_sys::cpu::CpuSet;
use serde::Serialize;

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
    /// Busy CPU of the whole host per transaction (all CPUs: wall time less /proc/stat idle).
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
    pub fn from_trials(cell: &Cell, trials: &[Trial]) -> Row {
        let sum = |f: &dyn Fn(&Trial) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
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

/// The rows of the cells, in plan order, before any comparison.
pub fn rows(cells: &[CellRun<Cell, Trial>]) -> Vec<Row> {
    cells
        .iter()
        .map(|c| Row::from_trials(&c.cell, &c.trials))
        .collect()
}

/// Column headers of the results table.
pub const HEADERS: [&str; 12] = [
    "config",
    "tps median (min-max)",
    "Mbps",
    "gain",
    "verdict",
    "srv us/txn",
    "cli us/txn",
    "syscalls/txn",
    "p50 us",
    "p99 us",
    "drops/lost",
    "per-CPU usr/sys/soft %",
];

/// Headers of the per-CPU table (the NTT talk's `sar -u ALL -P ALL` with NET_RX and softnet).
pub const PER_CPU_HEADERS: [&str; 12] = [
    "config",
    "CPU",
    "%usr",
    "%sys",
    "%irq",
    "%soft",
    "%idle",
    "NET_RX/s",
    "softnet processed/s",
    "dropped",
    "time_squeeze",
    "received_rps",
];

/// The cells of one row, as text.
pub fn cells(r: &Row) -> Vec<String> {
    let mut name = r.name.clone();
    if r.client_bound {
        name.push_str(" [client-bound]");
    }
    let sys = match &r.syscalls_per_txn {
        None => "unknown".into(),
        Some(_) => format!(
            "{} ({})",
            range(&r.syscalls_per_txn, &num),
            r.syscalls_source
        ),
    };
    let drops = format!(
        "{}/{}",
        r.kernel_drops
            .map_or("-".into(), |s| format!("{:.0}", s.median)),
        r.lost.map_or("-".into(), |s| format!("{:.0}", s.median))
    );
    vec![
        name,
        range(&r.tps, &si),
        r.mbps.map_or("-".into(), |s| num(s.median)),
        r.gain.map_or("-".into(), |g| format!("x{g:.2}")),
        if r.reverted {
            format!("{}, reverted", r.verdict.name())
        } else {
            r.verdict.name().into()
        },
        range(&r.server_cpu_us_per_txn, &num),
        range(&r.client_cpu_us_per_txn, &num),
        sys,
        range(&r.p50_us, &num),
        range(&r.p99_us, &num),
        drops,
        cpu_split(&r.cpus),
    ]
}

/// One line per row and CPU, from each row's median repetition.
pub fn per_cpu_cells(rows: &[Row]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for r in rows {
        let per_s = |v: u64| {
            if r.window_s > 0.0 {
                si(v as f64 / r.window_s)
            } else {
                "-".into()
            }
        };
        for c in &r.cpus {
            let sn = r.softnet.iter().find(|x| x.cpu == c.cpu);
            let pct = |v: f64| format!("{v:.1}");
            out.push(vec![
                r.name.clone(),
                c.cpu.to_string(),
                pct(c.split.usr),
                pct(c.split.sys),
                pct(c.split.irq),
                pct(c.split.soft),
                pct(c.split.idle),
                per_s(c.net_rx),
                sn.map_or("-".into(), |x| per_s(x.processed)),
                sn.map_or("-".into(), |x| x.dropped.to_string()),
                sn.map_or("-".into(), |x| x.time_squeeze.to_string()),
                sn.map_or("-".into(), |x| x.received_rps.to_string()),
            ]);
        }
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

const VERDICTS: &str =
    "Verdicts judge tps in closed loop and server CPU us/txn in open loop (where \
every configuration runs at the same rate). A verdict is `helped` or `hurt` only when the medians \
differ by more than the larger spread of the two rows (at least 5%) and their min-max ranges do \
not overlap. `[client-bound]` marks rows whose generator CPU was saturated while the server's was \
not: they say nothing about the server.";

/// The page of a ladder or comparison (`kind`).
pub fn page<C, T>(
    kind: &str,
    echo: &Echo,
    ran: &Ran<C, T>,
    rows: &[Row],
    ratios: &[Ratio],
) -> Page {
    let p = &ran.placement;
    let l = &echo.load;
    let topology = match echo.kind {
        Kind::Loopback => "loopback".to_string(),
        Kind::Veth => format!("veth ({} queue(s))", echo.queues),
    };
    let preamble = vec![
        format!(
            "firehose lab {kind}: topology {topology}, server CPUs {}, client CPUs {}, {} worker(s), {} repetition(s) of {} s",
            CpuSet::from(&p.server_cpus),
            CpuSet::from(&p.client_cpus),
            echo.workers,
            ran.repetitions,
            l.duration_s
        ),
        format!(
            "load: {} flow(s), window {}, {}, {}-byte payloads, {} s measured after {} s warm-up",
            l.flows,
            l.window.map_or("default".into(), |w| w.to_string()),
            l.rate.map_or("closed loop".into(), |r| format!("open loop at {r}/s")),
            l.size,
            l.duration_s,
            l.warmup_s,
        ),
        ran.host_line(),
    ];
    let names: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let knobs: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let k = r.knobs.as_ref()?;
            Some(format!(
                "`{}`: GRO {}/{} (server/client), rps_cpus [{}], server xps_cpus [{}], client xps_cpus [{}], rp_filter {}",
                r.name,
                on_off(k.server_gro),
                on_off(k.client_gro),
                k.server_rps_cpus.join(" "),
                k.server_xps_cpus.join(" "),
                k.client_xps_cpus.join(" "),
                k.server_rp_filter
            ))
        })
        .collect();
    let list = |title: &str, items: Vec<String>, text: TextList| {
        Block::List(List {
            title: title.into(),
            items,
            text,
        })
    };
    Page {
        title: format!("firehose lab {kind}"),
        preamble,
        blocks: vec![
            Block::Charts(vec![
                Chart::Bars {
                    title: "Transactions per second".into(),
                    axis: "transactions/s (median, min-max)".into(),
                    names: names.clone(),
                    values: rows.iter().map(|r| r.tps).collect(),
                    grey: rows.iter().map(|r| r.client_bound).collect(),
                },
                Chart::CpuStacks {
                    names: names.clone(),
                    cpus: rows.iter().map(|r| r.cpus.clone()).collect(),
                },
                Chart::Latency {
                    names,
                    latency: rows.iter().map(|r| r.latency_us.clone()).collect(),
                },
            ]),
            Block::Table(Table {
                title: Some("Results".into()),
                columns: HEADERS.map(Column::auto).to_vec(),
                rows: rows.iter().map(cells).collect(),
                dim: rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.client_bound)
                    .map(|(i, _)| i)
                    .collect(),
                text: TextTable::Padded {
                    gap: 2,
                    blank_before: true,
                },
            }),
            list(
                "What each configuration adds",
                rows.iter()
                    .map(|r| format!("`{}`: {}", r.name, r.describe))
                    .collect(),
                TextList::Hidden,
            ),
            Block::Table(Table {
                title: Some("Per CPU (median repetition)".into()),
                columns: PER_CPU_HEADERS.map(Column::auto).to_vec(),
                rows: per_cpu_cells(rows),
                dim: Vec::new(),
                text: TextTable::Hidden,
            }),
            list(
                "OS knobs, as read back from the kernel",
                knobs,
                TextList::Hidden,
            ),
            list(
                "Ratios (medians, measured side by side)",
                ratios
                    .iter()
                    .map(|r| format!("{}: {} / {} = {:.2}", r.what, r.a, r.b, r.value))
                    .collect(),
                TextList::Lines {
                    heading: Some("ratios (medians):".into()),
                    prefix: "  ".into(),
                    blank_before: true,
                },
            ),
            list(
                "Skipped",
                ran.skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.reason))
                    .collect(),
                TextList::prefixed("skipped "),
            ),
            list("Notes", ran.notes.clone(), TextList::prefixed("note: ")),
            Block::Prose(VERDICTS.into()),
        ],
    }
}

#[cfg(test)]
pub(crate) mod tests;
