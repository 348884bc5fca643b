//! `firehose lab compare --proto dns` end to end on loopback: our responder, knotd and nsd
//! driven by dnsperf and `firehose load`, one short repetition; a peer that is not
//! installed is skipped with an install hint, not failed.

use crate::util::{bin, installed, lab_cmd, lab_run, rcvbuf_line, squeezed_serve, tempdir, tmp};
use serde_json::Value;
use std::path::Path;

/// `lab compare --proto dns` for one repetition of one second on a small zone, writing its
/// JSON to `json`, followed by `extra`.
fn short_dns_run(json: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "lab",
        "compare",
        "--proto",
        "dns",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--names",
        "200",
        "--query-count",
        "1000",
        "--json-file",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(json.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// Runs it and returns the JSON it wrote.
fn run_json(args: &[String], json: &Path, path_env: Option<&Path>) -> Value {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(args);
    if let Some(p) = path_env {
        cmd.env("PATH", p);
    }
    let out = lab_cmd(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("QPS median (min-max)"), "{stdout}");
    let v = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let _ = std::fs::remove_file(json);
    v
}

fn rows(v: &Value) -> Vec<(String, String)> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["qps"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["server_cpu_us_per_query"].as_f64().unwrap() > 0.0, "{r}");
            (
                r["server"].as_str().unwrap().to_string(),
                r["driver"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn two_cpus() -> bool {
    let ok = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if !ok {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
    }
    ok
}

/// Two CPUs, and knotd, nsd and dnsperf installed; otherwise says why not.
fn peers_and_two_cpus() -> bool {
    if !two_cpus() {
        return false;
    }
    match ["knotd", "nsd", "dnsperf"]
        .into_iter()
        .find(|p| !installed(p))
    {
        Some(p) => {
            eprintln!("skipped: {p} is not installed (make peers)");
            false
        }
        None => true,
    }
}

#[test]
fn dns_compare_gives_a_row_per_server_and_driver() {
    if !peers_and_two_cpus() {
        return;
    }
    let json = tmp("dns-compare.json");
    let report = tmp("dns-compare-report");
    let mut args = short_dns_run(&json, &["--workers", "1", "--report"]);
    args.push(report.display().to_string());
    let v = run_json(&args, &json, None);
    let mut got = rows(&v);
    got.sort();
    let mut want = vec![];
    for s in ["firehose", "knot", "nsd"] {
        for d in ["dnsperf", "firehose"] {
            want.push((s.to_string(), d.to_string()));
        }
    }
    assert_eq!(got, want);
    assert_eq!(v["repetitions"], 1);
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let _ = std::fs::remove_dir_all(&report);
    assert!(
        md.contains("| knotd | udp-workers 1, socket-affinity on | dnsperf |"),
        "{md}"
    );
}

#[test]
fn dns_compare_over_tcp_drives_every_server_with_dnsperf() {
    if !peers_and_two_cpus() {
        return;
    }
    let json = tmp("dns-compare-tcp.json");
    let args = short_dns_run(
        &json,
        &[
            "--workers",
            "1",
            "--tcp-connections",
            "4",
            "--window",
            "64",
            "--no-syscalls",
        ],
    );
    let v = run_json(&args, &json, None);
    let mut got = rows(&v);
    got.sort();
    let want: Vec<(String, String)> = ["firehose", "knot", "nsd"]
        .iter()
        .map(|s| (s.to_string(), "dnsperf".to_string()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(v["tcp"]["connections"], 4);
    assert!(
        v["rows"].as_array().unwrap().iter().all(|r| r["lost"] == 0),
        "{v}"
    );
}

#[test]
fn dns_compare_skips_peers_that_are_not_installed() {
    if !two_cpus() {
        return;
    }
    // A PATH holding only the tools the run itself needs: knotd, nsd and dnsperf are absent.
    let bin = tmp("dns-compare-path");
    std::fs::create_dir_all(&bin).unwrap();
    // The programs themselves: `command -v kill` would name the shell's builtin.
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in ["sh", "taskset", "kill", "cat", "sleep", "perf"] {
        if let Some(p) = std::env::split_paths(&path)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
        {
            std::os::unix::fs::symlink(&p, bin.join(tool)).unwrap();
        }
    }
    let json = tmp("dns-compare-skip.json");
    let v = run_json(
        &short_dns_run(&json, &["--workers", "1", "--no-syscalls"]),
        &json,
        Some(&bin),
    );
    let _ = std::fs::remove_dir_all(&bin);
    assert_eq!(rows(&v), [("firehose".into(), "firehose".into())]);
    let skipped: Vec<String> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s["name"].as_str().unwrap(),
                s["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            "knotd: not installed (apt-get install -y knot)",
            "nsd: not installed (apt-get install -y nsd)",
            "dnsperf: not installed (apt-get install -y dnsperf)"
        ]
    );
}

#[test]
fn flags_that_mean_nothing_for_dns_are_refused() {
    for (args, says) in [
        (&["--proto", "dns", "--warmup", "0"][..], "--warmup"),
        (&["--proto", "dns", "--size", "100"][..], "--size"),
        (
            &["--proto", "dns", "--topology", "veth"][..],
            "loopback only",
        ),
        (&["--names", "10"][..], "--proto dns"),
        (&["--workers", "1,2"][..], "--proto dns"),
        (&["--tcp-connections", "8"][..], "--proto dns"),
        (
            &["--proto", "dns", "--queries-per-conn", "1"][..],
            "needs --tcp-connections",
        ),
        (
            &[
                "--proto",
                "dns",
                "--tcp-connections",
                "8",
                "--generators",
                "firehose",
            ][..],
            "over TCP use the dnsperf generator",
        ),
        (
            &[
                "--proto",
                "dns",
                "--tcp-connections",
                "200",
                "--window",
                "100",
            ][..],
            "use 1 to 100 connections",
        ),
        (
            &["--proto", "dns", "--firehose-bin", "/nonexistent/firehose"][..],
            "--firehose-bin /nonexistent/firehose: no such file",
        ),
    ] {
        let mut a = vec!["lab", "compare"];
        a.extend_from_slice(args);
        let out = lab_run(&a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
}

/// The library's comparison with the binary cargo built for this test: every server
/// answers every driver with figures, what was lost is reported (peers at saturation may
/// drop), and nothing is left running or on disk afterwards.
#[test]
fn library_comparison_gives_figures_for_every_row_and_cleans_up() {
    use firehose_lab::server::ServerKind;
    use firehose_lab::studies::dns::{DnsCompare, Driver};
    use firehose_lab::study::Placement;
    use firehose_lab::study::{self, Study};
    use std::time::Duration;
    if !two_cpus() {
        return;
    }
    let mut servers = vec![ServerKind::FirehoseDns];
    let mut drivers = vec![Driver::Firehose];
    for (kind, prog) in [(ServerKind::Knot, "knotd"), (ServerKind::Nsd, "nsd")] {
        if installed(prog) {
            servers.push(kind);
        } else {
            eprintln!("note: {prog} not installed; left out");
        }
    }
    if installed("dnsperf") {
        drivers.push(Driver::Dnsperf);
    } else {
        eprintln!("note: dnsperf not installed; left out");
    }
    // The run's private work directory: fh-lab-<this pid>-dns-compare-<random>.
    let prefix = format!("fh-lab-{}-dns-compare-", std::process::id());
    let workdirs = || -> Vec<String> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.path().display().to_string())
            .filter(|p| p.contains(&prefix))
            .collect()
    };
    let mut dns = DnsCompare::default();
    dns.servers = servers.clone();
    dns.drivers = drivers.clone();
    dns.workers = vec![1, 2];
    dns.duration = Duration::from_millis(500);
    dns.names = 200;
    dns.queries = 1000;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ctx = study::Context {
        bin: env!("CARGO_BIN_EXE_firehose").into(),
        stop: &stop,
        logs: None,
        placement: Placement {
            server_cpus: vec![0],
            client_cpus: vec![1],
        },
        repetitions: 1,
        guess_s: 1.0,
    };
    let ran = study::run(&mut dns, ctx, &mut |_| {}).expect("comparison runs");
    let rows = dns.rows(&ran);
    assert_eq!(rows.len(), servers.len() * drivers.len());
    for r in &rows {
        let what = format!("{} / {}", r.server.name(), r.driver.name());
        assert!(r.qps.median > 0.0, "{what}: no queries answered");
        let positive = |x: Option<f64>| x.is_some_and(|v| v > 0.0);
        assert!(positive(r.server_cpu_us_per_query), "{what}: {r:?}");
        assert!(positive(r.client_cpu_us_per_query), "{what}: {r:?}");
        assert_eq!(
            r.p50_us.is_some(),
            r.driver == Driver::Firehose,
            "only our load gives percentiles"
        );
        if r.lost > 0 {
            eprintln!("note: {what} lost {} queries", r.lost);
        }
    }
    // Two workers cannot be pinned apart from the client on one server CPU.
    assert_eq!(ran.skipped.len(), servers.len());
    let table = dns.page(&ran, &rows).text();
    assert!(table.contains("QPS median (min-max)"), "{table}");
    assert_eq!(workdirs(), Vec::<String>::new(), "work dir removed");
    let ps = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(!ps.contains(&prefix), "a server outlived the run:\n{ps}");
}

/// As root, the firehose driver's lost queries are attributed: our server's receive buffer
/// is squeezed (`--firehose-bin` adding `--rcvbuf 1` to `serve`), 100 queries in flight;
/// the summary and the document name SOCKET_RCVBUFF.
#[test]
fn the_firehose_drivers_loss_is_attributed() {
    if !firehose_sys::cpu::is_root() {
        eprintln!("skipped: the drop watch that attributes loss needs root");
        return;
    }
    if !two_cpus() {
        return;
    }
    let dir = tempdir("dns-loss");
    let json = dir.join("dns.json");
    let wrapper = squeezed_serve(&dir);
    let args = short_dns_run(
        &json,
        &[
            "--servers",
            "firehose",
            "--generators",
            "firehose",
            "--workers",
            "1",
            "--no-syscalls",
            "--firehose-bin",
            wrapper.to_str().unwrap(),
        ],
    );
    let out = lab_run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lost = v["trials"][0]["result"]["lost"].as_u64().unwrap();
    assert!(lost > 0, "the squeezed server lost nothing: {v}");
    rcvbuf_line(&v, "load", lost, &text);
}
