//! A signed zone served with DO=1 is accepted by a validating resolver (BIND's delv,
//! given the zone's key as its trust anchor): answers, NXDOMAIN, NODATA, wildcards,
//! DNAME and DS, each "fully validated".

mod common;

use std::process::Command;

#[test]
fn a_validating_resolver_accepts_signed_answers() {
    if Command::new("delv").arg("-v").output().is_err() {
        eprintln!("skipped: delv is not installed (Debian package bind9-dnsutils)");
        return;
    }
    let Some(signed) = common::signed_test_zones() else {
        return;
    };
    let files: Vec<String> = signed
        .zones
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    let refs: Vec<&str> = files.iter().map(|s| s.as_str()).collect();
    // UDP and TCP: BIND asks again over TCP after a DNAME answer (it does with Knot too).
    let (srv, tcp) = common::start_udp_tcp(&refs, Default::default());
    let port = srv.local_addr().port();
    let cases: &[(&str, &str, &str, &str)] = &[
        ("example.com", "www.example.com", "A", "; fully validated"),
        (
            "example.com",
            "x.y.wild.example.com",
            "TXT",
            "; fully validated",
        ),
        (
            "example.com",
            "nothere.example.com",
            "A",
            "; negative response, fully validated",
        ),
        (
            "example.com",
            "ns1.example.com",
            "MX",
            "; negative response, fully validated",
        ),
        (
            "example.com",
            "x.wild.example.com",
            "MX",
            "; negative response, fully validated",
        ),
        (
            "example.com",
            "ent.deep.example.com",
            "A",
            "; negative response, fully validated",
        ),
        ("example.com", "example.com", "DNSKEY", "; fully validated"),
        ("op.test", "www.olddept.op.test", "A", "; fully validated"),
        ("op.test", "nx.olddept.op.test", "A", ";-$NXDOMAIN"),
        ("op.test", "deleg.op.test", "DS", "; fully validated"),
        ("op.test", "mx.op.test", "MX", "; fully validated"),
    ];
    for &(apex, name, t, want) in cases {
        let text = common::delv(port, &signed, apex, name, t);
        assert!(text.contains(want), "{name} {t}:\n{text}");
        assert!(text.contains("fully validated"), "{name} {t}:\n{text}");
    }
    tcp.shutdown();
    srv.shutdown().expect("no worker failed");
}
