//! The generator's reply matching (`load::table::classify` over a workload): whatever
//! comes back to `firehose load` (or to the sink's and flood's neighbours) is counted as a
//! completion, a duplicate or a stray, and a real answer is never missed.
//!
//! Input: one control byte (echo or DNS, table size), then operations: send a request,
//! deliver its true answer (echo: the same bytes; DNS: QR set, the name's case changed,
//! records appended), deliver a damaged answer, deliver raw bytes, expire old requests.
//! Checked against a model: a completion is of a pending request on its own flow, and
//! each request completes at most once; a true answer to a pending request completes it;
//! every datagram is counted exactly once; pending = sent - completed - lost.

use crate::input::Input;
use firehose_load::dns::DnsWorkload;
use firehose_load::table::{classify, Answer, Table};
use firehose_load::{EchoWorkload, Workload};
use std::collections::HashMap;

const QUERIES: &str = "www.example.com A\nExample.COM MX\nx.y.wild.example.com TXT\n\
                       a.b.c.d.e.example.com AAAA\n. NS\n";

/// A request as the model remembers it.
struct Sent {
    id: u64,
    flow: u32,
    at: u64,
    bytes: Vec<u8>,
}

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let c = inp.byte();
    let mut w: Box<dyn Workload> = if c & 1 == 0 {
        Box::new(EchoWorkload::new(20 + (c as usize >> 1)).expect("a valid size"))
    } else {
        Box::new(
            DnsWorkload::parse(QUERIES, "q.txt", (c & 2 != 0).then_some(1232)).expect("queries"),
        )
    };
    let wide = w.id_bits() == 64;
    let mut table = Table::new(1 + (c as usize >> 4), wide);
    let mut sent: Vec<Sent> = Vec::new();
    // id -> index in `sent` of the request pending under it.
    let mut pending: HashMap<u64, usize> = HashMap::new();
    // Requests that completed and whose id was not reused since.
    let mut done: HashMap<u64, u32> = HashMap::new();
    let (mut now, mut datagrams, mut counted) = (0u64, 0u64, 0u64);
    let mut buf = vec![0u8; 1024];
    while !inp.is_empty() {
        let op = inp.byte();
        now += 1;
        let datagram: Option<(Vec<u8>, u32, bool)> = match op % 5 {
            0 => {
                let flow = u32::from(op >> 3);
                if let Some(id) = table.take(flow, now, true) {
                    let n = w.write_request(id, now, &mut buf);
                    pending.insert(id, sent.len());
                    done.remove(&id);
                    sent.push(Sent {
                        id,
                        flow,
                        at: now,
                        bytes: buf[..n].to_vec(),
                    });
                }
                None
            }
            1 | 2 => {
                let Some(s) = sent.get(inp.byte() as usize % sent.len().max(1)) else {
                    continue;
                };
                let mut r = true_answer(&*w, &s.bytes, inp.byte());
                let real = op % 5 == 1;
                if !real {
                    damage(&mut r, inp.byte(), inp.byte());
                }
                // The request pending under this id now may be another one (DNS ids are
                // reused): the answer must complete it only if it asked the same thing on
                // the same flow.
                let same = pending
                    .get(&s.id)
                    .is_some_and(|&i| sent[i].bytes == s.bytes && sent[i].flow == s.flow);
                Some((r, s.flow, real && same))
            }
            3 => {
                let n = inp.byte() as usize;
                Some((inp.take(n).to_vec(), u32::from(op >> 3), false))
            }
            _ => {
                let deadline = now.saturating_sub(u64::from(op >> 3));
                let lost = table.expire(deadline, |_| {});
                let before = pending.len();
                pending.retain(|_, i| sent[*i].at >= deadline);
                assert_eq!(
                    lost,
                    before - pending.len(),
                    "the requests sent before the deadline are lost"
                );
                None
            }
        };
        if let Some((d, flow, must_complete)) = datagram {
            datagrams += 1;
            let (a, _code) = classify(&mut table, &mut *w, &d, flow);
            counted += 1;
            let id = w.response_id(&d).map(|(id, _)| id);
            match a {
                Answer::Completes(e) => {
                    let id = id.expect("a completion carries an id");
                    let i = pending
                        .remove(&id)
                        .expect("only a pending request completes");
                    assert_eq!(e.flow, sent[i].flow, "on its own flow");
                    assert_eq!(e.intended_ns, sent[i].at);
                    done.insert(id, flow);
                }
                Answer::Duplicate => {
                    let id = id.expect("a duplicate carries an id");
                    assert!(
                        done.contains_key(&id),
                        "a duplicate is of a completed request"
                    );
                    assert!(!must_complete);
                }
                Answer::Stray => assert!(!must_complete, "a true answer counted as stray"),
            }
        }
        assert_eq!(
            table.pending(),
            pending.len(),
            "pending = sent - completed - lost"
        );
    }
    assert_eq!(counted, datagrams);
}

/// What a correct server sends back for `req`.
fn true_answer(w: &dyn Workload, req: &[u8], seed: u8) -> Vec<u8> {
    if w.id_bits() == 64 {
        return req.to_vec();
    }
    let mut r = req.to_vec();
    r[2] |= 0x80;
    r[3] = seed & 0x0F; // any rcode
    let end = firehose_dnswire::question_end(req).unwrap_or(req.len());
    for b in &mut r[12..end - 4] {
        if b.is_ascii_alphabetic() && seed & 0x10 != 0 {
            *b ^= 0x20; // names compare ignoring case
        }
    }
    r.extend(std::iter::repeat_n(seed, (seed >> 5) as usize * 7));
    r
}

fn damage(r: &mut Vec<u8>, at: u8, how: u8) {
    if r.is_empty() {
        return;
    }
    let i = at as usize % r.len();
    match how % 3 {
        0 => r[i] ^= how | 1,
        1 => r.truncate(i),
        _ => r.insert(i, how),
    }
}

/// Sends and true answers in order, answers out of order and twice, damaged answers,
/// garbage, expiry, for both workloads.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for c in [0x30u8, 0x31, 0x33, 0x01, 0x10] {
        out.push(vec![
            c, 0, 0, 0, 1, 0, 0, 1, 1, 0x20, 1, 0, 0, 1, 2, 0x10, 2, 2, 3, 2, 0x41,
        ]);
        out.push(vec![
            c, 0, 8, 16, 1, 2, 0, 1, 1, 0x30, 9, 0, 4, 3, 8, 1, 2, 3, 4, 5, 6, 7, 8,
        ]);
        out.push(vec![
            c, 0, 0, 0, 0, 2, 1, 7, 2, 2, 2, 1, 1, 1, 0, 0, 1, 3, 0x55,
        ]);
    }
    out
}
