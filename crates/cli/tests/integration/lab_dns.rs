//! `firehose lab compare --proto dns` end to end on loopback: our responder, knotd and nsd
//! driven by dnsperf and `firehose load`, one short repetition; a peer that is not
//! installed is skipped with an install hint, not failed.

use crate::util::{bin, installed, run, tmp};
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
        "--json",
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
    let out = cmd.output().expect("spawn firehose");
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

#[test]
fn dns_compare_gives_a_row_per_server_and_driver() {
    if !two_cpus() {
        return;
    }
    if let Some(p) = ["knotd", "nsd", "dnsperf"]
        .into_iter()
        .find(|p| !installed(p))
    {
        eprintln!("skipped: {p} is not installed (make peers)");
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
fn dns_compare_skips_peers_that_are_not_installed() {
    if !two_cpus() {
        return;
    }
    // A PATH holding only the tools the run itself needs: knotd, nsd and dnsperf are absent.
    let bin = tmp("dns-compare-path");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["sh", "taskset", "kill", "cat", "sleep", "perf"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        if !path.is_empty() {
            std::os::unix::fs::symlink(&path, bin.join(tool)).unwrap();
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
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
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
    ] {
        let mut a = vec!["lab", "compare"];
        a.extend_from_slice(args);
        let out = run(&a);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
}
