//! `firehose stream` across a veth pair between two namespaces (root only), IPv4 and IPv6
//! at MTU 9000: every send mode against every receive mode moves exactly the bytes sent,
//! every byte matching the pattern; zcrx on veth is refused with the errno.

use crate::util::{bin, root_or_skip, Spawned};
use firehose_lab::topology::{client_ns, run_id, server_ns, Topology, VETH_SERVER_ADDR};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The veth device inside a namespace.
fn veth_in(ns: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show", "type", "veth"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let name = text.split(": ").nth(1).expect("a veth in the namespace");
    name.split('@').next().unwrap().to_string()
}

/// Whether stream mode `m` can run here: the io_uring modes need their opcode (`send`:
/// IORING_OP_SEND, or SEND_ZC for uring-zc; `recv`: IORING_OP_RECV), else the pairs with
/// them are skipped with the reason printed.
fn mode_usable(m: &str, side: &str) -> bool {
    match m {
        "uring-zc" => crate::util::uring_or_skip("send_zc"),
        m if m.starts_with("uring") => crate::util::uring_or_skip(side),
        _ => true,
    }
}

fn pair(srv: &str, cli: &str, addr: &str, send: &str, recv: &str) -> serde_json::Value {
    let rx = Command::new("ip")
        .args([
            "netns",
            "exec",
            srv,
            bin(),
            "stream",
            "--listen",
            &format!("{addr}:5201"),
            "--recv",
            recv,
            "--once",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed when dropped: a failing assertion below leaves no receiver behind.
    let mut rx = Spawned::of(rx);
    let mut lines = BufReader::new(rx.child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("listening on"), "{first}");
    std::thread::spawn(move || for _ in lines {});
    let mut tx = Command::new("ip");
    tx.args([
        "netns",
        "exec",
        cli,
        bin(),
        "stream",
        "--target",
        &format!("{addr}:5201"),
        "--send",
        send,
    ])
    .args([
        "--flows",
        "2",
        "--msg-size",
        "256K",
        "--bytes",
        "3M",
        "--json",
    ]);
    let out = Spawned::start(tx).output(Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{send} -> {recv} over {addr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(rx.wait(Duration::from_secs(30)).success());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_pair_over_veth_ipv4_and_ipv6() {
    if !root_or_skip() {
        return;
    }
    let mut topo = Topology::veth(&run_id(Some(11)), 1).unwrap();
    let (srv, cli) = (server_ns(&run_id(Some(11))), client_ns(&run_id(Some(11))));
    for (ns, a) in [(&srv, "fd11::1/64"), (&cli, "fd11::2/64")] {
        let dev = veth_in(ns);
        ip(&["-n", ns, "link", "set", &dev, "mtu", "9000"]);
        ip(&["-n", ns, "addr", "add", a, "dev", &dev, "nodad"]);
    }
    let v4 = VETH_SERVER_ADDR.to_string();
    for addr in [v4.as_str(), "[fd11::1]"] {
        for send in [
            "copy", "zerocopy", "sendfile", "splice", "uring", "uring-zc",
        ]
        .into_iter()
        .filter(|&m| mode_usable(m, "send"))
        {
            for recv in ["copy", "mmap", "uring"]
                .into_iter()
                .filter(|&m| mode_usable(m, "recv"))
            {
                let v = pair(&srv, &cli, addr, send, recv);
                let sent = v["sender"]["bytes"].as_u64().unwrap();
                assert_eq!(sent, 2 * (3 << 20), "{send} -> {recv}");
                assert_eq!(
                    v["receiver"]["bytes"].as_u64(),
                    Some(sent),
                    "{send} -> {recv}"
                );
                assert_eq!(v["receiver"]["checked"], true);
                assert!(
                    v["sender"]["flows"][0]["mss"].as_i64().unwrap() > 1460,
                    "MTU 9000 MSS"
                );
            }
        }
    }
    if !mode_usable("uring-zcrx", "recv") {
        topo.teardown().unwrap();
        return;
    }
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &srv,
            bin(),
            "stream",
            "--listen",
            &format!("{v4}:5202"),
            "--recv",
            "uring-zcrx",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("EOPNOTSUPP"), "veth has no zcrx: {err}");
    topo.teardown().unwrap();
}
