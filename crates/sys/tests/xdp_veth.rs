//! AF_XDP against the real kernel, on a veth pair between two namespaces this test creates:
//! the server's pieces (redirect program on the server end, a minimal echo loop on the XSK,
//! kernel UDP sockets as clients; the client kernel's checksum counters are checked by the
//! CLI's xdp tests) and a generator's pieces (requests built and sent on the tx ring,
//! responses redirected by source-port range, the peer's MAC from the neighbour table).
//! Needs root; skips with a reason otherwise.

use firehose_frame::{parse, reply_in_place, write_request, Endpoints};
use firehose_sys::retry_interrupted;
use firehose_sys::xdp::attach::{XdpMode, XdpProg, XskMap};
use firehose_sys::xdp::prog::{AddrMatch, UdpMatch};
use firehose_sys::xdp::queue::{Wait, XdpQueue};
use firehose_sys::xdp::xsk::{Xsk, XskConfig, ZeroCopy};
use firehose_sys::xdp::{ifindex, netlink};
use firehose_sys::{cpu, netns};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Lab {
    srv: String,
    cli: String,
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?}");
}

impl Lab {
    /// `tag` keeps the tests of this process apart (namespace names; links live inside).
    fn new(tag: &str) -> Lab {
        let id = format!("{}{tag}", std::process::id());
        // The guard exists before the first step: whatever a failing step left is deleted.
        let lab = Lab {
            srv: format!("fhxs-{id}"),
            cli: format!("fhxc-{id}"),
        };
        ip(&["netns", "add", &lab.srv]);
        ip(&["netns", "add", &lab.cli]);
        ip(&[
            "link", "add", "xv0", "netns", &lab.srv, "type", "veth", "peer", "name", "xv1",
            "netns", &lab.cli,
        ]);
        for (ns, dev, a4, a6) in [
            (&lab.srv, "xv0", "10.201.0.1/24", "fd00:201::1/64"),
            (&lab.cli, "xv1", "10.201.0.2/24", "fd00:201::2/64"),
        ] {
            ip(&["-n", ns, "addr", "add", a4, "dev", dev]);
            ip(&["-n", ns, "addr", "add", a6, "dev", dev, "nodad"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.srv, &self.cli] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Echo loop on one queue until `stop`; returns how many frames it answered.
fn serve(q: &mut XdpQueue, stop: &AtomicBool) -> u64 {
    let mut answered = 0;
    let wait = Wait::Poll { ms: 10, also: None };
    while !stop.load(Ordering::Relaxed) {
        q.receive(64, wait);
        for i in 0..q.rx().len() {
            let d = q.rx()[i];
            let frame = q.frame_mut(d.addr);
            match parse(&frame[..d.len as usize]) {
                Ok(u) => {
                    let len = reply_in_place(frame, &u, u.len, 64);
                    assert!(q.transmit(d.addr, len as u32), "a ring of 256 holds 64");
                }
                Err(_) => q.recycle(d.addr),
            }
        }
        answered += q.flush() as u64;
    }
    answered
}

#[test]
fn echo_over_af_xdp_on_a_veth_ipv4_and_ipv6() {
    if !cpu::is_root() {
        eprintln!("skipped: AF_XDP on a veth needs root (network namespaces, BPF)");
        return;
    }
    let lab = Lab::new("e");
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let srv_ns = lab.srv.clone();
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        netns::enter(&srv_ns).unwrap();
        let idx = ifindex("xv0").unwrap();
        let cfg = XskConfig {
            ring: 256,
            frame_size: 4096,
            frames: 512,
            zerocopy: ZeroCopy::Auto,
            need_wakeup: true,
        };
        let xsk = Xsk::open(idx, 0, &cfg).unwrap();
        let map = XskMap::new(1).unwrap();
        map.set(0, xsk.as_raw_fd()).unwrap();
        let m = UdpMatch::to(7777, AddrMatch::Any, AddrMatch::Any);
        let prog = XdpProg::load(&m, &map).unwrap();
        let link = prog.attach(idx, XdpMode::Native).unwrap();
        let attached = netlink::query(idx).unwrap();
        assert_eq!(attached.native, prog.id().unwrap());
        let granted = (xsk.zerocopy(), xsk.zerocopy_refusal().map(String::from));
        // Stock the fill ring before anyone sends: a packet finding it empty is dropped.
        let mut q = XdpQueue::new(xsk, false);
        q.refill();
        ready_tx.send(granted).unwrap();
        let n = serve(&mut q, &stop2);
        drop(link);
        (n, netlink::query(idx).unwrap())
    });
    let (zc, refusal) = ready_rx.recv().unwrap();
    eprintln!("zero-copy granted: {zc}, refusal: {refusal:?}");
    let cli_ns = lab.cli.clone();
    let client = std::thread::spawn(move || {
        netns::enter(&cli_ns).unwrap();
        let mut count = 0;
        for (bind, dst) in [
            ("10.201.0.2:0", "10.201.0.1:7777"),
            ("[fd00:201::2]:0", "[fd00:201::1]:7777"),
        ] {
            let s = UdpSocket::bind(bind).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let max = if bind.starts_with('[') { 1452 } else { 1472 };
            for len in [0, 1, 2, 3, 64, 100, 999, max] {
                let msg: Vec<u8> = (0..len).map(|i| (i * 31 + len) as u8).collect();
                s.send_to(&msg, dst).unwrap();
                let mut buf = [0u8; 2048];
                let (n, from) = retry_interrupted(|| s.recv_from(&mut buf)).expect("echo reply");
                assert_eq!(&buf[..n], &msg[..], "{dst} len {len}");
                assert_eq!(from, dst.parse().unwrap());
                count += 1;
            }
        }
        count
    });
    let count = client.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (answered, after_detach) = server.join().unwrap();
    assert_eq!(count, 16);
    assert_eq!(answered, 16, "every datagram answered on the XDP path");
    assert_eq!(
        after_detach.native, 0,
        "dropping the link detaches the program"
    );
}

/// The MAC of `dev` in namespace `ns` (this thread's /sys shows the namespace it was
/// mounted for, so ask through `ip netns exec`).
fn mac_of(ns: &str, dev: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{dev}/address"),
        ])
        .output()
        .unwrap();
    firehose_frame::parse_mac(&String::from_utf8_lossy(&out.stdout)).expect("a MAC address")
}

#[test]
fn a_generator_sends_on_the_tx_ring_and_gets_its_port_range_back() {
    if !cpu::is_root() {
        eprintln!("skipped: AF_XDP on a veth needs root (network namespaces, BPF)");
        return;
    }
    let lab = Lab::new("g");
    let srv_ns = lab.srv.clone();
    // A kernel echo server on the far side.
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        netns::enter(&srv_ns).unwrap();
        let s = UdpSocket::bind("10.201.0.1:7777").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        port_tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = retry_interrupted(|| s.recv_from(&mut buf)) {
            s.send_to(&buf[..n], from).unwrap();
        }
    });
    port_rx.recv().unwrap();
    let cli_ns = lab.cli.clone();
    let (srv_mac, cli_mac) = (mac_of(&lab.srv, "xv0"), mac_of(&lab.cli, "xv1"));
    std::thread::spawn(move || {
        netns::enter(&cli_ns).unwrap();
        let idx = ifindex("xv1").unwrap();
        let target: std::net::SocketAddr = "10.201.0.1:7777".parse().unwrap();
        // The kernel resolves the target's MAC for a first datagram from a kernel socket,
        // whose port is outside the range: its answer stays with the kernel.
        let k = UdpSocket::bind("10.201.0.2:41000").unwrap();
        k.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        assert_eq!(netlink::neighbour(idx, target.ip()).unwrap(), None);
        k.send_to(b"resolve", target).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(retry_interrupted(|| k.recv(&mut buf)).unwrap(), 7);
        let dst_mac = netlink::neighbour(idx, target.ip())
            .unwrap()
            .expect("resolved");
        assert_eq!(dst_mac, srv_mac);

        let cfg = XskConfig {
            ring: 256,
            frame_size: 2048,
            frames: 512,
            zerocopy: ZeroCopy::Off,
            need_wakeup: true,
        };
        let xsk = Xsk::open(idx, 0, &cfg).unwrap();
        let map = XskMap::new(1).unwrap();
        map.set(0, xsk.as_raw_fd()).unwrap();
        let mut m = UdpMatch::to(
            40000,
            AddrMatch::Is("10.201.0.2".parse().unwrap()),
            AddrMatch::Off,
        );
        m.port_last = Some(40063);
        m.from = Some(target);
        let prog = XdpProg::load(&m, &map).unwrap();
        let _link = prog.attach(idx, XdpMode::Native).unwrap();
        let mut q = XdpQueue::new(xsk, false);
        q.refill();
        assert!(q.copy_mode(), "--zerocopy off");

        // XDP_MAX_TX_SKB_BUDGET (Linux 6.17+) lets one copy-mode kick move the whole ring
        // of 256; without it the kernel moves 32 per kick. There is no getsockopt for it:
        // the kicks below read it back.
        let budget = q.xsk().tx_budget();
        match q.xsk().tx_budget_refusal() {
            None => assert_eq!(budget, 256, "granted: the tx ring's size"),
            Some(errno) => assert_eq!(budget, 32, "refused ({errno}): the kernel's 32"),
        }
        // 64 requests, one per source port of the range, built in UMEM frames and sent by
        // one flush: one kick with the budget raised, two at the kernel's 32 per kick.
        assert_eq!(q.tx_room(64), 64);
        for i in 0..64 {
            let addr = q.alloc().unwrap();
            let e = Endpoints {
                src_mac: cli_mac,
                dst_mac,
                vlan: None,
                src: format!("10.201.0.2:{}", 40000 + i).parse().unwrap(),
                dst: target,
                ttl: 64,
            };
            let len = write_request(q.frame_mut(addr), &e, format!("req {i}").as_bytes()).unwrap();
            assert!(q.transmit(addr, len as u32));
        }
        assert_eq!(q.flush(), 64);
        assert_eq!(
            q.counters().tx_kicks,
            u64::from(64u32.div_ceil(budget)),
            "kicks for 64 frames at {budget} per kick: {:?}",
            q.counters()
        );
        assert_eq!(q.xsk().tx.unconsumed(), 0, "one flush sent all 64");
        let mut got = std::collections::BTreeSet::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        let wait = Wait::Poll { ms: 10, also: None };
        while got.len() < 64 && std::time::Instant::now() < deadline {
            q.receive(64, wait);
            for d in q.rx() {
                let frame = q.data(d.addr, d.len as usize);
                let u = parse(frame).unwrap();
                assert_eq!(u.src, target);
                let i = u.dst.port() - 40000;
                assert_eq!(
                    &frame[u.payload()..u.payload() + u.len],
                    format!("req {i}").as_bytes()
                );
                got.insert(i);
            }
            q.recycle_rx();
        }
        assert_eq!(got.len(), 64, "responses by source port: {got:?}");
        // Outside the range, the kernel socket still gets its answers.
        k.send_to(b"kernel", target).unwrap();
        assert_eq!(retry_interrupted(|| k.recv(&mut buf)).unwrap(), 6);
    })
    .join()
    .unwrap();
}
