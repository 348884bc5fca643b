//! `firehose lab compare --proto radius` end to end on loopback: our server and FreeRADIUS
//! on one CPU each in turn, one short repetition of the same generator; every answer
//! validated, accepts and rejects from both, and nothing left running.

use crate::util::{bin, installed, lab_cmd, tmp};
use serde_json::Value;

#[test]
fn radius_compare_gives_a_row_per_server_with_both_verdicts() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
        return;
    }
    if !installed("freeradius") {
        eprintln!("skipped: freeradius is not installed (make peers)");
        return;
    }
    let json = tmp("radius-compare.json");
    let report = tmp("radius-compare-report");
    let mut cmd = std::process::Command::new(bin());
    cmd.args([
        "lab",
        "compare",
        "--proto",
        "radius",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--workers",
        "1",
        "--flows",
        "2",
        "--window",
        "8",
        "--json-file",
    ])
    .arg(&json)
    .arg("--report")
    .arg(&report);
    let out = lab_cmd(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("req/s median (min-max)"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let md = std::fs::read_to_string(report.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&report);
    assert_eq!(v["study"], "compare --proto radius");
    let rows = v["rows"].as_array().unwrap();
    let servers: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(servers, ["firehose", "freeradius"], "{v}");
    for r in rows {
        assert!(r["rps"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["server_cpu_us_per_req"]["median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert!(
            r["host_cpu_us_per_req"]["median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        // The generator checks every answer: the authenticators and the verdict the users
        // file promises; every 4th generated user is rejected by Auth-Type.
        assert_eq!(r["invalid"], 0, "{r}");
        assert!(r["codes"]["Access-Accept"].as_u64().unwrap() > 0, "{r}");
        assert!(r["codes"]["Access-Reject"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(v["trials"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["ratios"][0]
        .as_str()
        .unwrap()
        .starts_with("Access-Requests/s per server CPU, firehose / FreeRADIUS, 1 CPU(s): "));
    assert!(md.contains("| freeradius | thread pool 1 |"), "{md}");
    // The servers went with the run.
    let left = std::process::Command::new("pgrep")
        .args(["-f", &format!("{}", report.display())])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "left running: {:?}", left.stdout);
}
