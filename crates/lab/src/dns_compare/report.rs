//! The comparison as text: a table with the ratios the targets ask for, and Markdown.

use super::{DnsCompareReport, DnsCompareRow, Driver, ServerKind, Spread};
use std::fmt::Write as _;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
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
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if let Some(st) = self.steal_pct {
            env.push(format!("steal {st:.1}% of CPU time during the run"));
        }
        let _ = writeln!(s, "{}", env.join("; "));
        let _ = writeln!(
            s,
            "{:<9} {:<34} {:<14} {:>26} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8}",
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
            "bound"
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<9} {:<34} {:<14} {:>26} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>7} {:>8}",
                r.server.name(),
                r.config,
                r.driver.name(),
                format!("{:.0} ({:.0}-{:.0})", r.qps.median, r.qps.min, r.qps.max),
                opt(r.server_cpu_us_per_query, 2),
                opt(r.client_cpu_us_per_query, 2),
                opt(r.syscalls_per_query, 2),
                opt(r.p50_us, 1),
                opt(r.p99_us, 1),
                opt(r.mean_us, 1),
                r.lost,
                r.bound
            );
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
        for (k, v) in &self.environment {
            let _ = writeln!(s, "- {k}: {v}");
        }
        if let Some(st) = self.steal_pct {
            let _ = writeln!(s, "- steal: {st:.1}% of CPU time during the run");
        }
        s.push_str(
            "\n| server | config | driver | QPS median (min-max) | server CPU us/q | client CPU us/q \
             | syscalls/q | p50 us | p99 us | mean us | lost | bound |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} ({:.0}-{:.0}) | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.server.name(),
                r.config,
                r.driver.name(),
                r.qps.median,
                r.qps.min,
                r.qps.max,
                opt(r.server_cpu_us_per_query, 2),
                opt(r.client_cpu_us_per_query, 2),
                opt(r.syscalls_per_query, 2),
                opt(r.p50_us, 1),
                opt(r.p99_us, 1),
                opt(r.mean_us, 1),
                r.lost,
                r.bound
            );
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
        self.rate.map_or("closed loop (saturation)".into(), |r| {
            format!("offered load {r} q/s")
        })
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
            .filter(|r| r.server == ServerKind::Firehose)
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
            Spread::of(&cli(Driver::Firehose)),
            Spread::of(&cli(Driver::Dnsperf)),
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
