//! `firehose sink` and `firehose flood` with the real binary and kernel: exact counts per
//! mode over IPv4 and IPv6 on loopback, flows as distinct source ports, fanout across
//! workers, ENOBUFS counted under a rate-limited qdisc in namespaces this test creates, and
//! bad input. AF_PACKET and namespace tests need root and skip with a reason otherwise.

use crate::util::{
    bin, free_port, root_or_skip, send_paced, veth, wait_for_udp_port, Side, Spawned, Topology,
};
use firehose_sys::cpu::is_root;
use firehose_sys::socket::UdpSock;
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn json_tmp(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("firehose-{tag}-{}.json", std::process::id()))
}

fn read_json(p: &std::path::Path) -> Value {
    let v = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let _ = std::fs::remove_file(p);
    v
}

/// How long a sink may take to open its sockets, and to finish a run the test bounds.
pub(crate) const START: Duration = Duration::from_secs(20);
pub(crate) const FINISH: Duration = Duration::from_secs(60);

/// Starts a sink and waits until its socket or ring is open (its first line is printed).
fn start_sink(args: &[&str]) -> Spawned {
    let mut c = Command::new(bin());
    c.arg("sink").args(args);
    Spawned::started(c, START)
}

fn finish(c: Spawned) -> Output {
    let o = c.output(FINISH);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// Sends `n` datagrams of `len` bytes to `to` (see [`send_paced`]).
fn send_gently(to: &str, n: usize, len: usize) {
    send_paced(to.parse().unwrap(), n, len, 1);
}

fn sink_counts_exactly(io: &str, ip: &str, bracket: bool) {
    sink_counts_exactly_with(io, ip, bracket, &[]);
}

fn sink_counts_exactly_with(io: &str, ip: &str, bracket: bool, extra: &[&str]) {
    let port = free_port(ip);
    let addr = if bracket {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    };
    let j = json_tmp(&format!("sink-{io}-{port}"));
    let mut args = vec![
        "--listen",
        &addr,
        "--io",
        io,
        "--count",
        "1000",
        "--duration",
        "20",
        "--rcvbuf",
        "8M",
        "--json-file",
        j.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let c = start_sink(&args);
    if io == "uring" {
        // The ring flags are what the kernel enforces on the sink's rings.
        let workers = extra
            .iter()
            .position(|&a| a == "--workers")
            .map_or(1, |i| extra[i + 1].parse().unwrap());
        crate::uring::assert_ring_flags(c.id(), workers, extra);
    }
    send_gently(&addr, 1000, 100);
    finish(c);
    let v = read_json(&j);
    assert_eq!(v["packets"], 1000, "{io} over {ip}: {v}");
    assert_eq!(v["bytes"], 100_000, "{io} over {ip}");
    assert_eq!(v["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(v["socket_drops"], 0);
}

#[test]
fn every_socket_sink_mode_counts_exactly_n_of_n_v4_and_v6() {
    for io in ["recv", "recvfrom", "recvmsg", "recvmmsg"] {
        sink_counts_exactly(io, "127.0.0.1", false);
        sink_counts_exactly(io, "::1", true);
    }
}

#[test]
fn uring_sink_counts_exactly_n_of_n_v4_and_v6_with_each_ring_option() {
    if !crate::util::uring_or_skip("recvmsg") {
        return;
    }
    sink_counts_exactly("uring", "127.0.0.1", false);
    sink_counts_exactly("uring", "::1", true);
    sink_counts_exactly_with(
        "uring",
        "127.0.0.1",
        false,
        &["--single-issuer", "--defer-taskrun", "--workers", "2"],
    );
    sink_counts_exactly_with("uring", "::1", true, &["--sqpoll"]);
}

#[test]
fn packet_sink_counts_exactly_n_of_n_v4_and_v6() {
    if !is_root() {
        eprintln!("skipping packet_sink_counts_exactly_n_of_n_v4_and_v6: AF_PACKET needs root");
        return;
    }
    sink_counts_exactly("packet", "127.0.0.1", false);
    sink_counts_exactly("packet", "::1", true);
}

/// A sink report's packets per worker.
pub(crate) fn per_worker_packets(v: &Value) -> Vec<u64> {
    v["per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["packets"].as_u64().unwrap())
        .collect()
}

/// A flood report's source ports.
pub(crate) fn reported_ports(v: &Value) -> BTreeSet<u16> {
    v["source_ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap() as u16)
        .collect()
}

/// A kernel socket to count a flood with, its receive buffer large enough to hold a whole
/// test's datagrams even when this busy host deschedules the reader.
pub(crate) fn receiver(addr: &str) -> UdpSock {
    let a: SocketAddr = addr.parse().unwrap();
    let s = UdpSock::new_for(&a).unwrap();
    if s.set_rcvbuf(16 << 20, true).is_err() {
        s.set_rcvbuf(16 << 20, false).unwrap();
    }
    s.bind(&a).unwrap();
    s.set_recv_timeout(Duration::from_millis(500)).unwrap();
    s
}

/// Counts what a flood sends: datagrams, their lengths, source ports.
pub(crate) fn receive(sock: &UdpSock, want: usize) -> (usize, BTreeSet<usize>, BTreeSet<u16>) {
    let mut buf = [0u8; 2048];
    let (mut n, mut lens, mut ports) = (0, BTreeSet::new(), BTreeSet::new());
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        match sock.recv_from(&mut buf, 0) {
            Ok((len, from)) => {
                n += 1;
                lens.insert(len);
                ports.insert(from.to_std().unwrap().port());
            }
            Err(_) if n >= want => break,
            Err(_) => {}
        }
    }
    (n, lens, ports)
}

fn flood_sends_exactly(io: &str, bind: &str) {
    let rx = receiver(bind);
    let to: SocketAddr = rx.local_addr().unwrap();
    let j = json_tmp(&format!("flood-{io}-{}", to.port()));
    let target = to.to_string();
    let c = Command::new(bin())
        .args([
            "flood",
            "--target",
            &target,
            "--io",
            io,
            "--count",
            "3000",
            "--flows",
            "3",
            "--threads",
            "3",
            "--size",
            "200",
            "--rate",
            "30k",
            "--quiet",
            "--json-file",
        ])
        .arg(&j)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Spawned::of(c);
    let (n, lens, ports) = receive(&rx, 3000);
    let st = c.wait(FINISH);
    assert!(st.success(), "flood --io {io} to {target} failed");
    let v = read_json(&j);
    assert_eq!(v["sent"], 3000, "{v}");
    assert_eq!(
        n, 3000,
        "--io {io} to {target}: the kernel socket counts every datagram"
    );
    assert_eq!(
        lens,
        BTreeSet::from([200]),
        "--io {io}: every datagram 200 bytes"
    );
    assert_eq!(
        ports.len(),
        3,
        "--io {io}: three flows, three source ports: {ports:?}"
    );
    let reported = reported_ports(&v);
    assert_eq!(reported, ports);
}

#[test]
fn every_flood_mode_sends_exactly_count_with_its_sizes_and_flows() {
    for io in ["sendto", "sendmmsg", "gso"] {
        flood_sends_exactly(io, "127.0.0.1:0");
        flood_sends_exactly(io, "[::1]:0");
    }
}

#[test]
fn uring_flood_sends_exactly_count_with_its_sizes_and_flows() {
    if !crate::util::uring_or_skip("recvmsg") {
        return;
    }
    flood_sends_exactly("uring", "127.0.0.1:0");
    flood_sends_exactly("uring", "[::1]:0");
}

#[test]
fn rfc2544_frame_sizes_become_payloads() {
    let rx = receiver("127.0.0.1:0");
    let target = rx.local_addr().unwrap().to_string();
    for (frame, payload) in [(64, 18), (1518, 1472)] {
        let o = Command::new(bin())
            .args([
                "flood",
                "--target",
                &target,
                "--frame",
                &frame.to_string(),
                "--count",
                "5",
                "--quiet",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let (n, lens, _) = receive(&rx, 5);
        assert_eq!((n, lens), (5, BTreeSet::from([payload])), "--frame {frame}");
    }
}

#[test]
fn a_remote_target_is_refused_unless_allowed() {
    let o = Command::new(bin())
        .args(["flood", "--target", "192.0.2.1:9", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("not an address of this host") && err.contains("--allow-remote"),
        "{err}"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        vec!["flood", "--target", "127.0.0.1:9", "--frame", "100"],
        vec!["flood", "--target", "[::1]:9", "--frame", "64"],
        vec!["flood", "--target", "127.0.0.1:9", "--io", "carrier-pigeon"],
        vec![
            "flood",
            "--target",
            "127.0.0.1:9",
            "--threads",
            "4",
            "--flows",
            "2",
        ],
        vec!["sink", "--listen", "127.0.0.1:9", "--io", "nope"],
        vec!["sink", "--listen", "127.0.0.1:9", "--repetitions", "3"],
        vec![
            "sink",
            "--listen",
            "127.0.0.1:9",
            "--workers",
            "3",
            "--cpus",
            "0",
        ],
        vec!["sink", "--listen", "127.0.0.1:9", "--iface", "lo"],
        vec!["sink", "--listen", "127.0.0.1:9", "--sqpoll"],
        vec!["flood", "--target", "127.0.0.1:9", "--single-issuer"],
        vec![
            "sink",
            "--listen",
            "127.0.0.1:9",
            "--io",
            "uring",
            "--defer-taskrun",
        ],
    ] {
        let o = Command::new(bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    if is_root() {
        let o = Command::new(bin())
            .args([
                "sink",
                "--listen",
                "0.0.0.0:9",
                "--io",
                "packet",
                "--duration",
                "1",
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("--iface"));
    }
}

/// Two namespaces `a` and `b` joined by the lab's veth pair ([`veth`]: removed on drop,
/// and a step that fails as root fails the test rather than skip it).
struct Pair {
    a: String,
    b: String,
    /// The veth end in `a`.
    a_dev: String,
    _topo: Topology,
}

impl Pair {
    fn new(tag: &str) -> Pair {
        let topo = veth(tag, 1);
        Pair {
            a: topo.netns(Side::Server).unwrap(),
            b: topo.netns(Side::Client).unwrap(),
            a_dev: topo.dev(Side::Server),
            _topo: topo,
        }
    }

    fn b_addr(&self) -> String {
        firehose_lab::topology::VETH_CLIENT_ADDR.to_string()
    }
}

#[test]
fn enobufs_under_a_full_queue_is_counted_and_the_run_completes() {
    if !root_or_skip() {
        return;
    }
    let pair = Pair::new("nb");
    // A token bucket of 2 Mbit/s with a one-frame queue: sendmmsg flat out overflows it.
    let tbf = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a,
            "tc",
            "qdisc",
            "add",
            "dev",
            &pair.a_dev,
            "root",
            "tbf",
            "rate",
            "2mbit",
            "burst",
            "1600",
            "limit",
            "1600",
        ])
        .status();
    if !tbf.map(|s| s.success()).unwrap_or(false) {
        eprintln!("skipping enobufs test: tc tbf qdisc unavailable");
        return;
    }
    let port = 9999;
    let j = json_tmp("enobufs");
    let sink = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.b,
            bin(),
            "sink",
            "--listen",
            &format!("{}:{port}", pair.b_addr()),
            "--count",
            "300",
            "--duration",
            "30",
            "--quiet",
            "--rcvbuf",
            "4M",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sink = Spawned::of(sink);
    wait_for_udp_port(sink.id(), port, Duration::from_secs(30));
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a,
            bin(),
            "flood",
            "--target",
            &format!("{}:{port}", pair.b_addr()),
            "--count",
            "300",
            "--size",
            "100",
            "--quiet",
            "--json-file",
        ])
        .arg(&j)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = read_json(&j);
    assert_eq!(v["sent"], 300, "{v}");
    assert!(
        v["enobufs"].as_u64().unwrap() > 0,
        "the queue refused some sends: {v}"
    );
    let out = sink.output(FINISH);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("300 datagrams"),
        "the sink in the other namespace got all: {text}"
    );
}

#[test]
fn packet_flood_sends_exactly_count_over_a_veth_pair() {
    if !root_or_skip() {
        return;
    }
    let pair = Pair::new("pk");
    // The smallest and largest RFC 2544 payloads and one between: each frame is written
    // into the ring once, with a vnet header asking for it whole in the linear area.
    for (port, size) in [(9998, 120usize), (9997, 18), (9996, 1472)] {
        packet_flood_once(&pair, port, size);
    }
}

fn packet_flood_once(pair: &Pair, port: u16, size: usize) {
    let j = json_tmp(&format!("pktflood-sink-{size}"));
    let sink = Command::new("ip")
        .args(["netns", "exec", &pair.b, bin(), "sink", "--listen"])
        .arg(format!("{}:{port}", pair.b_addr()))
        .args([
            "--count",
            "600",
            "--duration",
            "30",
            "--quiet",
            "--rcvbuf",
            "8M",
        ])
        .arg("--json-file")
        .arg(&j)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let sink = Spawned::of(sink);
    wait_for_udp_port(sink.id(), port, Duration::from_secs(30));
    let o = Command::new("ip")
        .args(["netns", "exec", &pair.a, bin(), "flood", "--target"])
        .arg(format!("{}:{port}", pair.b_addr()))
        .args([
            "--io",
            "packet",
            "--count",
            "600",
            "--size",
            &size.to_string(),
        ])
        .args([
            "--flows",
            "3",
            "--threads",
            "2",
            "--rate",
            "20k",
            "--quiet",
            "-J",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(f["sent"], 600, "{f}");
    assert!(sink.output(FINISH).status.success());
    let v = read_json(&j);
    assert_eq!(v["packets"], 600, "the kernel socket got every frame: {v}");
    assert_eq!(v["bytes"], 600 * size as u64, "{size}-byte payloads");
}

/// Every `--fanout` mode (docs/sink-flood.md): two workers count exactly
/// what 16 flows sent, and the report names the mode; `hash` keeps a flow on one worker
/// and spreads 16 flows over both (all on one: 2^-15).
#[test]
fn every_packet_fanout_mode_counts_exactly() {
    if !is_root() {
        eprintln!("skipping every_packet_fanout_mode_counts_exactly: AF_PACKET needs root");
        return;
    }
    for mode in ["hash", "cpu", "qm", "lb"] {
        let port = free_port("127.0.0.1");
        let addr = format!("127.0.0.1:{port}");
        let j = json_tmp(&format!("fanout-{mode}"));
        let c = start_sink(&[
            "--listen",
            &addr,
            "--io",
            "packet",
            "--workers",
            "2",
            "--fanout",
            mode,
            "--count",
            "480",
            "--duration",
            "20",
            "--json-file",
            j.to_str().unwrap(),
        ]);
        send_paced(addr.parse().unwrap(), 480, 64, 16);
        finish(c);
        let v = read_json(&j);
        let per = per_worker_packets(&v);
        assert_eq!(per.iter().sum::<u64>(), 480, "{mode}: {v}");
        assert_eq!(v["fanout"], mode, "{v}");
        if matches!(mode, "hash" | "lb") {
            assert!(
                per.iter().all(|&n| n > 0),
                "{mode} reaches both workers: {per:?}"
            );
        }
        if mode == "hash" {
            assert!(
                per.iter().all(|&n| n % 30 == 0),
                "a flow's 30 datagrams stay on one worker: {per:?}"
            );
        }
    }
}

/// `--rate` paces and `--duration` ends a run (docs/sink-flood.md). A paced sender cannot
/// be early, however busy the host: 1000 datagrams at 4k/s take at least the 999 gaps of
/// 250 us, and in a 1 s run at 2k/s no more leave than the rate allows; the run ends by
/// itself, and every datagram reaches the socket.
#[test]
fn flood_rate_paces_and_duration_ends_the_run() {
    let rx = receiver("127.0.0.1:0");
    let target = rx.local_addr().unwrap().to_string();
    let j = json_tmp("flood-rate");
    let t0 = Instant::now();
    let o = Command::new(bin())
        .args([
            "flood", "--target", &target, "--count", "1000", "--rate", "4k", "--quiet",
        ])
        .arg("--json-file")
        .arg(&j)
        .output()
        .unwrap();
    let wall = t0.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = read_json(&j);
    assert_eq!(v["sent"], 1000, "{v}");
    assert_eq!(receive(&rx, 1000).0, 1000, "every datagram arrived");
    let secs = v["seconds"].as_f64().unwrap();
    assert!(secs >= 0.24, "1000 at 4k/s in {secs} s: not paced");
    assert!(wall >= Duration::from_millis(240), "{wall:?}");
    let j = json_tmp("flood-duration");
    let t0 = Instant::now();
    let c = Command::new(bin())
        .args([
            "flood",
            "--target",
            &target,
            "--rate",
            "2k",
            "--duration",
            "1",
            "--quiet",
        ])
        .arg("--json-file")
        .arg(&j)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = Spawned::of(c).wait(Duration::from_secs(30));
    let wall = t0.elapsed();
    assert!(st.success(), "flood --duration 1 failed");
    assert!(wall >= Duration::from_secs(1), "ended early: {wall:?}");
    let v = read_json(&j);
    let (sent, secs) = (v["sent"].as_u64().unwrap(), v["seconds"].as_f64().unwrap());
    assert!(secs >= 0.99, "--duration 1 ran {secs} s: {v}");
    assert!(sent > 0, "{v}");
    assert!(
        sent as f64 <= 2000.0 * secs + 2.0,
        "{sent} sent in {secs} s at 2k/s: {v}"
    );
    assert_eq!(receive(&rx, sent as usize).0 as u64, sent);
}

#[test]
fn a_burst_read_within_one_tick_is_timed_as_a_tick_not_as_zero_seconds() {
    // 64 datagrams back to back on loopback arrive well within the sink's 10 ms tick; the
    // window used to be zero seconds and the rate billions of pps.
    let port = free_port("127.0.0.1");
    let addr = format!("127.0.0.1:{port}");
    let j = json_tmp(&format!("sink-burst-{port}"));
    let sink = start_sink(&[
        "--listen",
        &addr,
        "--duration",
        "2",
        "--json-file",
        j.to_str().unwrap(),
    ]);
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..64u8 {
        s.send_to(&[i; 100], &addr).unwrap();
    }
    finish(sink);
    let v = read_json(&j);
    assert_eq!(v["packets"], 64, "{v}");
    let secs = v["seconds"].as_f64().unwrap();
    assert!(secs >= 0.01, "the window is at least one tick: {v}");
    assert!(
        v["pps"].as_f64().unwrap() <= 64.0 / 0.01 + 1e-6,
        "the rate is no higher than one tick allows: {v}"
    );
}
