//! CNAME and DNAME chains (RFC 6672 §3.1, RFC 1034 §4.3.2 step 3: a name rewritten by
//! a CNAME or a DNAME restarts the lookup), and IXFR (RFC 1995).

mod common;

use common::{
    ask, exchange, ixfr_query, section, start_server_for, start_udp_tcp, transfer, ZONES,
};
use firehose_proto::dns::TcpConfig;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;

const CHAIN: [&str; 1] = ["chain.zone"];

/// The answer section, one `owner TYPE data` line per record, in the order sent
/// (DNAME by number: hickory prints it as an unknown type).
fn answer(m: &Message) -> Vec<String> {
    m.answers()
        .iter()
        .map(|r| {
            let t = match r.record_type() {
                RecordType::Unknown(39) => "DNAME".to_string(),
                t => t.to_string(),
            };
            let data = if t == "DNAME" {
                String::new()
            } else {
                format!(" {}", r.data())
            };
            let owner = r.name().to_ascii().to_ascii_lowercase();
            format!("{owner} {t}{}", data.to_ascii_lowercase())
        })
        .collect()
}

#[test]
fn a_cname_into_a_dname_restarts_the_lookup() {
    let srv = start_server_for(&CHAIN);
    let m = ask(srv.local_addr(), "cdname.ch.test.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative());
    assert_eq!(
        answer(&m),
        [
            "cdname.ch.test. CNAME a.olddept.ch.test.",
            "olddept.ch.test. DNAME",
            "a.olddept.ch.test. CNAME a.newdept.ch.test.",
            "a.newdept.ch.test. A 192.0.2.12",
        ]
    );
    // The new name does not exist: NXDOMAIN, the chain, and the SOA.
    let m = ask(srv.local_addr(), "cdname-nx.ch.test.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    assert_eq!(answer(&m).len(), 3, "{:?}", answer(&m));
    assert_eq!(section(m.name_servers()).len(), 1);
    assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    srv.shutdown().expect("no worker failed");
}

#[test]
fn dname_chains_are_followed_to_the_end() {
    let srv = start_server_for(&CHAIN);
    let a = srv.local_addr();
    // DNAME -> DNAME -> DNAME, from the query name.
    let m = ask(a, "WWW.d1.ch.test.", RecordType::A, Some(1232));
    assert_eq!(
        answer(&m),
        [
            "d1.ch.test. DNAME",
            "www.d1.ch.test. CNAME www.d2.ch.test.",
            "d2.ch.test. DNAME",
            "www.d2.ch.test. CNAME www.d3.ch.test.",
            "d3.ch.test. DNAME",
            "www.d3.ch.test. CNAME www.final.ch.test.",
            "www.final.ch.test. A 192.0.2.13",
        ]
    );
    // DNAME -> CNAME -> DNAME chain: the CNAME's template carries its own chain.
    let m = ask(a, "cc.d4.ch.test.", RecordType::A, None);
    assert_eq!(m.answers().len(), 10, "{:?}", answer(&m));
    assert_eq!(answer(&m)[9], "www.final.ch.test. A 192.0.2.13");
    // DNAME -> wildcard: the owner is the new name.
    let m = ask(a, "x.d5.ch.test.", RecordType::A, None);
    assert_eq!(answer(&m)[2], "x.w.ch.test. A 192.0.2.14");
    // A wildcard's NODATA after a DNAME: the SOA keeps its own name.
    let m = ask(a, "x.d5.ch.test.", RecordType::TXT, None);
    assert_eq!(m.answers().len(), 2);
    assert_eq!(m.name_servers()[0].name().to_ascii(), "ch.test.");
    // A DNAME whose target is a DNAME's own owner plus labels: five links, then stop.
    let m = ask(a, "a.self.ch.test.", RecordType::A, None);
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert_eq!(answer(&m).len(), 6, "{:?}", answer(&m));
    // Seven DNAMEs in a row: five links.
    let m = ask(a, "x.e0.ch.test.", RecordType::A, None);
    assert_eq!(answer(&m).len(), 10, "{:?}", answer(&m));
    assert!(m.name_servers().is_empty());
    // A CNAME query is answered by the synthesized CNAME.
    let m = ask(a, "www.d1.ch.test.", RecordType::CNAME, None);
    assert_eq!(answer(&m).len(), 2, "{:?}", answer(&m));
    srv.shutdown().expect("no worker failed");
}

#[test]
fn loops_end_where_they_close() {
    let srv = start_server_for(&CHAIN);
    let a = srv.local_addr();
    // CNAME -> DNAME -> CNAME back to the start.
    let m = ask(a, "loopc.ch.test.", RecordType::A, None);
    assert_eq!(
        answer(&m),
        [
            "loopc.ch.test. CNAME x.dl.ch.test.",
            "dl.ch.test. DNAME",
            "x.dl.ch.test. CNAME x.dl2.ch.test.",
            "x.dl2.ch.test. CNAME loopc.ch.test.",
        ]
    );
    let m = ask(a, "l1.ch.test.", RecordType::A, None);
    assert_eq!(answer(&m).len(), 2);
    // Seven CNAMEs in a row: five links, no SOA.
    let m = ask(a, "n0.ch.test.", RecordType::A, None);
    assert_eq!(answer(&m).len(), 5);
    assert!(m.name_servers().is_empty());
    srv.shutdown().expect("no worker failed");
}

/// Our serial in chain.zone.
const SERIAL: u32 = 1;

#[test]
fn ixfr_gets_the_soa_or_the_whole_zone() {
    let cfg = TcpConfig {
        allow_transfer: vec!["127.0.0.0/8".parse().unwrap()],
        ..TcpConfig::default()
    };
    let (udp, tcp) = start_udp_tcp(&CHAIN, cfg);
    let addr = udp.local_addr();
    // Over UDP: our SOA, whatever the client holds (RFC 1995 §2).
    for serial in [SERIAL, SERIAL + 4, SERIAL.wrapping_sub(2)] {
        let r = exchange(addr, &ixfr_query("ch.test.", Some(serial))).unwrap();
        let m = Message::from_vec(&r).unwrap();
        assert_eq!(m.response_code(), ResponseCode::NoError, "serial {serial}");
        assert!(m.authoritative());
        assert_eq!(m.queries()[0].query_type(), RecordType::IXFR);
        assert_eq!(m.answers().len(), 1);
        assert_eq!(m.answers()[0].record_type(), RecordType::SOA);
    }
    // Over TCP: a current client gets the SOA, an older one the zone AXFR-style.
    for serial in [SERIAL, SERIAL + 4] {
        let (rc, recs) = transfer(addr, &ixfr_query("ch.test.", Some(serial)));
        assert_eq!(
            (rc, recs.len()),
            (ResponseCode::NoError, 1),
            "serial {serial}"
        );
    }
    let (_, axfr) = common::axfr(addr, "ch.test.");
    let (rc, recs) = transfer(addr, &ixfr_query("ch.test.", Some(SERIAL.wrapping_sub(2))));
    assert_eq!(rc, ResponseCode::NoError);
    assert_eq!(section(&recs), section(&axfr));
    // The 47 records of chain.zone and the SOA again.
    assert_eq!(recs.len(), 48);
    // Without the client's SOA: FORMERR; a name that is no apex: NOTAUTH.
    let r = exchange(addr, &ixfr_query("ch.test.", None)).unwrap();
    assert_eq!(
        Message::from_vec(&r).unwrap().response_code(),
        ResponseCode::FormErr
    );
    let (rc, _) = transfer(addr, &ixfr_query("www.d1.ch.test.", Some(0)));
    assert_eq!(rc, ResponseCode::NotAuth);
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}

#[test]
fn ixfr_is_refused_to_those_not_allowed() {
    let (udp, tcp) = start_udp_tcp(&ZONES, TcpConfig::default());
    let addr = udp.local_addr();
    let q = ixfr_query("example.com.", Some(0));
    let r = Message::from_vec(&exchange(addr, &q).unwrap()).unwrap();
    assert_eq!(r.response_code(), ResponseCode::Refused);
    assert_eq!(r.queries().len(), 1, "the question is echoed");
    let (rc, _) = transfer(addr, &q);
    assert_eq!(rc, ResponseCode::Refused);
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}
