//! Rendering tests on synthetic trials (the figures are made up; the shapes are not).

use super::*;
use crate::metrics::{Drops, Metrics};
use crate::sample::{UdpDelta, Window};
use crate::server::ServerKind;
use crate::studies::echo::{Defaults, EchoOptions};
use crate::study::{Placement, Skipped};
use firehose_host::procfs::stat::CpuSplit;

pub(crate) fn cell(name: &str) -> Cell {
    Cell {
        name: name.into(),
        describe: format!("what {name} adds"),
        server: ServerKind::PlainEcho { threads: 1 },
        generator: Generator::Firehose,
        knobs: None,
    }
}

pub(crate) fn trial(name: &str, rep: usize, tps: f64, client_bound: bool) -> Trial {
    let cpu = |c: usize, usr: f64, sys: f64, soft: f64| CpuRow {
        cpu: c,
        split: CpuSplit {
            usr,
            sys,
            irq: 0.0,
            soft,
            idle: 100.0 - usr - sys - soft,
            steal: 0.0,
        },
        net_rx: 10,
    };
    let _ = name;
    Trial {
        generator: Generator::Firehose,
        server_command: "firehose serve".into(),
        client_command: "firehose load".into(),
        server_pid: 1,
        tps,
        completed: tps as u64,
        lost: 1,
        latency_us: Latency {
            min: Some(5.0),
            p50: Some(20.0 + rep as f64),
            p90: Some(30.0),
            p99: Some(60.0),
            p999: Some(120.0),
            p9999: Some(400.0),
            max: Some(900.0),
            mean: Some(25.0),
        },
        metrics: Metrics {
            mbps: crate::metrics::wire_mbps(tps, 100),
            server_cpu_us_per_txn: Some(1e6 / tps),
            client_cpu_us_per_txn: Some(0.5e6 / tps),
            host_cpu_us_per_txn: Some(2e6 / tps),
            server_cpu_util: 0.8,
            client_cpu_util: Some(0.99),
            syscalls_per_txn: Some(2.0),
            syscalls_source: "engine".into(),
            client_bound,
            drops: Drops {
                socket: 3,
                softnet_dropped: 1,
                ..Default::default()
            },
        },
        window: Window {
            seconds: 1.0,
            all: CpuSplit {
                usr: 10.0,
                sys: 40.0,
                irq: 0.0,
                soft: 30.0,
                idle: 20.0,
                steal: 0.0,
            },
            cpus: vec![cpu(0, 5.0, 60.0, 30.0), cpu(1, 20.0, 30.0, 10.0)],
            softnet: vec![crate::sample::SoftnetDelta {
                cpu: 0,
                processed: 2000,
                dropped: 1,
                time_squeeze: 2,
                received_rps: 3,
            }],
            udp_server: UdpDelta::default(),
            udp_client: None,
            socket_drops: 3,
            host_cpu_s: Some(2.0),
            server_cpu_s: 0.8,
            client_cpu_s: Some(0.99),
        },
        knobs: None,
        placement_seen: Default::default(),
        server_stats: None,
        generator_report: serde_json::json!({"tps": tps}),
        loss: None,
    }
}

/// Two cells (shared, reuseport) of three repetitions each, as a run hands them back.
pub(crate) fn cell_runs() -> Vec<CellRun<Cell, Trial>> {
    let mut shared0 = trial("shared", 0, 100_000.0, false);
    shared0.knobs = Some(crate::topology::KnobState {
        queues: 2,
        server_gro: false,
        client_gro: true,
        server_rps_cpus: vec!["1".into(), "1".into()],
        server_xps_cpus: vec!["1".into(), "0".into()],
        client_xps_cpus: vec!["2".into(), "0".into()],
        server_rp_filter: 0,
    });
    let run = |name: &str, trials: Vec<Trial>| CellRun {
        name: name.into(),
        cell: cell(name),
        reps: (1..=trials.len()).collect(),
        trials,
        skipped: None,
        failures: Vec::new(),
    };
    vec![
        run(
            "shared",
            vec![
                shared0,
                trial("shared", 1, 102_000.0, false),
                trial("shared", 2, 98_000.0, false),
            ],
        ),
        run(
            "reuseport",
            vec![
                trial("reuseport", 0, 250_000.0, false),
                trial("reuseport", 1, 255_000.0, true),
                trial("reuseport", 2, 245_000.0, false),
            ],
        ),
    ]
}

pub(crate) fn echo() -> Echo {
    let d = Defaults {
        flows: 4,
        window: Some(8),
        rate: None,
        pins: None,
    };
    let o = EchoOptions {
        duration_s: 1,
        warmup_s: Some(0),
        ..EchoOptions::default()
    };
    let p = Placement {
        server_cpus: vec![0],
        client_cpus: vec![1],
    };
    Echo::new(&o, d, &p).unwrap()
}

fn report() -> (Ran<Cell, Trial>, Vec<Row>, Page) {
    let mut ran = crate::study::tests::ran(cell_runs());
    ran.repetitions = 3;
    ran.skipped = vec![Skipped {
        name: "rps".into(),
        reason: "needs veth".into(),
    }];
    ran.notes = vec!["a <note> & more".into()];
    let mut r = rows(&ran.cells);
    let first = r[0].clone();
    r[1].compare_with(&first);
    let page = page("ladder", &echo(), &ran, &r, &[]);
    (ran, r, page)
}

#[test]
fn rows_take_medians_and_verdicts() {
    let (_, rows, _) = report();
    let r = &rows[1];
    assert_eq!(r.tps.unwrap().median, 250_000.0);
    assert_eq!(
        (r.tps.unwrap().min, r.tps.unwrap().max),
        (245_000.0, 255_000.0)
    );
    assert!((r.gain.unwrap() - 2.5).abs() < 1e-9);
    assert_eq!(r.verdict, Effect::Helped);
    assert!(r.client_bound, "one client-bound repetition marks the row");
    assert_eq!(r.kernel_drops.unwrap().median, 4.0);
    // The per-CPU split and latency come from the median repetition (rep 0 for 250k).
    assert_eq!(r.latency_us.p50, Some(20.0));
    assert_eq!(r.cpus.len(), 2);
}

#[test]
fn table_and_markdown_show_every_row() {
    let (_, _, p) = report();
    let t = p.text();
    assert!(
        t.contains("shared") && t.contains("reuseport [client-bound]"),
        "{t}"
    );
    assert!(t.contains("250.0k (245.0k-255.0k)"), "{t}");
    assert!(t.contains("x2.50") && t.contains("helped"), "{t}");
    assert!(t.contains("skipped rps: needs veth"), "{t}");
    assert!(t.contains("note: a <note> & more"), "{t}");
    assert!(t.contains("  4/1  "), "drops and lost are counts: {t}");
    assert!(
        !t.contains("NET_RX/s"),
        "the per-CPU table is for the pages: {t}"
    );
    let m = p.markdown();
    assert!(m.contains("| shared |"), "{m}");
    assert!(m.contains("c0 5/60/30 c1 20/30/10"), "{m}");
    assert!(
        m.contains("- `shared`: GRO off/on (server/client), rps_cpus [1 1], server xps_cpus [1 0], client xps_cpus [2 0], rp_filter 0"),
        "{m}"
    );
    // sar-style rows: 10 NET_RX and 2000 packets in a 1 s window.
    assert!(
        m.contains("| shared | 0 | 5.0 | 60.0 | 0.0 | 30.0 | 5.0 | 10 | 2.0k | 1 | 2 | 3 |"),
        "{m}"
    );
    assert!(
        m.contains("| shared | 1 | 20.0 | 30.0 | 0.0 | 10.0 | 40.0 | 10 | - | - | - | - |"),
        "{m}"
    );
}

#[test]
fn html_is_self_contained_with_three_charts() {
    let (_, _, p) = report();
    let h = p.html().unwrap();
    assert_eq!(h.matches("<svg").count(), 3);
    assert!(!h.contains("<script"), "no scripts");
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(
            !h.contains(fetch),
            "the page must not fetch anything: {fetch}"
        );
    }
    assert!(h.contains("a &lt;note&gt; &amp; more"));
    assert!(h.contains("Transactions per second"));
    assert!(
        h.contains("<th>NET_RX/s</th>") && h.contains("<td>2.0k</td>"),
        "per-CPU table"
    );
}
