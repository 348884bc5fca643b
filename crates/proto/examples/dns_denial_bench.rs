//! Cost of signed denial on the hot path (no sockets): NXDOMAIN with DO=1 for names
//! that change every query, over zones signed elsewhere, side by side.
//! `cargo run --release -p firehose-proto --example dns_denial_bench -- A.signed B.signed`
//! (for instance the same zone signed with NSEC and with NSEC3). Each file is served
//! alone; rounds alternate between them (A B A B ...). Prints ns per query for NXDOMAIN
//! with DO, NXDOMAIN without DO and the apex SOA with DO, median of 5 rounds (min-max),
//! after each file's load time (one load each: a rough figure).

use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_proto::dns::wire::{name_from_text, name_to_text};
use firehose_proto::dns::{load_zones_limited, DnsHandler, Limits, DEFAULT_MAX_UDP};
use std::time::Instant;

/// A query for `name` `qtype`, with an OPT record (DO set if `dnssec`).
fn query(name: &str, qtype: u16, dnssec: bool) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    name_from_text(name, &mut m).expect("valid name");
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    let flags = if dnssec { 0x80 } else { 0 };
    m.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, flags, 0, 0, 0]);
    m
}

/// ns per query over `queries`, one round of `n`.
fn round(h: &mut DnsHandler, queries: &[Vec<u8>], n: usize) -> f64 {
    let peer = Peer::from_addr("127.0.0.1:1".parse().expect("address"));
    let mut buf = vec![0u8; 65536];
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
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("dns_denial_bench: pass one or more signed zone files");
        std::process::exit(2);
    }
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("dns_denial_bench: {e}");
        std::process::exit(2)
    };
    let mut cases = Vec::new();
    for f in &files {
        let t = Instant::now();
        // Any iteration count: the cost of each is what this measures.
        let limits = Limits {
            nsec3_max_iterations: u16::MAX,
            ..Limits::default()
        };
        let db = load_zones_limited(&[f], &limits).unwrap_or_else(|e| fail(&e));
        println!("loaded in {:.0} ms  {f}", t.elapsed().as_secs_f64() * 1e3);
        let apex = name_to_text(&db.zones[0].apex);
        let h = DnsHandler::new(db, DEFAULT_MAX_UDP);
        let nx = |dnssec| -> Vec<Vec<u8>> {
            (0..4096)
                .map(|i| query(&format!("nx{i}.{apex}"), 1, dnssec))
                .collect()
        };
        let kinds = [
            ("NXDOMAIN DO=1", nx(true)),
            ("NXDOMAIN DO=0", nx(false)),
            ("apex SOA DO=1", vec![query(&apex, 6, true)]),
        ];
        cases.push((f, h, kinds));
    }
    let n = 500_000;
    for k in 0..3 {
        let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
        for _ in 0..5 {
            for (c, (_, h, kinds)) in cases.iter_mut().enumerate() {
                rounds[c].push(round(h, &kinds[k].1, n));
            }
        }
        for (c, (f, _, kinds)) in cases.iter().enumerate() {
            let r = &mut rounds[c];
            r.sort_by(f64::total_cmp);
            println!(
                "{:<14} {:>7.1} ns/query ({:.1}-{:.1})  {f}",
                kinds[k].0, r[2], r[0], r[4]
            );
        }
    }
}
