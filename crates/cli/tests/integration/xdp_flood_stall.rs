//! `firehose flood --io xdp` when its frames stop completing (docs/sink-flood.md: frames
//! that do not complete within 2 s are counted as `xdp_uncompleted` and end that thread, not
//! the run). Its interface is set down mid-run: the kernel then refuses every kick
//! (ENETDOWN) and takes nothing more off the tx rings, so the frames on them never complete.
//! Each thread gives them up, counted, and the flood ends long before its `--duration`, with
//! its report. On a two-queue veth pair between namespaces the test creates (removed on
//! drop). Needs root; skips with a reason otherwise.

use crate::sink_drops::Sink;
use crate::util::{bin, root_or_skip, tmp};
use crate::xdp_util::{Lab, SRV4};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn frames_that_never_complete_are_counted_and_end_the_flood() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("st");
    let j = tmp("xdp-flood-stall.json");
    let target = format!("{SRV4}:9");
    let (threads, ring) = (2u64, 256u64);
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.cli, bin(), "flood"]).args([
        "--target",
        &target,
        "--io",
        "xdp",
        "--threads",
        &threads.to_string(),
        "--flows",
        "2",
        "--ring",
        &ring.to_string(),
        "--rate",
        "5k",
        "--duration",
        "120",
        "--json-file",
        j.to_str().unwrap(),
    ]);
    let (flood, first) = Sink::spawn(c);
    assert!(first.starts_with("firehose flood: "), "{first}");
    // The event: a per-second line with datagrams sent.
    let deadline = Instant::now() + Duration::from_secs(30);
    'sending: loop {
        for l in flood.lines_so_far() {
            let pps = l.split_whitespace().nth(1).map(|n| n.replace(',', ""));
            if l.contains(" pps ") && pps.is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0)) {
                break 'sending;
            }
        }
        assert!(Instant::now() < deadline, "nothing sent in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let down = Instant::now();
    let st = Command::new("ip")
        .args(["-n", &lab.cli, "link", "set", "dev", &lab.cli_dev, "down"])
        .status()
        .unwrap();
    assert!(st.success());
    // Ends by itself (within 30 s: each thread's 2 s stall plus the final wait), not at
    // its --duration of 120 s.
    let v = flood.exited(&j);
    let uncompleted = v["xdp_uncompleted"].as_u64().unwrap();
    assert!(
        uncompleted > 0,
        "frames stuck on a downed interface's tx rings: {v}"
    );
    assert!(
        uncompleted <= threads * ring,
        "at most a tx ring's worth per thread: {v}"
    );
    assert!(v["sent"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["seconds"].as_f64().unwrap() < 60.0,
        "the stall ended the run, not --duration: {v}"
    );
    assert!(down.elapsed() >= Duration::from_secs(2), "a 2 s stall");
}
