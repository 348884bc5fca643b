//! `firehose lab compare --proto radius` end to end on loopback: our server and FreeRADIUS
//! on one CPU each in turn, one short repetition of the same generator; every answer
//! validated, accepts and rejects from both, and nothing left running.

use crate::util::{bin, installed, lab_cmd, tmp};
use serde_json::Value;

/// Two CPUs to pin server and client apart, and FreeRADIUS; otherwise says why not.
fn can_compare() -> bool {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
        return false;
    }
    if !installed("freeradius") {
        eprintln!("skipped: freeradius is not installed (make peers)");
        return false;
    }
    true
}

/// A row per server, firehose first, each with answers, none invalid (the generator checks
/// the authenticators and the verdict the users file promises: every 4th generated user is
/// rejected by Auth-Type), and both verdicts.
fn both_servers_validated(v: &Value) {
    let rows = v["rows"].as_array().unwrap();
    let servers: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(servers, ["firehose", "freeradius"], "{v}");
    for r in rows {
        assert!(r["rps"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["invalid"], 0, "{r}");
        assert!(r["codes"]["Access-Accept"].as_u64().unwrap() > 0, "{r}");
        assert!(r["codes"]["Access-Reject"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn radius_compare_gives_a_row_per_server_with_both_verdicts() {
    if !can_compare() {
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
    both_servers_validated(&v);
    for r in v["rows"].as_array().unwrap() {
        for k in ["server_cpu_us_per_req", "host_cpu_us_per_req"] {
            assert!(r[k]["median"].as_f64().unwrap() > 0.0, "{k}: {r}");
        }
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

/// A lab run that loses requests says where they went: the server's receive buffer is
/// squeezed to the kernel's minimum (through a `--firehose-bin` that adds `--rcvbuf 1` to
/// `serve`), 256 requests are in flight, so the kernel drops requests at the server's
/// socket; the summary, the pages and the document name SOCKET_RCVBUFF at that port.
#[test]
fn lab_loss_is_attributed_in_the_summary_report_and_document() {
    if !firehose_sys::cpu::is_root() {
        eprintln!("skipped: the drop watch that attributes loss needs root");
        return;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
        return;
    }
    let dir = tmp("lab-loss");
    std::fs::create_dir_all(&dir).unwrap();
    let wrapper = dir.join("firehose-small-rcvbuf");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = serve ]; then shift; exec {} serve --rcvbuf 1 \"$@\"; fi\nexec {} \"$@\"\n",
            bin(),
            bin()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let json = dir.join("loss.json");
    let report = dir.join("report");
    let mut cmd = std::process::Command::new(bin());
    cmd.args([
        "lab",
        "compare",
        "--proto",
        "radius",
        "--servers",
        "firehose",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--workers",
        "1",
        "--flows",
        "16",
        "--window",
        "16",
        "--firehose-bin",
    ])
    .arg(&wrapper)
    .arg("--json-file")
    .arg(&json)
    .arg("--report")
    .arg(&report);
    let out = lab_cmd(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let md = std::fs::read_to_string(report.join("report.md")).unwrap_or_default();
    let html = std::fs::read_to_string(report.join("report.html")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let lost = v["trials"][0]["lost"].as_u64().unwrap();
    assert!(lost > 0, "the squeezed server lost nothing: {v}");
    let a = &v["loss_attribution"][0];
    assert!(a["cell"].as_str().unwrap().starts_with("firehose"), "{v}");
    assert_eq!(a["by"], "load", "{a}");
    assert_eq!(a["lost"], lost, "{a}");
    let lines: Vec<&str> = a["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let rcvbuf = lines
        .iter()
        .find(|l| l.contains(" SOCKET_RCVBUFF at "))
        .unwrap_or_else(|| panic!("no SOCKET_RCVBUFF line: {a}"));
    assert!(a["drops"].as_u64().unwrap() > 0, "{a}");
    // The same line on the terminal, in report.md and in report.html.
    assert!(stdout.contains("where the loss went"), "{stdout}");
    assert!(stdout.contains(rcvbuf), "{stdout}");
    assert!(
        md.contains("Where the loss went") && md.contains(rcvbuf),
        "{md}"
    );
    assert!(html.contains("Where the loss went"), "{html}");
}

/// `--topology veth`: both servers in the server namespace, the generator in the client
/// namespace, the clients.conf naming the veth client address; every answer validated, both
/// verdicts from both servers (teardown after veth runs is lab_veth.rs's).
#[test]
fn radius_compare_runs_across_the_veth_pair() {
    if !crate::util::root_or_skip() {
        return;
    }
    if !can_compare() {
        return;
    }
    let json = tmp("radius-veth.json");
    let mut cmd = std::process::Command::new(bin());
    cmd.args([
        "lab",
        "compare",
        "--proto",
        "radius",
        "--topology",
        "veth",
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
    .arg(&json);
    let out = lab_cmd(cmd);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["topology"], "veth", "{v}");
    assert!(
        v["notes"].to_string().contains("10.199.0.2"),
        "the clients.conf names the veth client: {v}"
    );
    both_servers_validated(&v);
}
