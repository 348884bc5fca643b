//! `firehose lab sink` beyond one receive queue and `lab sink`/`lab flood` with their peers
//! (docs/lab.md), with a fractional `--duration` (the README: every subcommand takes
//! `2.5s`): every cell is measured (packets counted) or, for a peer that is not installed,
//! reported as not measured with how to install it; the queue count of each cell is the
//! veth's while it runs (read from `ethtool -l` during the run); nothing is left behind.
//! Needs root and ethtool; skips with a reason otherwise.

use crate::lab_stream::ready;
use crate::lab_veth::{namespaces, pids_in};
use crate::util::{bin, installed, json_of, tmp, Spawned, LAB_LIMIT};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Runs `firehose lab ARGS --json-file F` (bounded); while it runs, `watch(pid)` is called
/// every 20 ms on another thread. Returns the document and the run's output.
fn lab_watched(args: &[&str], tag: &str, watch: impl Fn(u32) + Send + 'static) -> (Value, Output) {
    let json = tmp(&format!("lab-peers-{tag}.json"));
    let mut c = Command::new(bin());
    c.arg("lab").args(args).arg("--json-file").arg(&json);
    let child = Spawned::bounded(c);
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                watch(pid);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    let out = child.output(LAB_LIMIT);
    done.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&json);
    let _ = std::fs::remove_file(&json);
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.ends_with(&format!("-{pid}")))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    (v, out)
}

/// Each row named as `names`, in order; a row of a peer that is not installed (`program`
/// of the pairs in `peers`) is not measured and says how to install it, every other row
/// has packets counted.
fn rows_measured(v: &Value, names: &[&str], peers: &[(&str, &str)]) {
    let rows = v["rows"].as_array().unwrap();
    let got: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(got, names, "{v}");
    for r in rows {
        let name = r["name"].as_str().unwrap();
        let absent = peers
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .filter(|(_, program)| !installed(program));
        match absent {
            Some((_, program)) => {
                let why = r["not_measured"].as_str().unwrap_or_default();
                assert!(
                    why.contains(&format!("{program} not installed")),
                    "{name}: {r}"
                );
            }
            None => assert!(
                r["pps"]["median"].as_f64().unwrap_or(0.0) > 0.0,
                "{name}: no packets counted: {r}"
            ),
        }
    }
}

/// The RX channel count `ethtool -l` reports as current on the server veth of lab run
/// `pid`, when its namespace is up.
fn current_rx(pid: u32) -> Option<u32> {
    let out = Command::new("ip")
        .args(["netns", "exec", &format!("fh-srv-{pid}"), "ethtool", "-l"])
        .arg(format!("fhv0-{pid}"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let current = text.split("Current hardware settings:").nth(1)?;
    current
        .lines()
        .find_map(|l| l.trim().strip_prefix("RX:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The `--threads` of a `firehose flood` running in lab run `pid`'s client namespace (a
/// lab sink cell's sender: one thread per receive queue of the cell).
fn flood_threads(pid: u32) -> Option<u32> {
    pids_in(&format!("fh-cli-{pid}")).into_iter().find_map(|p| {
        let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
        let args: Vec<String> = cmd
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a == "flood") {
            return None;
        }
        let i = args.iter().position(|a| a == "--threads")?;
        args.get(i + 1)?.parse().ok()
    })
}

#[test]
fn lab_sink_over_two_queues_with_its_peers_and_a_fractional_duration() {
    if !ready() {
        return;
    }
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let s = seen.clone();
    let (v, out) = lab_watched(
        &[
            "sink",
            "--queues",
            "2",
            "--modes",
            "recvmsg,xdp",
            "--peers",
            "sockperf,udp_sink",
            "--repetitions",
            "1",
            "--duration",
            "1.5",
            "--warmup",
            "0",
            "--no-profile",
        ],
        "sink",
        // While a cell's sender runs, the veth has the cell's queue count: (sender threads,
        // RX channels), read before and after the sender is looked up.
        move |pid| {
            let before = current_rx(pid);
            if let (Some(threads), Some(rx)) = (flood_threads(pid), before) {
                if Some(rx) == current_rx(pid) {
                    s.lock().unwrap().insert((threads, rx));
                }
            }
        },
    );
    assert_eq!(v["duration_s"], 1.5, "{}", v["duration_s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 repetition(s) of 1.5 s"), "{text}");
    rows_measured(
        &v,
        &[
            "recvmsg q1",
            "xdp q1",
            "sockperf sr q1",
            "udp_sink q1",
            "recvmsg q2",
            "xdp q2",
            "sockperf sr q2",
            "udp_sink q2",
        ],
        &[("sockperf", "sockperf"), ("udp_sink", "udp_sink")],
    );
    // The q1 cells ran on one queue, the q2 cells on two.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        BTreeSet::from([(1, 1), (2, 2)]),
        "(sender threads, RX channels) seen during the run"
    );
    let targets: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(
        targets.iter().any(|t| t.starts_with("q2: best sink mode")),
        "a verdict per queue count: {targets:?}"
    );
}

#[test]
fn lab_flood_with_its_peers_and_a_fractional_duration() {
    if !ready() {
        return;
    }
    let (v, out) = lab_watched(
        &[
            "flood",
            "--frames",
            "64",
            "--modes",
            "sendto,xdp",
            "--peers",
            "trafgen,iperf3,sockperf",
            "--repetitions",
            "1",
            "--duration",
            "1.5",
            "--warmup",
            "0",
        ],
        "flood",
        |_| {},
    );
    assert_eq!(v["duration_s"], 1.5, "{}", v["duration_s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 repetition(s) of 1.5 s"), "{text}");
    // sockperf's own warm-up stage lasts over a second: with no lab warm-up its window
    // opens only once it sends (it was measured as 0 pps before).
    rows_measured(
        &v,
        &[
            "sendto 64B",
            "xdp 64B",
            "trafgen 64B",
            "iperf3 -u 64B",
            "sockperf tp 64B",
        ],
        &[
            ("trafgen", "trafgen"),
            ("iperf3", "iperf3"),
            ("sockperf", "sockperf"),
        ],
    );
}
