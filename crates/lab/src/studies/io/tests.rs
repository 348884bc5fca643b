//! Tests of the cells, the figures and the table.

use super::*;
use crate::report::page::Page as P;

fn opts(ios: &[&str], dns: bool) -> IoCompare {
    IoCompare::new(
        ios.iter().map(|s| s.to_string()).collect(),
        dns.then_some(100),
    )
}

#[test]
fn cells_follow_the_asked_paths() {
    let names = |c: Vec<Cell>| c.into_iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(
        names(cells(&opts(&["socket", "xdp"], false), "s0", "c0")).len(),
        6
    );
    let xdp = cells(&opts(&["xdp"], false), "s0", "c0");
    assert_eq!(xdp.len(), 3);
    assert!(xdp.iter().all(|c| c.server
        == ServerCmd::Firehose(s(&["--io", "xdp", "--iface", "s0", "--profile", "xdp"]))
        || c.group == "rtt"));
    let Driver::Load(args) = &xdp[0].driver else {
        panic!("{:?}", xdp[0].driver)
    };
    assert!(
        args.ends_with(&s(&["--io", "xdp", "--iface", "c0"])),
        "{args:?}"
    );
    let uring = cells(&opts(&["uring"], false), "s0", "c0");
    assert_eq!(
        names(uring.clone()),
        [
            "serve uring tuned <- load xdp",
            "serve uring tuned <- load socket",
            "ping-pong uring (busy poll) <- load socket --spin"
        ]
    );
    assert!(uring.iter().all(|c| matches!(&c.server,
        ServerCmd::Firehose(f) if f.starts_with(&s(&["--io", "uring", "--profile"])))));
    let dns = cells(&opts(&["socket", "xdp"], true), "s0", "c0");
    assert_eq!(
        names(dns.clone()),
        [
            "dns firehose xdp <- load xdp",
            "dns knot xdp <- load xdp",
            "dns knot socket <- load xdp",
            "dns firehose xdp <- dnsperf",
            "dns knot xdp <- dnsperf",
            "dns knot socket <- dnsperf"
        ]
    );
    assert!(dns.iter().all(|c| c.group == "dns"));
    assert_eq!(
        dns[1].server,
        ServerCmd::Dns {
            kind: ServerKind::Knot,
            xdp: true
        }
    );
}

fn row(name: &str, tps: f64, host: f64) -> Row {
    let one = |v: f64| Summary::of([v]);
    Row {
        cell: Cell {
            group: "echo",
            name: name.into(),
            server: ServerCmd::Firehose(Vec::new()),
            driver: Driver::Dnsperf { outstanding: 1 },
        },
        tps: one(tps),
        p50_us: None,
        p99_us: None,
        server_cpu_us_per_txn: one(host / 4.0),
        client_cpu_us_per_txn: None,
        host_cpu_us_per_txn: one(host),
        client_bound: false,
        skipped: None,
    }
}

#[test]
fn the_table_has_a_row_per_cell_and_the_ratios() {
    let mut skipped = row("dns knot xdp <- dnsperf", 0.0, 0.0);
    skipped.skipped = Some("no XDP".into());
    let rows = [
        row("serve xdp <- load xdp", 200_000.0, 5.0),
        row("serve socket tuned <- load xdp", 100_000.0, 10.0),
        skipped,
    ];
    let page = P {
        title: "t".into(),
        preamble: Vec::new(),
        blocks: vec![
            Block::Table(table(&rows)),
            Block::List(List {
                title: "Ratios".into(),
                items: ratios(&rows),
                text: TextList::Lines {
                    heading: None,
                    prefix: String::new(),
                    blank_before: true,
                },
            }),
        ],
    };
    let t = page.text();
    assert!(
        t.starts_with("| cell | tps | host CPU us/txn | server CPU us/txn | client CPU us/txn | p50 us | p99 us |\n|---|"),
        "{t}"
    );
    assert!(
        t.contains("| serve xdp <- load xdp | 200000 (200000-200000) | 5.000"),
        "{t}"
    );
    assert!(
        t.contains("| dns knot xdp <- dnsperf | skipped: no XDP |"),
        "{t}"
    );
    assert!(
        t.contains("\n\nserver xdp / socket tuned (same generator): tps 2.00x, host CPU per txn 0.50x, server CPU per txn 0.50x\n"),
        "{t}"
    );
}
