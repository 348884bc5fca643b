//! The generator's GSO fallback through the real binary: in a namespace whose loopback MTU
//! (1400) is below the request size, the kernel refuses UDP GSO sends of 1472-byte segments
//! (GSO cannot fragment) while plain sends are fragmented and arrive. Every request must
//! still complete, and the summary must say the requests went by sendmmsg, and why.

use crate::util::{root_or_skip, wait_for_udp_port, Netns, Spawned};
use std::process::Stdio;

/// A namespace ([`Netns`], removed on drop), its loopback up with the given MTU.
fn netns(tag: &str, mtu: u32) -> Netns {
    let ns = Netns::new(tag);
    ns.ip(&["link", "set", "lo", "mtu", &mtu.to_string(), "up"]);
    ns
}

#[test]
fn a_refused_gso_send_falls_back_and_the_summary_says_so() {
    if !root_or_skip() {
        return;
    }
    let ns = netns("gso", 1400);
    let srv = ns
        .firehose(&[
            "serve",
            "--listen",
            "127.0.0.1:9400",
            "--profile",
            "naive",
            "--duration",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let srv = Spawned::of(srv);
    // `ip netns exec` execs the server, so its /proc entry shows the namespace's sockets:
    // wait until it is bound, or a busy host starts the load first and a window is lost.
    wait_for_udp_port(srv.id(), 9400, std::time::Duration::from_secs(10));
    let out = ns
        .firehose(&[
            "load",
            "--target",
            "127.0.0.1:9400",
            "--size",
            "1472",
            "--window",
            "64",
            "--requests",
            "2000",
            "--timeout",
            "5",
            "--json",
        ])
        .output()
        .unwrap();
    drop(srv);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["completed"], 2000, "every request answered: {doc}");
    assert_eq!(doc["send_path"], "sendmmsg", "{doc}");
    let why = doc["gso_error"].as_str().unwrap_or_default();
    assert!(why.contains("EMSGSIZE"), "the refusal and its errno: {doc}");
    assert!(err.contains("the kernel refused UDP GSO"), "{err}");
}
