//! The generator's GSO fallback through the real binary: in a namespace whose loopback MTU
//! (1400) is below the request size, the kernel refuses UDP GSO sends of 1472-byte segments
//! (GSO cannot fragment) while plain sends are fragmented and arrive. Every request must
//! still complete, and the summary must say the requests went by sendmmsg, and why.

use crate::util::{bin, root_or_skip};
use std::process::{Command, Stdio};

/// A namespace removed on drop, its loopback up with the given MTU.
struct Netns(String);

impl Netns {
    fn new(tag: &str, mtu: u32) -> Netns {
        let name = format!("fh-{tag}-{}", std::process::id());
        let ok = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().unwrap();
            assert!(st.success(), "ip {args:?}");
        };
        ok(&["netns", "add", &name]);
        let ns = Netns(name);
        ok(&[
            "-n",
            &ns.0,
            "link",
            "set",
            "lo",
            "mtu",
            &mtu.to_string(),
            "up",
        ]);
        ns
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, bin()]).args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn a_refused_gso_send_falls_back_and_the_summary_says_so() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("gso", 1400);
    let mut srv = ns
        .cmd(&[
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
    // `ip netns exec` execs the server, so its /proc entry shows the namespace's sockets:
    // wait until it is bound, or a busy host starts the load first and a window is lost.
    let bound = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let udp = format!("/proc/{}/net/udp", srv.id());
    while !std::fs::read_to_string(&udp).is_ok_and(|t| t.contains(":24B8 ")) {
        assert!(
            std::time::Instant::now() < bound,
            "the server never bound 9400 (0x24B8)"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = ns
        .cmd(&[
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
    let _ = srv.kill();
    let _ = srv.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["completed"], 2000, "every request answered: {doc}");
    assert_eq!(doc["send_path"], "sendmmsg", "{doc}");
    let why = doc["gso_error"].as_str().unwrap_or_default();
    assert!(why.contains("EMSGSIZE"), "the refusal and its errno: {doc}");
    assert!(err.contains("the kernel refused UDP GSO"), "{err}");
}
