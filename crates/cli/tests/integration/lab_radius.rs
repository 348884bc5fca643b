//! `firehose lab compare --proto radius` end to end on loopback: our server and FreeRADIUS
//! on one CPU each in turn, one short repetition of the same generator; every answer
//! validated, accepts and rejects from both, and nothing left running.

use crate::util::{installed, lab_compare, squeezed_serve, tempdir};
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
    assert_eq!(v["study"], "compare --proto radius");
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
    let run = lab_compare("radius", &["--flows", "2", "--window", "8"]);
    assert!(
        run.stdout.contains("req/s median (min-max)"),
        "{}",
        run.stdout
    );
    let v = &run.doc;
    both_servers_validated(v);
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
    assert!(
        run.md.contains("| freeradius | thread pool 1 |"),
        "{}",
        run.md
    );
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
    let dir = tempdir("lab-loss");
    let wrapper = squeezed_serve(&dir).display().to_string();
    let run = lab_compare(
        "radius",
        &[
            "--servers",
            "firehose",
            "--flows",
            "16",
            "--window",
            "16",
            "--firehose-bin",
            &wrapper,
        ],
    );
    let v = &run.doc;
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
    assert!(run.stdout.contains("where the loss went"), "{}", run.stdout);
    assert!(run.stdout.contains(rcvbuf), "{}", run.stdout);
    assert!(
        run.md.contains("Where the loss went") && run.md.contains(rcvbuf),
        "{}",
        run.md
    );
    assert!(run.html.contains("Where the loss went"), "{}", run.html);
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
    let run = lab_compare(
        "radius",
        &["--topology", "veth", "--flows", "2", "--window", "8"],
    );
    let v = &run.doc;
    assert_eq!(v["topology"], "veth", "{v}");
    assert!(
        v["notes"].to_string().contains("10.199.0.2"),
        "the clients.conf names the veth client: {v}"
    );
    both_servers_validated(v);
}
