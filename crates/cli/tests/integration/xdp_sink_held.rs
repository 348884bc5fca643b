//! `firehose sink --io xdp` when it cannot clean up and when its queues are taken
//! (docs/sink-flood.md): after SIGKILL its program leaves the interface with the process
//! (a BPF link) and the next sink takes the same queues and counts exactly; a sink whose
//! queue another AF_XDP socket holds, or whose interface another sink's linked program
//! holds, stops with one line and exit 2, attaches nothing, and leaves the holder running
//! and counting. On a two-queue veth pair between namespaces the test creates (removed on
//! drop). Needs root; skips with a reason otherwise.

use crate::sink_drops::Sink;
use crate::util::{root_or_skip, tmp, Spawned};
use crate::xdp_util::{firehose_in, Lab, CLI4, SRV4};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `sink --io xdp ARGS` in the server namespace, writing its report to `json`.
fn xdp_sink(lab: &Lab, listen: &str, json: &std::path::Path, extra: &[&str]) -> Command {
    let mut a = vec!["sink", "--listen", listen, "--io", "xdp", "--no-drops"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--duration", "60", "--json-file", json.to_str().unwrap()]);
    firehose_in(&lab.srv, &a)
}

/// A refused start: exit 2, one line naming `needle`.
fn refused(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "wanted {needle:?} in {err}");
}

/// Runs `cmd` to its end within 30 s.
fn run(cmd: Command) -> Output {
    Spawned::bounded(cmd).output(Duration::from_secs(30))
}

#[test]
fn after_sigkill_the_xdp_sinks_program_is_gone_and_the_next_sink_counts_exactly() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("hk");
    let listen = format!("{SRV4}:7401");
    let j = tmp("xdp-sink-killed.json");
    let mut first = Sink::start(xdp_sink(&lab, &listen, &j, &["--queues", "0,1"]));
    assert!(lab.has_xdp(), "attached while running");
    first.kill();
    // The BPF link closes with the last descriptor of the dead process; the kernel's
    // release is deferred, so wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(5);
    while lab.has_xdp() {
        assert!(
            Instant::now() < deadline,
            "program left 5 s after SIGKILL: {}",
            lab.link_show()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!j.exists(), "a killed sink wrote no report");
    let again = Sink::start(xdp_sink(
        &lab,
        &listen,
        &j,
        &["--queues", "0,1", "--count", "300"],
    ));
    assert!(lab.has_xdp());
    lab.send_gently(listen.parse().unwrap(), 300, 100);
    let v = again.exited(&j);
    assert_eq!(v["packets"], 300, "{v}");
    assert_eq!(v["xdp"]["queues"], "0,1", "both queues taken again: {v}");
    assert!(!lab.has_xdp(), "program left after the second run");
}

#[test]
fn an_xdp_sink_on_a_queue_another_socket_holds_stops_with_one_line() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("hq");
    // `flood --io xdp` from the server's namespace holds both queues of its interface with
    // AF_XDP sockets and attaches no program.
    let target = format!("{CLI4}:9");
    // Its start line is printed once its sockets are open.
    let (mut flood, first) = Sink::spawn(firehose_in(
        &lab.srv,
        &[
            "flood",
            "--target",
            &target,
            "--io",
            "xdp",
            "--threads",
            "2",
            "--flows",
            "2",
            "--rate",
            "2k",
            "--duration",
            "60",
        ],
    ));
    assert!(first.starts_with("firehose flood: "), "{first}");
    let j = tmp("xdp-sink-held-queue.json");
    let listen = format!("{SRV4}:7402");
    let started = Instant::now();
    let out = run(xdp_sink(&lab, &listen, &j, &["--queues", "0"]));
    refused(&out, "queue 0 of ");
    refused(&out, "in use by another AF_XDP socket");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the wait for a busy queue is bounded"
    );
    assert!(!lab.has_xdp(), "a refused start leaves nothing attached");
    assert!(!j.exists());
    assert!(flood.running(), "the holder is left running");
    flood.kill();
}

#[test]
fn an_xdp_sink_on_an_interface_another_sink_holds_stops_and_the_holder_keeps_counting() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("hl");
    let listen = format!("{SRV4}:7403");
    let j1 = tmp("xdp-sink-holder.json");
    let holder = Sink::start(xdp_sink(
        &lab,
        &listen,
        &j1,
        &["--queues", "0,1", "--count", "200"],
    ));
    let prog = lab.link_show();
    assert!(prog.contains("prog/xdp"), "{prog}");
    let j2 = tmp("xdp-sink-second.json");
    let out = run(xdp_sink(
        &lab,
        &format!("{SRV4}:7404"),
        &j2,
        &["--queues", "1"],
    ));
    refused(&out, "held by a BPF link of another firehose run");
    assert!(!j2.exists());
    assert_eq!(
        prog_id(&lab.link_show()),
        prog_id(&prog),
        "the holder's program is still the one attached"
    );
    lab.send_gently(listen.parse().unwrap(), 200, 100);
    let v = holder.exited(&j1);
    assert_eq!(v["packets"], 200, "the holder counts on, exactly: {v}");
    assert!(!lab.has_xdp(), "program left after the holder's run");
}

/// The `prog/xdp id N` of `ip link show` output.
fn prog_id(link: &str) -> Option<String> {
    let at = link.find("prog/xdp id ")?;
    link[at..].split_whitespace().nth(2).map(str::to_string)
}
