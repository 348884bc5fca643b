//! `firehose sink --io xdp` and `firehose flood --io xdp` with the real binary and kernel, on
//! a two-queue veth pair between two namespaces the test creates: the sink counts exactly N
//! of N datagrams a kernel socket sends, over IPv4 and IPv6, and its program is gone after
//! the run and after Ctrl-C; the flood's `--count` datagrams all reach a kernel socket with
//! the asked size and one source port per flow; bad input is one line and exit 2 with
//! nothing left attached. Needs root; skips with a reason otherwise.

use crate::util::{json_of, root_or_skip, tmp, Spawned};
use crate::xdp_util::*;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::mpsc;

/// Starts `sink ARGS` in the server namespace and waits for its start line (printed once
/// the sockets and the program are in place).
fn start_sink(lab: &Lab, args: &[&str]) -> Spawned {
    Spawned::started(
        firehose_in(&lab.srv, &[&["sink"], args].concat()),
        crate::sink_flood::START,
    )
}

#[test]
fn xdp_sink_counts_exactly_n_of_n_v4_and_v6_and_detaches() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("p");
    for (listen, tag) in [
        (format!("{SRV4}:7201"), "v4"),
        (format!("[{SRV6}]:7202"), "v6"),
    ] {
        let j = tmp(&format!("xdpsink-{tag}.json"));
        let c = start_sink(
            &lab,
            &[
                "--listen",
                &listen,
                "--io",
                "xdp",
                "--count",
                "1000",
                "--duration",
                "20",
                "--json-file",
                j.to_str().unwrap(),
            ],
        );
        assert!(lab.has_xdp(), "{tag}: program attached while running");
        lab.send_gently(listen.parse().unwrap(), 1000, 100);
        let o = c.output(crate::sink_flood::FINISH);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v = json_of(&j);
        assert_eq!(v["mode"], "xdp", "{v}");
        assert_eq!(v["packets"], 1000, "{tag}: {v}");
        assert_eq!(v["bytes"], 100_000, "{tag}");
        assert_eq!(v["workers"], 2, "one worker per queue: {v}");
        let per = crate::sink_flood::per_worker_packets(&v);
        assert_eq!(per.iter().sum::<u64>(), 1000, "{per:?}");
        for k in ["xsk_rx_dropped", "xsk_rx_ring_full", "held_port_filtered"] {
            assert_eq!(v[k], 0, "{tag}: {k} in {v}");
        }
        assert!(v["xsk_fill_ring_empty"].is_u64(), "{v}");
        assert_eq!(v["xdp"]["queues"], "0,1", "{v}");
        assert!(
            ["on", "off"].contains(&v["xdp"]["zerocopy"].as_str().unwrap()),
            "{v}"
        );
        assert!(!lab.has_xdp(), "{tag}: program left after the run");
        std::fs::remove_file(&j).unwrap();
    }
}

#[test]
fn xdp_sink_on_ctrl_c_reports_and_detaches() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("q");
    let listen = format!("{SRV4}:7203");
    let j = tmp("xdpsink-ctrl-c.json");
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        &lab.srv,
        env!("CARGO_BIN_EXE_firehose"),
        "sink",
    ])
    .args(["--listen", &listen, "--io", "xdp", "--queues", "0,1"])
    .args(["--count", "50", "--repetitions", "1000", "--json-file"])
    .arg(&j);
    let sink = crate::sink_drops::Sink::start(cmd);
    assert!(lab.has_xdp());
    lab.send_gently(listen.parse().unwrap(), 50, 100);
    // The round's line is the event: all 50 were counted before Ctrl-C.
    let line = sink.wait_line("round 1:");
    assert!(line.contains(" 50 datagrams"), "{line}");
    let v = sink.stop(&j);
    assert_eq!(v["mode"], "xdp", "{v}");
    assert_eq!(v["packets"], 50, "the report of a Ctrl-C'd run: {v}");
    assert_eq!(v["bytes"], 5000, "{v}");
    assert_eq!(v["rounds"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["rounds"][0]["packets"], 50, "{v}");
    assert_eq!(v["held_port_filtered"], 0, "both queues served: {v}");
    assert!(!lab.has_xdp(), "program left after Ctrl-C");
}

/// A kernel UDP socket on `bind` in namespace `ns` counting datagrams, their lengths and
/// source ports (sink_flood's receiver); returns once the socket is bound.
type Seen = (usize, BTreeSet<usize>, BTreeSet<u16>);

fn receiver(ns: &str, bind: SocketAddr, want: usize) -> std::thread::JoinHandle<Seen> {
    let ns = ns.to_string();
    let (ready, bound) = mpsc::channel();
    let h = std::thread::spawn(move || {
        firehose_sys::netns::enter(&ns).unwrap();
        let s = crate::sink_flood::receiver(&bind.to_string());
        ready.send(()).unwrap();
        crate::sink_flood::receive(&s, want)
    });
    bound.recv().unwrap();
    h
}

fn flood(lab: &Lab, args: &[&str]) -> Output {
    firehose_in(&lab.cli, &[&["flood"], args].concat())
        .output()
        .unwrap()
}

#[test]
fn xdp_flood_sends_exactly_count_with_its_sizes_and_flows_v4_and_v6() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("r");
    for (target, tag) in [
        (format!("{SRV4}:7204"), "v4"),
        (format!("[{SRV6}]:7205"), "v6"),
    ] {
        let to: SocketAddr = target.parse().unwrap();
        let rx = receiver(&lab.srv, to, 3000);
        let o = flood(
            &lab,
            &[
                "--target",
                &target,
                "--io",
                "xdp",
                "--count",
                "3000",
                "--flows",
                "3",
                "--threads",
                "2",
                "--size",
                "200",
                "--rate",
                "30k",
                "--quiet",
                "-J",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let (n, lens, ports) = rx.join().unwrap();
        assert_eq!(v["sent"], 3000, "{tag}: {v}");
        assert_eq!(n, 3000, "{tag}: the kernel socket counts every datagram");
        assert_eq!(
            lens,
            BTreeSet::from([200]),
            "{tag}: every datagram 200 bytes"
        );
        assert_eq!(ports.len(), 3, "{tag}: three flows, three ports: {ports:?}");
        let reported = crate::sink_flood::reported_ports(&v);
        assert_eq!(reported, ports, "{tag}");
        assert_eq!(v["xdp"]["queues"], "0,1", "{v}");
        assert_eq!(v["xdp_uncompleted"], 0, "{v}");
        assert_eq!(v["per_thread"].as_array().unwrap().len(), 2);
        assert!(!lab.client_has_xdp(), "flood attaches nothing");
    }
}

/// One line on stderr, exit 2, and no program left on either end of the pair (a sink
/// runs on the server's end, a flood on the client's).
fn refused(lab: &Lab, out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "wanted {needle:?} in {err}");
    assert!(
        !lab.has_xdp(),
        "left attached on the server's end after: {err}"
    );
    assert!(
        !lab.client_has_xdp(),
        "left attached on the client's end after: {err}"
    );
}

#[test]
fn xdp_bad_input_is_one_line_and_exit_2_with_nothing_attached() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("s");
    let listen = format!("{SRV4}:7206");
    let sink = |extra: &[&str]| {
        let mut a = vec!["sink", "--listen", listen.as_str(), "--duration", "1"];
        a.extend_from_slice(extra);
        firehose_in(&lab.srv, &a).output().unwrap()
    };
    refused(
        &lab,
        &sink(&["--io", "xdp", "--iface", "nope0"]),
        "no such interface",
    );
    refused(&lab, &sink(&["--io", "xdp", "--workers", "3"]), "--queues");
    refused(
        &lab,
        &sink(&["--io", "xdp", "--workers", "1", "--queues", "0"]),
        "not both",
    );
    refused(
        &lab,
        &sink(&["--io", "xdp", "--ring", "100"]),
        "power of two",
    );
    refused(
        &lab,
        &sink(&["--io", "recvmsg", "--zerocopy", "on"]),
        "applies only to --io xdp",
    );
    // Loopback has no driver XDP: the refusal names the errno and the fix.
    refused(
        &lab,
        &firehose_in(
            &lab.srv,
            &[
                "sink",
                "--listen",
                "127.0.0.1:7207",
                "--io",
                "xdp",
                "--xdp-mode",
                "native",
                "--duration",
                "1",
            ],
        )
        .output()
        .unwrap(),
        "--xdp-mode auto",
    );
    let target = format!("{SRV4}:7208");
    refused(
        &lab,
        &flood(
            &lab,
            &[
                "--target",
                &target,
                "--io",
                "xdp",
                "--threads",
                "3",
                "--flows",
                "3",
            ],
        ),
        "lower --threads",
    );
    refused(
        &lab,
        &flood(&lab, &["--target", &target, "--ring", "4096"]),
        "applies only to --io xdp",
    );
    refused(
        &lab,
        &flood(
            &lab,
            &["--target", "127.0.0.1:9", "--io", "xdp", "--count", "1"],
        ),
        "not a real link",
    );
}
