//! The supervision policy through the binary (docs/serve.md, "When a worker fails"): a worker
//! that fails stops the run at once, and the run exits 1 with one line naming the worker and
//! the cause. The failure is a real one: the interface under an AF_PACKET sink goes down.

use crate::util::{bin, ip, root_or_skip, veth, Side, Spawned};
use std::time::{Duration, Instant};

#[test]
fn a_sink_whose_interface_goes_down_stops_and_names_the_worker() {
    if !root_or_skip() {
        return;
    }
    let pair = veth("su", 1);
    let (srv, dev) = (pair.netns(Side::Server).unwrap(), pair.dev(Side::Server));
    let mut sink = std::process::Command::new("ip");
    sink.args(["netns", "exec", &srv, bin(), "sink", "--listen"])
        .arg(format!("{}:7310", pair.server_addr()))
        .args(["--io", "packet", "--iface", &dev, "--duration", "60"]);
    let sink = Spawned::started(sink, Duration::from_secs(20));
    ip(&["-n", &srv, "link", "set", "dev", &dev, "down"]).unwrap();
    let t0 = Instant::now();
    let out = sink.output(Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    // Well before the 60 s asked for: the failure ended the run (the sink used to spin on
    // the dead ring to the end and exit 0 with 0 packets).
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("sink worker 0")
            && err.contains("ENETDOWN")
            && err.contains("the sink stopped"),
        "{err}"
    );
}
