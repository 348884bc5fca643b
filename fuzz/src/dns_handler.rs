//! The whole DNS handler: bytes in, a response out, as a UDP worker or the TCP loop calls
//! it, over the test zones.
//!
//! Input: two control bytes (the reply capacity, the transport, which handler: plain, with
//! NSID and cookies, with response rate limiting; the peer's family), then the message.
//! What must hold: no panic; a reply within the buffer and within the transport's limit;
//! the request's ID, QR set, opcode kept; a parsed question echoed byte for byte; sections
//! that walk to exactly the reply's end; and the counters adding up (each message is one
//! response by rcode, or one counted drop).

use crate::input::Input;
use firehose_dnswire::{get16, parse_query, NameBuf, Parsed, HEADER};
use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_proto::dns::build::build;
use firehose_proto::dns::counters::slot;
use firehose_proto::dns::options::OptionsConfig;
use firehose_proto::dns::zone::parse_zone;
use firehose_proto::dns::{DnsHandler, RrlConfig, Transport, DEFAULT_MAX_UDP};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

/// The test zones of crates/proto, as text.
pub const ZONES: [(&str, &str); 5] = [
    (
        "example.zone",
        include_str!("../../crates/proto/tests/data/example.zone"),
    ),
    (
        "reverse.zone",
        include_str!("../../crates/proto/tests/data/reverse.zone"),
    ),
    (
        "op.zone",
        include_str!("../../crates/proto/tests/data/op.zone"),
    ),
    (
        "child.zone",
        include_str!("../../crates/proto/tests/data/child.zone"),
    ),
    (
        "nsec3.zone",
        include_str!("../../crates/proto/tests/data/nsec3.zone"),
    ),
];

/// Capacities a backend may lend: the request's own length and a little more (the check
/// adds the request length), a 512-byte and an MTU-sized datagram, what is left of a
/// 2048- or 4096-byte AF_XDP frame, and the socket path's 64 KiB.
const CAPACITY: [usize; 8] = [
    0,
    11,
    17,
    512,
    1472,
    2048 - 256 - 42,
    4096 - 256 - 62,
    65536,
];

/// Three handlers over the same zones: plain, with NSID and cookies, with RRL.
fn handlers() -> &'static Mutex<[DnsHandler; 3]> {
    static H: OnceLock<Mutex<[DnsHandler; 3]>> = OnceLock::new();
    H.get_or_init(|| {
        let zones = ZONES
            .iter()
            .map(|(name, text)| parse_zone(text.as_bytes(), name).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .expect("test zones parse");
        let db = Arc::new(build(&zones).expect("test zones build"));
        let plain = DnsHandler::new(db.clone(), DEFAULT_MAX_UDP);
        let options = DnsHandler::new(db.clone(), DEFAULT_MAX_UDP).with_options(OptionsConfig {
            nsid: Some(vec![b'n'; 64]),
            cookie_secret: Some([7; 16]),
        });
        let rrl = DnsHandler::new(db, 4096).with_rrl(RrlConfig { rate: 2, slip: 2 });
        Mutex::new([plain, options, rrl])
    })
}

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let (a, b) = (inp.byte(), inp.byte());
    let msg = inp.rest();
    let mut g = handlers().lock().unwrap_or_else(|e| e.into_inner());
    let which = (a as usize >> 3) % 3;
    let max_udp = if which == 2 { 4096 } else { DEFAULT_MAX_UDP };
    let h = &mut g[which];
    let extra = CAPACITY[a as usize & 7];
    let cap = if extra < 512 {
        msg.len() + extra
    } else {
        extra.max(msg.len())
    };
    let tr = match b & 3 {
        0 | 1 => Transport::Udp,
        2 => Transport::Tcp { keepalive: None },
        _ => Transport::Tcp {
            keepalive: Some(100),
        },
    };
    let peer: SocketAddr = if b & 4 == 0 {
        SocketAddr::from(([192, 0, 2, b >> 3], 5353))
    } else {
        SocketAddr::from(([0xfd00, 0, 0, 0, 0, 0, 0, u16::from(b)], 5353))
    };
    answer(h, max_udp, msg, cap, tr, peer);
}

/// Answers `msg` in a buffer of `cap` bytes with `h` (built with `max_udp`) and checks
/// the response and the counters.
pub fn answer(
    h: &mut DnsHandler,
    max_udp: u16,
    msg: &[u8],
    cap: usize,
    tr: Transport,
    peer: SocketAddr,
) {
    let mut buf = vec![0u8; cap];
    buf[..msg.len()].copy_from_slice(msg);
    let before = h.stats().clone();
    let peer = Peer::from_addr(peer);
    let v = match tr {
        Transport::Udp => h.handle(&mut Request::new(&mut buf, msg.len(), peer)),
        tr => h.respond(&mut buf, msg.len(), tr, &peer),
    };
    let after = h.stats();
    let d = |s: usize| after.get(s) - before.get(s);
    let rcodes: u64 = (slot::NOERROR..=slot::RCODE_OTHER).map(d).sum();
    let drops = d(slot::DROPPED_SHORT) + d(slot::DROPPED_RESPONSE);
    assert_eq!(
        rcodes + drops,
        1,
        "one response or one counted drop per message"
    );
    let mut nb = NameBuf::default();
    let parsed = parse_query(msg, &mut nb);
    let qtypes: u64 = (slot::QTYPE_A..=slot::QTYPE_OTHER).map(d).sum();
    assert_eq!(qtypes, u64::from(matches!(parsed, Parsed::Query(_))));
    let n = match v {
        Verdict::Reply(n) => n,
        Verdict::Drop => {
            let rrl = d(slot::RRL_DROPPED);
            assert!(
                drops + rrl == 1,
                "a drop is counted (short, response or rrl)"
            );
            return;
        }
        Verdict::Error => panic!("the DNS handler never reports an error"),
    };
    assert!(n <= cap, "reply of {n} bytes in a {cap}-byte buffer");
    assert!(n >= HEADER, "reply shorter than a header");
    let resp = &buf[..n];
    assert_eq!(resp[..2], msg[..2], "ID echoed");
    assert!(resp[2] & 0x80 != 0, "QR set");
    assert_eq!(resp[2] & 0x78, msg[2] & 0x78, "opcode kept");
    if let Parsed::Query(q) = parsed {
        assert_eq!(get16(resp, 4), 1, "one question");
        assert_eq!(resp[HEADER..q.question_end], msg[HEADER..q.question_end]);
        if tr == Transport::Udp {
            let limit = q.edns.map_or(512, |e| e.udp_size.clamp(512, max_udp)) as usize;
            assert!(
                n <= limit,
                "UDP reply of {n} bytes over the client's limit {limit}"
            );
        }
    }
    if tr == Transport::Udp {
        assert!(n <= usize::from(max_udp.max(512)), "UDP reply of {n} bytes");
    }
    if let Err(e) = crate::dns_message::walk(resp) {
        panic!("malformed response ({e}): {resp:02x?}");
    }
}

/// A query for `name` and `qtype`, with EDNS (payload 1232, DO set) or without.
pub fn query(name: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let b = firehose_dnswire::QueryBuilder {
        id: 0x4242,
        edns: edns.then_some(firehose_dnswire::Edns {
            udp_size: 1232,
            version: 0,
            dnssec_ok: true,
        }),
        ..Default::default()
    };
    let mut out = Vec::new();
    b.write(name, qtype, &mut out).expect("a good name");
    out
}

/// Queries for names of every kind in the test zones.
pub fn queries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (name, t) in [
        ("www.example.com.", 1),
        ("x.y.wild.example.com.", 16),
        ("deep.sub.example.com.", 1),
        ("nx.example.com.", 28),
        ("big.example.com.", 16),
        ("example.com.", 255),
        ("80.2.0.192.in-addr.arpa.", 12),
        ("www.olddept.op.test.", 1),
        ("nx.olddept.op.test.", 15),
        ("x.outside.op.test.", 1),
        ("mx.op.test.", 15),
        ("cdeleg.op.test.", 1),
        ("child.op.test.", 43),
        ("www.n3.test.", 1),
        ("a.x.y.deep.n3.test.", 1),
        ("alias.n3.test.", 1),
        ("nope.n3.test.", 1),
    ] {
        out.push(query(name, t, false));
        out.push(query(name, t, true));
    }
    out
}

/// Every test query with a few control-byte combinations (capacities, transports,
/// handlers), plus a NOTIFY, a response and a runt.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, q) in queries().into_iter().enumerate() {
        let a = [0x07, 0x0b, 0x13, 0x04, 0x10, 0x00][i % 6];
        let b = [0x00, 0x02, 0x07, 0x0b][i % 4];
        out.push([&[a, b][..], &q].concat());
    }
    let mut notify = query("example.com.", 6, false);
    notify[2] = 0x20;
    out.push([&[0x00, 0x00][..], &notify].concat());
    let mut resp = query("example.com.", 6, false);
    resp[2] |= 0x80;
    out.push([&[0x00, 0x00][..], &resp].concat());
    out.push(vec![0, 0, 1, 2, 3]);
    out
}
