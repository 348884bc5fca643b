//! The comparison's rows (one per server and worker count), the ratios the goals
//! ask for (responses/s and CPU per response against chronyd, hold time at the same load),
//! and the page.

use super::{Cell, NtpCompare, Trial};
use crate::report::mmm;
use crate::report::page::Page;
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;

/// A busy side uses at least this share of its CPUs.
const SATURATED: f64 = 0.95;

/// One (server, workers) over all repetitions: figures as median, min, max.
#[derive(Debug, Clone, Serialize)]
pub struct NtpRow {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    pub config: String,
    /// Client requests answered and validated per second.
    pub rps: Summary,
    pub server_cpu_us_per_req: Option<Summary>,
    pub host_cpu_us_per_req: Option<Summary>,
    pub client_cpu_us_per_req: Option<Summary>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    /// The server's hold time (transmit - receive) and the client's offset, µs.
    pub hold_p50_us: Option<Summary>,
    pub hold_p99_us: Option<Summary>,
    pub offset_p50_us: Option<Summary>,
    pub offset_p99_us: Option<Summary>,
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
pub fn row_of(c: &Cell, trials: &[Trial]) -> Option<NtpRow> {
    let sum = |f: &dyn Fn(&Trial) -> Option<f64>| Summary::of(trials.iter().filter_map(f));
    let rps = Summary::of(trials.iter().map(|t| t.measured.rps))?;
    let med = |f: &dyn Fn(&Trial) -> Option<f64>| sum(f).map_or(0.0, |s| s.median);
    let server_util = med(&|t| Some(t.server_util));
    let client_util = med(&|t| Some(t.client_util));
    let total = |f: &dyn Fn(&Trial) -> u64| trials.iter().map(f).sum::<u64>();
    let answered = |t: &Trial, v: f64| Some(v).filter(|_| t.measured.completed > 0);
    let server_busy = server_util >= SATURATED * c.workers as f64;
    Some(NtpRow {
        config: c.server.config(c.workers),
        server: c.server.clone(),
        workers: c.workers,
        rps,
        server_cpu_us_per_req: sum(&|t| t.server_cpu_us_per_req),
        host_cpu_us_per_req: sum(&|t| t.host_cpu_us_per_req),
        client_cpu_us_per_req: sum(&|t| t.client_cpu_us_per_req),
        p50_us: sum(&|t| answered(t, t.measured.p50_us)),
        p99_us: sum(&|t| answered(t, t.measured.p99_us)),
        hold_p50_us: sum(&|t| t.measured.hold_p50_us),
        hold_p99_us: sum(&|t| t.measured.hold_p99_us),
        offset_p50_us: sum(&|t| t.measured.offset_p50_us),
        offset_p99_us: sum(&|t| t.measured.offset_p99_us),
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
const COLUMNS: [(&str, usize, bool); 14] = [
    ("server", 9, true),
    ("config", 24, true),
    ("resp/s median (min-max)", 26, false),
    ("srv us/req", 18, false),
    ("host us/req", 18, false),
    ("cli us/req", 10, false),
    ("p50 us", 8, false),
    ("p99 us", 8, false),
    ("hold p99 us", 11, false),
    ("offset p50 us", 13, false),
    ("lost", 7, false),
    ("invalid", 7, false),
    ("drops", 6, false),
    ("bound", 8, false),
];

/// One row's cells, in [`COLUMNS`] order.
fn cells(r: &NtpRow) -> Vec<String> {
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
        med(&r.hold_p99_us, 2),
        med(&r.offset_p50_us, 2),
        r.lost.to_string(),
        r.invalid.to_string(),
        r.server_drops.to_string(),
        r.bound.into(),
    ]
}

/// The offered load, as the preamble says it.
fn load(d: &NtpCompare) -> String {
    let how = d.rate.map_or("closed loop (saturation)".into(), |r| {
        format!("open loop at {r} requests/s")
    });
    format!(
        "{how}, NTPv4 client requests with random transmit timestamps, {} flows x window {} from one generator thread",
        d.flows, d.window
    )
}

/// The table, the ratios, the notes and what was skipped.
pub fn page(d: &NtpCompare, ran: &Ran<Cell, Trial>, rows: &[NtpRow]) -> Page {
    let preamble = vec![
        format!(
            "NTP: {} repetition(s) of {:.1} s, interleaved; {}; server CPUs {:?}, client CPU {:?}",
            ran.repetitions,
            d.duration.as_secs_f64(),
            load(d),
            ran.placement.server_cpus,
            &ran.placement.client_cpus[..ran.placement.client_cpus.len().min(1)]
        ),
        ran.host_line(),
    ];
    super::super::served::page(
        "firehose lab compare --proto ntp",
        preamble,
        &COLUMNS,
        rows.iter().map(cells).collect(),
        ratios(d, rows),
        &ran.notes,
        &ran.skipped,
    )
}

/// firehose against chronyd per worker count: responses/s and server CPU per response
/// (goal: 4x), hold-time p99 at the same offered load (goal: no worse).
pub fn ratios(d: &NtpCompare, rows: &[NtpRow]) -> Vec<String> {
    let mut out = Vec::new();
    for ours in rows.iter().filter(|r| r.server == ServerKind::FirehoseNtp) {
        let Some(peer) = rows
            .iter()
            .find(|r| r.server == ServerKind::Chronyd && r.workers == ours.workers)
        else {
            continue;
        };
        let w = ours.workers;
        if d.rate.is_none() {
            out.push(format!(
                "responses/s per server CPU, firehose / chronyd, {w} CPU(s): {:.2}x (goal >= 4; ours bound by {}, theirs by {})",
                ours.rps.median / peer.rps.median,
                ours.bound,
                peer.bound
            ));
        }
        if let (Some(a), Some(b)) = (ours.server_cpu_us_per_req, peer.server_cpu_us_per_req) {
            out.push(format!(
                "server CPU per response, chronyd / firehose, {w} CPU(s): {:.2} / {:.2} us = {:.2}x (goal >= 4; {})",
                b.median,
                a.median,
                b.median / a.median,
                if d.rate.is_some() { "same offered load" } else { "at saturation" }
            ));
        }
        if let (Some(a), Some(b)) = (ours.host_cpu_us_per_req, peer.host_cpu_us_per_req) {
            out.push(format!(
                "host CPU per response (all CPUs, generator included), chronyd / firehose, {w} CPU(s): {:.2}x",
                b.median / a.median
            ));
        }
        if let (Some(a), Some(b)) = (ours.hold_p99_us, peer.hold_p99_us) {
            out.push(format!(
                "hold-time p99 (transmit - receive), firehose / chronyd, {w} CPU(s), {}: {:.2} / {:.2} us = {:.2}x (goal <= 1 at half chronyd's maximum)",
                d.rate.map_or("at saturation".into(), |r| format!("at {r} requests/s")),
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
    use super::super::{Measured, NtpCompare};
    use super::*;
    use std::collections::BTreeMap;

    fn trial(rps: f64, server_us: f64, util: f64, hold_p99: f64) -> Trial {
        Trial {
            measured: Measured {
                rps,
                completed: 4,
                lost: 1,
                unsent: 0,
                invalid: BTreeMap::from([("bad_origin".to_string(), 1)]),
                p50_us: 40.0,
                p99_us: 100.0,
                hold_p50_us: Some(hold_p99 / 2.0),
                hold_p99_us: Some(hold_p99),
                offset_p50_us: Some(-1.5),
                offset_p99_us: Some(3.0),
                server_s: 0.0,
                host_s: 0.0,
                client_s: 0.0,
                wall_s: 1.0,
                server_drops: 2,
                rcvbuf_errors: 0,
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
            server: ServerKind::FirehoseNtp,
            workers: 1,
        };
        let ch = Cell {
            server: ServerKind::Chronyd,
            workers: 1,
        };
        let a = row_of(
            &fh,
            &[
                trial(800_000.0, 1.0, 1.0, 2.0),
                trial(600_000.0, 1.5, 1.0, 4.0),
            ],
        )
        .unwrap();
        let b = row_of(
            &ch,
            &[
                trial(100_000.0, 8.0, 1.0, 10.0),
                trial(100_000.0, 10.0, 1.0, 12.0),
            ],
        )
        .unwrap();
        assert_eq!(
            (a.rps.median, a.rps.min, a.rps.max),
            (700_000.0, 600_000.0, 800_000.0)
        );
        assert_eq!((a.lost, a.invalid, a.server_drops), (2, 2, 4));
        assert_eq!(a.hold_p99_us.unwrap().median, 3.0);
        assert_eq!(a.offset_p50_us.unwrap().median, -1.5);
        assert_eq!((a.bound, b.bound), ("server", "server"));
        let r = ratios(&NtpCompare::default(), &[a.clone(), b.clone()]);
        assert!(
            r[0].contains("firehose / chronyd, 1 CPU(s): 7.00x"),
            "{r:?}"
        );
        assert!(r[1].contains("9.00 / 1.25 us = 7.20x (goal"), "{r:?}");
        assert!(r[3].contains("3.00 / 11.00 us = 0.27x"), "{r:?}");
        let open = NtpCompare {
            rate: Some(1000),
            ..NtpCompare::default()
        };
        let r = ratios(&open, &[a, b]);
        assert!(r.iter().all(|l| !l.contains("responses/s per")), "{r:?}");
        assert!(r.last().unwrap().contains("at 1000 requests/s"), "{r:?}");
        assert!(row_of(&fh, &[]).is_none());
    }
}
