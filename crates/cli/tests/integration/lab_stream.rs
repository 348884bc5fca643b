//! `firehose lab stream` on the veth topology with the real kernel: a tiny matrix writes
//! its cells, ranking and report; link settings read back as asked inside each cell and as
//! before after it; Ctrl-C mid-run leaves no namespace, link or process behind. Needs root
//! (and ethtool); skips with a reason otherwise.

use crate::lab_veth::{namespaces, pids_in};
use crate::util::{bin, installed, json_of, lab_run, root_or_skip, stderr, tempdir, tmp, Spawned};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// Root and ethtool, or a printed reason to skip.
pub(crate) fn ready() -> bool {
    if !root_or_skip() {
        return false;
    }
    if !installed("ethtool") {
        eprintln!("skipped: ethtool is not installed (apt-get install -y ethtool)");
        return false;
    }
    true
}

fn lab_stream(extra: &[&str], json: &std::path::Path) -> Value {
    let mut args = vec![
        "lab",
        "stream",
        "--peers",
        "none",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--flows",
        "2",
        "--json-file",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = lab_run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_of(json);
    let _ = std::fs::remove_file(json);
    v
}

#[test]
fn a_tiny_matrix_reports_its_cells_and_ranking() {
    if !ready() {
        return;
    }
    let dir = tempdir("lab-stream-report");
    let d = dir.to_str().unwrap();
    let v = lab_stream(
        &[
            "--mtus",
            "1500",
            "--cells",
            "base",
            "--send",
            "copy,sendfile",
            "--recv",
            "copy",
            "--report",
            d,
        ],
        &tmp("lab-stream-tiny.json"),
    );
    let rows = v["rows"].as_array().unwrap();
    let cells: Vec<&str> = rows.iter().map(|r| r["cell"].as_str().unwrap()).collect();
    assert_eq!(
        cells,
        [
            "1500 base firehose copy/copy",
            "1500 base firehose sendfile/copy"
        ]
    );
    for r in rows {
        assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["roi"]["median"].as_f64().unwrap() > 0.0, "{r}");
    }
    let ranking = v["ranking"].as_array().unwrap();
    assert_eq!(ranking.len(), 2, "{ranking:?}");
    assert!(ranking[0]["roi"].as_f64() >= ranking[1]["roi"].as_f64());
    // Every trial crossed the veth in the namespaces, over IPv6.
    for t in v["trials"].as_array().unwrap() {
        let cmd = t["sender_command"].as_str().unwrap();
        assert!(cmd.starts_with("ip netns exec fh-cli-"), "{cmd}");
        assert!(cmd.contains("[fd00:199::1]:"), "{cmd}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Ranking by ROI"), "{md}");
    assert!(md.contains("| 1 | 1500 base firehose "), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "throughput, CPU and ROI charts"
    );
    assert!(dir.join("results.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn settings_read_back_inside_each_cell_and_as_before_after_it() {
    if !ready() {
        return;
    }
    let v = lab_stream(
        &[
            "--mtus",
            "9000,4168",
            "--cells",
            "gro-off,tso-off,big-tcp-128k",
            "--send",
            "copy",
            "--recv",
            "copy",
        ],
        &tmp("lab-stream-restore.json"),
    );
    let blocks = v["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 6);
    let first_before = &blocks[0]["before"];
    for b in blocks {
        let want = &b["requested"];
        assert!(b["error"].is_null(), "{b}");
        for end in b["applied"].as_array().unwrap() {
            assert_eq!(end["mtu"], want["mtu"], "{b}");
            assert_eq!(end["gro"], want["gro"], "{b}");
            assert_eq!(end["tso"], want["tso"], "{b}");
            assert_eq!(end["gso"], want["tso"], "{b}");
            assert_eq!(end["gso_max_size"], want["max_size"], "{b}");
            assert_eq!(end["gro_max_size"], want["max_size"], "{b}");
        }
        // The cell before this one was put back: each starts from the same state...
        assert_eq!(&b["before"], first_before, "{b}");
        // ...and reads back as that state after its own restore.
        assert_eq!(
            b["restored"].as_array().unwrap(),
            std::slice::from_ref(first_before)
        );
    }
    // A veth starts at MTU 1500 without BIG TCP: the restores really changed something.
    for end in first_before.as_array().unwrap() {
        assert_eq!(end["mtu"], 1500);
        assert_eq!(end["gso_max_size"], 65536);
    }
}

/// First words of `ip ARGS` lines (link or namespace names).
fn names(args: &[&str]) -> Vec<String> {
    let out = Command::new("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n).to_string())
        })
        .collect()
}

#[test]
fn ctrl_c_mid_cell_leaves_nothing_behind() {
    if !ready() {
        return;
    }
    let json = tmp("lab-stream-int.json");
    let mut c = Command::new(bin());
    c.args([
        "lab",
        "stream",
        "--mtus",
        "9000",
        "--cells",
        "big-tcp-185k",
        "--send",
        "copy",
        "--recv",
        "copy",
        "--peers",
        "none",
        "--repetitions",
        "3",
        "--duration",
        "30",
        "--flows",
        "2",
        "--json-file",
        json.to_str().unwrap(),
    ]);
    let child = Spawned::bounded(c);
    let id = child.id();
    let (srv, cli) = (format!("fh-srv-{id}"), format!("fh-cli-{id}"));
    let dev = format!("fhv0-{id}");
    // Wait for the sender to run (not the ip and ethtool commands that set the cell up,
    // which run in the namespaces too): the cell's settings are in force then.
    let firehose_in = |ns: &str| {
        pids_in(ns).into_iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "firehose")
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !firehose_in(&cli) || !firehose_in(&srv) {
        // The child is stopped when dropped by the panic.
        assert!(
            Instant::now() < deadline,
            "lab stream never started its sender"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut seen = pids_in(&cli);
    seen.extend(pids_in(&srv));
    let link = Command::new("ip")
        .args(["-n", &srv, "-d", "-j", "link", "show", "dev", &dev])
        .output()
        .unwrap();
    let l: Value = serde_json::from_slice(&link.stdout).unwrap();
    assert_eq!(l[0]["mtu"], 9000, "{l}");
    assert_eq!(l[0]["gso_max_size"], 185000, "{l}");
    let st = Command::new("kill")
        .args(["-s", "INT", &id.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.output(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let nss = namespaces();
    assert!(!nss.contains(&srv) && !nss.contains(&cli), "{nss:?}");
    let links = names(&["-o", "link", "show"]);
    let tag = format!("-{id}");
    assert!(!links.iter().any(|l| l.contains(&tag)), "{links:?}");
    for pid in seen {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} of the run outlived it"
        );
    }
    assert!(!json.exists(), "an interrupted run writes no results");
    let prefix = format!("fh-lab-{id}-");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "its logs are removed: {left:?}");
}
