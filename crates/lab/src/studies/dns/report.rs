//! The comparison's rows (one per server, workers and driver), the ratios the targets ask
//! for, and the page.

use super::super::served::{bound, preamble, utilisation};
use super::{Cell, DnsCompare, Driver, Sample};
use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;

/// One (server, config, driver) over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct DnsRow {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    pub config: String,
    pub driver: Driver,
    pub qps: Summary,
    pub server_cpu_us_per_query: Option<f64>,
    pub client_cpu_us_per_query: Option<f64>,
    pub syscalls_per_query: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: Option<f64>,
    /// Lost queries summed over repetitions.
    pub lost: u64,
    /// Datagrams the server's sockets dropped (their /proc/net/udp drop counters), summed
    /// over repetitions: queries that never reached the server.
    pub server_drops: u64,
    /// Growth of the host's Udp RcvbufErrors (/proc/net/snmp) during the driver runs,
    /// summed: every full socket buffer on the host, the client's included.
    pub udp_rcvbuf_errors: u64,
    /// Median CPU use of the server (1.0 = one CPU busy) and of the driver.
    pub server_util: f64,
    pub client_util: f64,
    /// The driver was saturated while the server was not: says nothing about the server.
    pub client_bound: bool,
    /// "client", "server" or "neither": which side limited the rate.
    pub bound: &'static str,
}

/// The row of a cell's samples; `None` when none was measured.
pub fn row_of(c: &Cell, samples: &[Sample]) -> Option<DnsRow> {
    let med = |f: &dyn Fn(&Sample) -> Option<f64>| {
        Summary::of(samples.iter().filter_map(f)).map(|s| s.median)
    };
    let qps = Summary::of(samples.iter().map(|s| s.result.qps))?;
    let per_query = |secs: f64, s: &Sample| {
        (s.result.completed > 0).then(|| secs * 1e6 / s.result.completed as f64)
    };
    // Over the time the driver sent, when the server works (not the driver's start-up).
    let server_util = med(&|s| Some(utilisation(s.server_s, s.result.load_s))).unwrap_or(0.0);
    let client_util = med(&|s| Some(s.result.client_util)).unwrap_or(0.0);
    let bound = bound(server_util, client_util, c.workers);
    Some(DnsRow {
        config: c.server.config(c.workers),
        server: c.server.clone(),
        workers: c.workers,
        driver: c.driver,
        qps,
        server_cpu_us_per_query: med(&|s| per_query(s.server_s, s)),
        client_cpu_us_per_query: med(&|s| per_query(s.result.client_cpu_s, s)),
        syscalls_per_query: med(&|s| s.syscalls_per_query),
        p50_us: med(&|s| s.result.p50_us),
        p99_us: med(&|s| s.result.p99_us),
        mean_us: med(&|s| s.result.mean_us),
        lost: samples.iter().map(|s| s.result.lost).sum(),
        server_drops: samples.iter().map(|s| s.server_drops).sum(),
        udp_rcvbuf_errors: samples.iter().map(|s| s.rcvbuf_errors).sum(),
        server_util,
        client_util,
        client_bound: bound == "client",
        bound,
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The columns of the table: header, width on the terminal, left-aligned.
const COLUMNS: [(&str, usize, bool); 13] = [
    ("server", 9, true),
    ("config", 34, true),
    ("driver", 14, true),
    ("QPS median (min-max)", 26, false),
    ("srv us/q", 9, false),
    ("cli us/q", 9, false),
    ("sysc/q", 9, false),
    ("p50 us", 8, false),
    ("p99 us", 8, false),
    ("mean us", 8, false),
    ("lost", 7, false),
    ("drops", 6, false),
    ("bound", 8, false),
];

/// One row's cells, in [`COLUMNS`] order.
fn cells(r: &DnsRow) -> Vec<String> {
    vec![
        r.server.name().into(),
        r.config.clone(),
        r.driver.name().into(),
        format!("{:.0} ({:.0}-{:.0})", r.qps.median, r.qps.min, r.qps.max),
        opt(r.server_cpu_us_per_query, 2),
        opt(r.client_cpu_us_per_query, 2),
        opt(r.syscalls_per_query, 2),
        opt(r.p50_us, 1),
        opt(r.p99_us, 1),
        opt(r.mean_us, 1),
        r.lost.to_string(),
        r.server_drops.to_string(),
        r.bound.into(),
    ]
}

/// The offered load, as the preamble says it.
fn load(d: &DnsCompare) -> String {
    let load = d.rate.map_or("closed loop (saturation)".into(), |r| {
        format!("offered load {r} q/s")
    });
    match d.tcp {
        None => format!("{load}, UDP"),
        Some(t) => format!(
            "{load}, TCP over {} connections, {} (firehose 1 TCP thread, knotd tcp-workers 1, nsd its server processes)",
            t.connections,
            t.queries_per_conn
                .map_or("kept open".into(), |n| format!("{n} queries per connection"))
        ),
    }
}

/// The table, the ratios the targets ask for, and what was skipped.
pub fn page(d: &DnsCompare, ran: &Ran<Cell, Sample>, rows: &[DnsRow]) -> Page {
    let preamble = preamble("DNS", ran, d.duration, load(d));
    let table = Table {
        title: None,
        columns: Column::fixed_all(&COLUMNS),
        rows: rows.iter().map(cells).collect(),
        dim: rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.client_bound)
            .map(|(i, _)| i)
            .collect(),
        text: TextTable::Padded {
            gap: 1,
            blank_before: false,
        },
    };
    Page {
        title: "firehose lab compare --proto dns".into(),
        preamble,
        blocks: vec![
            Block::Table(table),
            Block::List(List {
                title: "Ratios".into(),
                items: ratios(d, rows),
                text: TextList::prefixed(""),
            }),
            Block::List(List {
                title: "Skipped".into(),
                items: ran
                    .skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.reason))
                    .collect(),
                text: TextList::prefixed("skipped: "),
            }),
        ],
    }
}

/// Our figures as ratios to the better peer, per worker count and driver.
pub fn ratios(d: &DnsCompare, rows: &[DnsRow]) -> Vec<String> {
    let mut out = Vec::new();
    let find = |k: ServerKind, w: usize, drv: Driver| {
        rows.iter()
            .find(|r| r.server == k && r.workers == w && r.driver == drv)
    };
    for ours in rows.iter().filter(|r| r.server == ServerKind::FirehoseDns) {
        let peers: Vec<&DnsRow> = [ServerKind::Knot, ServerKind::Nsd]
            .into_iter()
            .filter_map(|k| find(k, ours.workers, ours.driver))
            .collect();
        let best_cpu = peers
            .iter()
            .filter_map(|p| p.server_cpu_us_per_query.map(|c| (c, p.server.name())))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let (Some(c), Some((b, name))) = (ours.server_cpu_us_per_query, best_cpu) {
            out.push(format!(
                "server CPU per query, firehose / best peer ({name}), workers {}, {}: {:.2}x (target <= 0.90; {})",
                ours.workers,
                ours.driver.name(),
                c / b,
                if d.rate.is_some() { "same offered load" } else { "at saturation, loads differ" }
            ));
        }
        if let Some(best) = peers
            .iter()
            .max_by(|a, b| a.qps.median.total_cmp(&b.qps.median))
        {
            out.push(format!(
                "QPS, firehose / best peer ({}), workers {}, {}: {:.2}x (ours bound by {}, theirs by {})",
                best.server.name(),
                ours.workers,
                ours.driver.name(),
                ours.qps.median / best.qps.median,
                ours.bound,
                best.bound
            ));
        }
    }
    let rows_of = |drv: Driver| rows.iter().filter(move |r| r.driver == drv);
    let cli = |drv: Driver| -> Vec<f64> {
        rows_of(drv)
            .filter_map(|r| r.client_cpu_us_per_query)
            .collect()
    };
    let drops = |drv: Driver| -> (u64, u64) {
        rows_of(drv).fold((0, 0), |(a, b), r| {
            (a + r.server_drops, b + r.udp_rcvbuf_errors)
        })
    };
    if let (Some(f), Some(p)) = (
        Summary::of(cli(Driver::Firehose)),
        Summary::of(cli(Driver::Dnsperf)),
    ) {
        let ((fd, fr), (pd, pr)) = (drops(Driver::Firehose), drops(Driver::Dnsperf));
        out.push(format!(
            "client CPU per query, firehose load / dnsperf (medians over rows): {:.2} / {:.2} us = {:.2}x (target <= 0.50; {}); server socket drops {fd} / {pd}, host RcvbufErrors {fr} / {pr}",
            f.median,
            p.median,
            f.median / p.median,
            load(d)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::DriverResult;
    use super::*;

    /// A server busy for the 5.0 s the driver sent is the bound, though the driver took
    /// 5.3 s from its start to its exit (over those its CPU read 0.92 and the row
    /// "neither").
    #[test]
    fn a_server_busy_while_the_driver_sent_is_the_bound() {
        let s = Sample {
            result: DriverResult {
                qps: 200_000.0,
                completed: 1_000_000,
                client_cpu_s: 3.0,
                wall_s: 5.3,
                load_s: 5.0,
                client_util: 0.58,
                ..DriverResult::default()
            },
            server_s: 4.9,
            server_drops: 0,
            rcvbuf_errors: 0,
            syscalls: None,
            syscalls_per_query: None,
        };
        let c = Cell {
            server: ServerKind::Knot,
            workers: 1,
            driver: Driver::Dnsperf,
        };
        let r = row_of(&c, &[s]).unwrap();
        assert!((r.server_util - 0.98).abs() < 1e-9, "{r:?}");
        assert_eq!((r.bound, r.client_bound), ("server", false), "{r:?}");
    }
}
