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
    srv.shutdown();
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
    srv.shutdown();
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
    let counters = srv.shutdown();
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
    srv.shutdown();
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
    srv.shutdown();
}

#[test]
fn rrl_drops_and_slips_past_the_rate() {
    use firehose_engine::{Handler, Peer, Verdict};
    use firehose_proto::dns::RrlConfig;
    let mut h = common::handler_for(&FILES).with_rrl(RrlConfig { rate: 5, slip: 2 });
    let mut buf = vec![0u8; 65536];
    let q = query("mx.op.test.", RecordType::MX, None);
    let mut ask_from = |ip: &str| {
        buf[..q.len()].copy_from_slice(&q);
        let peer = Peer::from_addr(format!("{ip}:5353").parse().unwrap());
        match h.handle(&mut buf, q.len(), &peer) {
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
