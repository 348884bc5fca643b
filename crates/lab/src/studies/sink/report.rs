//! The study's results: one row per cell (medians with min-max over the repetitions), the
//! targets of `make bench-sink` stated as met / not met / not measured with the figures, the
//! receiving CPU's kernel profile per mode, and the page.

use super::{Cell, Figures, Kind, PacketStudy, Subject};
use crate::peers::perf::Symbol;
use crate::report::charts::Chart;
use crate::report::page::{Align, Block, Column, List, Page, Table, TextList, TextTable};
use crate::report::{num, range, si};
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;

/// One cell over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cell: Cell,
    pub name: String,
    pub pps: Option<Summary>,
    /// Packets per second per CPU-second of the measured process (the receiver in lab
    /// sink, the sender in lab flood): 1e6 / its CPU us per packet.
    pub pps_per_cpu: Option<Summary>,
    pub receiver_cpu_us_per_packet: Option<Summary>,
    pub sender_cpu_us_per_packet: Option<Summary>,
    pub host_cpu_us_per_packet: Option<Summary>,
    pub own_drops: Option<Summary>,
    pub kernel_drops: Option<Summary>,
    /// Why the cell was not measured.
    pub not_measured: Option<String>,
}

impl Row {
    pub fn new(cell: &Cell, trials: &[Figures], not_measured: Option<String>, kind: Kind) -> Row {
        let sum = |f: &dyn Fn(&Figures) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
        let own = |m: &Figures| match kind {
            Kind::Sink => m.receiver_cpu_us_per_packet,
            Kind::Flood => m.sender_cpu_us_per_packet,
        };
        Row {
            name: cell.name(),
            pps: sum(&|m| Some(m.pps)),
            pps_per_cpu: sum(&|m| own(m).map(|us| 1e6 / us)),
            receiver_cpu_us_per_packet: sum(&|m| m.receiver_cpu_us_per_packet),
            sender_cpu_us_per_packet: sum(&|m| m.sender_cpu_us_per_packet),
            host_cpu_us_per_packet: sum(&|m| m.host_cpu_us_per_packet),
            own_drops: sum(&|m| Some(m.own_drops as f64)),
            kernel_drops: sum(&|m| Some(m.kernel_drops as f64)),
            cell: cell.clone(),
            not_measured,
        }
    }
}

/// A profile of the receiving CPU during one mode's run.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub cell: String,
    pub top_kernel_symbols: Vec<Symbol>,
    pub error: Option<String>,
}

impl Profile {
    pub fn of(cell: String, p: Result<Vec<Symbol>, String>) -> Profile {
        match p {
            Ok(top) => Profile {
                cell,
                top_kernel_symbols: top,
                error: None,
            },
            Err(e) => Profile {
                cell,
                top_kernel_symbols: Vec::new(),
                error: Some(e),
            },
        }
    }

    /// `do_syscall_64 12.3%, _raw_spin_lock 8.0%, ...` or why there is no profile.
    fn line(&self) -> String {
        match &self.error {
            Some(e) => format!("no profile: {e}"),
            None => self
                .top_kernel_symbols
                .iter()
                .map(|s| format!("{} {:.1}%", s.symbol, s.percent))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

fn med(r: Option<&Row>, f: fn(&Row) -> Option<Summary>) -> Option<f64> {
    r.and_then(f).map(|s| s.median)
}

fn verdict(ratio: f64, want: f64) -> &'static str {
    if ratio >= want {
        "met"
    } else {
        "not met"
    }
}

/// The lab sink targets, per receive queue count: the best firehose mode against recvmsg per
/// receiving CPU (>= 1.5x), and uring against recvmmsg stated as measured.
pub fn sink_targets(rows: &[Row], queues: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    for &q in queues {
        let find = |mode: &str| {
            rows.iter().find(|r| {
                r.cell.queues == q
                    && r.cell.subject == Subject::Sink(mode.into())
                    && r.pps.is_some()
            })
        };
        let best = rows
            .iter()
            .filter(|r| r.cell.queues == q && matches!(r.cell.subject, Subject::Sink(_)))
            .filter_map(|r| Some((r, r.pps_per_cpu?.median)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match (med(find("recvmsg"), |r| r.pps_per_cpu), best) {
            (Some(base), Some((b, v))) if base > 0.0 => {
                let ratio = v / base;
                // Work a mode moves into softirq (AF_PACKET's ring copy) leaves the receiving
                // CPU's figure: the host's CPU per packet says what it cost in all.
                let host = match (
                    med(Some(b), |r| r.host_cpu_us_per_packet),
                    med(find("recvmsg"), |r| r.host_cpu_us_per_packet),
                ) {
                    (Some(x), Some(y)) => {
                        format!(" (host CPU per packet {x:.2} against {y:.2} us)")
                    }
                    _ => String::new(),
                };
                out.push(format!(
                    "q{q}: best sink mode per receiving CPU >= 1.5x recvmsg: {}: {} {} pps per CPU \
                     against recvmsg's {} = {ratio:.2}x{host}",
                    verdict(ratio, 1.5),
                    b.cell.subject.name(),
                    si(v),
                    si(base),
                ));
            }
            _ => out.push(format!(
                "q{q}: best sink mode per receiving CPU >= 1.5x recvmsg: not measured (recvmsg or \
                 the receiver's CPU time missing)"
            )),
        }
        let (u, m) = (find("uring"), find("recvmmsg"));
        match (med(u, |r| r.pps), med(m, |r| r.pps)) {
            (Some(a), Some(b)) if b > 0.0 => {
                let cpu = match (med(u, |r| r.pps_per_cpu), med(m, |r| r.pps_per_cpu)) {
                    (Some(x), Some(y)) if y > 0.0 => format!(", per receiving CPU {:.2}x", x / y),
                    _ => String::new(),
                };
                let pct = (a / b - 1.0) * 100.0;
                out.push(format!(
                    "q{q}: uring against recvmmsg (published expectation: within a few percent \
                     for small datagrams): {} against {} pps = {:.2}x{cpu}; this host: uring {:.0}% {}",
                    si(a),
                    si(b),
                    a / b,
                    pct.abs(),
                    if pct >= 0.0 { "faster" } else { "slower" }
                ));
            }
            _ => out.push(format!(
                "q{q}: uring against recvmmsg: not measured (a mode did not run)"
            )),
        }
    }
    out
}

/// The lab flood targets at the smallest frame: packet and xdp >= 2x sendto pps per CPU.
/// `available`: the send modes this build has (xdp may not be one of them).
pub fn flood_targets(rows: &[Row], available: &[&str]) -> Vec<String> {
    let Some(frame) = rows.iter().map(|r| r.cell.frame).min() else {
        return Vec::new();
    };
    let find = |mode: &str| {
        rows.iter().find(|r| {
            r.cell.frame == frame
                && r.cell.subject == Subject::Flood(mode.into())
                && r.pps.is_some()
        })
    };
    let base = med(find("sendto"), |r| r.pps_per_cpu);
    ["packet", "xdp"]
        .iter()
        .map(|mode| {
            let head = format!("{frame}B: flood {mode} >= 2x sendto pps per CPU");
            if !available.contains(mode) {
                return format!("{head}: not measured (flood --io {mode} is not in this build)");
            }
            match (med(find(mode), |r| r.pps_per_cpu), base) {
                (Some(v), Some(b)) if b > 0.0 => format!(
                    "{head}: {}: {} against {} pps per CPU = {:.2}x",
                    verdict(v / b, 2.0),
                    si(v),
                    si(b),
                    v / b
                ),
                _ => format!("{head}: not measured ({mode} or sendto did not run)"),
            }
        })
        .collect()
}

/// The targets of the study.
pub fn targets(s: &PacketStudy, rows: &[Row]) -> Vec<String> {
    match s.kind {
        Kind::Sink => sink_targets(rows, &s.queues),
        Kind::Flood => {
            let available: Vec<&str> = s.available.iter().map(String::as_str).collect();
            flood_targets(rows, &available)
        }
    }
}

const COLUMNS: [(&str, usize); 8] = [
    ("cell", 22),
    ("pps", 26),
    ("pps per CPU", 26),
    ("recv us/pkt", 22),
    ("send us/pkt", 22),
    ("host us/pkt", 22),
    ("own drops", 14),
    ("kernel drops", 0),
];

fn cells(r: &Row) -> Vec<String> {
    if let Some(why) = &r.not_measured {
        return vec![r.name.clone(), format!("not measured: {why}")];
    }
    let us = |v: f64| format!("{v:.3}");
    vec![
        r.name.clone(),
        range(&r.pps, &si),
        range(&r.pps_per_cpu, &si),
        range(&r.receiver_cpu_us_per_packet, &us),
        range(&r.sender_cpu_us_per_packet, &us),
        range(&r.host_cpu_us_per_packet, &us),
        range(&r.own_drops, &num),
        range(&r.kernel_drops, &num),
    ]
}

/// The table, the profiles, the targets, and charts of pps and pps per CPU per cell.
pub fn page(s: &PacketStudy, ran: &Ran<Cell, Figures>, rows: &[Row]) -> Page {
    let p = &ran.placement;
    let mut preamble = vec![
        format!(
            "lab {}: veth, receiver on CPU {}, sender on CPU {:?}, {} repetition(s) of {} s",
            s.kind.name(),
            p.server_cpus[0],
            p.client_cpus,
            ran.repetitions,
            s.duration.as_secs_f64()
        ),
        ran.host_line(),
    ];
    preamble.extend(ran.notes.iter().cloned());
    let measured: Vec<&Row> = rows.iter().filter(|r| r.pps.is_some()).collect();
    let names: Vec<String> = measured.iter().map(|r| r.name.clone()).collect();
    let pick = |f: fn(&Row) -> Option<Summary>| measured.iter().map(|r| f(r)).collect::<Vec<_>>();
    Page {
        title: format!("firehose lab {}", s.kind.name()),
        preamble,
        blocks: vec![
            Block::Charts(vec![
                Chart::HBars {
                    title: "Packets per second".into(),
                    axis: "pps (median, min-max)".into(),
                    names: names.clone(),
                    values: pick(|r| r.pps),
                },
                Chart::HBars {
                    title: "Packets per second per CPU".into(),
                    axis: "pps per CPU-second of the measured process".into(),
                    names,
                    values: pick(|r| r.pps_per_cpu),
                },
            ]),
            Block::Table(Table {
                title: None,
                columns: COLUMNS
                    .iter()
                    .map(|&(h, w)| Column::fixed(h, w, Align::Left))
                    .collect(),
                rows: rows.iter().map(cells).collect(),
                dim: rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.not_measured.is_some())
                    .map(|(i, _)| i)
                    .collect(),
                text: TextTable::Padded {
                    gap: 1,
                    blank_before: false,
                },
            }),
            Block::List(List {
                title: "Receiving CPU: top kernel symbols (perf, cpu-clock)".into(),
                items: s
                    .profiles
                    .iter()
                    .map(|p| format!("{}: {}", p.cell, p.line()))
                    .collect(),
                text: TextList::prefixed("receiving CPU, "),
            }),
            Block::List(List {
                title: "Targets".into(),
                items: targets(s, rows),
                text: TextList::prefixed("target: "),
            }),
        ],
    }
}
