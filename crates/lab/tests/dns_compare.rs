//! A short real comparison: every server answers both drivers, figures come back for
//! every row, and nothing is left running or on disk afterwards.

use firehose_lab::cmd::installed;
use firehose_lab::dns_compare::{run, DnsCompareOptions, Driver, ServerKind};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The firehose binary next to this test's deps directory, if the workspace built it.
fn firehose_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("firehose");
    bin.exists().then_some(bin)
}

#[test]
fn short_comparison_gives_figures_for_every_row_and_cleans_up() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
        return;
    }
    let mut servers = vec![];
    let mut drivers = vec![];
    let bin = firehose_bin();
    match &bin {
        Some(_) => {
            servers.push(ServerKind::Firehose);
            drivers.push(Driver::Firehose);
        }
        None => eprintln!("note: target/*/firehose not built; comparing peers only"),
    }
    for (kind, prog) in [(ServerKind::Knot, "knotd"), (ServerKind::Nsd, "nsd")] {
        if installed(prog) {
            servers.push(kind);
        } else {
            eprintln!("note: {prog} not installed; left out");
        }
    }
    if installed("dnsperf") {
        drivers.push(Driver::Dnsperf);
    }
    if servers.is_empty() || drivers.is_empty() {
        eprintln!("skipped: no server or no driver available");
        return;
    }
    let workdir = std::env::temp_dir().join(format!("fh-dns-compare-test-{}", std::process::id()));
    let opts = DnsCompareOptions {
        firehose: bin.unwrap_or_default(),
        servers: servers.clone(),
        drivers: drivers.clone(),
        workers: vec![1, 2],
        server_cpus: vec![0],
        client_cpus: vec![1],
        repetitions: 1,
        duration: Duration::from_millis(500),
        names: 200,
        queries: 1000,
        workdir: workdir.clone(),
        ..DnsCompareOptions::default()
    };
    let report = run(&opts).expect("comparison runs");
    assert_eq!(report.rows.len(), servers.len() * drivers.len());
    for r in &report.rows {
        assert!(
            r.qps.median > 1000.0,
            "{:?} {:?}: {} q/s",
            r.server,
            r.driver,
            r.qps.median
        );
        let cpu = r.server_cpu_us_per_query.expect("server CPU measured");
        assert!(cpu > 0.0 && cpu < 1000.0, "{cpu}");
        assert!(r.client_cpu_us_per_query.is_some());
        assert_eq!(
            r.lost, 0,
            "{:?} {:?} lost queries on loopback",
            r.server, r.driver
        );
        assert_eq!(
            r.p50_us.is_some(),
            r.driver == Driver::Firehose,
            "only our load gives percentiles"
        );
    }
    // Two workers cannot be pinned apart from the client on one server CPU.
    assert_eq!(report.skipped.len(), servers.len());
    let table = report.render_table();
    assert!(table.contains("QPS median (min-max)"), "{table}");
    assert!(!workdir.exists(), "work dir removed");
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !ps.contains(workdir.to_str().unwrap()),
        "a server outlived the run:\n{ps}"
    );
}
