//! The supervision policy through the binary (docs/serve.md, "When a worker fails"): a worker
//! that fails stops the run at once, and the run exits 1 with one line naming the worker and
//! the cause. The failure is a real one: the interface under an AF_PACKET sink goes down.

use crate::util::{root_or_skip, wait_exit};
use crate::xdp_util::{Lab, SRV4};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_sink_whose_interface_goes_down_stops_and_names_the_worker() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("v");
    let listen = format!("{SRV4}:7310");
    let mut sink = Command::new("ip")
        .args(["netns", "exec", &lab.srv, env!("CARGO_BIN_EXE_firehose")])
        .args([
            "sink", "--listen", &listen, "--io", "packet", "--iface", &lab.dev,
        ])
        .args(["--duration", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = sink.stdout.take().unwrap();
    let mut first = [0u8; 1];
    assert_eq!(out.read(&mut first).unwrap(), 1, "sink printed nothing");
    let st = Command::new("ip")
        .args(["-n", &lab.srv, "link", "set", "dev", &lab.dev, "down"])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let status = wait_exit(&mut sink, Duration::from_secs(20));
    let mut err = String::new();
    sink.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    // Not the 60 s asked for: the failure ended the run (the old sink spun blind to the end
    // and exited 0).
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("sink worker 0")
            && err.contains("ENETDOWN")
            && err.contains("the sink stopped"),
        "{err}"
    );
}
