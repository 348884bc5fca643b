//! The matrix's results: one row per cell (medians with min-max over the repetitions),
//! the ranking by ROI, firehose's best against iperf3 per block, as JSON, a text table,
//! Markdown and an HTML page with the talk's three figures (throughput, CPU, ROI per cell).

use super::trial::{Engine, MatrixTrial};
use super::{cell_name, BlockRecord, Profile, StreamMatrixOptions};
use crate::env::Environment;
use crate::report::html::{esc, html_table, page_start, PAGE_END};
use crate::report::markdown::md_table;
use crate::report::{charts, num, range, write_pages};
use crate::stats::Summary;
use crate::LabResult;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One cell over its repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixRow {
    pub cell: String,
    pub mtu: u32,
    pub profile: Profile,
    pub engine: Engine,
    pub repetitions: usize,
    pub gbps: Option<Summary>,
    /// Sender + receiver process CPU, in cores.
    pub process_cores: Option<Summary>,
    /// Busy cores on the CPUs used (/proc/stat, softirq included), and its split.
    pub host_cores: Option<Summary>,
    pub host_softirq_cores: Option<Summary>,
    /// (Gbit/s)^2 / process cores: the ranking figure.
    pub roi: Option<Summary>,
    /// (Gbit/s)^2 / host busy cores on the CPUs used.
    pub roi_host: Option<Summary>,
    pub retransmits: Option<Summary>,
    /// Share of zero-copy sends the kernel copied anyway (MSG_ZEROCOPY, SEND_ZC).
    pub zerocopy_copied_pct: Option<f64>,
    /// The kernel refused a mode or the settings: the reason, with the errno.
    pub unsupported: Option<String>,
    /// Runs that failed otherwise.
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

/// A place in the ranking.
#[derive(Debug, Clone, Serialize)]
pub struct Ranked {
    pub rank: usize,
    pub cell: String,
    pub roi: f64,
    pub gbps: f64,
}

/// Everything one `lab stream` run produced.
#[derive(Debug, Clone, Serialize)]
pub struct StreamMatrixReport {
    pub kind: String,
    pub started_unix: u64,
    pub topology: String,
    pub family: String,
    pub repetitions: usize,
    pub duration_s: f64,
    pub flows: usize,
    pub msg_size: usize,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    pub environment: Option<Environment>,
    pub blocks: Vec<BlockRecord>,
    pub rows: Vec<MatrixRow>,
    /// Rows with a ROI, best first.
    pub ranking: Vec<Ranked>,
    /// Per block: firehose's best ROI over iperf3's default.
    pub ratios: Vec<String>,
    pub trials: Vec<MatrixTrial>,
}

fn sum(trials: &[&MatrixTrial], f: impl Fn(&MatrixTrial) -> Option<f64>) -> Option<Summary> {
    Summary::of(trials.iter().filter_map(|t| f(t)))
}

fn roi(gbps: f64, cores: f64) -> Option<f64> {
    firehose_stream::cpu::roi(gbps, cores)
}

impl MatrixRow {
    fn new(
        b: &BlockRecord,
        e: &Engine,
        trials: &[&MatrixTrial],
        unsupported: Option<String>,
        failures: Vec<String>,
    ) -> MatrixRow {
        let zc: (u64, u64) = trials.iter().fold((0, 0), |acc, t| {
            (
                acc.0 + t.zerocopy_sends.unwrap_or(0),
                acc.1 + t.zerocopy_copied.unwrap_or(0),
            )
        });
        let mut notes: Vec<String> = trials.iter().flat_map(|t| t.notes.clone()).collect();
        notes.sort();
        notes.dedup();
        MatrixRow {
            cell: cell_name(b.mtu, b.profile, e),
            mtu: b.mtu,
            profile: b.profile,
            engine: *e,
            repetitions: trials.len(),
            gbps: sum(trials, |t| Some(t.gbps)),
            process_cores: sum(trials, |t| Some(t.process_cores)),
            host_cores: sum(trials, |t| Some(t.host.busy)),
            host_softirq_cores: sum(trials, |t| Some(t.host.softirq)),
            roi: sum(trials, |t| roi(t.gbps, t.process_cores)),
            roi_host: sum(trials, |t| roi(t.gbps, t.host.busy)),
            retransmits: sum(trials, |t| t.retransmits.map(|r| r as f64)),
            zerocopy_copied_pct: (zc.0 > 0).then(|| 100.0 * zc.1 as f64 / zc.0 as f64),
            unsupported: unsupported.or_else(|| b.error.clone()),
            failures,
            notes,
        }
    }
}

impl StreamMatrixReport {
    /// Groups trials into rows (plan order), ranks them and compares with iperf3.
    pub fn build(
        o: &StreamMatrixOptions,
        records: Vec<BlockRecord>,
        trials: Vec<MatrixTrial>,
        unsupported: &[(String, String)],
        failed: &[(String, String)],
    ) -> StreamMatrixReport {
        let mut rows = Vec::new();
        for b in &records {
            for e in &o.engines {
                let cell = cell_name(b.mtu, b.profile, e);
                let mine: Vec<&MatrixTrial> = trials.iter().filter(|t| t.cell == cell).collect();
                let why = unsupported
                    .iter()
                    .find(|(c, _)| *c == cell)
                    .map(|x| x.1.clone());
                let fails = failed
                    .iter()
                    .filter(|(c, _)| *c == cell)
                    .map(|x| x.1.clone())
                    .collect();
                rows.push(MatrixRow::new(b, e, &mine, why, fails));
            }
        }
        let mut ranking: Vec<Ranked> = rows
            .iter()
            .filter_map(|r| {
                Some(Ranked {
                    rank: 0,
                    cell: r.cell.clone(),
                    roi: r.roi?.median,
                    gbps: r.gbps?.median,
                })
            })
            .collect();
        ranking.sort_by(|a, b| b.roi.total_cmp(&a.roi));
        for (i, r) in ranking.iter_mut().enumerate() {
            r.rank = i + 1;
        }
        let mut rep = StreamMatrixReport {
            kind: "stream".into(),
            started_unix: 0,
            topology: "veth".into(),
            family: "ipv6".into(),
            repetitions: o.repetitions,
            duration_s: o.duration.as_secs_f64(),
            flows: o.flows,
            msg_size: o.msg_size,
            server_cpus: o.server_cpus.clone(),
            client_cpus: o.client_cpus.clone(),
            environment: None,
            blocks: records,
            rows,
            ranking,
            ratios: Vec::new(),
            trials,
        };
        rep.ratios = rep.peer_ratios();
        rep
    }

    /// Per block: the best firehose pair's ROI over iperf3's default, and over `iperf3 -Z`.
    fn peer_ratios(&self) -> Vec<String> {
        let mut out = Vec::new();
        for b in &self.blocks {
            let here = |r: &&MatrixRow| r.mtu == b.mtu && r.profile == b.profile;
            let best = self
                .rows
                .iter()
                .filter(here)
                .filter(|r| !r.engine.is_peer())
                .filter_map(|r| Some((r, r.roi?.median)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((best, ours)) = best else { continue };
            for z in [false, true] {
                let peer = self
                    .rows
                    .iter()
                    .filter(here)
                    .find(|r| r.engine == Engine::Iperf3 { zerocopy: z })
                    .and_then(|r| Some((r, r.roi?.median)));
                if let Some((p, theirs)) = peer {
                    out.push(format!(
                        "MTU {} {}: ROI of the best firehose pair ({}) / {}: {} / {} = {:.2}x",
                        b.mtu,
                        b.profile.name(),
                        best.engine.name(),
                        p.engine.name(),
                        num(ours),
                        num(theirs),
                        ours / theirs
                    ));
                }
            }
        }
        out
    }

    fn cells(r: &MatrixRow) -> Vec<String> {
        let f = |s: &Option<Summary>| range(s, &|v| num(v));
        vec![
            r.cell.clone(),
            f(&r.gbps),
            f(&r.process_cores),
            f(&r.host_cores),
            f(&r.roi),
            f(&r.roi_host),
            f(&r.retransmits),
            r.zerocopy_copied_pct
                .map_or("-".into(), |p| format!("{p:.0}%")),
            match (&r.unsupported, r.failures.first()) {
                (Some(u), _) => format!("unsupported: {u}"),
                (None, Some(f)) => format!("failed: {f}"),
                _ => String::new(),
            },
        ]
    }

    const HEADERS: [&'static str; 9] = [
        "cell (MTU settings tool send/recv)",
        "Gbit/s",
        "process cores",
        "host cores",
        "ROI",
        "ROI host",
        "retrans",
        "ZC copied",
        "note",
    ];

    fn preamble(&self) -> Vec<String> {
        let mut v = vec![format!(
            "veth, IPv6, {} flows x {} B messages, {} repetition(s) of {} s, interleaved; receiver CPUs {:?}, sender CPUs {:?}",
            self.flows, self.msg_size, self.repetitions, self.duration_s, self.server_cpus, self.client_cpus
        )];
        if let Some(env) = &self.environment {
            v.push(
                env.brief()
                    .iter()
                    .map(|(k, x)| format!("{k} {x}"))
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        v.push("ROI = (Gbit/s)^2 / CPU cores: \"ROI\" over the sender and receiver processes, \"ROI host\" over /proc/stat busy time on the CPUs used (softirq included); median (min-max)".into());
        v
    }

    /// The text table, the ranking and the ratios to iperf3.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        for l in self.preamble() {
            let _ = writeln!(s, "{l}");
        }
        let w = [42, 20, 18, 18, 20, 20, 20, 9, 0];
        let line = |c: &[String]| {
            let mut l = String::new();
            for (x, w) in c.iter().zip(w) {
                let _ = write!(l, "{x:<w$} ");
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(s, "{}", line(&Self::HEADERS.map(String::from)));
        for r in &self.rows {
            let _ = writeln!(s, "{}", line(&Self::cells(r)));
        }
        let _ = writeln!(s, "ranking by ROI:");
        for r in &self.ranking {
            let _ = writeln!(
                s,
                "{:>3}. {:<40} ROI {:>8}  {} Gbit/s",
                r.rank,
                r.cell,
                num(r.roi),
                num(r.gbps)
            );
        }
        for r in &self.ratios {
            let _ = writeln!(s, "{r}");
        }
        s
    }

    /// report.md.
    pub fn render_markdown(&self) -> String {
        let mut s = String::from("# firehose lab stream\n\n");
        for l in self.preamble() {
            let _ = writeln!(s, "- {l}");
        }
        let rows: Vec<Vec<String>> = self.rows.iter().map(Self::cells).collect();
        s.push('\n');
        s.push_str(&md_table(&Self::HEADERS, &rows));
        s.push_str("\n## Ranking by ROI\n\n| rank | cell | ROI | Gbit/s |\n|---|---|---|---|\n");
        for r in &self.ranking {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                r.rank,
                r.cell,
                num(r.roi),
                num(r.gbps)
            );
        }
        if !self.ratios.is_empty() {
            s.push_str("\n## Against iperf3\n\n");
            for r in &self.ratios {
                let _ = writeln!(s, "- {r}");
            }
        }
        s.push_str("\n## Link settings, as read back\n\n");
        for b in &self.blocks {
            let _ = writeln!(s, "- {}", block_line(b));
        }
        s
    }

    /// report.html: the three figures and the tables.
    pub fn render_html(&self) -> LabResult<String> {
        let names: Vec<String> = self.rows.iter().map(|r| r.cell.clone()).collect();
        let pick = |f: fn(&MatrixRow) -> Option<Summary>| -> Vec<Option<Summary>> {
            self.rows.iter().map(f).collect()
        };
        let tp = charts::summary_hbars(
            &names,
            &pick(|r| r.gbps),
            "Throughput",
            "Gbit/s (median, min-max)",
        )?;
        let cpu = charts::summary_hbars(
            &names,
            &pick(|r| r.process_cores),
            "CPU: sender + receiver processes",
            "cores (median, min-max)",
        )?;
        let roi = charts::summary_hbars(
            &names,
            &pick(|r| r.roi),
            "ROI = (Gbit/s)^2 / CPU",
            "Gbit/s^2 per core",
        )?;
        let mut h = page_start("firehose lab stream");
        for l in self.preamble() {
            let _ = writeln!(h, "<p>{}</p>", esc(&l));
        }
        let _ = writeln!(
            h,
            "<div class=\"charts\"><div>{tp}</div><div>{cpu}</div><div>{roi}</div></div>"
        );
        let rows: Vec<Vec<String>> = self.rows.iter().map(Self::cells).collect();
        h.push_str("<h2>Cells</h2>\n");
        h.push_str(&html_table(&Self::HEADERS, &rows));
        h.push_str("<h2>Ranking by ROI</h2>\n<ol>\n");
        for r in &self.ranking {
            let _ = writeln!(
                h,
                "<li>{}: ROI {}, {} Gbit/s</li>",
                esc(&r.cell),
                num(r.roi),
                num(r.gbps)
            );
        }
        h.push_str("</ol>\n<h2>Against iperf3</h2>\n<ul>\n");
        for r in &self.ratios {
            let _ = writeln!(h, "<li>{}</li>", esc(r));
        }
        h.push_str("</ul>\n<h2>Link settings, as read back</h2>\n<ul>\n");
        for b in &self.blocks {
            let _ = writeln!(h, "<li>{}</li>", esc(&block_line(b)));
        }
        h.push_str("</ul>\n");
        h.push_str(PAGE_END);
        Ok(h)
    }

    /// Writes report.md and report.html into `dir`.
    pub fn write_dir(&self, dir: &Path) -> LabResult<()> {
        write_pages(dir, &self.render_markdown(), &self.render_html()?)
    }
}

/// "MTU 9000 big-tcp-185k: mtu 9000 gro on tso on gso on gso/gro_max 185000/185000 on both
/// ends; restored after every repetition" (or the kernel's refusal).
fn block_line(b: &BlockRecord) -> String {
    if let Some(e) = &b.error {
        return format!("MTU {} {}: refused: {e}", b.mtu, b.profile.name());
    }
    let ends: Vec<String> = b
        .applied
        .iter()
        .map(|s| {
            format!(
                "{} mtu {} gro {} tso {} gso {} gso/gro_max_size {}/{}",
                s.dev, s.mtu, s.gro, s.tso, s.gso, s.gso_max_size, s.gro_max_size
            )
        })
        .collect();
    let restored = !b.restored.is_empty() && b.restored.iter().all(|r| *r == b.before);
    format!(
        "MTU {} {}: {}; {}",
        b.mtu,
        b.profile.name(),
        ends.join("; "),
        if restored {
            "restored to the state before after every repetition"
        } else {
            "NOT restored as before"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_stream::{RecvMode, SendMode};
    use std::time::Duration;

    fn trial(cell: String, gbps: f64, cores: f64) -> MatrixTrial {
        MatrixTrial {
            gbps,
            process_cores: cores,
            ..MatrixTrial::blank(&cell)
        }
    }

    #[test]
    fn rows_rank_by_roi_and_compare_with_iperf3() {
        let fh = Engine::Firehose {
            send: SendMode::Uring,
            recv: RecvMode::Copy,
        };
        let zcrx = Engine::Firehose {
            send: SendMode::Copy,
            recv: RecvMode::UringZcrx,
        };
        let peer = Engine::Iperf3 { zerocopy: false };
        let o = StreamMatrixOptions {
            firehose: "firehose".into(),
            mtus: vec![1500],
            profiles: vec![Profile::Base],
            engines: vec![fh, zcrx, peer],
            repetitions: 2,
            duration: Duration::from_secs(3),
            flows: 16,
            msg_size: 524288,
            server_cpus: vec![0],
            client_cpus: vec![1],
            logs: "/nonexistent".into(),
            stop: None,
        };
        let block = BlockRecord {
            mtu: 1500,
            profile: Profile::Base,
            requested: Profile::Base.settings(1500),
            applied: Vec::new(),
            before: Vec::new(),
            restored: Vec::new(),
            error: None,
        };
        let c = |e: &Engine| cell_name(1500, Profile::Base, e);
        let trials = vec![
            trial(c(&fh), 20.0, 1.0),
            trial(c(&fh), 10.0, 1.0),
            trial(c(&peer), 10.0, 1.0),
        ];
        let why = vec![(c(&zcrx), "EOPNOTSUPP".to_string())];
        let r = StreamMatrixReport::build(&o, vec![block], trials, &why, &[]);
        assert_eq!(r.rows.len(), 3);
        // ROI per trial: 400 and 100, median 250; iperf3 100.
        assert_eq!(r.rows[0].roi.unwrap().median, 250.0);
        assert_eq!(r.rows[1].unsupported.as_deref(), Some("EOPNOTSUPP"));
        let ranked: Vec<&str> = r.ranking.iter().map(|x| x.cell.as_str()).collect();
        assert_eq!(
            ranked,
            ["1500 base firehose uring/copy", "1500 base iperf3"]
        );
        assert_eq!(
            r.ratios,
            ["MTU 1500 base: ROI of the best firehose pair (firehose uring/copy) / iperf3: 250 / 100 = 2.50x"]
        );
        let md = r.render_markdown();
        assert!(
            md.contains("| 1 | 1500 base firehose uring/copy | 250 | 15.0 |"),
            "{md}"
        );
        assert!(md.contains("| unsupported: EOPNOTSUPP |"), "{md}");
        let html = r.render_html().unwrap();
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(r.render_table().contains("  2. 1500 base iperf3"));
    }
}
