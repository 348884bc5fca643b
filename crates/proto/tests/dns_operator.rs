//! Regressions found by trying the responder as an operator would, against Knot on
//! zones the other tests never saw: DNAME, DS at a cut, truncation of the additional
//! section, CNAME into a delegation, and OPT in error replies.

mod common;

use common::{ask, exchange, query, section, start_server_for};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

const FILES: [&str; 2] = ["op.zone", "child.zone"];

/// Answer lines with the type by number where hickory does not know it.
fn lines(m: &hickory_proto::op::Message) -> Vec<String> {
    section(m.answers())
}

#[test]
fn dname_synthesizes_a_cname_and_follows_it() {
    let srv = start_server_for(&FILES);
    let a = srv.local_addr();
    let m = ask(a, "www.OldDept.op.test.", RecordType::A, Some(1232));
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative());
    let l = lines(&m);
    assert_eq!(l.len(), 3, "{l:?}");
    // hickory (without its DNSSEC features) prints DNAME as an unknown type.
    assert!(l[0].starts_with("olddept.op.test. 3600 "), "{l:?}");
    assert_eq!(m.answers()[0].record_type(), RecordType::Unknown(39));
    assert_eq!(l[1], "www.newdept.op.test. 3600 A 192.0.2.10");
    assert_eq!(l[2], "www.olddept.op.test. 3600 CNAME www.newdept.op.test.");
    // A target that does not exist: NXDOMAIN with the DNAME, the CNAME and the SOA.
    let m = ask(a, "nx.olddept.op.test.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(m.answers().len(), 2);
    assert_eq!(m.name_servers().len(), 1);
    // A target outside the zone: DNAME and CNAME only, the resolver goes on.
    let m = ask(a, "x.outside.op.test.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(lines(&m)[1], "x.outside.op.test. 3600 CNAME x.example.net.");
    // A synthesized name longer than 255 bytes: YXDOMAIN (RFC 6672 §2.2).
    let long = format!("{0}.{0}.{0}.{1}.s.op.test.", "a".repeat(63), "b".repeat(49));
    let m = ask(a, &long, RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::YXDomain);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn ds_is_served_from_the_parent_at_a_cut() {
    let srv = start_server_for(&FILES);
    let a = srv.local_addr();
    let m = ask(a, "deleg.op.test.", RecordType::DS, None);
    assert!(m.authoritative());
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.answers()[0].record_type(), RecordType::DS);
    // child.op.test is served here too, but DS belongs to op.test.
    let m = ask(a, "child.op.test.", RecordType::DS, None);
    assert!(m.authoritative());
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.answers()[0].record_type(), RecordType::DS);
    // Other types at the child apex still come from the child.
    let m = ask(a, "child.op.test.", RecordType::SOA, None);
    assert!(
        lines(&m)[0].contains("ns.child.op.test."),
        "{:?}",
        lines(&m)
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn only_the_additional_section_is_trimmed_when_it_overflows() {
    let srv = start_server_for(&FILES);
    for edns in [None, Some(1232)] {
        let req = query("mx.op.test.", RecordType::MX, edns);
        let resp = exchange(srv.local_addr(), &req).unwrap();
        assert!(resp.len() <= edns.unwrap_or(512) as usize);
        let m = hickory_proto::op::Message::from_vec(&resp).unwrap();
        assert!(!m.truncated(), "edns {edns:?}");
        assert_eq!(m.answers().len(), 20, "edns {edns:?}");
        let extra = m.additionals().len();
        assert!(extra > 0 && extra < 40, "{extra} additional records");
    }
    let counters = srv.shutdown().expect("no worker failed");
    assert!(
        counters.contains(&("dns_additional_trimmed", 2)),
        "{counters:?}"
    );
}

#[test]
fn cname_into_a_delegation_carries_the_referral() {
    let srv = start_server_for(&FILES);
    let m = ask(srv.local_addr(), "cdeleg.op.test.", RecordType::A, None);
    assert!(m.authoritative());
    assert_eq!(
        lines(&m),
        ["cdeleg.op.test. 3600 CNAME host.deleg.op.test."]
    );
    assert_eq!(
        section(m.name_servers()),
        ["deleg.op.test. 3600 NS ns.deleg.op.test."]
    );
    assert_eq!(
        section(m.additionals()),
        ["ns.deleg.op.test. 3600 A 192.0.2.54"]
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn formerr_and_notimp_carry_opt_when_the_query_had_one() {
    let srv = start_server_for(&FILES);
    let a = srv.local_addr();
    // QDCOUNT=0 with an OPT: FORMERR, and our OPT.
    let mut q = query("op.test.", RecordType::SOA, Some(1232));
    let qend = q.len() - 11;
    q.drain(12..qend);
    q[5] = 0;
    let r = exchange(a, &q).unwrap();
    assert_eq!((r[3] & 0xF, r[11], r.len()), (1, 1, 23));
    assert_eq!(r[12..15], [0, 0, 41]);
    // Opcode STATUS with an OPT: NOTIMP, the question, and our OPT.
    let mut q = query("op.test.", RecordType::SOA, Some(1232));
    q[2] = 2 << 3;
    let r = exchange(a, &q).unwrap();
    assert_eq!((r[3] & 0xF, r[5], r[11], r.len()), (4, 1, 1, q.len()));
    // Without an OPT, none comes back.
    let mut q = query("op.test.", RecordType::SOA, None);
    q[2] = 2 << 3;
    let r = exchange(a, &q).unwrap();
    assert_eq!((r[3] & 0xF, r[11], r.len()), (4, 0, q.len()));
    srv.shutdown().expect("no worker failed");
}

#[test]
fn rrl_drops_and_slips_past_the_rate() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::RrlConfig;
    let mut h = common::handler_for(&FILES).with_rrl(RrlConfig { rate: 5, slip: 2 });
    let mut buf = vec![0u8; 65536];
    let q = query("mx.op.test.", RecordType::MX, None);
    let mut ask_from = |ip: &str| {
        buf[..q.len()].copy_from_slice(&q);
        let peer = Peer::from_addr(format!("{ip}:5353").parse().unwrap());
        match h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
            Verdict::Reply(n) => Some(hickory_proto::op::Message::from_vec(&buf[..n]).unwrap()),
            _ => None,
        }
    };
    let (mut full, mut slipped, mut dropped) = (0, 0, 0);
    for i in 0..20 {
        // The same /24 throughout.
        match ask_from(&format!("192.0.2.{}", 10 + i)) {
            Some(m) if m.truncated() => {
                assert!(m.answers().is_empty());
                assert_eq!(m.queries().len(), 1);
                slipped += 1;
            }
            Some(m) => {
                assert_eq!(m.answers().len(), 20);
                full += 1;
            }
            None => dropped += 1,
        }
    }
    // 5 per second; 20 queries take well under a second but may straddle one boundary.
    assert!((5..=10).contains(&full), "{full} full answers");
    assert!(
        slipped >= 5 && dropped >= 5,
        "{slipped} slipped, {dropped} dropped"
    );
    // Another network has its own budget.
    assert!(ask_from("198.51.100.1").is_some_and(|m| !m.truncated()));
    let c = h.counters();
    assert!(c.contains(&("dns_rrl_slipped", slipped)), "{c:?}");
    assert!(c.contains(&("dns_rrl_dropped", dropped)), "{c:?}");
}

#[test]
fn rrl_counts_synthesized_answers_and_referrals_under_their_source() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::RrlConfig;
    // Random names below a wildcard, a delegation and a DNAME, and missing names: each
    // kind shares one count (the wildcard, the cut, the DNAME, the zone), as in Knot and
    // BIND; keyed by the query name, every name got a fresh one.
    let mut h =
        common::handler_for(&["example.zone", "op.zone"]).with_rrl(RrlConfig { rate: 5, slip: 0 });
    let peer = Peer::from_addr("192.0.2.7:5353".parse().unwrap());
    let mut buf = vec![0u8; 65536];
    for (kind, parent, t) in [
        ("wildcard", "wild.example.com.", RecordType::A),
        ("wildcard NODATA", "wild.example.com.", RecordType::MX),
        ("referral", "sub.example.com.", RecordType::A),
        ("DNAME", "olddept.op.test.", RecordType::A),
        ("NXDOMAIN", "example.com.", RecordType::A),
    ] {
        let mut sent = 0;
        for i in 0..12 {
            let q = query(&format!("r{i}x{}.{parent}", kind.len()), t, None);
            buf[..q.len()].copy_from_slice(&q);
            if let Verdict::Reply(_) = h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
                sent += 1;
            }
        }
        // 5 per second; 12 queries take well under a second but may straddle one boundary.
        assert!(sent <= 10, "{kind}: {sent} of 12 answered at 5 per second");
    }
}

/// A query with EDNS options `opts` (code, value) in its OPT.
fn with_options(name: &str, opts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut q = query(name, RecordType::A, Some(1232));
    let mut rdata = Vec::new();
    for (code, v) in opts {
        rdata.extend_from_slice(&code.to_be_bytes());
        rdata.extend_from_slice(&(v.len() as u16).to_be_bytes());
        rdata.extend_from_slice(v);
    }
    let at = q.len() - 2;
    q[at..].copy_from_slice(&(rdata.len() as u16).to_be_bytes());
    q.extend_from_slice(&rdata);
    q
}

/// The options of the OPT that ends a response, as (code, value).
fn response_options(r: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let n = r.len();
    let at = (11..n.min(300))
        .map(|k| n - k)
        .find(|&at| {
            r[at..at + 3] == [0, 0, 41]
                && u16::from_be_bytes([r[at + 9], r[at + 10]]) as usize == n - at - 11
        })
        .expect("an OPT at the end");
    let mut out = Vec::new();
    let mut o = at + 11;
    while o + 4 <= n {
        let code = u16::from_be_bytes([r[o], r[o + 1]]);
        let len = u16::from_be_bytes([r[o + 2], r[o + 3]]) as usize;
        out.push((code, r[o + 4..o + 4 + len].to_vec()));
        o += 4 + len;
    }
    out
}

#[test]
fn nsid_and_cookies_when_switched_on() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::options::OptionsConfig;
    use firehose_proto::dns::RrlConfig;
    let plain = common::handler_for(&FILES);
    let mut h = plain
        .clone()
        .with_options(OptionsConfig {
            nsid: Some(b"ns-a".to_vec()),
            cookie_secret: Some([7; 16]),
        })
        .with_rrl(RrlConfig { rate: 1, slip: 0 });
    let peer = Peer::from_addr("192.0.2.9:4000".parse().unwrap());
    let mut buf = vec![0u8; 65536];
    let mut ask = |h: &mut firehose_proto::DnsHandler, q: &[u8]| {
        buf[..q.len()].copy_from_slice(q);
        match h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
            Verdict::Reply(n) => Some(buf[..n].to_vec()),
            _ => None,
        }
    };
    let client = [1, 2, 3, 4, 5, 6, 7, 8];
    let q = with_options("newdept.op.test.", &[(3, b""), (10, &client)]);
    let r = ask(&mut h, &q).unwrap();
    let opts = response_options(&r);
    assert_eq!(opts[0], (3, b"ns-a".to_vec()));
    let (code, cookie) = &opts[1];
    assert_eq!(
        (*code, cookie.len(), &cookie[..8], cookie[8]),
        (10, 24, &client[..], 1)
    );
    // Rate 1: without a valid server cookie the next answers are dropped (at least one
    // of three, should a second begin between them)...
    let dropped = (0..3).filter(|_| ask(&mut h, &q).is_none()).count();
    assert!(dropped >= 1);
    // ...with the one we got, they are not.
    let q2 = with_options("newdept.op.test.", &[(10, cookie)]);
    for _ in 0..3 {
        let r = ask(&mut h, &q2).expect("a valid cookie is not rate limited");
        assert_eq!(response_options(&r)[0].1[..8], client);
    }
    // A cookie option of a forbidden length: FORMERR.
    let bad = with_options("newdept.op.test.", &[(10, &[1, 2, 3, 4, 5])]);
    let r = ask(&mut h, &bad).unwrap();
    assert_eq!(r[3] & 0xF, 1);
    // Switched off, the options are ignored.
    let mut off = plain;
    let r = ask(&mut off, &q).unwrap();
    assert!(response_options(&r).is_empty());
}

/// A reply never runs past the buffer the backend lends (a handler's contract; an AF_XDP
/// frame is a few KiB): an error reply written over a query whose OPT was shorter than
/// ours (NSID, cookie, keepalive) leaves our options out rather than writing past the
/// end. Found by the `dns_handler` fuzz target (it panicked on the slice).
#[test]
fn our_options_are_left_out_when_they_do_not_fit_the_buffer() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::options::OptionsConfig;
    use firehose_proto::dns::Transport;
    let mut h = common::handler_for(&FILES).with_options(OptionsConfig {
        nsid: Some(vec![b'n'; 64]),
        cookie_secret: None,
    });
    let peer = || Peer::from_addr("192.0.2.9:4000".parse().unwrap());
    // Class CH: REFUSED, the question and our OPT only.
    let mut q = with_options("newdept.op.test.", &[(3, b"")]);
    let qe = q.len() - 11 - 4;
    q[qe - 2..qe].copy_from_slice(&3u16.to_be_bytes());
    for tr in [
        Transport::Udp,
        Transport::Tcp {
            keepalive: Some(100),
        },
    ] {
        for cap in [q.len(), q.len() + 40, 4096] {
            let mut buf = vec![0u8; cap];
            buf[..q.len()].copy_from_slice(&q);
            let v = match tr {
                Transport::Udp => h.handle(&mut Request::new(&mut buf, q.len(), peer())),
                tr => h.respond(&mut buf, q.len(), tr, &peer()),
            };
            let Verdict::Reply(n) = v else {
                panic!("{v:?}")
            };
            assert!(n <= cap, "{n} bytes in a {cap}-byte buffer");
            assert_eq!(buf[3] & 0xF, 5, "REFUSED");
            let opts = response_options(&buf[..n]);
            if cap == 4096 {
                assert!(opts.contains(&(3, vec![b'n'; 64])), "room: NSID answered");
            } else if cap == q.len() {
                assert!(opts.is_empty(), "no room: a bare OPT, {opts:?}");
            }
        }
    }
}

/// A rate-limited response without a question (a FORMERR) cannot go out truncated, so its
/// slip sends nothing: it is counted as dropped, never as slipped (slipped counts TC=1
/// answers sent). Found by the `dns_handler` fuzz target's counters check.
#[test]
fn a_slip_that_sends_nothing_is_counted_as_a_drop() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::RrlConfig;
    let mut h = common::handler_for(&FILES).with_rrl(RrlConfig { rate: 1, slip: 1 });
    // QDCOUNT 1 but ANCOUNT 1: FORMERR, answered with the header alone (QDCOUNT 0).
    let mut q = query("newdept.op.test.", RecordType::A, None);
    q[7] = 1;
    let (mut dropped, mut replies) = (0, 0);
    for _ in 0..10 {
        let mut buf = vec![0u8; 4096];
        buf[..q.len()].copy_from_slice(&q);
        let peer = Peer::from_addr("192.0.2.9:4000".parse().unwrap());
        match h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
            Verdict::Reply(n) => {
                assert_eq!(buf[2] & 0x02, 0, "no TC=1 answer without a question");
                assert_eq!(buf[3] & 0xF, 1, "FORMERR");
                assert!(n >= 12);
                replies += 1;
            }
            Verdict::Drop => dropped += 1,
            v => panic!("{v:?}"),
        }
    }
    assert!(dropped >= 8, "rate 1: {replies} replies");
    let c = h.counters();
    assert!(c.contains(&("dns_rrl_dropped", dropped)), "{c:?}");
    assert!(c.contains(&("dns_rrl_slipped", 0)), "{c:?}");
}
