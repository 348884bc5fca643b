//! Zones signed with NSEC3 (RFC 5155), by ldns-signzone -n (with and without the opt-out
//! flag) and by BIND's dnssec-signzone -3 -A (opt-out: insecure delegations and the
//! empty non-terminals only they make are left out of the chain). With DO=1 a denial
//! carries the closest encloser proof (NXDOMAIN), the NSEC3 matching the name (NODATA,
//! DS at a delegation), or the one covering the next closer name (wildcards). Checked
//! two ways: BIND's delv validates the answers against the zone's key, and Knot DNS
//! serving the same files gives the same answers, NSEC3 owners included.

mod common;

use common::{
    compare_with_do, delv, no_differences, query, query_do, signed_with, start_server_for, Knot,
    Signed, Signer, NAMES, OPERATOR_NAMES,
};
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;
use std::process::Command;

/// The zones signed with each signer: the NSEC3 cases and the two general test zones.
const ZONES: [(&str, &str); 3] = [
    ("n3.test", "nsec3.zone"),
    ("example.com", "example.zone"),
    ("op.test", "op.zone"),
];

/// The NSEC3 signers, and NSEC on the same zones for comparison.
const SIGNERS: [Signer; 4] = [
    Signer::LdnsNsec3 {
        iterations: 3,
        opt_out: false,
    },
    Signer::LdnsNsec3 {
        iterations: 0,
        opt_out: true,
    },
    Signer::BindNsec3OptOut,
    Signer::LdnsNsec,
];

/// The zones signed by `signer`, or `None` after printing why the test is skipped.
fn signed(signer: Signer) -> Option<Signed> {
    match signed_with(&ZONES, signer) {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn paths(s: &Signed) -> Vec<String> {
    s.zones
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect()
}

/// Names of the NSEC3 zone: every kind of node and of missing name.
const N3_NAMES: &[&str] = &[
    "n3.test.",
    "www.n3.test.",
    "nope.n3.test.",
    "x.nope.n3.test.",
    "mail.n3.test.",
    "*.wild.n3.test.",
    "a.wild.n3.test.",
    "b.a.wild.n3.test.",
    "wild.n3.test.",
    "c.n3.test.",
    "b.c.n3.test.",
    "a.b.c.n3.test.",
    "z.b.c.n3.test.",
    "z.a.b.c.n3.test.",
    "insec.n3.test.",
    "www.insec.n3.test.",
    "ns.insec.n3.test.",
    "sec.n3.test.",
    "www.sec.n3.test.",
    "deep.n3.test.",
    "y.deep.n3.test.",
    "x.y.deep.n3.test.",
    "w.x.y.deep.n3.test.",
    "z.y.deep.n3.test.",
    "q.deep.n3.test.",
    "alias.n3.test.",
    "alias2.n3.test.",
    "alias3.n3.test.",
    "zzzz.n3.test.",
    "x.*.wild.n3.test.",
    "a.ns1.n3.test.",
    "*.c.n3.test.",
    "*.n3.test.",
];

/// The owners of the NSEC3 records of a signed file, sorted.
fn nsec3_owners_all(file: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut owners: Vec<String> = text
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == "NSEC3"))
        .filter(|l| !l.contains("RRSIG"))
        .filter_map(|l| l.split_whitespace().next().map(|o| o.to_ascii_lowercase()))
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

/// The owners of a few NSEC3 records of a signed file (hashed names: a client asking
/// for one must get what Knot gives).
fn nsec3_owners(file: &std::path::Path) -> Vec<String> {
    let mut owners = nsec3_owners_all(file);
    owners.truncate(3);
    owners
}

#[test]
fn nsec3_zones_match_knot_with_do() {
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::TXT,
        RecordType::MX,
        RecordType::NS,
        RecordType::DS,
        RecordType::DNSKEY,
        RecordType::NSEC3PARAM,
        RecordType::NSEC3,
        RecordType::CNAME,
        RecordType::SOA,
        RecordType::ANY,
    ];
    let mut total = 0;
    for signer in SIGNERS {
        // A missing signer skips its own round only.
        let Some(signed) = signed(signer) else {
            continue;
        };
        let files = paths(&signed);
        let zones: Vec<(&str, &str)> = signed
            .zones
            .iter()
            .zip(&files)
            .map(|((apex, _), p)| (apex.as_str(), p.as_str()))
            .collect();
        let Some(knot) = Knot::start_with(&zones) else {
            return;
        };
        let refs: Vec<&str> = files.iter().map(|p| p.as_str()).collect();
        let ours = start_server_for(&refs);
        let hashed: Vec<String> = signed
            .zones
            .iter()
            .flat_map(|(_, p)| nsec3_owners(p))
            .collect();
        let names = N3_NAMES
            .iter()
            .copied()
            .chain(NAMES.iter().copied())
            .chain(OPERATOR_NAMES.iter().copied())
            .chain(hashed.iter().map(|s| s.as_str()))
            .filter(|n| n.len() < 100);
        let label = format!("{signer:?}: ");
        let (diffs, n) = compare_with_do(knot.addr, ours.local_addr(), names, &types, &label);
        ours.shutdown().expect("no worker failed");
        no_differences(&diffs, n);
        eprintln!("{signer:?}: {n} queries, the same answers as Knot");
        total += n;
    }
    eprintln!("{total} queries in all");
}

/// The NSEC3 owners in the authority section of our answer to `name` `t` with DO.
fn authority_nsec3(server: std::net::SocketAddr, name: &str, t: RecordType) -> Vec<String> {
    let r = common::exchange(server, &query_do(name, t)).expect("an answer");
    let m = Message::from_vec(&r).expect("decodes");
    m.name_servers()
        .iter()
        .filter(|r| r.record_type() == RecordType::NSEC3)
        .map(|r| r.name().to_ascii().to_ascii_lowercase())
        .collect()
}

#[test]
fn denials_carry_each_nsec3_once_and_plain_answers_none() {
    let Some(signed) = signed(SIGNERS[0]) else {
        return;
    };
    let files = paths(&signed);
    let refs: Vec<&str> = files.iter().map(|p| p.as_str()).collect();
    let ours = start_server_for(&refs);
    let addr = ours.local_addr();
    // NXDOMAIN: up to three, never one twice (RFC 5155 §7.2.2).
    for name in ["nope.n3.test.", "x.nope.n3.test.", "z.a.b.c.n3.test."] {
        let owners = authority_nsec3(addr, name, RecordType::A);
        let mut distinct = owners.clone();
        distinct.sort();
        distinct.dedup();
        assert!(
            !owners.is_empty() && owners.len() <= 3,
            "{name}: {owners:?}"
        );
        assert_eq!(owners.len(), distinct.len(), "{name}: {owners:?}");
    }
    // NODATA: the NSEC3 matching the name; a wildcard answer: one covering a hash.
    assert_eq!(
        authority_nsec3(addr, "www.n3.test.", RecordType::TXT).len(),
        1
    );
    assert_eq!(
        authority_nsec3(addr, "a.wild.n3.test.", RecordType::A).len(),
        1
    );
    // Without DO, no DNSSEC records at all.
    for (name, t) in [
        ("nope.n3.test.", RecordType::A),
        ("www.n3.test.", RecordType::TXT),
        ("a.wild.n3.test.", RecordType::A),
    ] {
        let r = common::exchange(addr, &query(name, t, Some(1232))).unwrap();
        let m = Message::from_vec(&r).unwrap();
        let dnssec = m
            .answers()
            .iter()
            .chain(m.name_servers())
            .any(|r| r.record_type().is_dnssec());
        assert!(!dnssec, "{name} {t}: {m:?}");
    }
    ours.shutdown().expect("no worker failed");
}

#[test]
fn a_validating_resolver_accepts_nsec3_denials() {
    if Command::new("delv").arg("-v").output().is_err() {
        eprintln!("skipped: delv is not installed (Debian package bind9-dnsutils)");
        return;
    }
    let full = "; fully validated";
    let negative = "; negative response, fully validated";
    // A wildcard answer whose next closer name is covered by an opt-out NSEC3 is
    // insecure (an unsigned delegation could be there): BIND says so.
    let wild = |opt_out: bool| if opt_out { "; unsigned answer" } else { full };
    let cases = |opt_out: bool, nsec: bool| -> Vec<(&str, &str, &str, &str)> {
        vec![
            ("n3.test", "www.n3.test", "A", full),
            ("n3.test", "nope.n3.test", "A", negative),
            ("n3.test", "x.nope.n3.test", "A", negative),
            ("n3.test", "www.n3.test", "TXT", negative),
            ("n3.test", "c.n3.test", "A", negative),
            ("n3.test", "z.b.c.n3.test", "A", negative),
            ("n3.test", "a.wild.n3.test", "A", wild(opt_out)),
            ("n3.test", "b.a.wild.n3.test", "TXT", wild(opt_out)),
            ("n3.test", "a.wild.n3.test", "MX", negative),
            ("n3.test", "sec.n3.test", "DS", full),
            // Left out of the chain by BIND's opt-out: the closest encloser proof.
            ("n3.test", "insec.n3.test", "DS", negative),
            ("n3.test", "deep.n3.test", "A", negative),
            ("n3.test", "y.deep.n3.test", "A", negative),
            ("n3.test", "alias.n3.test", "A", ";-$NXDOMAIN"),
            (
                "n3.test",
                "n3.test",
                "NSEC3PARAM",
                if nsec { negative } else { full },
            ),
            ("example.com", "nothere.example.com", "A", negative),
            ("example.com", "x.y.wild.example.com", "TXT", wild(opt_out)),
            ("example.com", "x.wild.example.com", "MX", negative),
            ("example.com", "ent.deep.example.com", "A", negative),
            ("op.test", "nx.olddept.op.test", "A", ";-$NXDOMAIN"),
            ("op.test", "deleg.op.test", "DS", full),
        ]
    };
    for signer in SIGNERS {
        // A missing signer skips its own round only.
        let Some(signed) = signed(signer) else {
            continue;
        };
        let files = paths(&signed);
        let refs: Vec<&str> = files.iter().map(|p| p.as_str()).collect();
        // UDP and TCP: BIND asks again over TCP after a DNAME answer.
        let (srv, tcp) = common::start_udp_tcp(&refs, Default::default());
        let port = srv.local_addr().port();
        let opt_out = matches!(
            signer,
            Signer::LdnsNsec3 { opt_out: true, .. } | Signer::BindNsec3OptOut
        );
        for (apex, name, t, want) in cases(opt_out, signer == Signer::LdnsNsec) {
            let text = delv(port, &signed, apex, name, t);
            assert!(text.contains(want), "{signer:?}: {name} {t}:\n{text}");
            let secure = want != "; unsigned answer";
            assert_eq!(
                text.contains("fully validated"),
                secure,
                "{signer:?}: {name} {t}:\n{text}"
            );
        }
        tcp.shutdown();
        srv.shutdown().expect("no worker failed");
    }
}

#[test]
fn a_zone_transfer_carries_the_nsec3_chain() {
    let Some(signed) = signed(Signer::BindNsec3OptOut) else {
        return;
    };
    let files = paths(&signed);
    let refs: Vec<&str> = files.iter().map(|p| p.as_str()).collect();
    let cfg = firehose_proto::dns::TcpConfig {
        allow_transfer: vec!["127.0.0.0/8".parse().unwrap()],
        ..Default::default()
    };
    let (udp, tcp) = common::start_udp_tcp(&refs, cfg);
    let (rc, recs) = common::axfr(udp.local_addr(), "n3.test.");
    assert_eq!(rc, hickory_proto::op::ResponseCode::NoError);
    let sent: Vec<String> = recs
        .iter()
        .filter(|r| r.record_type() == RecordType::NSEC3)
        .map(|r| r.name().to_ascii().to_ascii_lowercase())
        .collect();
    let mut in_file = nsec3_owners_all(&signed.zones[0].1);
    let mut got = sent.clone();
    got.sort();
    in_file.sort();
    assert!(!in_file.is_empty());
    assert_eq!(got, in_file);
    // Their RRSIGs too.
    let sigs = recs
        .iter()
        .filter(|r| {
            r.record_type() == RecordType::RRSIG
                && sent.contains(&r.name().to_ascii().to_ascii_lowercase())
        })
        .count();
    assert_eq!(sigs, sent.len());
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}

#[test]
fn nsec3_iterations_are_capped_at_load() {
    use firehose_proto::dns::{load_zones, load_zones_limited, Limits};
    let signer = |iterations| Signer::LdnsNsec3 {
        iterations,
        opt_out: false,
    };
    let (zero, three) = match (
        signed_with(&[("n3.test", "nsec3.zone")], signer(0)),
        signed_with(&[("n3.test", "nsec3.zone")], signer(3)),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) | (_, Err(why)) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // RFC 9276 §3.1: 0 iterations, and by default nothing more.
    assert!(load_zones(&[&zero.zones[0].1]).is_ok());
    let e = load_zones(&[&three.zones[0].1]).unwrap_err().to_string();
    assert!(
        e.contains("NSEC3 with 3 iterations") && e.contains("--nsec3-max-iterations 3"),
        "{e}"
    );
    let allow = |n| Limits {
        nsec3_max_iterations: n,
        ..Limits::default()
    };
    assert!(load_zones_limited(&[&three.zones[0].1], &allow(3)).is_ok());
    assert!(load_zones_limited(&[&three.zones[0].1], &allow(2)).is_err());
}
