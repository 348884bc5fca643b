//! Differential test: the same zones in Knot DNS and in our responder, a few hundred
//! generated queries, and every difference in rcode, flags or sections reported.

mod common;

use common::{
    compare_sets, compare_trimmed, compare_with_do, exchange, fold, mix_case, no_differences,
    query, query_do, section, start_server, start_server_for, Knot, Signer, NAMES, OPERATOR_NAMES,
    OPERATOR_ZONES,
};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::net::SocketAddr;

const TYPES: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::NS,
    RecordType::SOA,
    RecordType::MX,
    RecordType::TXT,
    RecordType::CNAME,
    RecordType::SRV,
    RecordType::PTR,
    RecordType::CAA,
    RecordType::SSHFP,
    RecordType::DS,
    RecordType::ANY,
];

/// What we compare: rcode, AA, TC, and the three sections; `None` when no answer came.
fn summary(server: SocketAddr, req: &[u8]) -> Option<String> {
    let resp = exchange(server, req)?;
    let m = Message::from_vec(&resp).expect("decodes");
    Some(format!(
        "rcode={} aa={} tc={} qr={}\n  answer: {:?}\n  authority: {:?}\n  additional: {:?}",
        m.response_code(),
        m.authoritative(),
        m.truncated(),
        m.message_type() as u8,
        fold(section(m.answers())),
        fold(section(m.name_servers())),
        fold(section(m.additionals())),
    ))
}

/// Header bytes 2-11 (flags, rcode, counts) and the OPT's extended rcode and version;
/// `None` when no answer came.
fn raw_summary(server: SocketAddr, req: &[u8]) -> Option<String> {
    let r = exchange(server, req)?;
    Some(if r.len() >= 12 {
        let opt = if r[11] > 0 && r.len() >= 23 {
            format!("{:?}", &r[r.len() - 6..r.len() - 4])
        } else {
            "-".into()
        };
        format!("flags/counts {:02x?} opt {opt}", &r[2..12])
    } else {
        format!("{} bytes", r.len())
    })
}

/// Compares two answers to one query. Every query sent here is one both servers answer,
/// so a missing answer on either side is a difference, never an agreement. Returns true
/// when both answered (a real comparison).
fn compare(
    what: &str,
    knot: Option<String>,
    ours: Option<String>,
    diffs: &mut Vec<String>,
) -> bool {
    match (&knot, &ours) {
        (Some(k), Some(o)) => {
            if k != o {
                diffs.push(format!("{what}\n knot: {k}\n ours: {o}"));
            }
            true
        }
        _ => {
            let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "no answer".into());
            diffs.push(format!(
                "{what}\n knot: {}\n ours: {}",
                show(&knot),
                show(&ours)
            ));
            false
        }
    }
}

#[test]
fn same_answers_as_knot() {
    let Some(knot) = Knot::start() else {
        return;
    };
    let ours = start_server();
    let mut diffs = Vec::new();
    let (mut sent, mut compared) = (0, 0);
    for (i, name) in NAMES.iter().enumerate() {
        for (j, &t) in TYPES.iter().enumerate() {
            let name = mix_case(name, i + j);
            for edns in [None, Some(1232)] {
                let req = query(&name, t, edns);
                let (k, o) = (summary(knot.addr, &req), summary(ours.local_addr(), &req));
                sent += 1;
                let what = format!("{name} {t} edns={edns:?}");
                compared += usize::from(compare(&what, k, o, &mut diffs));
            }
        }
    }
    // Header-level cases: EDNS version 1, opcode STATUS, class CH, QTYPE ANY.
    let base = query("www.example.com.", RecordType::A, Some(1232));
    let mut specials: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut v = base.clone();
    let at = v.len() - 11 + 6;
    v[at] = 1;
    specials.push(("edns version 1", v));
    let mut v = query("www.example.com.", RecordType::A, None);
    v[2] |= 2 << 3;
    specials.push(("opcode 2", v));
    let mut v = query("www.example.com.", RecordType::A, None);
    let at = v.len() - 1;
    v[at] = 3;
    specials.push(("class CH", v));
    specials.push((
        "ANY at a CNAME",
        query("www.example.com.", RecordType::ANY, None),
    ));
    for (what, req) in specials {
        let (k, o) = (
            raw_summary(knot.addr, &req),
            raw_summary(ours.local_addr(), &req),
        );
        eprintln!("{what}: knot {k:?}");
        sent += 1;
        compared += usize::from(compare(what, k, o, &mut diffs));
    }
    ours.shutdown().expect("no worker failed");
    assert!(
        diffs.is_empty(),
        "{} of {sent} answers differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    // Every query was answered by both and compared.
    assert_eq!(compared, NAMES.len() * TYPES.len() * 2 + 4, "{sent} sent");
}

const OPERATOR_TYPES: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::NS,
    RecordType::SOA,
    RecordType::MX,
    RecordType::CNAME,
    RecordType::Unknown(39),
    RecordType::DS,
    RecordType::TXT,
];

#[test]
fn operator_zones_match_knot() {
    let Some(knot) = Knot::start_with(&OPERATOR_ZONES) else {
        return;
    };
    let files: Vec<&str> = OPERATOR_ZONES.iter().map(|z| z.1).collect();
    let ours = start_server_for(&files);
    let mut diffs = Vec::new();
    let mut n = 0;
    for (i, name) in OPERATOR_NAMES.iter().enumerate() {
        for (j, &t) in OPERATOR_TYPES.iter().enumerate() {
            let name = mix_case(name, i + j);
            for edns in [None, Some(1232), Some(4096)] {
                let req = query(&name, t, edns);
                n += 1;
                let what = format!("{name} {t} edns={edns:?}");
                diffs.extend(compare_trimmed(knot.addr, ours.local_addr(), &req, &what));
            }
        }
    }
    // FORMERR and NOTIMP to queries carrying an OPT carry one too (RFC 6891 §7).
    let mut no_question = query("op.test.", RecordType::SOA, Some(1232));
    let qend = no_question.len() - 11;
    no_question.drain(12..qend);
    no_question[5] = 0;
    let mut status = query("op.test.", RecordType::SOA, Some(1232));
    status[2] = 2 << 3;
    for (what, req) in [("QDCOUNT=0 + OPT", no_question), ("STATUS + OPT", status)] {
        let (k, o) = (
            raw_summary(knot.addr, &req),
            raw_summary(ours.local_addr(), &req),
        );
        n += 1;
        compare(what, k, o, &mut diffs);
    }
    ours.shutdown().expect("no worker failed");
    no_differences(&diffs, n);
}

#[test]
fn signed_zones_match_knot_with_do() {
    let Some(signed) = common::signed_test_zones() else {
        return;
    };
    let paths: Vec<String> = signed
        .zones
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    let zones: Vec<(&str, &str)> = signed
        .zones
        .iter()
        .zip(&paths)
        .map(|((apex, _), p)| (apex.as_str(), p.as_str()))
        .collect();
    let Some(knot) = Knot::start_with(&zones) else {
        return;
    };
    let files: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let ours = start_server_for(&files);
    let names = NAMES
        .iter()
        .chain(OPERATOR_NAMES)
        .copied()
        .filter(|n| n.len() < 100);
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::NS,
        RecordType::SOA,
        RecordType::MX,
        RecordType::TXT,
        RecordType::DS,
        RecordType::DNSKEY,
        RecordType::CNAME,
        RecordType::ANY,
    ];
    let (diffs, n) = compare_with_do(knot.addr, ours.local_addr(), names, &types, "");
    ours.shutdown().expect("no worker failed");
    no_differences(&diffs, n);
}

/// Names of chain.zone: the start, the middle and the end of every chain, names below
/// each DNAME, and names that do not exist.
const CHAIN_NAMES: &[&str] = &[
    "ch.test.",
    "nothere.ch.test.",
    "cdname.ch.test.",
    "cdname-nx.ch.test.",
    "olddept.ch.test.",
    "a.olddept.ch.test.",
    "nx.olddept.ch.test.",
    "newdept.ch.test.",
    "a.newdept.ch.test.",
    "d1.ch.test.",
    "www.d1.ch.test.",
    "x.y.d1.ch.test.",
    "d2.ch.test.",
    "www.d2.ch.test.",
    "d3.ch.test.",
    "www.d3.ch.test.",
    "www.final.ch.test.",
    "cd1.ch.test.",
    "d4.ch.test.",
    "www.d4.ch.test.",
    "cc.d4.ch.test.",
    "nx.d4.ch.test.",
    "www.c.ch.test.",
    "cc.c.ch.test.",
    "d5.ch.test.",
    "x.d5.ch.test.",
    "a.b.d5.ch.test.",
    "x.w.ch.test.",
    "*.w.ch.test.",
    "x.cw.ch.test.",
    "*.cw.ch.test.",
    "d6.ch.test.",
    "host.d6.ch.test.",
    "ns.d6.ch.test.",
    "deleg.ch.test.",
    "host.deleg.ch.test.",
    "dout.ch.test.",
    "x.dout.ch.test.",
    "cout.ch.test.",
    "loopc.ch.test.",
    "dl.ch.test.",
    "x.dl.ch.test.",
    "x.dl2.ch.test.",
    "self.ch.test.",
    "a.self.ch.test.",
    "cself.ch.test.",
    "l1.ch.test.",
    "l2.ch.test.",
    "n0.ch.test.",
    "n3.ch.test.",
    "n7.ch.test.",
    "e0.ch.test.",
    "x.e0.ch.test.",
    "x.e3.ch.test.",
    "x.e7.ch.test.",
];

const CHAIN_TYPES: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::CNAME,
    RecordType::Unknown(39),
    RecordType::TXT,
    RecordType::NS,
    RecordType::SOA,
    RecordType::DS,
    RecordType::MX,
    RecordType::ANY,
];

#[test]
fn chains_match_knot() {
    let Some(knot) = Knot::start_with(&[("ch.test", "chain.zone")]) else {
        return;
    };
    let ours = start_server_for(&["chain.zone"]);
    let (mut diffs, mut n) = (Vec::new(), 0);
    for (i, name) in CHAIN_NAMES.iter().enumerate() {
        for (j, &t) in CHAIN_TYPES.iter().enumerate() {
            let name = mix_case(name, i + j);
            for edns in [None, Some(1232)] {
                n += 1;
                let what = format!("{name} {t} edns={edns:?}");
                diffs.extend(compare_sets(
                    knot.addr,
                    ours.local_addr(),
                    &query(&name, t, edns),
                    &what,
                ));
            }
        }
    }
    ours.shutdown().expect("no worker failed");
    no_differences(&diffs, n);
}

#[test]
fn signed_chains_match_knot() {
    for signer in [
        Signer::LdnsNsec,
        Signer::LdnsNsec3 {
            iterations: 0,
            opt_out: false,
        },
    ] {
        let signed = match common::signed_with(&[("ch.test", "chain.zone")], signer) {
            Ok(s) => s,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        let file = signed.zones[0].1.display().to_string();
        let Some(knot) = Knot::start_with(&[("ch.test", &file)]) else {
            return;
        };
        let ours = start_server_for(&[&file]);
        let (mut diffs, mut n) = (Vec::new(), 0);
        for (i, name) in CHAIN_NAMES.iter().enumerate() {
            for (j, &t) in CHAIN_TYPES.iter().enumerate() {
                let name = mix_case(name, i + j);
                for (dnssec, req) in [
                    (true, query_do(&name, t)),
                    (false, query(&name, t, Some(1232))),
                ] {
                    n += 1;
                    let what = format!("{signer:?} {name} {t} do={dnssec}");
                    diffs.extend(compare_sets(knot.addr, ours.local_addr(), &req, &what));
                }
            }
        }
        ours.shutdown().expect("no worker failed");
        no_differences(&diffs, n);
    }
}

/// Rcode, question and records of an IXFR answer over UDP (one message) or TCP (every
/// message of a transfer); `None` when no answer came. AA is left out: Knot 3.2 clears
/// it in transfer replies, where RFC 5936 §2.2.1 (and we) set it.
fn ixfr_summary(server: SocketAddr, req: &[u8], tcp: bool) -> Option<String> {
    let mut msgs = Vec::new();
    if tcp {
        let mut s = common::connect(server);
        common::send_framed(&mut s, &[req.to_vec()]);
        // Until an error, or a message ending in the SOA (the only one of a current
        // client's answer, the last of a transfer).
        while let Some(m) = common::read_framed(&mut s) {
            let m = Message::from_vec(&m).expect("decodes");
            let last_soa = m.answers().last().map(|r| r.record_type()) == Some(RecordType::SOA);
            let done = m.response_code() != ResponseCode::NoError || last_soa;
            msgs.push(m);
            if done {
                break;
            }
        }
    } else {
        msgs.push(Message::from_vec(&exchange(server, req)?).expect("decodes"));
    }
    let first = msgs.first()?;
    let recs: Vec<_> = msgs.iter().flat_map(|m| m.answers().to_vec()).collect();
    Some(format!(
        "rcode={} tc={} question={:?} messages>1={}\n  records: {:?}",
        first.response_code(),
        first.truncated(),
        first.queries(),
        msgs.len() > 1,
        fold(section(&recs))
    ))
}

/// IXFR from an address allowed to transfer, and from one that is not (RFC 1995 §4: an
/// AXFR-style reply or the SOA alone; REFUSED when transfers are not allowed).
#[test]
fn ixfr_matches_knot() {
    for allowed in [true, false] {
        ixfr_matches_knot_when(allowed);
    }
}

fn ixfr_matches_knot_when(allowed: bool) {
    let zones = [("ch.test", "chain.zone")];
    let knot = if allowed {
        Knot::start_with_transfers(&zones)
    } else {
        Knot::start_with(&zones)
    };
    let Some(knot) = knot else {
        return;
    };
    let cfg = firehose_proto::dns::TcpConfig {
        allow_transfer: if allowed {
            vec!["127.0.0.1".parse().unwrap()]
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let (udp, tcp) = common::start_udp_tcp(&["chain.zone"], cfg);
    let ours = udp.local_addr();
    let mut diffs = Vec::new();
    let mut n = 0;
    // chain.zone's serial is 1: the same, newer, older (serial arithmetic), none, and a
    // name that is no apex.
    let cases = [
        ("ch.test.", Some(1)),
        ("ch.test.", Some(5)),
        ("ch.test.", Some(u32::MAX)),
        ("ch.test.", Some(0x8000_0002)),
        ("ch.test.", None),
        ("www.d1.ch.test.", Some(0)),
    ];
    for (zone, serial) in cases {
        // Not allowed, a query without the client's SOA is FORMERR here (its form is
        // checked first) and NOTAUTH from Knot (its ACL first): both as RFC 1995 allows.
        if !allowed && serial.is_none() {
            continue;
        }
        let req = common::ixfr_query(zone, serial);
        for tcp in [false, true] {
            let what = format!("IXFR {zone} serial {serial:?} tcp={tcp} allowed={allowed}");
            n += 1;
            let mut k = ixfr_summary(knot.addr, &req, tcp);
            if !allowed {
                // Knot answers a transfer its ACL denies with NOTAUTH, we with REFUSED:
                // both say the transfer is not allowed; compared as one rcode.
                k = k.map(|s| s.replacen("rcode=Not authorized", "rcode=Query Refused", 1));
            }
            compare(&what, k, ixfr_summary(ours, &req, tcp), &mut diffs);
        }
    }
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
    no_differences(&diffs, n);
}
