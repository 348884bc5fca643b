//! `firehose lab compare` end to end on loopback: our profiles against the plain echo under
//! our load, and sockperf's server and client where installed, at one rate; ratios printed;
//! what cannot run is skipped with the reason, not failed.

use crate::util::{installed, lab_run, short_run, tmp};
use serde_json::Value;

#[test]
fn compare_runs_peers_side_by_side_and_prints_ratios() {
    let json = tmp("compare.json");
    let args = [
        "lab",
        "compare",
        "--servers",
        "naive,plain,sockperf",
        "--generators",
        "firehose,sockperf",
        "--rate",
        "2000",
    ];
    let out = lab_run(&short_run(&args, &json));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let names: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let skipped: Vec<(&str, &str)> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(v["load"]["rate"], 2000);
    if installed("sockperf") {
        assert_eq!(
            names,
            [
                "naive/firehose",
                "plain/firehose",
                "plain/sockperf",
                "sockperf/sockperf"
            ]
        );
        assert_eq!(
            skipped.iter().map(|s| s.0).collect::<Vec<_>>(),
            ["sockperf/firehose", "naive/sockperf"]
        );
        let ratios = v["ratios"].as_array().unwrap();
        let has = |what: &str, a: &str, b: &str| {
            ratios.iter().any(|r| {
                r["what"] == what
                    && r["a"] == a
                    && r["b"] == b
                    && r["value"].as_f64().unwrap() > 0.0
            })
        };
        assert!(has("tps", "naive/firehose", "plain/firehose"), "{ratios:?}");
        assert!(
            has(
                "generator client CPU us/txn",
                "plain/firehose",
                "plain/sockperf"
            ),
            "{ratios:?}"
        );
        assert!(
            has("generator p99 us", "plain/firehose", "plain/sockperf"),
            "{ratios:?}"
        );
        let mut counted_by_perf = 0;
        for t in v["trials"].as_array().unwrap() {
            assert!(t["completed"].as_u64().unwrap() > 0, "{}", t["cell"]);
            assert!(
                t["server_cpu_us_per_txn"].as_f64().unwrap() > 0.0,
                "{}",
                t["cell"]
            );
            assert!(
                t["client_cpu_us_per_txn"].as_f64().unwrap() > 0.0,
                "{}",
                t["cell"]
            );
            let source = t["syscalls_source"].as_str().unwrap();
            if t["cell"] == "naive/firehose" {
                assert_eq!(source, "engine", "{}", t["cell"]);
            } else if installed("perf") {
                // perf may fail to attach in time on a loaded host; the row then says so.
                assert!(matches!(source, "perf" | "unknown"), "{}", t["cell"]);
                counted_by_perf += usize::from(source == "perf");
            } else {
                assert_eq!(source, "unknown", "{}", t["cell"]);
            }
        }
        // Without root, perf_event_paranoid usually forbids the tracepoint.
        if !installed("perf") {
            eprintln!(
                "skipping the perf check: perf is not installed (apt-get install -y linux-perf)"
            );
        } else if !firehose_sys::cpu::is_root() {
            eprintln!("skipping the perf check: not root, so perf_event_paranoid may forbid the tracepoint");
        } else {
            assert!(counted_by_perf > 0, "perf is installed but counted no peer");
        }
        let sp = v["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["cell"] == "sockperf/sockperf")
            .unwrap();
        assert!(sp["server_command"]
            .as_str()
            .unwrap()
            .contains("sockperf sr"));
        assert!(sp["latency_us"]["p99"].as_f64().unwrap() > 0.0);
    } else {
        assert_eq!(names, ["naive/firehose", "plain/firehose"]);
        assert!(
            skipped
                .iter()
                .any(|s| s.1.contains("apt-get install -y sockperf")),
            "{skipped:?}"
        );
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("ratios (medians):") && table.contains("skipped "),
        "{table}"
    );
}
