//! `firehose serve --proto echo`, driven over real sockets.

use crate::util::{tmp, Served};
use firehose_sys::retry_interrupted;
use std::net::UdpSocket;
use std::time::Duration;

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

pub(crate) fn check_exact_echo(listen: &str, bind: &str, profile: &[&str]) {
    let mut args = vec!["--listen", listen, "--workers", "2", "--cpus", "none"];
    args.extend_from_slice(profile);
    let srv = Served::start(&args);
    let c = UdpSocket::bind(bind).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = vec![0u8; 70000];
    for (k, size) in [0usize, 1, 100, 1472, 9000, 65507].into_iter().enumerate() {
        let msg = pattern(size, k as u8);
        c.send_to(&msg, srv.addr).unwrap();
        let (n, from) = retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
        assert_eq!(from, srv.addr);
        assert_eq!(n, size, "{profile:?} {listen}: size {size}");
        assert_eq!(
            &buf[..n],
            &msg[..],
            "{profile:?} {listen}: bytes differ at size {size}"
        );
    }
    let out = srv.stop();
    assert!(out.contains("stopped after"), "{out}");
}

#[test]
fn echo_is_exact_ipv4_every_profile() {
    for p in ["naive", "reuseport", "steered", "tuned", "latency"] {
        check_exact_echo("127.0.0.1:0", "127.0.0.1:0", &["--profile", p]);
    }
}

#[test]
fn echo_is_exact_ipv6() {
    if UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipping: no IPv6 loopback on this host");
        return;
    }
    check_exact_echo("[::1]:0", "[::1]:0", &["--profile", "naive"]);
    // IPv6 datagrams above the 65536-byte loopback MTU need fragmentation, which
    // IP_PMTUDISC_DO forbids, so the tuned profile is checked with the kernel default.
    check_exact_echo(
        "[::1]:0",
        "[::1]:0",
        &["--profile", "tuned", "--pmtudisc", "default"],
    );
}

#[test]
fn pmtudisc_do_refuses_oversize_replies_and_counts_them() {
    if UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("skipping: no IPv6 loopback on this host");
        return;
    }
    let dir = tmp("echo-do");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.json");
    let srv = Served::start(&[
        "--listen",
        "[::1]:0",
        "--profile",
        "tuned",
        "--json-file",
        path.to_str().unwrap(),
    ]);
    let c = UdpSocket::bind("[::1]:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.send_to(&pattern(65507, 1), srv.addr).unwrap();
    c.send_to(b"small", srv.addr).unwrap();
    let mut buf = vec![0u8; 70000];
    let (n, _) = retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
    assert_eq!(
        &buf[..n],
        b"small",
        "the oversize reply is refused, the next one goes out"
    );
    srv.stop();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["totals"]["packets_in"], 2);
    assert_eq!(doc["totals"]["packets_out"], 1);
    assert_eq!(
        doc["totals"]["send_errors"], 1,
        "EMSGSIZE is counted, not fatal"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stats_json_counts_what_was_served() {
    let dir = tmp("echo-stats");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.json");
    let srv = Served::tuned(&["--json-file", path.to_str().unwrap()]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 200];
    for i in 0..123u32 {
        c.send_to(&i.to_le_bytes(), srv.addr).unwrap();
        retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
    }
    srv.stop();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["totals"]["packets_in"], 123);
    assert_eq!(doc["totals"]["packets_out"], 123);
    assert_eq!(doc["applied"]["batch"], 64);
    assert_eq!(doc["applied"]["socket_detail"][0]["mtu_discover"], "do");
    assert_eq!(doc["applied"]["socket_detail"][0]["rxq_ovfl"], false);
    assert!(doc["totals"]["syscalls"].as_u64().unwrap() >= 123);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn startup_prints_the_read_back_configuration() {
    let mut srv = Served::tuned(&["--rcvbuf", "1M"]);
    let mut lines = String::new();
    for _ in 0..3 {
        std::io::BufRead::read_line(&mut srv.stdout, &mut lines).unwrap();
    }
    assert!(lines.contains("IP_MTU_DISCOVER=do"), "{lines}");
    assert!(lines.contains("SO_REUSEPORT=1"), "{lines}");
    if firehose_sys::cpu::is_root() {
        // SO_RCVBUFFORCE grants the size asked for; the kernel reports it doubled.
        assert!(
            lines.contains("SO_RCVBUF=2097152"),
            "granted size is printed: {lines}"
        );
    } else {
        eprintln!(
            "skipping the granted-buffer check: not root, so SO_RCVBUF is clamped to \
             net.core.rmem_max instead of forced to 1M"
        );
    }
    srv.stop();
}
