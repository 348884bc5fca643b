//! The matrix's results: one row per cell (medians with min-max over the repetitions), the
//! ranking by ROI, firehose's best against iperf3 per block, and the page with the talk's
//! three figures (throughput, CPU, ROI per cell).

use super::trial::{Engine, MatrixTrial};
use super::{BlockRecord, Cell, Profile, StreamMatrix};
use crate::report::charts::Chart;
use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::report::{num, range};
use crate::stats::Summary;
use crate::study::Ran;
use serde::Serialize;

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
    /// Busy cores on the CPUs used (wall time less /proc/stat idle, softirq included), and
    /// its softirq share (a tick sample).
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

fn roi(gbps: f64, cores: f64) -> Option<f64> {
    firehose_stream::cpu::roi(gbps, cores)
}

/// The rows, in plan order.
pub fn rows(_m: &StreamMatrix, ran: &Ran<Cell, MatrixTrial>) -> Vec<MatrixRow> {
    ran.cells
        .iter()
        .map(|c| {
            let t = &c.trials;
            let sum = |f: &dyn Fn(&MatrixTrial) -> Option<f64>| Summary::of(t.iter().filter_map(f));
            let zc: (u64, u64) = t.iter().fold((0, 0), |acc, t| {
                (
                    acc.0 + t.zerocopy_sends.unwrap_or(0),
                    acc.1 + t.zerocopy_copied.unwrap_or(0),
                )
            });
            let mut notes: Vec<String> = t.iter().flat_map(|t| t.notes.clone()).collect();
            notes.sort();
            notes.dedup();
            MatrixRow {
                cell: c.name.clone(),
                mtu: c.cell.mtu,
                profile: c.cell.profile,
                engine: c.cell.engine,
                repetitions: t.len(),
                gbps: sum(&|t| Some(t.gbps)),
                process_cores: sum(&|t| Some(t.process_cores)),
                host_cores: sum(&|t| Some(t.host.busy)),
                host_softirq_cores: sum(&|t| Some(t.host.softirq)),
                roi: sum(&|t| roi(t.gbps, t.process_cores)),
                roi_host: sum(&|t| roi(t.gbps, t.host.busy)),
                retransmits: sum(&|t| t.retransmits.map(|r| r as f64)),
                zerocopy_copied_pct: (zc.0 > 0).then(|| 100.0 * zc.1 as f64 / zc.0 as f64),
                unsupported: c.skipped.clone(),
                failures: c.failures.clone(),
                notes,
            }
        })
        .collect()
}

/// Rows with a ROI, best first.
pub fn ranking(rows: &[MatrixRow]) -> Vec<Ranked> {
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
    ranking
}

/// Per block: the best firehose pair's ROI over iperf3's default, and over `iperf3 -Z`.
pub fn peer_ratios(m: &StreamMatrix, rows: &[MatrixRow]) -> Vec<String> {
    let mut out = Vec::new();
    for b in &m.blocks {
        let here = |r: &&MatrixRow| r.mtu == b.mtu && r.profile == b.profile;
        let best = rows
            .iter()
            .filter(here)
            .filter(|r| !r.engine.is_peer())
            .filter_map(|r| Some((r, r.roi?.median)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((best, ours)) = best else { continue };
        for z in [false, true] {
            let peer = rows
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

const COLUMNS: [(&str, usize); 9] = [
    ("cell (MTU settings tool send/recv)", 42),
    ("Gbit/s", 20),
    ("process cores", 18),
    ("host cores", 18),
    ("ROI", 20),
    ("ROI host", 20),
    ("retrans", 20),
    ("ZC copied", 9),
    ("note", 0),
];

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

/// The table, the charts, the ranking, the ratios to iperf3 and the link settings.
pub fn page(m: &StreamMatrix, ran: &Ran<Cell, MatrixTrial>, rows: &[MatrixRow]) -> Page {
    let p = &ran.placement;
    let preamble = vec![
        format!(
            "veth, IPv6, {} flows x {} B messages, {} repetition(s) of {} s, interleaved; receiver CPUs {:?}, sender CPUs {:?}",
            m.flows,
            m.msg_size,
            ran.repetitions,
            m.duration.as_secs_f64(),
            p.server_cpus,
            p.client_cpus
        ),
        ran.host_line(),
        "ROI = (Gbit/s)^2 / CPU cores: \"ROI\" over the sender and receiver processes, \"ROI host\" over the busy time on the CPUs used (wall time less /proc/stat idle, softirq included); median (min-max)".into(),
    ];
    let names: Vec<String> = rows.iter().map(|r| r.cell.clone()).collect();
    let pick = |f: fn(&MatrixRow) -> Option<Summary>| rows.iter().map(f).collect::<Vec<_>>();
    let hbars = |title: &str, axis: &str, values| Chart::HBars {
        title: title.into(),
        axis: axis.into(),
        names: names.clone(),
        values,
    };
    let ranked = ranking(rows);
    Page {
        title: "firehose lab stream".into(),
        preamble,
        blocks: vec![
            Block::Charts(vec![
                hbars("Throughput", "Gbit/s (median, min-max)", pick(|r| r.gbps)),
                hbars(
                    "CPU: sender + receiver processes",
                    "cores (median, min-max)",
                    pick(|r| r.process_cores),
                ),
                hbars(
                    "ROI = (Gbit/s)^2 / CPU",
                    "Gbit/s^2 per core",
                    pick(|r| r.roi),
                ),
            ]),
            Block::Table(Table {
                title: Some("Cells".into()),
                columns: COLUMNS
                    .iter()
                    .map(|&(h, w)| Column::fixed(h, w, crate::report::page::Align::Left))
                    .collect(),
                rows: rows.iter().map(cells).collect(),
                dim: Vec::new(),
                text: TextTable::Padded {
                    gap: 1,
                    blank_before: false,
                },
            }),
            Block::Terminal(
                std::iter::once("ranking by ROI:".to_string())
                    .chain(ranked.iter().map(|r| {
                        format!(
                            "{:>3}. {:<40} ROI {:>8}  {} Gbit/s",
                            r.rank,
                            r.cell,
                            num(r.roi),
                            num(r.gbps)
                        )
                    }))
                    .collect(),
            ),
            Block::Table(Table {
                title: Some("Ranking by ROI".into()),
                columns: ["rank", "cell", "ROI", "Gbit/s"].map(Column::auto).to_vec(),
                rows: ranked
                    .iter()
                    .map(|r| vec![r.rank.to_string(), r.cell.clone(), num(r.roi), num(r.gbps)])
                    .collect(),
                dim: Vec::new(),
                text: TextTable::Hidden,
            }),
            Block::List(List {
                title: "Against iperf3".into(),
                items: peer_ratios(m, rows),
                text: TextList::prefixed(""),
            }),
            Block::List(List {
                title: "Link settings, as read back".into(),
                items: m.blocks.iter().map(block_line).collect(),
                text: TextList::Hidden,
            }),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::super::cell_name;
    use super::*;
    use crate::study::CellRun;
    use firehose_stream::{RecvMode, SendMode};

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
        let mut m = StreamMatrix::new(vec![1500], vec![Profile::Base], vec![fh, zcrx, peer]);
        m.blocks.push(BlockRecord {
            mtu: 1500,
            profile: Profile::Base,
            requested: Profile::Base.settings(1500),
            applied: Vec::new(),
            before: Vec::new(),
            restored: Vec::new(),
            error: None,
        });
        let c = |e: &Engine| cell_name(1500, Profile::Base, e);
        let run = |e: Engine, trials: Vec<MatrixTrial>, skipped: Option<&str>| CellRun {
            name: c(&e),
            cell: Cell {
                mtu: 1500,
                profile: Profile::Base,
                engine: e,
            },
            reps: (1..=trials.len()).collect(),
            trials,
            skipped: skipped.map(String::from),
            failures: Vec::new(),
        };
        let mut ran = crate::study::tests::ran(vec![
            run(
                fh,
                vec![trial(c(&fh), 20.0, 1.0), trial(c(&fh), 10.0, 1.0)],
                None,
            ),
            run(zcrx, Vec::new(), Some("EOPNOTSUPP")),
            run(peer, vec![trial(c(&peer), 10.0, 1.0)], None),
        ]);
        ran.repetitions = 2;
        let r = rows(&m, &ran);
        assert_eq!(r.len(), 3);
        // ROI per trial: 400 and 100, median 250; iperf3 100.
        assert_eq!(r[0].roi.unwrap().median, 250.0);
        assert_eq!(r[1].unsupported.as_deref(), Some("EOPNOTSUPP"));
        let ranked: Vec<String> = ranking(&r).into_iter().map(|x| x.cell).collect();
        assert_eq!(
            ranked,
            ["1500 base firehose uring/copy", "1500 base iperf3"]
        );
        assert_eq!(
            peer_ratios(&m, &r),
            ["MTU 1500 base: ROI of the best firehose pair (firehose uring/copy) / iperf3: 250 / 100 = 2.50x"]
        );
        let p = page(&m, &ran, &r);
        let md = p.markdown();
        assert!(
            md.contains("| 1 | 1500 base firehose uring/copy | 250 | 15.0 |"),
            "{md}"
        );
        assert!(md.contains("| unsupported: EOPNOTSUPP |"), "{md}");
        assert_eq!(p.html().unwrap().matches("<svg").count(), 3);
        let t = p.text();
        assert!(
            t.contains("ranking by ROI:\n  1. 1500 base firehose uring/copy"),
            "{t}"
        );
        assert!(t.contains("  2. 1500 base iperf3"), "{t}");
        assert!(!t.contains("Link settings"), "{t}");
    }
}
