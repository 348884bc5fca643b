//! `firehose lab sink`, `lab flood` and the XDP_DROP receiver of lab flood, with the real
//! kernel: tiny runs write their cells with packets counted and leave no namespace behind;
//! the drop program drops every packet that reaches the veth (none gets to a socket) and
//! leaves the interface when its holder exits. Needs root (and ethtool); skips otherwise.

use crate::lab_stream::ready;
use crate::lab_veth::{namespaces, pids_in};
use crate::util::{bin, installed, json_of, lab_run, signal_pid, tmp, Netns, Spawned};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `firehose lab ARGS --json-file F` and returns the document and the lab's pid.
fn lab(args: &[&str], tag: &str) -> (Value, u32) {
    let json = tmp(&format!("lab-{tag}.json"));
    let mut c = Command::new(bin());
    c.arg("lab").args(args).arg("--json-file").arg(&json);
    let child = Spawned::bounded(c);
    let pid = child.id();
    let out = child.output(crate::util::LAB_LIMIT);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&json);
    let _ = std::fs::remove_file(&json);
    (v, pid)
}

fn no_namespace_of(pid: u32) {
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.ends_with(&format!("-{pid}")))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The document has exactly these cells, each with packets counted.
fn measured(v: &Value, names: &[&str]) {
    let rows = v["rows"].as_array().unwrap();
    let got: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(got, names, "{v}");
    for r in rows {
        assert!(
            r["pps"]["median"].as_f64().unwrap_or(0.0) > 0.0,
            "no packets: {r}"
        );
    }
}

/// A target line `HEAD` `met: ... = R.RRx` or `not met: ... = R.RRx`: the verdict is the
/// one the printed ratio gives against `want` (either at the rounding edge).
fn verdict_agrees(t: &str, head: &str, want: f64) {
    let rest = t
        .strip_prefix(head)
        .unwrap_or_else(|| panic!("{t:?} starts with {head:?}"));
    let met = if rest.starts_with("met: ") {
        true
    } else if rest.starts_with("not met: ") {
        false
    } else {
        panic!("{t:?}: neither 'met: ' nor 'not met: ' after the head");
    };
    let ratio: f64 = rest
        .split(" = ")
        .nth(1)
        .and_then(|r| r.split('x').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{t:?}: no ' = R.RRx' ratio"));
    if (ratio - want).abs() > 0.005 {
        assert_eq!(
            met,
            ratio >= want,
            "{t:?}: the verdict disagrees with the ratio"
        );
    }
}

#[test]
fn a_tiny_lab_sink_counts_packets_in_every_cell_and_cleans_up() {
    if !ready() {
        return;
    }
    let (v, pid) = lab(
        &[
            "sink",
            "--queues",
            "1",
            "--modes",
            "recvmsg,recvmmsg",
            "--peers",
            "none",
            "--repetitions",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0",
        ],
        "sink",
    );
    measured(&v, &["recvmsg q1", "recvmmsg q1"]);
    for row in v["rows"].as_array().unwrap() {
        assert!(
            row["receiver_cpu_us_per_packet"]["median"]
                .as_f64()
                .unwrap()
                > 0.0,
            "{row}"
        );
    }
    // One profile per mode: kernel symbols, or perf's absence said as such.
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{v}");
    for p in profiles {
        if installed("perf") {
            assert!(
                !p["top_kernel_symbols"].as_array().unwrap().is_empty(),
                "{p}"
            );
        } else {
            assert!(p["error"].as_str().unwrap().contains("perf"), "{p}");
        }
    }
    let targets: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    verdict_agrees(
        targets[0],
        "q1: best sink mode per receiving CPU >= 1.5x recvmsg: ",
        1.5,
    );
    assert!(
        targets[1].contains("uring against recvmmsg: not measured"),
        "{targets:?}"
    );
    no_namespace_of(pid);
}

#[test]
fn a_tiny_lab_flood_counts_what_each_mode_sent_and_cleans_up() {
    if !ready() {
        return;
    }
    let (v, pid) = lab(
        &[
            "flood",
            "--frames",
            "64",
            "--modes",
            "sendto,packet",
            "--peers",
            "none",
            "--repetitions",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0",
        ],
        "flood",
    );
    measured(&v, &["sendto 64B", "packet 64B"]);
    let t = v["targets"][0].as_str().unwrap();
    verdict_agrees(t, "64B: flood packet >= 2x sendto pps per CPU: ", 2.0);
    no_namespace_of(pid);
}

fn sh(script: &str) -> String {
    let o = Command::new("sh").args(["-ec", script]).output().unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn flood(ns: &str, target: &str, count: &str) {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, bin(), "flood", "--target", target])
        .args([
            "--io", "sendto", "--count", count, "--rate", "20k", "--quiet", "-J",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(f["sent"], count.parse::<u64>().unwrap(), "{f}");
}

#[test]
fn the_xdp_drop_receiver_drops_everything_and_goes_with_its_holder() {
    if !ready() {
        return;
    }
    let id = std::process::id();
    // Two namespaces joined by va/vb, deleted on drop after what runs in them (declared
    // later, dropped first).
    let (na, nb) = (Netns::new("xda"), Netns::new("xdb"));
    let sub = id % 200 + 20;
    let (a, b) = (na.name.as_str(), nb.name.as_str());
    let (addr_a, addr_b) = (format!("10.203.{sub}.1"), format!("10.203.{sub}.2"));
    sh(&format!(
        "ip -n {a} link add va type veth peer name vb netns {b}
         ip -n {a} addr add {addr_a}/24 dev va; ip -n {b} addr add {addr_b}/24 dev vb
         ip -n {a} link set va up; ip -n {b} link set vb up"
    ));
    // ARP replies would be dropped too: the sender gets the neighbour entry by hand.
    let mac = sh(&format!("ip netns exec {b} cat /sys/class/net/vb/address"));
    sh(&format!(
        "ip -n {a} neigh replace {addr_b} lladdr {mac} dev va nud permanent"
    ));
    let mut holder = nb.firehose(&["lab", "xdp-drop", "--iface", "vb"]);
    holder.stdout(Stdio::piped());
    let mut holder = Spawned::of(holder.spawn().unwrap());
    let holder_pid = holder.id();
    let mut line = String::new();
    BufReader::new(holder.child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("drops every packet on vb"), "{line}");
    assert!(sh(&format!("ip -n {b} link show vb")).contains("xdp"));
    let port = 9700 + (id % 200) as u16;
    let target = format!("{addr_b}:{port}");
    let mut sink = nb.firehose(&["sink", "--listen", &target]);
    sink.args(["--duration", "6", "--quiet", "-J"])
        .stdout(Stdio::piped());
    let sink = Spawned::of(sink.spawn().unwrap());
    let sink_pid = sink.id();
    crate::util::wait_for_udp_port(sink_pid, port, Duration::from_secs(30));
    let tx = || -> u64 {
        sh(&format!(
            "ip netns exec {a} cat /sys/class/net/va/statistics/tx_packets"
        ))
        .parse()
        .unwrap()
    };
    let tx0 = tx();
    flood(a, &target, "300");
    assert!(tx() - tx0 >= 300, "the datagrams left the sender");
    // The holder goes: the program goes with it, and datagrams reach the socket again.
    signal_pid(holder_pid, "TERM");
    assert!(holder.wait(Duration::from_secs(30)).success());
    assert!(!sh(&format!("ip -n {b} link show vb")).contains("xdp"));
    flood(a, &target, "200");
    let out = sink.output(Duration::from_secs(30));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["packets"], 200,
        "only the datagrams sent after detaching arrive: {v}"
    );
}

#[test]
fn ctrl_c_mid_flood_leaves_no_namespace_program_or_process() {
    if !ready() {
        return;
    }
    let json = tmp("lab-flood-int.json");
    let mut c = Command::new(bin());
    c.args([
        "lab", "flood", "--frames", "64", "--modes", "sendto", "--peers", "none",
    ])
    .args(["--repetitions", "5", "--duration", "5", "--json-file"])
    .arg(&json);
    let child = Spawned::bounded(c);
    let id = child.id();
    let srv = format!("fh-srv-{id}");
    // Wait until the drop program is on the server veth and the flood runs.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while seen.len() < 2
        || !sh(&format!("ip -n {srv} link show 2>/dev/null || true")).contains("xdp")
    {
        // The child is stopped when dropped by the panic.
        assert!(
            Instant::now() < deadline,
            "lab flood never attached its receiver"
        );
        seen = pids_in(&srv);
        seen.extend(pids_in(&format!("fh-cli-{id}")));
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_pid(id, "INT");
    let out = child.output(Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    no_namespace_of(id);
    for pid in seen {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} of the run outlived it"
        );
    }
    assert!(!json.exists(), "an interrupted run writes no results");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["lab", "sink", "--modes", "recvmsg,bogus"][..],
        &["lab", "flood", "--frames", "65"],
        &["lab", "flood", "--peers", "netperf"],
        &["lab", "sink", "--frame", "100"],
        &["lab", "sink", "--duration", "0.5"],
    ] {
        let o = lab_run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
