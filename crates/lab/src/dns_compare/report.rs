//! The comparison as text: a table with the ratios the targets ask for, and Markdown.

use super::{DnsCompareReport, DnsCompareRow, Driver, ServerKind};
use crate::stats::Summary;
use std::fmt::Write as _;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Column headers of the table and of report.md.
const HEADERS: [&str; 12] = [
    "server",
    "config",
    "driver",
    "QPS median (min-max)",
    "srv us/q",
    "cli us/q",
    "sysc/q",
    "p50 us",
    "p99 us",
    "mean us",
    "lost",
    "bound",
];

/// Width of each column of the text table, and whether it is left-aligned.
const WIDTHS: [(usize, bool); 12] = [
    (9, true),
    (34, true),
    (14, true),
    (26, false),
    (9, false),
    (9, false),
    (9, false),
    (8, false),
    (8, false),
    (8, false),
    (7, false),
    (8, false),
];

/// One row's cells, in [`HEADERS`] order.
fn cells(r: &DnsCompareRow) -> [String; 12] {
    [
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
        r.bound.into(),
    ]
}

impl DnsCompareReport {
    /// The table, the ratios the targets ask for, and what was skipped.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "DNS: {} repetition(s) of {:.1} s, interleaved; {}; server CPUs {:?}, client CPU {:?}",
            self.repetitions,
            self.duration_s,
            self.load(),
            self.server_cpus,
            self.client_cpus
        );
        let mut env: Vec<String> = self
            .environment
            .brief()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if let Some(st) = self.steal_pct {
            env.push(format!("steal {st:.1}% of CPU time during the run"));
        }
        let _ = writeln!(s, "{}", env.join("; "));
        let line = |cells: &[String]| {
            let mut l = String::new();
            for (c, (w, left)) in cells.iter().zip(WIDTHS) {
                let _ = if left {
                    write!(l, "{c:<w$} ")
                } else {
                    write!(l, "{c:>w$} ")
                };
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(s, "{}", line(&HEADERS.map(String::from)));
        for r in &self.rows {
            let _ = writeln!(s, "{}", line(&cells(r)));
        }
        for line in self.ratios() {
            let _ = writeln!(s, "{line}");
        }
        for k in &self.skipped {
            let _ = writeln!(s, "skipped: {k}");
        }
        s
    }

    /// The same as Markdown, for `--report DIR` (report.md).
    pub fn render_markdown(&self) -> String {
        let mut s = String::from("# firehose lab compare --proto dns\n\n");
        let _ = writeln!(
            s,
            "- {} repetition(s) of {:.1} s, interleaved; {}\n- server CPUs {:?}, client CPUs {:?}",
            self.repetitions,
            self.duration_s,
            self.load(),
            self.server_cpus,
            self.client_cpus
        );
        for (k, v) in self.environment.brief() {
            let _ = writeln!(s, "- {k}: {v}");
        }
        if let Some(st) = self.steal_pct {
            let _ = writeln!(s, "- steal: {st:.1}% of CPU time during the run");
        }
        let _ = writeln!(
            s,
            "\n| {} |\n|{}",
            HEADERS.join(" | "),
            "---|".repeat(HEADERS.len())
        );
        for r in &self.rows {
            let row = cells(r).map(|c| c.replace('|', "\\|"));
            let _ = writeln!(s, "| {} |", row.join(" | "));
        }
        let ratios = self.ratios();
        if !ratios.is_empty() {
            s.push_str("\n## Ratios\n\n");
            for line in ratios {
                let _ = writeln!(s, "- {line}");
            }
        }
        if !self.skipped.is_empty() {
            s.push_str("\n## Skipped\n\n");
            for k in &self.skipped {
                let _ = writeln!(s, "- {k}");
            }
        }
        s
    }

    fn load(&self) -> String {
        let load = self.rate.map_or("closed loop (saturation)".into(), |r| {
            format!("offered load {r} q/s")
        });
        match self.tcp {
            None => format!("{load}, UDP"),
            Some(t) => format!(
                "{load}, TCP over {} connections, {} (firehose 1 TCP thread, knotd tcp-workers 1, nsd its server processes)",
                t.connections,
                t.queries_per_conn
                    .map_or("kept open".into(), |n| format!("{n} queries per connection"))
            ),
        }
    }

    /// Our figures as ratios to the better peer, per worker count and driver.
    pub fn ratios(&self) -> Vec<String> {
        let mut out = Vec::new();
        let find = |k: ServerKind, w: usize, d: Driver| {
            self.rows
                .iter()
                .find(|r| r.server == k && r.workers == w && r.driver == d)
        };
        for ours in self
            .rows
            .iter()
            .filter(|r| r.server == ServerKind::FirehoseDns)
        {
            let peers: Vec<&DnsCompareRow> = [ServerKind::Knot, ServerKind::Nsd]
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
                    if self.rate.is_some() { "same offered load" } else { "at saturation, loads differ" }
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
        let cli = |d: Driver| -> Vec<f64> {
            self.rows
                .iter()
                .filter(|r| r.driver == d)
                .filter_map(|r| r.client_cpu_us_per_query)
                .collect()
        };
        if let (Some(f), Some(p)) = (
            Summary::of(cli(Driver::Firehose)),
            Summary::of(cli(Driver::Dnsperf)),
        ) {
            out.push(format!(
                "client CPU per query, firehose load / dnsperf (medians over rows): {:.2} / {:.2} us = {:.2}x (target <= 0.50)",
                f.median,
                p.median,
                f.median / p.median
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Environment;

    fn report() -> DnsCompareReport {
        let row = |server: ServerKind, driver, qps: f64, cpu| DnsCompareRow {
            config: server.config(1),
            server,
            workers: 1,
            driver,
            qps: Summary::of([qps, qps * 1.1]).unwrap(),
            server_cpu_us_per_query: Some(cpu),
            client_cpu_us_per_query: Some(2.0),
            syscalls_per_query: None,
            p50_us: None,
            p99_us: None,
            mean_us: Some(80.0),
            lost: 3,
            server_util: 1.0,
            client_util: 0.5,
            client_bound: false,
            bound: "server",
        };
        DnsCompareReport {
            rows: vec![
                row(ServerKind::FirehoseDns, Driver::Dnsperf, 200_000.0, 2.0),
                row(ServerKind::Nsd, Driver::Dnsperf, 100_000.0, 4.0),
            ],
            skipped: vec!["knotd: not installed (apt-get install -y knot)".into()],
            environment: Environment {
                kernel: "6.1".into(),
                cpu_model: "AMD EPYC".into(),
                nproc: 2,
                sysctls: Default::default(),
                modules_loaded: Vec::new(),
                loadavg: "0.50 0.40 0.30 1/100 42".into(),
                firehose_version: "0.1.0".into(),
            },
            repetitions: 2,
            duration_s: 1.0,
            rate: None,
            tcp: None,
            server_cpus: vec![0],
            client_cpus: vec![1],
            steal_pct: None,
        }
    }

    #[test]
    fn table_and_markdown_carry_the_same_cells() {
        let r = report();
        let t = r.render_table();
        let row = t.lines().find(|l| l.starts_with("nsd ")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>().join(" "),
            "nsd server-count 1, reuseport dnsperf 105000 (100000-110000) 4.00 2.00 - - - 80.0 3 server"
        );
        assert!(t.contains("skipped: knotd: not installed"), "{t}");
        assert!(
            t.contains("kernel 6.1; cpu AMD EPYC; nproc 2; loadavg 0.50 0.40 0.30 1/100 42\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "server CPU per query, firehose / best peer (nsd), workers 1, dnsperf: 0.50x"
            ),
            "{t}"
        );
        let md = r.render_markdown();
        assert!(md.contains(
            "| nsd | server-count 1, reuseport | dnsperf | 105000 (100000-110000) | 4.00 | 2.00 | - | - | - | 80.0 | 3 | server |"
        ), "{md}");
        assert!(
            md.contains("\n## Skipped\n\n- knotd: not installed"),
            "{md}"
        );
        assert!(
            md.contains("|---|---|---|---|---|---|---|---|---|---|---|---|\n"),
            "{md}"
        );
    }
}
