//! The responder on loopback, checked with an independent decoder (hickory-proto) and
//! with a real client (kdig).

mod common;

use common::{ask, exchange, section, start_server};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use std::process::Command;

#[test]
fn answers_every_record_type_authoritatively() {
    let srv = start_server();
    let a = srv.local_addr();
    let cases: &[(&str, RecordType, &[&str])] = &[
        (
            "example.com.",
            RecordType::A,
            &["example.com. 3600 A 192.0.2.1"],
        ),
        (
            "example.com.",
            RecordType::AAAA,
            &["example.com. 3600 AAAA 2001:db8::1"],
        ),
        (
            "example.com.",
            RecordType::NS,
            &[
                "example.com. 3600 NS ns1.example.com.",
                "example.com. 3600 NS ns2.example.net.",
            ],
        ),
        (
            "example.com.",
            RecordType::MX,
            &[
                "example.com. 3600 MX 10 mail.example.com.",
                "example.com. 3600 MX 20 mail.example.net.",
            ],
        ),
        (
            "example.com.",
            RecordType::TXT,
            &["example.com. 3600 TXT v=spf1 -all"],
        ),
        (
            "example.com.",
            RecordType::CAA,
            &["example.com. 3600 CAA 0 issue \"letsencrypt.org\""],
        ),
        (
            "_sip._udp.example.com.",
            RecordType::SRV,
            &["_sip._udp.example.com. 3600 SRV 0 5 5060 sip.example.com."],
        ),
        (
            "ptr.example.com.",
            RecordType::PTR,
            &["ptr.example.com. 3600 PTR web.example.com."],
        ),
        (
            "80.2.0.192.in-addr.arpa.",
            RecordType::PTR,
            &["80.2.0.192.in-addr.arpa. 3600 PTR web.example.com."],
        ),
        (
            "www.example.com.",
            RecordType::CNAME,
            &["www.example.com. 3600 CNAME web.example.com."],
        ),
        (
            "txt2.example.com.",
            RecordType::TXT,
            &["txt2.example.com. 3600 TXT first stringsecond string"],
        ),
    ];
    for &(name, t, want) in cases {
        let m = ask(a, name, t, Some(1232));
        assert_eq!(m.response_code(), ResponseCode::NoError, "{name} {t}");
        assert!(m.authoritative(), "{name} {t}: AA");
        assert!(!m.truncated());
        assert_eq!(m.id(), 0x4242);
        assert_eq!(section(m.answers()), want, "{name} {t}");
        assert!(
            m.name_servers().is_empty(),
            "{name} {t}: minimal positive answer"
        );
        assert_eq!(m.queries()[0].name().to_ascii(), name);
        assert_eq!(m.extensions().as_ref().map(|e| e.max_payload()), Some(1232));
    }
    let soa = ask(a, "example.com.", RecordType::SOA, None);
    assert_eq!(
        section(soa.answers()),
        ["example.com. 3600 SOA ns1.example.com. hostmaster.example.com. 2024010101 7200 3600 1209600 300"]
    );
    assert!(
        soa.extensions().is_none(),
        "no OPT without one in the query"
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn additional_records_for_ns_and_mx_targets() {
    let srv = start_server();
    let m = ask(srv.local_addr(), "example.com.", RecordType::MX, None);
    assert_eq!(
        section(m.additionals()),
        [
            "mail.example.com. 3600 A 192.0.2.25",
            "mail.example.com. 3600 AAAA 2001:db8::25"
        ]
    );
    let m = ask(srv.local_addr(), "example.com.", RecordType::NS, None);
    assert_eq!(
        section(m.additionals()),
        [
            "ns1.example.com. 3600 A 192.0.2.53",
            "ns1.example.com. 3600 AAAA 2001:db8::53"
        ]
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn names_match_ignoring_case_and_the_question_keeps_its_case() {
    let srv = start_server();
    let m = ask(
        srv.local_addr(),
        "mIxEd.cAsE.ExAmPlE.CoM.",
        RecordType::A,
        None,
    );
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(m.queries()[0].name().to_ascii(), "mIxEd.cAsE.ExAmPlE.CoM.");
    assert_eq!(
        section(m.answers()),
        ["mixed.case.example.com. 3600 A 192.0.2.99"]
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn cnames_are_followed_inside_the_zone() {
    let srv = start_server();
    let a = srv.local_addr();
    let m = ask(a, "chain1.example.com.", RecordType::A, None);
    assert_eq!(
        section(m.answers()),
        [
            "chain1.example.com. 3600 CNAME chain2.example.com.",
            "chain2.example.com. 3600 CNAME web.example.com.",
            "web.example.com. 300 A 192.0.2.80",
            "web.example.com. 300 A 192.0.2.81",
        ]
    );
    let m = ask(a, "alias-out.example.com.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(
        section(m.answers()),
        ["alias-out.example.com. 3600 CNAME www.example.org."]
    );
    let m = ask(a, "alias-nx.example.com.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(m.answers().len(), 1);
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    // A type no zone holds still follows the chain, to NODATA at the target.
    let m = ask(a, "www.example.com.", RecordType::SSHFP, None);
    assert_eq!(
        section(m.answers()),
        ["www.example.com. 3600 CNAME web.example.com."]
    );
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn negative_answers_carry_the_soa() {
    let srv = start_server();
    let a = srv.local_addr();
    let nx = ask(a, "nope.deep.example.com.", RecordType::A, Some(1232));
    assert_eq!(nx.response_code(), ResponseCode::NXDomain);
    assert!(nx.authoritative());
    assert!(nx.answers().is_empty());
    // TTL is min(SOA TTL, MINIMUM) per RFC 2308.
    assert_eq!(
        section(nx.name_servers()),
        ["example.com. 300 SOA ns1.example.com. hostmaster.example.com. 2024010101 7200 3600 1209600 300"]
    );
    let nodata = ask(a, "web.example.com.", RecordType::MX, None);
    assert_eq!(nodata.response_code(), ResponseCode::NoError);
    assert!(nodata.answers().is_empty());
    assert_eq!(nodata.name_servers()[0].record_type(), RecordType::SOA);
    // A name far deeper than any node: still NXDOMAIN with the SOA, and REFUSED outside.
    let deep = "a.".repeat(100) + "example.com.";
    let m = ask(a, &deep, RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    let m = ask(a, &("a.".repeat(100) + "example.org."), RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::Refused);
    // An empty non-terminal exists: NODATA, not NXDOMAIN.
    let ent = ask(a, "b.c.example.com.", RecordType::A, None);
    assert_eq!(ent.response_code(), ResponseCode::NoError);
    assert_eq!(ent.name_servers()[0].record_type(), RecordType::SOA);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn wildcards_synthesise_the_query_name() {
    let srv = start_server();
    let a = srv.local_addr();
    let m = ask(a, "Anything.At.All.wild.example.com.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(
        section(m.answers()),
        ["anything.at.all.wild.example.com. 3600 A 192.0.2.42"]
    );
    let m = ask(a, "x.wild.example.com.", RecordType::TXT, Some(4096));
    assert_eq!(
        section(m.answers()),
        ["x.wild.example.com. 3600 TXT wildcard"]
    );
    let m = ask(a, "x.wild.example.com.", RecordType::MX, None);
    assert!(m.answers().is_empty());
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    let m = ask(a, "some.cw.example.com.", RecordType::A, None);
    assert_eq!(
        section(m.answers()),
        [
            "some.cw.example.com. 3600 CNAME web.example.com.",
            "web.example.com. 300 A 192.0.2.80",
            "web.example.com. 300 A 192.0.2.81",
        ]
    );
    // RFC 4592 §2.2.2: a wildcard does not match below an existing name.
    let m = ask(a, "x.ns1.example.com.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn delegations_get_a_referral_with_glue() {
    let srv = start_server();
    for name in [
        "sub.example.com.",
        "host.deep.sub.example.com.",
        "ns.sub.example.com.",
    ] {
        let m = ask(srv.local_addr(), name, RecordType::A, None);
        assert_eq!(m.response_code(), ResponseCode::NoError, "{name}");
        assert!(
            !m.authoritative(),
            "{name}: a referral is not authoritative"
        );
        assert!(m.answers().is_empty());
        assert_eq!(
            section(m.name_servers()),
            [
                "sub.example.com. 3600 NS ns.other.net.",
                "sub.example.com. 3600 NS ns.sub.example.com."
            ]
        );
        assert_eq!(
            section(m.additionals()),
            ["ns.sub.example.com. 3600 A 192.0.2.100"]
        );
    }
    srv.shutdown().expect("no worker failed");
}

#[test]
fn refuses_names_outside_every_zone_and_other_classes() {
    let srv = start_server();
    let m = ask(srv.local_addr(), "example.org.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::Refused);
    assert!(!m.authoritative());
    assert!(m.answers().is_empty());
    // A name that exists, asked in class CH (a CHAOS query built by hickory, not patched
    // bytes): refused, not answered from the IN data.
    let mut q = Message::new();
    q.set_id(0x5151);
    let mut question = Query::query(Name::from_ascii("www.example.com.").unwrap(), RecordType::A);
    question.set_query_class(DNSClass::CH);
    q.add_query(question);
    let req = q.to_vec().unwrap();
    assert_eq!(
        u16::from_be_bytes([req[req.len() - 2], req[req.len() - 1]]),
        3,
        "class CH on the wire"
    );
    let m = Message::from_vec(&exchange(srv.local_addr(), &req).expect("an answer")).unwrap();
    assert_eq!(m.id(), 0x5151);
    assert_eq!(m.response_code(), ResponseCode::Refused);
    assert!(m.answers().is_empty());
    assert_eq!(
        m.queries()[0].query_class(),
        DNSClass::CH,
        "the question is echoed"
    );
    srv.shutdown().expect("no worker failed");
}

#[test]
fn any_gets_one_rrset_per_rfc8482() {
    let srv = start_server();
    // The apex holds SOA (6), NS (2), A (1), AAAA (28), MX (15), TXT (16) and CAA (257), in
    // that order in the file: the README promises the lowest-numbered type, A, which is
    // neither the first in the file nor the largest set.
    let m = ask(srv.local_addr(), "example.com.", RecordType::ANY, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative());
    assert_eq!(section(m.answers()), ["example.com. 3600 A 192.0.2.1"]);
    // A name with A and AAAA: A again.
    let m = ask(srv.local_addr(), "ns1.example.com.", RecordType::ANY, None);
    assert_eq!(section(m.answers()), ["ns1.example.com. 3600 A 192.0.2.53"]);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn large_answers_truncate_to_the_clients_size() {
    let srv = start_server();
    let a = srv.local_addr();
    let small = ask(a, "big.example.com.", RecordType::TXT, None);
    assert!(small.truncated(), "512 without EDNS");
    assert!(small.answers().is_empty());
    let mid = ask(a, "big.example.com.", RecordType::TXT, Some(1232));
    assert!(mid.truncated(), "2 KB of TXT does not fit 1232");
    assert!(mid.extensions().is_some(), "OPT kept when truncated");
    // The client offers 4096 but the server caps at its own 1232.
    let capped = ask(a, "big.example.com.", RecordType::TXT, Some(4096));
    assert!(capped.truncated());
    let fits = ask(a, "www.example.com.", RecordType::A, Some(512));
    assert!(!fits.truncated());
    srv.shutdown().expect("no worker failed");
}

/// The engine's contract: `buf.len()` is the reply capacity (64 KiB on the socket path,
/// a few KiB in an AF_XDP frame). A handler allowed 4096-byte answers must fit each reply
/// into the buffer it gets, truncating with TC when the answer does not fit.
#[test]
fn replies_fit_the_buffer_the_backend_lends() {
    use firehose_engine::{Handler, Peer, Request, Verdict};
    use firehose_proto::dns::{load_zones, DnsHandler};
    let paths: Vec<_> = common::ZONES.iter().map(|z| common::zone_path(z)).collect();
    let mut h = DnsHandler::new(load_zones(&paths).unwrap(), 4096);
    let peer = Peer::from_addr("127.0.0.1:9".parse().unwrap());
    let big = common::query("big.example.com.", RecordType::TXT, Some(4096));
    for (cap, truncated) in [(3900, false), (1500, true), (big.len(), true)] {
        let mut buf = vec![0u8; cap];
        buf[..big.len()].copy_from_slice(&big);
        let Verdict::Reply(n) = h.handle(&mut Request::new(&mut buf, big.len(), peer)) else {
            panic!("no reply in {cap} bytes");
        };
        assert!(n <= cap, "{n} bytes written into {cap}");
        let m = hickory_proto::op::Message::from_vec(&buf[..n]).unwrap();
        assert_eq!(m.truncated(), truncated, "capacity {cap}");
        assert_eq!(m.answers().is_empty(), truncated, "capacity {cap}");
    }
    // Every kind of answer in a buffer exactly as long as its query.
    for (name, t) in [
        ("www.example.com.", RecordType::A),
        ("example.com.", RecordType::NS),
        ("nx.example.com.", RecordType::AAAA),
        ("x.y.wild.example.com.", RecordType::TXT),
    ] {
        for edns in [None, Some(4096)] {
            let q = common::query(name, t, edns);
            let mut buf = q.clone();
            match h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
                Verdict::Reply(n) => assert!(n <= q.len()),
                v => panic!("{name} {t}: {v:?}"),
            }
        }
    }
}

#[test]
fn edns_version_and_opcode_and_malformed_queries() {
    let srv = start_server();
    let a = srv.local_addr();
    // EDNS version 1 -> BADVERS (extended rcode 16: 1 in the OPT, 0 in the header).
    let mut q = common::query("example.com.", RecordType::A, Some(1232));
    let opt = q.len() - 11;
    q[opt + 6] = 1;
    let r = exchange(a, &q).unwrap();
    assert_eq!(r[3] & 0xF, 0);
    assert_eq!(r[r.len() - 11 + 5], 1, "extended rcode high bits");
    assert_eq!(r[r.len() - 11 + 6], 0, "we speak version 0");
    // NOTIFY (4) carrying an SOA in the answer section -> NOTIMP with the question.
    let mut q = common::query("example.com.", RecordType::SOA, None);
    let qe = q.len();
    q[2] = 4 << 3;
    q[7] = 1;
    q.extend_from_slice(&[0xC0, 12, 0, 6, 0, 1, 0, 0, 0, 0, 0, 0]);
    let r = exchange(a, &q).unwrap();
    assert_eq!((r.len(), r[3] & 0xF, r[5], r[7]), (qe, 4, 1, 0));
    // Opcode STATUS (2) -> NOTIMP.
    let mut q = common::query("example.com.", RecordType::A, None);
    q[2] |= 2 << 3;
    let r = exchange(a, &q).unwrap();
    assert_eq!(r[3] & 0xF, 4);
    assert_eq!((r[2] >> 3) & 0xF, 2, "opcode echoed");
    // Trailing garbage, two questions, a compression pointer -> FORMERR, header only.
    let mut q = common::query("example.com.", RecordType::A, None);
    q.push(0);
    let r = exchange(a, &q).unwrap();
    assert_eq!((r.len(), r[3] & 0xF, r[0], r[1]), (12, 1, 0x42, 0x42));
    let mut q = common::query("example.com.", RecordType::A, None);
    q[5] = 2;
    assert_eq!(exchange(a, &q).unwrap()[3] & 0xF, 1);
    let ptr = [
        0x11, 0x22, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 1, 0, 1,
    ];
    assert_eq!(exchange(a, &ptr).unwrap()[3] & 0xF, 1);
    // Short datagrams and responses are dropped and counted.
    assert_eq!(exchange(a, &[1, 2, 3]), None);
    let mut resp = common::query("example.com.", RecordType::A, None);
    resp[2] |= 0x80;
    assert_eq!(exchange(a, &resp), None);
    let counters = srv.shutdown().expect("no worker failed");
    let get = |k: &str| counters.iter().find(|(n, _)| *n == k).map(|c| c.1);
    assert_eq!(get("dns_dropped_short"), Some(1));
    assert_eq!(get("dns_dropped_response"), Some(1));
    assert_eq!(get("dns_badvers"), Some(1));
    assert_eq!(get("dns_notimp"), Some(2));
    assert_eq!(get("dns_formerr"), Some(3));
}

/// Runs kdig against `port` and returns its output.
fn kdig(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("kdig")
        .args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            "+norec",
            "+retry=0",
            "+time=2",
        ])
        .args(args)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn kdig_sees_what_an_authoritative_server_should_say() {
    let srv = start_server();
    let port = srv.local_addr().port();
    let Some(out) = kdig(port, &["www.example.com", "A"]) else {
        eprintln!("skipped: kdig is not installed (Debian package knot-dnsutils)");
        return;
    };
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("Flags: qr aa;"), "{out}");
    assert!(
        out.contains("www.example.com.    \t3600\tIN\tCNAME\tweb.example.com."),
        "{out}"
    );
    assert!(
        out.contains("web.example.com.    \t300\tIN\tA\t192.0.2.81"),
        "{out}"
    );
    let out = kdig(port, &["nothing.example.com", "AAAA"]).unwrap();
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert!(out.contains("AUTHORITY SECTION:"), "{out}");
    let out = kdig(
        port,
        &["+bufsize=1232", "big.example.com", "TXT", "+ignore"],
    )
    .unwrap();
    assert!(out.contains("Flags: qr aa tc;"), "{out}");
    let out = kdig(port, &["+edns=1", "example.com", "SOA"]).unwrap();
    assert!(out.contains("status: BADVERS"), "{out}");
    let out = kdig(port, &["x.y.wild.example.com", "TXT"]).unwrap();
    assert!(
        out.contains("x.y.wild.example.com.\t3600\tIN\tTXT\t\"wildcard\""),
        "{out}"
    );
    let out = kdig(port, &["example.net", "A"]).unwrap();
    assert!(out.contains("status: REFUSED"), "{out}");
    srv.shutdown().expect("no worker failed");
}
