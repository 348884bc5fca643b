//! The comparison's rows (one per server and worker count), the ratios the goals
//! ask for, and the page.

use super::{Cell, RadiusCompare, Trial};
use crate::report::mmm;
use crate::report::page::Page;
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;
use std::collections::BTreeMap;

/// A busy side uses at least this share of its CPUs.
const SATURATED: f64 = 0.95;

/// One (server, workers) over all repetitions: figures as median, min, max.
#[derive(Debug, Clone, Serialize)]
pub struct RadiusRow {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    pub config: String,
    /// Access-Requests answered and validated per second.
    pub rps: Summary,
    pub server_cpu_us_per_req: Option<Summary>,
    pub host_cpu_us_per_req: Option<Summary>,
    pub client_cpu_us_per_req: Option<Summary>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    /// Summed over repetitions: responses by code, requests lost (no valid answer before
    /// the timeout), not sent (open loop behind), responses failing validation.
    pub codes: BTreeMap<String, u64>,
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
pub fn row_of(c: &Cell, trials: &[Trial]) -> Option<RadiusRow> {
    let sum = |f: &dyn Fn(&Trial) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
    let rps = Summary::of(trials.iter().map(|t| t.measured.rps))?;
    let med = |f: &dyn Fn(&Trial) -> Option<f64>| sum(f).map_or(0.0, |s| s.median);
    let server_util = med(&|t| Some(t.server_util));
    let client_util = med(&|t| Some(t.client_util));
    let total = |f: &dyn Fn(&Trial) -> u64| trials.iter().map(f).sum::<u64>();
    let mut codes = BTreeMap::new();
    for t in trials {
        for (k, v) in &t.measured.codes {
            *codes.entry(k.clone()).or_insert(0) += v;
        }
    }
    let server_busy = server_util >= SATURATED * c.workers as f64;
    Some(RadiusRow {
        config: c.server.config(c.workers),
        server: c.server.clone(),
        workers: c.workers,
        rps,
        server_cpu_us_per_req: sum(&|t| t.server_cpu_us_per_req),
        host_cpu_us_per_req: sum(&|t| t.host_cpu_us_per_req),
        client_cpu_us_per_req: sum(&|t| t.client_cpu_us_per_req),
        p50_us: sum(&|t| Some(t.measured.p50_us).filter(|_| t.measured.completed > 0)),
        p99_us: sum(&|t| Some(t.measured.p99_us).filter(|_| t.measured.completed > 0)),
        codes,
        lost: total(&|t| t.measured.lost),
        unsent: total(&|t| t.measured.unsent),
        invalid: total(&|t| t.measured.invalid.values().sum()),
        server_drops: total(&|t| t.measured.server_drops),
        udp_rcvbuf_errors: total(&|t| t.measured.rcvbuf_errors),
        server_util,
        client_util,
        bound: match (server_busy, client_util >= SATURATED) {
            (true, _) => "server",
            (false, true) => "client",
            (false, false) => "neither",
        },
    })
}

/// The columns of the table: header, width on the terminal, left-aligned.
const COLUMNS: [(&str, usize, bool); 13] = [
    ("server", 10, true),
    ("config", 13, true),
    ("req/s median (min-max)", 26, false),
    ("srv us/req", 18, false),
    ("host us/req", 18, false),
    ("cli us/req", 10, false),
    ("p50 us", 8, false),
    ("p99 us", 8, false),
    ("accept/reject", 15, false),
    ("lost", 7, false),
    ("invalid", 7, false),
    ("drops", 6, false),
    ("bound", 8, false),
];

/// One row's cells, in [`COLUMNS`] order.
fn cells(r: &RadiusRow) -> Vec<String> {
    let code = |k: &str| r.codes.get(k).copied().unwrap_or(0);
    let med = |s: &Option<Summary>, d: usize| s.map_or("-".into(), |s| format!("{:.d$}", s.median));
    vec![
        r.server.name().into(),
        r.config.clone(),
        mmm(&Some(r.rps), 0, "-"),
        mmm(&r.server_cpu_us_per_req, 2, "-"),
        mmm(&r.host_cpu_us_per_req, 2, "-"),
        med(&r.client_cpu_us_per_req, 2),
        med(&r.p50_us, 1),
        med(&r.p99_us, 1),
        format!("{}/{}", code("Access-Accept"), code("Access-Reject")),
        r.lost.to_string(),
        r.invalid.to_string(),
        r.server_drops.to_string(),
        r.bound.into(),
    ]
}

/// The offered load, as the preamble says it.
fn load(d: &RadiusCompare) -> String {
    let how = d.rate.map_or("closed loop (saturation)".into(), |r| {
        format!("open loop at {r} requests/s")
    });
    format!(
        "{how}, PAP with a Message-Authenticator, {} flows x window {} from one generator thread",
        d.flows, d.window
    )
}

/// The table, the ratios, the notes and what was skipped.
pub fn page(d: &RadiusCompare, ran: &Ran<Cell, Trial>, rows: &[RadiusRow]) -> Page {
    let preamble = vec![
        format!(
            "RADIUS: {} repetition(s) of {:.1} s, interleaved; {}; server CPUs {:?}, client CPU {:?}",
            ran.repetitions,
            d.duration.as_secs_f64(),
            load(d),
            ran.placement.server_cpus,
            &ran.placement.client_cpus[..ran.placement.client_cpus.len().min(1)]
        ),
        ran.host_line(),
    ];
    super::super::served::page(
        "firehose lab compare --proto radius",
        preamble,
        &COLUMNS,
        rows.iter().map(cells).collect(),
        ratios(d, rows),
        &ran.notes,
        &ran.skipped,
    )
}

/// firehose against FreeRADIUS per worker count: requests/s and server CPU per request
/// (goal: 5x), p99 at the same offered load (goal: no worse).
pub fn ratios(d: &RadiusCompare, rows: &[RadiusRow]) -> Vec<String> {
    let mut out = Vec::new();
    for ours in rows
        .iter()
        .filter(|r| r.server == ServerKind::FirehoseRadius)
    {
        let Some(peer) = rows
            .iter()
            .find(|r| r.server == ServerKind::FreeRadius && r.workers == ours.workers)
        else {
            continue;
        };
        let w = ours.workers;
        if d.rate.is_none() {
            out.push(format!(
                "Access-Requests/s per server CPU, firehose / FreeRADIUS, {w} CPU(s): {:.2}x (goal >= 5; ours bound by {}, theirs by {})",
                ours.rps.median / peer.rps.median,
                ours.bound,
                peer.bound
            ));
        }
        if let (Some(a), Some(b)) = (ours.server_cpu_us_per_req, peer.server_cpu_us_per_req) {
            out.push(format!(
                "server CPU per request, FreeRADIUS / firehose, {w} CPU(s): {:.2} / {:.2} us = {:.2}x (goal >= 5; {})",
                b.median,
                a.median,
                b.median / a.median,
                if d.rate.is_some() { "same offered load" } else { "at saturation" }
            ));
        }
        if let (Some(a), Some(b)) = (ours.host_cpu_us_per_req, peer.host_cpu_us_per_req) {
            out.push(format!(
                "host CPU per request (all CPUs, generator included), FreeRADIUS / firehose, {w} CPU(s): {:.2}x",
                b.median / a.median
            ));
        }
        if let (Some(r), Some(a), Some(b)) = (d.rate, ours.p99_us, peer.p99_us) {
            out.push(format!(
                "p99 at {r} requests/s, firehose / FreeRADIUS, {w} CPU(s): {:.1} / {:.1} us = {:.2}x (goal <= 1)",
                a.median,
                b.median,
                a.median / b.median
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{Measured, RadiusCompare};
    use super::*;

    fn trial(rps: f64, server_us: f64, util: f64) -> Trial {
        let mut codes = BTreeMap::new();
        codes.insert("Access-Accept".to_string(), 3);
        codes.insert("Access-Reject".to_string(), 1);
        Trial {
            measured: Measured {
                rps,
                completed: 4,
                lost: 1,
                unsent: 0,
                invalid: BTreeMap::new(),
                codes,
                p50_us: 40.0,
                p99_us: 100.0,
                server_s: 0.0,
                host_s: 0.0,
                client_s: 0.0,
                wall_s: 1.0,
                server_drops: 2,
                rcvbuf_errors: 0,
                loss: None,
            },
            server_cpu_us_per_req: Some(server_us),
            host_cpu_us_per_req: Some(server_us * 2.0),
            client_cpu_us_per_req: Some(3.0),
            server_util: util,
            client_util: 0.5,
        }
    }

    #[test]
    fn rows_and_ratios() {
        let fh = Cell {
            server: ServerKind::FirehoseRadius,
            workers: 1,
        };
        let fr = Cell {
            server: ServerKind::FreeRadius,
            workers: 1,
        };
        let a = row_of(
            &fh,
            &[trial(500_000.0, 2.0, 1.0), trial(400_000.0, 2.5, 1.0)],
        )
        .unwrap();
        let b = row_of(
            &fr,
            &[trial(50_000.0, 20.0, 0.6), trial(60_000.0, 18.0, 0.6)],
        )
        .unwrap();
        assert_eq!(
            (a.rps.median, a.rps.min, a.rps.max),
            (450_000.0, 400_000.0, 500_000.0)
        );
        assert_eq!(a.codes["Access-Accept"], 6);
        assert_eq!((a.lost, a.server_drops), (2, 4));
        assert_eq!((a.bound, b.bound), ("server", "neither"));
        let d = RadiusCompare::default();
        let r = ratios(&d, &[a.clone(), b.clone()]);
        assert!(
            r[0].contains("firehose / FreeRADIUS, 1 CPU(s): 8.18x"),
            "{r:?}"
        );
        assert!(r[1].contains("19.00 / 2.25 us = 8.44x (goal"), "{r:?}");
        let open = RadiusCompare {
            rate: Some(1000),
            ..RadiusCompare::default()
        };
        let r = ratios(&open, &[a, b]);
        assert!(
            r.iter().all(|l| !l.contains("Access-Requests/s per")),
            "{r:?}"
        );
        assert!(
            r.last().unwrap().contains("p99 at 1000 requests/s"),
            "{r:?}"
        );
        assert!(row_of(&fh, &[]).is_none());
    }
}
