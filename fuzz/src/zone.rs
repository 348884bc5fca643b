//! The zone file parser and the answer builder behind it: a zone file is input from
//! whoever writes it (or from a transfer), and a zone that loads is served.
//!
//! Input: zone file text. A zone that parses has each record's parts inside its RDATA;
//! one that also builds is answered, over UDP and TCP, for every owner name (its own
//! types, A, ANY, and a name below it) with the checks of the `dns_handler` target.

use crate::dns_handler::answer;
use firehose_dnswire::{name_to_text, rtype};
use firehose_proto::dns::build::build;
use firehose_proto::dns::zone::{parse_zone, Part};
use firehose_proto::dns::{DnsHandler, Transport};
use std::net::SocketAddr;
use std::sync::Arc;

/// Owners asked about, at most (building and asking is the slow part).
const OWNERS: usize = 24;

pub fn check(data: &[u8]) {
    let Ok(zone) = parse_zone(data, "fuzz.zone") else {
        return;
    };
    let mut owners: Vec<(Vec<u8>, u16)> = Vec::new();
    for r in zone.iter() {
        assert!(r.owner.last() == Some(&0) && r.owner.len() <= 255);
        for p in r.parts() {
            match p {
                Part::Bytes(b) => assert!(b.len() <= r.rdata.len()),
                Part::Name { wire, .. } => assert!(wire.len() <= r.rdata.len()),
            }
        }
        let mut plain = Vec::new();
        r.write_plain(&mut plain);
        assert_eq!(plain.len(), r.owner.len() + 10 + r.rdata.len());
        if owners.len() < OWNERS && !owners.iter().any(|(o, t)| *o == r.owner && *t == r.rtype) {
            owners.push((r.owner.to_vec(), r.rtype));
        }
    }
    let Ok(db) = build(&[Arc::new(zone)]) else {
        return;
    };
    let mut h = DnsHandler::new(Arc::new(db), 1232);
    let peer = SocketAddr::from(([192, 0, 2, 1], 5353));
    for (owner, t) in &owners {
        let text = name_to_text(owner);
        let below = format!("zz9.{text}");
        for (name, qtype) in [
            (&text, *t),
            (&text, rtype::A),
            (&text, 255),
            (&below, rtype::A),
        ] {
            for edns in [false, true] {
                let mut q = Vec::new();
                let b = firehose_dnswire::QueryBuilder {
                    id: 0x1234,
                    edns: edns.then_some(firehose_dnswire::Edns {
                        udp_size: 1232,
                        version: 0,
                        dnssec_ok: true,
                    }),
                    ..Default::default()
                };
                if b.write(name, qtype, &mut q).is_err() {
                    continue; // a name one label too long for `below`
                }
                answer(&mut h, 1232, &q, 1472, Transport::Udp, peer);
                answer(
                    &mut h,
                    1232,
                    &q,
                    65535,
                    Transport::Tcp { keepalive: None },
                    peer,
                );
            }
        }
    }
}

/// The test zones of crates/proto and a zone with directives, escapes and every type the
/// answer builder treats apart.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = crate::dns_handler::ZONES
        .iter()
        .map(|(_, t)| t.as_bytes().to_vec())
        .collect();
    out.push(
        b"$ORIGIN fz.test.\n$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n\
          ns1 AAAA 2001:db8::1\n*.w TXT \"a\\\"b\" c\nmx MX 10 ns1\nsrv SRV 1 2 3 ns1\n\
          c CNAME ns1\nd DNAME other.test.\nsub NS ns.sub\nns.sub A 192.0.2.9\n\
          \\046dot A 192.0.2.3\nptr PTR ns1\n"
            .to_vec(),
    );
    out
}
