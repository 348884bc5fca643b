//! Differential test: the same zones in Knot DNS and in our responder, a few hundred
//! generated queries, and every difference in rcode, flags or sections reported.

mod common;

use common::{
    compare_trimmed, compare_with_do, exchange, fold, mix_case, no_differences, query, section,
    start_server, start_server_for, Knot, NAMES, OPERATOR_NAMES, OPERATOR_ZONES,
};
use hickory_proto::op::Message;
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
