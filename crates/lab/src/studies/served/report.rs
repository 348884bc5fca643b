//! A served comparison's rows (one per server and worker count), the ratios the issues'
//! goals ask for (rate and server CPU per request against the goal's peer at saturation,
//! the protocol's latency at the same offered load), and the page.

use super::{bound, Cell, Served, ServedCompare, Trial};
use crate::report::mmm;
use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;
use std::time::Duration;

/// One (server, workers) over all repetitions: figures as median, min, max.
#[derive(Debug, Clone, Serialize)]
pub struct Row<F> {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    /// Our server's I/O path, when the study compares paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    pub config: String,
    /// Requests answered and validated per second.
    pub rps: Summary,
    pub server_cpu_us_per_req: Option<Summary>,
    pub host_cpu_us_per_req: Option<Summary>,
    pub client_cpu_us_per_req: Option<Summary>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    /// The protocol's own figures.
    #[serde(flatten)]
    pub proto: F,
    /// Summed over repetitions: requests lost (no valid answer before the timeout), not
    /// sent (open loop behind), responses failing validation.
    pub lost: u64,
    pub unsent: u64,
    pub invalid: u64,
    /// Where the lost went, summed: datagrams the server's sockets dropped, and the growth
    /// of the host's Udp RcvbufErrors (every full socket buffer, the generator's included).
    pub server_drops: u64,
    pub udp_rcvbuf_errors: u64,
    /// Median CPUs busy: the server's (of `workers`) and the generator's (of 1).
    pub server_util: f64,
    pub client_util: f64,
    /// "server", "client" or "neither": which side limited the rate.
    pub bound: &'static str,
}

/// The row of a cell's trials; `None` when none was measured.
pub fn row_of<P: Served>(
    proto: &P,
    c: &Cell,
    trials: &[Trial<P::Figures>],
) -> Option<Row<P::RowFigures>> {
    type T<F> = Trial<F>;
    let sum = |f: &dyn Fn(&T<P::Figures>) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
    let rps = Summary::of(trials.iter().map(|t| t.measured.rps))?;
    let med = |f: &dyn Fn(&T<P::Figures>) -> Option<f64>| sum(f).map_or(0.0, |s| s.median);
    let server_util = med(&|t| Some(t.server_util));
    let client_util = med(&|t| Some(t.client_util));
    let total = |f: &dyn Fn(&T<P::Figures>) -> u64| trials.iter().map(f).sum::<u64>();
    let answered = |t: &T<P::Figures>, v: f64| Some(v).filter(|_| t.measured.completed > 0);
    Some(Row {
        config: c.config(),
        server: c.server.clone(),
        workers: c.workers,
        io: c.io.clone(),
        rps,
        server_cpu_us_per_req: sum(&|t| t.server_cpu_us_per_req),
        host_cpu_us_per_req: sum(&|t| t.host_cpu_us_per_req),
        client_cpu_us_per_req: sum(&|t| t.client_cpu_us_per_req),
        p50_us: sum(&|t| answered(t, t.measured.p50_us)),
        p99_us: sum(&|t| answered(t, t.measured.p99_us)),
        proto: proto.row_figures(trials),
        lost: total(&|t| t.measured.lost),
        unsent: total(&|t| t.measured.unsent),
        invalid: total(&|t| t.measured.invalid.values().sum()),
        server_drops: total(&|t| t.measured.server_drops),
        udp_rcvbuf_errors: total(&|t| t.measured.rcvbuf_errors),
        server_util,
        client_util,
        bound: bound(server_util, client_util, c.workers),
    })
}

/// The table's columns (header, width on the terminal, left-aligned): the common ones with
/// the protocol's after p99.
fn columns<P: Served>(proto: &P) -> Vec<(&'static str, usize, bool)> {
    let spec = proto.spec();
    let mut c = vec![
        ("server", spec.widths.0, true),
        ("config", spec.widths.1, true),
        (spec.rate_column, 26, false),
        ("srv us/req", 18, false),
        ("host us/req", 18, false),
        ("cli us/req", 10, false),
        ("p50 us", 8, false),
        ("p99 us", 8, false),
    ];
    c.extend(proto.columns());
    c.extend([
        ("lost", 7, false),
        ("invalid", 7, false),
        ("drops", 6, false),
        ("bound", 8, false),
    ]);
    c
}

/// A summary's median with `d` digits, or "-".
pub fn median(s: &Option<Summary>, d: usize) -> String {
    s.map_or("-".into(), |s| format!("{:.d$}", s.median))
}

/// One row's cells, in [`columns`] order.
fn cells<P: Served>(proto: &P, r: &Row<P::RowFigures>) -> Vec<String> {
    let mut v = vec![
        r.server.name().into(),
        r.config.clone(),
        mmm(&Some(r.rps), 0, "-"),
        mmm(&r.server_cpu_us_per_req, 2, "-"),
        mmm(&r.host_cpu_us_per_req, 2, "-"),
        median(&r.client_cpu_us_per_req, 2),
        median(&r.p50_us, 1),
        median(&r.p99_us, 1),
    ];
    v.extend(proto.cells(&r.proto));
    v.extend([
        r.lost.to_string(),
        r.invalid.to_string(),
        r.server_drops.to_string(),
        r.bound.into(),
    ]);
    v
}

/// The offered load, as the preamble says it.
fn load<P: Served>(d: &ServedCompare<P>) -> String {
    let how = d.rate.map_or("closed loop (saturation)".into(), |r| {
        format!("open loop at {r} requests/s")
    });
    format!(
        "{how}, {}, {} flows x window {} from one generator thread",
        d.proto.spec().requests,
        d.flows,
        d.window
    )
}

/// A comparison's preamble: what ran (`title`, the repetitions of `duration`, the offered
/// `load`, each side's CPUs) and on what host.
pub fn preamble<C, T>(
    title: &str,
    ran: &Ran<C, T>,
    duration: Duration,
    load: String,
) -> Vec<String> {
    vec![
        format!(
            "{title}: {} repetition(s) of {:.1} s, interleaved; {load}; server CPUs {:?}, client CPU {:?}",
            ran.repetitions,
            duration.as_secs_f64(),
            ran.placement.server_cpus,
            &ran.placement.client_cpus[..ran.placement.client_cpus.len().min(1)]
        ),
        ran.host_line(),
    ]
}

/// The table, the ratios, the notes and what was skipped.
pub fn page<P: Served>(
    d: &ServedCompare<P>,
    ran: &Ran<Cell, Trial<P::Figures>>,
    rows: &[Row<P::RowFigures>],
) -> Page {
    let spec = d.proto.spec();
    let preamble = preamble(spec.title, ran, d.duration, load(d));
    let table = Table {
        title: None,
        columns: Column::fixed_all(&columns(&d.proto)),
        rows: rows.iter().map(|r| cells(&d.proto, r)).collect(),
        dim: Vec::new(),
        text: TextTable::Padded {
            gap: 1,
            blank_before: false,
        },
    };
    let list = |title: &str, items: Vec<String>, prefix: &str| {
        Block::List(List {
            title: title.into(),
            items,
            text: TextList::prefixed(prefix),
        })
    };
    Page {
        title: format!("firehose lab compare --proto {}", spec.proto),
        preamble,
        blocks: vec![
            Block::Table(table),
            list("Ratios", ratios(d, rows), ""),
            list("Notes", ran.notes.clone(), "note: "),
            list(
                "Skipped",
                ran.skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.reason))
                    .collect(),
                "skipped: ",
            ),
        ],
    }
}

/// Ours against each peer at the same worker count: the rate and server CPU per request
/// (with the goal against the goal's peer, at saturation), host CPU per request, and the
/// protocol's latency (its goal: no worse at the same offered load).
pub fn ratios<P: Served>(d: &ServedCompare<P>, rows: &[Row<P::RowFigures>]) -> Vec<String> {
    let spec = d.proto.spec();
    let ours_kind = &spec.servers[0];
    let (unit, (lat, digits)) = (spec.unit, spec.latency);
    let mut out = Vec::new();
    for ours in rows.iter().filter(|r| &r.server == ours_kind) {
        let us = match &ours.io {
            Some(io) => format!("firehose --io {io}"),
            None => "firehose".into(),
        };
        for peer in rows
            .iter()
            .filter(|r| &r.server != ours_kind && r.workers == ours.workers)
        {
            let (w, name) = (ours.workers, peer.server.title());
            let goal = (peer.server == spec.goal.0).then_some(spec.goal.1);
            let goal_note = |g: Option<f64>| g.map_or(String::new(), |g| format!("goal >= {g}; "));
            if d.rate.is_none() {
                out.push(format!(
                    "{} per server CPU, {us} / {name}, {w} CPU(s): {:.2}x ({}ours bound by {}, theirs by {})",
                    spec.rate,
                    ours.rps.median / peer.rps.median,
                    goal_note(goal),
                    ours.bound,
                    peer.bound
                ));
            }
            if let (Some(a), Some(b)) = (ours.server_cpu_us_per_req, peer.server_cpu_us_per_req) {
                // The goal is at saturation; at one offered load the ratio is only that.
                let how = match d.rate {
                    Some(r) => format!("same offered load, {r} requests/s"),
                    None => format!("{}at saturation", goal_note(goal)),
                };
                out.push(format!(
                    "server CPU per {unit}, {name} / {us}, {w} CPU(s): {:.2} / {:.2} us = {:.2}x ({how})",
                    b.median,
                    a.median,
                    b.median / a.median,
                ));
            }
            if let (Some(a), Some(b)) = (ours.host_cpu_us_per_req, peer.host_cpu_us_per_req) {
                out.push(format!(
                    "host CPU per {unit} (all CPUs, generator included), {name} / {us}, {w} CPU(s): {:.2} / {:.2} us = {:.2}x",
                    b.median,
                    a.median,
                    b.median / a.median
                ));
            }
            if let (Some(a), Some(b)) = (d.proto.latency(ours), d.proto.latency(peer)) {
                let at = d
                    .rate
                    .map_or("at saturation".into(), |r| format!("at {r} requests/s"));
                out.push(format!(
                    "{lat} {at}, {us} / {name}, {w} CPU(s): {a:.digits$} / {b:.digits$} us = {:.2}x{}",
                    a / b,
                    if d.rate.is_some() { " (goal <= 1)" } else { "" }
                ));
            }
        }
    }
    out.extend(paths(d, rows));
    out
}

/// Each of our other I/O paths against our first (the socket path when compared): server
/// and host CPU per request. XDP moves work from the server process into the receive
/// softirq (on veth, on the sending CPU), so the host's figure is the one to read.
fn paths<P: Served>(d: &ServedCompare<P>, rows: &[Row<P::RowFigures>]) -> Vec<String> {
    let spec = d.proto.spec();
    let ours: Vec<_> = rows
        .iter()
        .filter(|r| r.server == spec.servers[0] && r.io.is_some())
        .collect();
    let mut out = Vec::new();
    for base in ours.iter().filter(|r| r.io == ours[0].io) {
        for r in ours
            .iter()
            .filter(|r| r.io != base.io && r.workers == base.workers)
        {
            let (a, b) = (
                base.io.as_deref().unwrap_or(""),
                r.io.as_deref().unwrap_or(""),
            );
            let ratio = |x: Option<Summary>, y: Option<Summary>| match (x, y) {
                (Some(x), Some(y)) => format!(
                    "{:.2} / {:.2} us = {:.2}x",
                    x.median,
                    y.median,
                    x.median / y.median
                ),
                _ => "-".into(),
            };
            out.push(format!(
                "firehose --io {a} / --io {b}, {} CPU(s): server CPU per {unit} {}; host CPU per {unit} {}",
                base.workers,
                ratio(base.server_cpu_us_per_req, r.server_cpu_us_per_req),
                ratio(base.host_cpu_us_per_req, r.host_cpu_us_per_req),
                unit = spec.unit,
            ));
        }
    }
    out
}
