//! DNS over TCP (RFC 7766) beside the UDP workers: framing, pipelining, keepalive,
//! limits, idle timeout, and zone transfers.

mod common;

use common::{axfr, connect, exchange, query, read_framed, send_framed, start_udp_tcp, ZONES};
use firehose_proto::dns::TcpConfig;
use firehose_sys::retry_interrupted;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::io::Read;
use std::process::Command;
use std::time::Duration;

fn with_id(mut q: Vec<u8>, id: u16) -> Vec<u8> {
    q[..2].copy_from_slice(&id.to_be_bytes());
    q
}

/// The value of EDNS option `code` in a response whose last record is the OPT.
fn opt_option(resp: &[u8], code: u16) -> Option<Vec<u8>> {
    let n = resp.len();
    let at = (11..n.min(300)).map(|k| n - k).find(|&at| {
        resp[at..at + 3] == [0, 0, 41]
            && u16::from_be_bytes([resp[at + 9], resp[at + 10]]) as usize == n - at - 11
    })?;
    let mut o = at + 11;
    while o + 4 <= n {
        let c = u16::from_be_bytes([resp[o], resp[o + 1]]);
        let l = u16::from_be_bytes([resp[o + 2], resp[o + 3]]) as usize;
        if c == code {
            return Some(resp[o + 4..o + 4 + l].to_vec());
        }
        o += 4 + l;
    }
    None
}

#[test]
fn a_truncated_udp_answer_is_complete_over_tcp_with_pipelining() {
    let (udp, tcp) = start_udp_tcp(&ZONES, TcpConfig::default());
    let addr = udp.local_addr();
    assert_eq!(tcp.local_addr(), addr, "same address and port");
    let big = query("big.example.com.", RecordType::TXT, Some(1232));
    let r = Message::from_vec(&exchange(addr, &big).unwrap()).unwrap();
    assert!(r.truncated(), "2 KB of TXT does not fit UDP");
    // Three queries in one write; every answer comes back, complete.
    let mut s = connect(addr);
    let msgs = vec![
        with_id(big.clone(), 1),
        with_id(query("www.example.com.", RecordType::A, None), 2),
        with_id(query("nothere.example.com.", RecordType::AAAA, None), 3),
    ];
    send_framed(&mut s, &msgs);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let m = Message::from_vec(&read_framed(&mut s).expect("an answer")).unwrap();
        seen.push(m.id());
        match m.id() {
            1 => {
                assert!(!m.truncated());
                assert_eq!(m.answers().len(), 20);
            }
            2 => assert_eq!(m.answers().len(), 3),
            3 => assert_eq!(m.response_code(), ResponseCode::NXDomain),
            id => panic!("unexpected id {id}"),
        }
    }
    seen.sort();
    assert_eq!(seen, [1, 2, 3]);
    // The same connection goes on serving, and no keepalive is offered unasked.
    send_framed(&mut s, &[with_id(big, 4)]);
    let resp = read_framed(&mut s).unwrap();
    assert_eq!(opt_option(&resp, 11), None);
    drop(s);
    let c = tcp.shutdown();
    let get = |k: &str| c.iter().find(|(n, _)| *n == k).map(|c| c.1);
    assert_eq!(get("dns_tcp_queries"), Some(4));
    assert_eq!(get("dns_tcp_noerror"), Some(3));
    assert_eq!(get("dns_tcp_nxdomain"), Some(1));
    assert_eq!(get("dns_tcp_truncated"), Some(0));
    udp.shutdown().expect("no worker failed");
}

#[test]
fn keepalive_is_advertised_to_clients_that_ask() {
    let cfg = TcpConfig {
        idle: Duration::from_secs(7),
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&ZONES, cfg);
    let mut q = query("www.example.com.", RecordType::A, Some(1232));
    // An empty edns-tcp-keepalive option in the OPT (RFC 7828 §3.2.1).
    let rdlen_at = q.len() - 2;
    q[rdlen_at + 1] = 4;
    q.extend_from_slice(&[0, 11, 0, 0]);
    let mut s = connect(udp.local_addr());
    send_framed(&mut s, &[q.clone()]);
    let resp = read_framed(&mut s).unwrap();
    assert_eq!(
        opt_option(&resp, 11),
        Some(vec![0, 70]),
        "7 s in units of 100 ms"
    );
    // Never over UDP (RFC 7828 §3.2.1).
    let resp = exchange(udp.local_addr(), &q).unwrap();
    assert_eq!(opt_option(&resp, 11), None);
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}

/// The limit per client, with an idle timeout no busy host can reach mid-test: which
/// connection is refused depends on the count only, never on time.
#[test]
fn the_connection_over_the_per_client_limit_is_closed() {
    let cfg = TcpConfig {
        max_per_client: 2,
        idle: Duration::from_secs(600),
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&ZONES, cfg);
    let addr = udp.local_addr();
    let mut a = connect(addr);
    let mut b = connect(addr);
    // Both are served.
    for s in [&mut a, &mut b] {
        send_framed(s, &[query("www.example.com.", RecordType::A, None)]);
        assert!(read_framed(s).is_some());
    }
    // The third from the same address is closed at once.
    let mut c = connect(addr);
    let mut byte = [0u8; 1];
    assert_eq!(
        retry_interrupted(|| c.read(&mut byte)).unwrap_or(0),
        0,
        "closed without an answer"
    );
    let c = tcp.shutdown();
    let get = |k: &str| c.iter().find(|(n, _)| *n == k).map(|c| c.1);
    assert_eq!(get("dns_tcp_accepted"), Some(2));
    assert_eq!(get("dns_tcp_rejected"), Some(1));
    assert_eq!(get("dns_tcp_idle_closed"), Some(0));
    udp.shutdown().expect("no worker failed");
}

/// Idle connections are closed by the server: the test waits for the end of stream (an
/// event), however long the host takes past the 300 ms.
#[test]
fn idle_connections_are_closed() {
    let cfg = TcpConfig {
        idle: Duration::from_millis(300),
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&ZONES, cfg);
    let addr = udp.local_addr();
    let mut a = connect(addr);
    let mut b = connect(addr);
    for s in [&a, &b] {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    }
    send_framed(&mut a, &[query("www.example.com.", RecordType::A, None)]);
    assert!(read_framed(&mut a).is_some());
    // End of stream, no answer: one served first, one never asked anything.
    let mut byte = [0u8; 1];
    assert_eq!(retry_interrupted(|| a.read(&mut byte)).unwrap(), 0);
    assert_eq!(retry_interrupted(|| b.read(&mut byte)).unwrap(), 0);
    let c = tcp.shutdown();
    let get = |k: &str| c.iter().find(|(n, _)| *n == k).map(|c| c.1);
    assert_eq!(get("dns_tcp_accepted"), Some(2));
    assert_eq!(get("dns_tcp_idle_closed"), Some(2));
    udp.shutdown().expect("no worker failed");
}

#[test]
fn axfr_to_allowed_addresses_only() {
    let cfg = TcpConfig {
        allow_transfer: vec!["127.0.0.0/8".parse().unwrap()],
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&ZONES, cfg);
    let (rc, recs) = axfr(udp.local_addr(), "example.com.");
    assert_eq!(rc, ResponseCode::NoError);
    assert_eq!(recs.first().unwrap().record_type(), RecordType::SOA);
    // The 55 records of example.zone, and the SOA again at the end.
    assert_eq!(recs.len(), 56);
    let (rc, _) = axfr(udp.local_addr(), "www.example.com.");
    assert_eq!(rc, ResponseCode::NotAuth, "not a zone apex");
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
    let cfg = TcpConfig {
        allow_transfer: vec!["192.0.2.1".parse().unwrap()],
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&ZONES, cfg);
    let (rc, recs) = axfr(udp.local_addr(), "example.com.");
    assert_eq!((rc, recs.len()), (ResponseCode::Refused, 0));
    let c = tcp.shutdown();
    assert!(c.contains(&("dns_tcp_axfr_refused", 1)), "{c:?}");
    udp.shutdown().expect("no worker failed");
}

#[test]
fn kdig_follows_a_truncated_answer_over_tcp() {
    let (udp, tcp) = start_udp_tcp(&ZONES, TcpConfig::default());
    let port = udp.local_addr().port().to_string();
    let out = match Command::new("kdig")
        .args(["@127.0.0.1", "-p", &port, "+norec", "+retry=0", "+time=2"])
        .args(["+bufsize=1232", "big.example.com", "TXT"])
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            eprintln!("skipped: kdig is not installed (Debian package knot-dnsutils)");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(TCP)"), "{text}");
    assert!(text.contains("ANSWER: 20;"), "{text}");
    assert!(text.contains("Flags: qr aa;"), "{text}");
    let out = Command::new("kdig")
        .args(["@127.0.0.1", "-p", &port, "+tcp", "+norec", "+time=2"])
        .args(["www.example.com", "A"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("A\t192.0.2.81"), "{text}");
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}

/// The value of counter `name` now.
fn counter(tcp: &firehose_proto::dns::TcpServer, name: &str) -> u64 {
    tcp.counters()
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |c| c.1)
}

#[test]
fn a_client_that_does_not_read_holds_up_nobody_else() {
    let (udp, tcp) = start_udp_tcp(&ZONES, TcpConfig::default());
    let addr = udp.local_addr();
    // 5000 queries for 2 KB answers, sent from another thread (the server stops
    // reading them once the answers back up), none of the answers read yet.
    const N: u16 = 5000;
    let mut slow = connect(addr);
    let mut writer = slow.try_clone().unwrap();
    let big = query("big.example.com.", RecordType::TXT, None);
    let msgs: Vec<Vec<u8>> = (0..N).map(|i| with_id(big.clone(), i)).collect();
    let sender = std::thread::spawn(move || send_framed(&mut writer, &msgs));
    // Wait (bounded) until the server has found the slow client's socket full.
    for _ in 0..1000 {
        if counter(&tcp, "dns_tcp_write_blocked") > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(counter(&tcp, "dns_tcp_write_blocked") > 0, "never blocked");
    // Another client is answered meanwhile, by the same (single) TCP thread.
    let mut other = connect(addr);
    send_framed(
        &mut other,
        &[with_id(query("www.example.com.", RecordType::A, None), 9)],
    );
    let m = Message::from_vec(&read_framed(&mut other).expect("answered")).unwrap();
    assert_eq!((m.id(), m.answers().len()), (9, 3));
    // The slow client gets every answer, in order, once it reads.
    for i in 0..N {
        let m = Message::from_vec(&read_framed(&mut slow).expect("an answer")).unwrap();
        assert_eq!((m.id(), m.answers().len()), (i, 20));
    }
    sender.join().unwrap();
    let c = tcp.shutdown();
    let get = |k: &str| c.iter().find(|(n, _)| *n == k).map(|c| c.1);
    assert_eq!(get("dns_tcp_queries"), Some(N as u64 + 1));
    udp.shutdown().expect("no worker failed");
}

#[test]
fn messages_split_anywhere_are_reassembled() {
    use std::io::Write;
    let (udp, tcp) = start_udp_tcp(&ZONES, TcpConfig::default());
    let mut s = connect(udp.local_addr());
    s.set_nodelay(true).unwrap();
    let framed = |id: u16| {
        let q = with_id(query("www.example.com.", RecordType::A, None), id);
        let mut f = (q.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(&q);
        f
    };
    let pause = || std::thread::sleep(Duration::from_millis(2));
    // Byte by byte, the length prefix included.
    for b in framed(1) {
        s.write_all(&[b]).unwrap();
        pause();
    }
    // One message and the first byte of the next one's prefix, then the rest.
    let (a, b) = (framed(2), framed(3));
    let mut first = a.clone();
    first.push(b[0]);
    s.write_all(&first).unwrap();
    pause();
    s.write_all(&b[1..]).unwrap();
    for id in 1..=3 {
        let m = Message::from_vec(&read_framed(&mut s).expect("an answer")).unwrap();
        assert_eq!((m.id(), m.answers().len()), (id, 3));
    }
    // A partial message at end of stream is never answered, and the server closes.
    s.write_all(&framed(4)[..5]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(read_framed(&mut s).is_none());
    let c = tcp.shutdown();
    assert!(c.contains(&("dns_tcp_queries", 3)), "{c:?}");
    udp.shutdown().expect("no worker failed");
}

#[test]
fn a_transfer_larger_than_a_connection_queue_streams_whole() {
    let dir = std::env::temp_dir().join(format!("fh-axfr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.zone");
    let mut z = String::from("$ORIGIN big.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n");
    for i in 0..6000 {
        z.push_str(&format!("host{i} A 192.0.{}.{}\n", i / 250, i % 250));
    }
    std::fs::write(&path, z).unwrap();
    let cfg = TcpConfig {
        allow_transfer: vec!["127.0.0.1".parse().unwrap()],
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&[path.to_str().unwrap()], cfg);
    let _ = std::fs::remove_dir_all(&dir);
    let (rc, recs) = axfr(udp.local_addr(), "big.test.");
    assert_eq!(rc, ResponseCode::NoError);
    // SOA, NS, 6000 A, SOA: about 150 KB in ten 16 KB messages.
    assert_eq!(recs.len(), 6003);
    assert_eq!(recs.last().unwrap().record_type(), RecordType::SOA);
    let names: std::collections::HashSet<String> =
        recs.iter().map(|r| r.name().to_string()).collect();
    assert!(names.contains("host5999.big.test."));
    let c = tcp.shutdown();
    assert!(c.contains(&("dns_tcp_axfr", 1)), "{c:?}");
    udp.shutdown().expect("no worker failed");
}

/// docs/dns.md: an AXFR is streamed whole before the queries pipelined behind it are
/// answered, and a message the server does not answer (here a response) closes the
/// connection once the earlier answers are written: every message of the transfer, then
/// the pipelined answer, then end of stream (not a timeout).
#[test]
fn a_transfer_comes_before_pipelined_answers_and_a_bad_message_closes_after_them() {
    let dir = std::env::temp_dir().join(format!("fh-axfr-order-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.zone");
    let mut z = String::from("$ORIGIN big.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\n");
    for i in 0..6000 {
        z.push_str(&format!("host{i} A 192.0.{}.{}\n", i / 250, i % 250));
    }
    std::fs::write(&path, z).unwrap();
    let cfg = TcpConfig {
        allow_transfer: vec!["127.0.0.1".parse().unwrap()],
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&[path.to_str().unwrap()], cfg);
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = connect(udp.local_addr());
    let transfer = with_id(query("big.test.", RecordType::AXFR, None), 7);
    let after = with_id(query("host42.big.test.", RecordType::A, None), 8);
    let mut bad = with_id(query("host43.big.test.", RecordType::A, None), 9);
    bad[2] |= 0x80; // a response: never answered
    send_framed(&mut s, &[transfer, after, bad]);
    let mut records = 0;
    let mut messages = 0;
    loop {
        let m = Message::from_vec(&read_framed(&mut s).expect("the transfer")).unwrap();
        assert_eq!(
            m.id(),
            7,
            "nothing overtakes the transfer (message {messages})"
        );
        messages += 1;
        records += m.answers().len();
        if records > 1 && m.answers().last().unwrap().record_type() == RecordType::SOA {
            break;
        }
    }
    assert_eq!(records, 6003, "SOA, NS, 6000 A, SOA");
    assert!(messages > 1, "streamed in several messages");
    let m = Message::from_vec(&read_framed(&mut s).expect("the pipelined answer")).unwrap();
    assert_eq!((m.id(), m.answers().len()), (8, 1));
    let mut rest = [0u8; 1];
    assert_eq!(
        s.read(&mut rest).expect("end of stream, not a timeout"),
        0,
        "closed after the earlier answers, the bad message unanswered"
    );
    let c = tcp.shutdown();
    assert!(c.contains(&("dns_tcp_axfr", 1)), "{c:?}");
    udp.shutdown().expect("no worker failed");
}
