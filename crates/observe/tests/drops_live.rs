//! The drop watch against the real kernel (root): datagrams sent in a network namespace the
//! test makes are counted exactly, by reason, port and namespace, on both ways of counting.

use firehose_observe::drops::{report, DropWatch, Options, Via};
use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// A named network namespace with lo up, removed on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("fh{tag}{}", std::process::id());
        let ok = |args: &[&str]| {
            let s = Command::new("ip").args(args).status().unwrap();
            assert!(s.success(), "ip {args:?}");
        };
        ok(&["netns", "add", &name]);
        let ns = Netns(name);
        ok(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }

    fn inode(&self) -> u32 {
        std::fs::metadata(format!("/run/netns/{}", self.0))
            .unwrap()
            .ino() as u32
    }

    /// Sends `n` datagrams to 127.0.0.1:`port` from inside the namespace.
    fn send(&self, port: u16, n: usize) {
        let name = self.0.clone();
        std::thread::spawn(move || {
            firehose_sys::netns::enter(&name).unwrap();
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            for _ in 0..n {
                // ICMP port unreachable may fail a later send on this socket: ignore it.
                let _ = s.send_to(b"x", ("127.0.0.1", port));
            }
        })
        .join()
        .unwrap();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn closed_port_counts(via: Via) {
    if !firehose_sys::cpu::is_root() {
        eprintln!("skipped: needs root (BPF, perf and a network namespace)");
        return;
    }
    let ns = Netns::new(if via == Via::Perf { "dp" } else { "db" });
    let mut w = DropWatch::start(Options {
        via,
        prog_stats: false,
    })
    .unwrap();
    assert_eq!(
        w.method().via,
        if via == Via::Perf { "perf" } else { "bpf" }
    );
    let before = w.counts().unwrap();
    ns.send(9, 50);
    let c = w.counts().unwrap().since(&before);
    let mut rows = report::rows(&c, w.format(), &report::Namer::load(), true);
    if via == Via::Perf {
        // perf cannot tell the namespace: count NO_SOCKET at __udp4_lib_rcv host-wide, at
        // least ours.
        let n: u64 = rows
            .iter()
            .filter(|r| r.reason == "NO_SOCKET")
            .map(|r| r.count)
            .sum();
        assert!(n >= 50, "{rows:?}");
        return;
    }
    report::filter(&mut rows, Some(9), Some(ns.inode()));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].count, 50);
    assert_eq!(rows[0].reason, "NO_SOCKET");
    assert_eq!(rows[0].protocol.as_deref(), Some("udp"));
    assert_eq!(rows[0].port_from.as_deref(), Some("packet"));
    assert!(rows[0].location.contains("udp"), "{:?}", rows[0]);
}

#[test]
fn closed_port_bpf() {
    closed_port_counts(Via::Bpf);
}

#[test]
fn closed_port_perf() {
    closed_port_counts(Via::Perf);
}
