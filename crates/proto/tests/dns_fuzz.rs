//! A long randomized test: mutated and random datagrams thrown at the handler. Every
//! one must give either a counted drop or a response that an independent decoder
//! accepts, with the request's id and QR set; nothing may panic.

mod common;

use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_proto::dns::counters::slot;
use hickory_proto::op::Message;
use hickory_proto::rr::RecordType;

/// xorshift64*: deterministic, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn corpus() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (name, t) in [
        ("www.example.com.", RecordType::A),
        ("x.y.wild.example.com.", RecordType::TXT),
        ("deep.sub.example.com.", RecordType::A),
        ("nx.example.com.", RecordType::AAAA),
        ("big.example.com.", RecordType::TXT),
        ("80.2.0.192.in-addr.arpa.", RecordType::PTR),
        ("www.olddept.op.test.", RecordType::A),
        ("nx.olddept.op.test.", RecordType::MX),
        ("x.outside.op.test.", RecordType::A),
        ("mx.op.test.", RecordType::MX),
        ("cdeleg.op.test.", RecordType::A),
        ("child.op.test.", RecordType::DS),
    ] {
        v.push(common::query(name, t, None));
        v.push(common::query(name, t, Some(4096)));
    }
    v
}

fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut m = base.to_vec();
    match rng.below(6) {
        0 => {
            // Random bytes, random length.
            m = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
        }
        1 => m.truncate(rng.below(m.len() + 1)),
        2 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(m.len());
                m[i] = rng.next() as u8;
            }
        }
        3 => {
            // Compression pointers and label-length bytes where the name is.
            let i = 12 + rng.below(m.len().saturating_sub(16).max(1));
            if i < m.len() {
                m[i] = [0xC0, 0x3F, 0x40, 0x80, 0xFF][rng.below(5)];
            }
        }
        4 => m.extend((0..1 + rng.below(20)).map(|_| rng.next() as u8)),
        _ => {
            // Counts in the header.
            let i = 4 + rng.below(8);
            m[i] = rng.next() as u8;
        }
    }
    m
}

#[test]
fn random_datagrams_never_break_the_handler() {
    let mut h = common::handler_for(&["example.zone", "reverse.zone", "op.zone", "child.zone"]);
    let peer = Peer::from_addr("127.0.0.1:9".parse().unwrap());
    let corpus = corpus();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut buf = vec![0u8; 65536];
    let (mut replies, mut drops) = (0u64, 0u64);
    for _ in 0..1_000_000 {
        let pick = rng.below(corpus.len());
        let req = mutate(&mut rng, &corpus[pick]);
        buf[..req.len()].copy_from_slice(&req);
        match h.handle(&mut Request::new(&mut buf, req.len(), peer)) {
            Verdict::Reply(n) => {
                replies += 1;
                let r = &buf[..n];
                assert!(n >= 12, "reply shorter than a header for {req:02x?}");
                assert_eq!(r[..2], req[..2], "id echoed");
                assert!(r[2] & 0x80 != 0, "QR set");
                if let Err(e) = Message::from_vec(r) {
                    panic!("undecodable reply {r:02x?} to {req:02x?}: {e}");
                }
            }
            Verdict::Drop => {
                drops += 1;
                assert!(
                    req.len() < 12 || req[2] & 0x80 != 0,
                    "dropped a query {req:02x?}"
                );
            }
            Verdict::Error => panic!("handler error for {req:02x?}"),
        }
    }
    let s = h.stats();
    assert_eq!(
        drops,
        s.get(slot::DROPPED_SHORT) + s.get(slot::DROPPED_RESPONSE),
        "every drop counted"
    );
    assert_eq!(
        replies,
        (slot::NOERROR..=slot::RCODE_OTHER)
            .map(|i| s.get(i))
            .sum::<u64>(),
        "every reply counted by rcode"
    );
    assert!(
        s.rcode(1u8) > 1000 && s.rcode(0u8) > 1000,
        "mutations reach both FORMERR and answers: {s:?}"
    );
}
