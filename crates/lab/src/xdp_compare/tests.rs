//! Tests of the cells and the table.

use super::*;

fn opts(ios: &[&str]) -> XdpCompareOptions {
    XdpCompareOptions {
        bin: "firehose".into(),
        ios: ios.iter().map(|s| s.to_string()).collect(),
        repetitions: 3,
        duration_s: 5,
        warmup_s: 1,
        size: 100,
        server_cpu: 0,
        client_cpu: 1,
        flows: 64,
        window: 8,
        workdir: "/tmp/x".into(),
        dns_names: None,
    }
}

#[test]
fn cells_follow_the_asked_paths() {
    let names = |c: Vec<Cell>| c.into_iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(
        names(cells(&opts(&["socket", "xdp"]), "s0", "c0", None)).len(),
        6
    );
    let xdp = cells(&opts(&["xdp"]), "s0", "c0", None);
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
    let uring = cells(&opts(&["uring"]), "s0", "c0", None);
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
    let f = DnsFiles {
        zone: "z".into(),
        queries: "q".into(),
    };
    let dns = cells(&opts(&["socket", "xdp"]), "s0", "c0", Some(&f));
    assert_eq!(dns.len(), 6);
    assert!(dns.iter().all(|c| c.group == "dns"));
    assert!(dns.iter().any(|c| c.name == "dns knot xdp <- dnsperf"));
}

fn row(name: &str, tps: f64, host: f64) -> Row {
    let one = |v: f64| Summary::of([v]);
    Row {
        cell: Cell {
            group: "echo",
            name: name.into(),
            server: ServerCmd::Knot { xdp: false },
            driver: Driver::Dnsperf { outstanding: 1 },
        },
        trials: Vec::new(),
        tps: one(tps),
        p50_us: None,
        p99_us: None,
        server_cpu_us_per_txn: one(host / 4.0),
        client_cpu_us_per_txn: None,
        host_cpu_us_per_txn: one(host),
        skipped: None,
    }
}

#[test]
fn the_table_has_a_row_per_cell_and_the_ratios() {
    let mut skipped = row("dns knot xdp <- dnsperf", 0.0, 0.0);
    skipped.skipped = Some("no XDP".into());
    let t = table(&[
        row("serve xdp <- load xdp", 200_000.0, 5.0),
        row("serve socket tuned <- load xdp", 100_000.0, 10.0),
        skipped,
    ]);
    assert!(
        t.contains("| serve xdp <- load xdp | 200000 (200000-200000) | 5.000"),
        "{t}"
    );
    assert!(
        t.contains("| dns knot xdp <- dnsperf | skipped: no XDP"),
        "{t}"
    );
    assert!(
        t.contains("server xdp / socket tuned (same generator): tps 2.00x, host CPU per txn 0.50x, server CPU per txn 0.50x"),
        "{t}"
    );
}
