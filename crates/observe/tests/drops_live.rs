//! The drop watch against the real kernel (root): datagrams sent in a network namespace the
//! test makes are counted exactly, by reason, port and namespace, on both ways of counting.
//! Every count is read once the namespace's own UDP counters say the kernel has handled
//! every datagram (loopback delivery may finish in a softirq after `sendto` returns).

use firehose_host::procfs::snmp::{parse_udp, UdpCounters};
use firehose_observe::drops::{report, Counts, DropWatch, Options, Via};
use firehose_sys::socket::UdpSock;
use std::net::UdpSocket;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// A named network namespace with lo up, removed on drop.
struct Netns(String);

/// What the kernel of the namespace counted once it had handled every datagram sent.
struct Sent {
    udp: UdpCounters,
}

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

    /// Inside the namespace: `setup` makes a socket to keep (a receiver), then `n`
    /// datagrams go to 127.0.0.1:`port`; returns once the namespace's UDP counters account
    /// for all `n` (delivered, no port, or dropped at a full buffer).
    fn send(&self, port: u16, n: u64, setup: fn(u16) -> Option<UdpSock>) -> Sent {
        let name = self.0.clone();
        std::thread::spawn(move || {
            firehose_sys::netns::enter(&name).unwrap();
            let kept = setup(port);
            // This thread's namespace: a fresh one, so every count is this test's.
            let udp = || {
                parse_udp(&std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap()).unwrap()
            };
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            for _ in 0..n {
                // ICMP port unreachable may fail a later send on this socket: ignore it.
                let _ = s.send_to(b"x", ("127.0.0.1", port));
            }
            // What the receiver queued is counted (InDatagrams) as it is read.
            if let Some(r) = &kept {
                r.set_nonblocking(true).unwrap();
            }
            let by = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(r) = &kept {
                    let mut b = [0u8; 8];
                    while r.recv(&mut b, 0).is_ok() {}
                }
                let c = udp();
                if c.in_datagrams + c.no_ports + c.rcvbuf_errors >= n {
                    return Sent { udp: c };
                }
                assert!(Instant::now() < by, "the kernel handled only {c:?} of {n}");
                std::thread::yield_now();
            }
        })
        .join()
        .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn root_or_skip() -> bool {
    let root = firehose_sys::cpu::is_root();
    if !root {
        eprintln!("skipped: needs root (BPF, perf and a network namespace)");
    }
    root
}

fn watch(via: Via) -> DropWatch {
    let w = DropWatch::start(Options {
        via,
        prog_stats: false,
    })
    .unwrap();
    assert_eq!(
        w.method().via,
        if via == Via::Perf { "perf" } else { "bpf" }
    );
    w
}

fn no_receiver(_: u16) -> Option<UdpSock> {
    None
}

/// A receiver that never reads, with the smallest buffer the kernel grants.
fn squeezed_receiver(port: u16) -> Option<UdpSock> {
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let s = UdpSock::new_for(&at).unwrap();
    s.set_rcvbuf(1, false).unwrap();
    s.bind(&at).unwrap();
    Some(s)
}

/// The NO_SOCKET drops perf saw host-wide (perf cannot tell the namespace), and the samples
/// its rings lost.
fn no_socket(w: &DropWatch, c: &Counts) -> u64 {
    let rows = report::rows(c, w.format(), &report::Namer::none(), false);
    rows.iter()
        .filter(|r| r.reason == "NO_SOCKET")
        .map(|r| r.count)
        .sum()
}

#[test]
fn closed_port_bpf() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("db");
    let mut w = watch(Via::Bpf);
    let before = w.counts().unwrap();
    let sent = ns.send(9, 50, no_receiver);
    assert_eq!(sent.udp.no_ports, 50);
    let c = w.counts().unwrap().since(&before);
    let mut rows = report::rows(&c, w.format(), &report::Namer::load(), true);
    report::filter(&mut rows, Some(9), Some(ns.inode()));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].count, 50);
    assert_eq!(rows[0].reason, "NO_SOCKET");
    assert_eq!(rows[0].protocol.as_deref(), Some("udp"));
    assert_eq!(rows[0].port_from.as_deref(), Some("packet"));
    assert!(rows[0].location.contains("udp"), "{:?}", rows[0]);
}

#[test]
fn closed_port_perf() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dp");
    let mut w = watch(Via::Perf);
    let before = w.counts().unwrap();
    assert_eq!(ns.send(9, 50, no_receiver).udp.no_ports, 50);
    let c = w.counts().unwrap().since(&before);
    // perf cannot tell the namespace: NO_SOCKET host-wide, at least ours.
    assert!(no_socket(&w, &c) >= 50, "lost {}: {c:?}", c.lost);
}

/// A BPF watch (this test's, or any firehose's as root) must not blind the perf path: a
/// tracepoint program that returns 0 tells the kernel to hand the event to no perf event,
/// and the perf watch saw nothing while one was attached.
#[test]
fn perf_counts_while_a_bpf_watch_is_attached() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dx");
    let mut bpf = watch(Via::Bpf);
    let mut perf = watch(Via::Perf);
    let (b0, p0) = (bpf.counts().unwrap(), perf.counts().unwrap());
    assert_eq!(ns.send(9, 50, no_receiver).udp.no_ports, 50);
    let p = perf.counts().unwrap().since(&p0);
    assert!(no_socket(&perf, &p) >= 50, "lost {}: {p:?}", p.lost);
    let b = bpf.counts().unwrap().since(&b0);
    let mut rows = report::rows(&b, bpf.format(), &report::Namer::none(), false);
    report::filter(&mut rows, Some(9), Some(ns.inode()));
    assert_eq!(rows.iter().map(|r| r.count).sum::<u64>(), 50, "{rows:?}");
}

/// The perf path gives a UDP socket's receive-buffer drops their port: as many
/// SOCKET_RCVBUFF drops at the receiver's port as the namespace's RcvbufErrors.
#[test]
fn perf_attributes_receive_buffer_drops_to_the_port() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dr");
    let mut w = watch(Via::Perf);
    assert!(
        w.method()
            .limits
            .iter()
            .any(|l| l.contains("udp:udp_fail_queue_rcv_skb")),
        "{:?}",
        w.method().limits
    );
    // perf sees every namespace: a port no other test uses at the same time.
    let port = 20000 + (std::process::id() % 20000) as u16;
    let before = w.counts().unwrap();
    let sent = ns.send(port, 400, squeezed_receiver);
    let dropped = sent.udp.rcvbuf_errors;
    assert!(
        dropped > 0,
        "a 1-byte buffer dropped nothing: {:?}",
        sent.udp
    );
    let c = w.counts().unwrap().since(&before);
    assert_eq!(c.lost, 0, "the rings lost samples: {c:?}");
    let mut rows = report::rows(&c, w.format(), &report::Namer::load(), false);
    report::filter(&mut rows, Some(port), None);
    let at_port: u64 = rows
        .iter()
        .filter(|r| r.reason == "SOCKET_RCVBUFF" && r.port_from.as_deref() == Some("socket"))
        .map(|r| r.count)
        .sum();
    assert_eq!(at_port, dropped, "{rows:?}");
    let lines = report::attribution(&rows, 5);
    assert!(
        lines[0].contains(&format!(
            " SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port {port}"
        )),
        "{lines:?}"
    );
}
