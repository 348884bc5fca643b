//! `flood`'s local-target check is made in the namespace that sends (issue 20): an address
//! held by another namespace of this host is accepted only when the sending namespace
//! reaches it straight out of the veth whose other end holds it; reached through a gateway,
//! the flood would go wherever that route leads, so it is refused.

use crate::util::{root_or_skip, Netns};
use crate::xdp_util::{Lab, CLI4, SRV4};
use std::process::{Command, Output};

fn flood_from(ns: &str, target: &str) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_firehose")])
        .args(["flood", "--target", target, "--count", "3", "--quiet"])
        .output()
        .unwrap()
}

#[test]
fn a_target_is_local_only_as_the_sending_namespace_routes_to_it() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("fl");
    // A third namespace holding an address (on its loopback).
    let other = Netns::new("xo");
    other.ip(&["addr", "add", "10.207.9.9/32", "dev", "lo"]);
    // The client namespace routes everything else through the server end of its veth.
    let st = Command::new("ip")
        .args(["-n", &lab.cli, "route", "add", "default", "via", SRV4])
        .status()
        .unwrap();
    assert!(st.success());
    let text = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // Held by another namespace, reached through a gateway: refused.
    let o = flood_from(&lab.cli, "10.207.9.9:9");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not an address of this host"),
        "{}",
        text(&o)
    );
    // The veth's other end, straight out of the veth: accepted; and our own address.
    for target in [
        format!("{SRV4}:9"),
        format!("{CLI4}:9"),
        "127.0.0.1:9".into(),
    ] {
        let o = flood_from(&lab.cli, &target);
        assert!(o.status.success(), "{target}: {}", text(&o));
    }
    // --allow-remote still lets the operator decide.
    let o = Command::new("ip")
        .args(["netns", "exec", &lab.cli, env!("CARGO_BIN_EXE_firehose")])
        .args([
            "flood",
            "--target",
            "10.207.9.9:9",
            "--count",
            "1",
            "--quiet",
            "--allow-remote",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    drop(other);
}
