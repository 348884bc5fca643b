//! The generator's reply matching (`load::table::classify` over a workload): whatever
//! comes back to `firehose load` (or to the sink's and flood's neighbours) is counted as a
//! completion, a duplicate or a stray, and a real answer is never missed.
//!
//! Input: one control byte (echo, DNS or RADIUS, table size), then operations: send a request,
//! deliver its true answer (echo: the same bytes; DNS: QR set, the name's case changed,
//! records appended; RADIUS: the verdict the users file owes, signed with the secret),
//! deliver a damaged answer, deliver raw bytes, expire old requests.
//! Checked against a model: a completion is of a pending request on its own flow, and
//! each request completes at most once; a true answer to a pending request completes it;
//! every datagram is counted exactly once; pending = sent - completed - lost.

use crate::input::Input;
use firehose_load::dns::DnsWorkload;
use firehose_load::radius::{users_from, RadiusLoad, RadiusWorkload, RequestKind};
use firehose_load::table::{classify, Answer, Table};
use firehose_load::{EchoWorkload, Workload};
use firehose_radiuswire::{attr, chap_response, code, parse_request, put_header, Secret, HEADER};
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
    } else if c & 4 == 0 {
        Box::new(
            DnsWorkload::parse(QUERIES, "q.txt", (c & 2 != 0).then_some(1232)).expect("queries"),
        )
    } else {
        Box::new(radius(c))
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
        // (bytes, flow, must complete, must not complete)
        let datagram: Option<(Vec<u8>, u32, bool, bool)> = match op % 5 {
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
                let seed = inp.byte();
                let mut r = true_answer(&*w, &s.bytes, seed);
                // A RADIUS answer with the other verdict, well signed: never a completion.
                let lie = w.id_bits() == 8 && seed & 0x20 != 0;
                let real = op % 5 == 1 && !lie;
                if op % 5 == 2 {
                    damage(&mut r, inp.byte(), inp.byte());
                }
                // The request pending under this id now may be another one (DNS ids are
                // reused): the answer must complete it only if it asked the same thing on
                // the same flow.
                let same = pending
                    .get(&s.id)
                    .is_some_and(|&i| sent[i].bytes == s.bytes && sent[i].flow == s.flow);
                Some((r, s.flow, real && same, lie))
            }
            3 => {
                let n = inp.byte() as usize;
                Some((inp.take(n).to_vec(), u32::from(op >> 3), false, false))
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
        if let Some((d, flow, must_complete, must_not)) = datagram {
            datagrams += 1;
            let (a, _code) = classify(&mut table, &mut *w, &d, flow, None);
            counted += 1;
            let id = w.response_id(&d).map(|(id, _)| id);
            match a {
                Answer::Completes(e) => {
                    assert!(!must_not, "an answer with the wrong verdict completed");
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

/// The RADIUS users the generator logs in as; every third password is wrong.
const USERS: &str = "alice Cleartext-Password := \"alicepw\"\nbob Auth-Type := Reject\n\
                     carol Cleartext-Password := \"a much longer password, over 16 bytes\"\n";
const SECRET: &[u8] = b"testing123";

/// A RADIUS workload: PAP, CHAP or accounting, with or without Message-Authenticators.
fn radius(c: u8) -> RadiusWorkload {
    let users = firehose_radiuswire::users::parse(USERS, "users").expect("the users parse");
    let cfg = RadiusLoad {
        kind: [RequestKind::Pap, RequestKind::Chap, RequestKind::Accounting][(c as usize >> 1) % 3],
        message_authenticator: c & 8 != 0,
        wrong_every: 3,
        secret: Secret::new(SECRET),
        users: users_from(&users).into(),
    };
    RadiusWorkload::new(cfg, u64::from(c)).expect("users to log in as")
}

/// What a correct RADIUS server sends back for `req`: the verdict decided here from the
/// users file (not from the generator's own expectation; the other one when `seed` has
/// 0x20), Reply-Messages when `seed` asks, a Message-Authenticator and the Response
/// Authenticator.
fn radius_answer(req: &[u8], seed: u8) -> Vec<u8> {
    let s = Secret::new(SECRET);
    let r = parse_request(req).expect("the generator's request parses");
    let ra = r.header.authenticator;
    let p = &req[..r.header.length as usize];
    let code = if r.header.code == code::ACCOUNTING_REQUEST {
        if seed & 0x20 != 0 {
            code::ACCESS_ACCEPT
        } else {
            code::ACCOUNTING_RESPONSE
        }
    } else {
        let user = r.user_name.map_or(&[][..], |u| u.of(p));
        let pw: &[u8] = match user {
            b"alice" => b"alicepw",
            b"carol" => b"a much longer password, over 16 bytes",
            _ => b"",
        };
        let ok = if let Some(chap) = r.chap_password {
            let chap = chap.of(p);
            chap_response(chap[0], pw, &ra) == chap[1..]
        } else {
            let mut clear = [0u8; 128];
            let hidden = r.user_password.expect("PAP carries a User-Password").of(p);
            let n = s.unhide_password(&ra, hidden, &mut clear).expect("hidden");
            &clear[..n] == pw
        };
        if (ok && user != b"bob") != (seed & 0x20 != 0) {
            code::ACCESS_ACCEPT
        } else {
            code::ACCESS_REJECT
        }
    };
    let mut out = vec![0u8; HEADER];
    let ma = (code != code::ACCOUNTING_RESPONSE || seed & 0x40 != 0).then(|| {
        out.extend([attr::MESSAGE_AUTHENTICATOR, 18]);
        out.extend([0; 16]);
        HEADER + 2
    });
    for _ in 0..seed & 3 {
        out.extend([attr::REPLY_MESSAGE, 2 + 5]);
        out.extend(b"hello");
    }
    let n = out.len();
    put_header(&mut out, code, r.header.id, n);
    if let Some(at) = ma {
        let m = s.message_authenticator(&out, at, &ra);
        out[at..at + 16].copy_from_slice(&m);
    }
    let a = s.authenticator(&out, &ra);
    out[4..HEADER].copy_from_slice(&a);
    if seed & 0x80 != 0 {
        out.extend([0xEE; 3]); // padding past the length field
    }
    out
}

/// What a correct server sends back for `req`.
fn true_answer(w: &dyn Workload, req: &[u8], seed: u8) -> Vec<u8> {
    if w.id_bits() == 64 {
        return req.to_vec();
    }
    if w.id_bits() == 8 {
        return radius_answer(req, seed);
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
    for c in [0x30u8, 0x31, 0x33, 0x01, 0x10, 0x35, 0x37, 0x3d, 0x39, 0x15] {
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
