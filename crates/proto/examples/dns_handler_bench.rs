//! Cost of the DNS hot path alone (no sockets): parse, look up, copy, patch.
//! `cargo run --release -p firehose-proto --example dns_handler_bench`
//! Over the test zone, a mix of answers, NXDOMAIN, wildcard, referral and CNAME chains.
//! Prints ns per query, median of 5 rounds (min-max).

use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_proto::dns::wire::name_from_text;
use firehose_proto::dns::{load_zones, DnsHandler, DEFAULT_MAX_UDP};
use std::path::PathBuf;
use std::time::Instant;

fn query(name: &str, qtype: u16) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    name_from_text(name, &mut m).expect("valid name");
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    m
}

fn main() {
    let zone = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/example.zone");
    let queries: Vec<Vec<u8>> = [
        ("www.example.com.", 1),
        ("web.example.com.", 1),
        ("nothere.example.com.", 28),
        ("x.wild.example.com.", 1),
        ("deep.sub.example.com.", 1),
        ("example.com.", 15),
        ("chain1.example.com.", 1),
        ("mail.example.com.", 28),
    ]
    .iter()
    .map(|&(n, t)| query(n, t))
    .collect();
    let db = load_zones(&[zone]).unwrap_or_else(|e| {
        eprintln!("dns_handler_bench: {e}");
        std::process::exit(2)
    });
    let mut h = DnsHandler::new(db, DEFAULT_MAX_UDP);
    let peer = Peer::from_addr("127.0.0.1:1".parse().expect("address"));
    let mut buf = vec![0u8; 65536];
    let n = 2_000_000;
    let mut rounds = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let mut bytes = 0usize;
        for i in 0..n {
            let q = &queries[i % queries.len()];
            buf[..q.len()].copy_from_slice(q);
            if let Verdict::Reply(len) = h.handle(&mut Request::new(&mut buf, q.len(), peer)) {
                bytes += len;
            }
        }
        std::hint::black_box(bytes);
        rounds.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    rounds.sort_by(f64::total_cmp);
    println!(
        "dns handler: {:.1} ns/query median of 5 rounds of {n} ({:.1}-{:.1}), {} distinct queries",
        rounds[2],
        rounds[0],
        rounds[4],
        queries.len()
    );
}
