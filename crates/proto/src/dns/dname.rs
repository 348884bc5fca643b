//! Answers below a DNAME (RFC 6672): the DNAME RR, a CNAME synthesized from the query
//! name, and the lookup restarted at the new name (RFC 6672 §3.1, RFC 1034 §4.3.2
//! step 3), in the same zone: another DNAME repeats the step, anything else ends the
//! answer with its template.
//!
//! Everything is written straight into the response buffer: each DNAME template is
//! copied like any other; a CNAME's target is the name's leading labels followed by
//! the DNAME's target, written whole; the closing answer's template is copied behind
//! and its compression pointers redirected from its model question to the new name.

use super::build::MAX_CHAIN;
use super::db::{Answer, Template, ZoneSet};
use super::template::rr_end;
use super::wire::{get16, put16, rcode, read_name, rtype, NameBuf, Query, HEADER, MAX_NAME};

/// Where compression pointers can point (14 bits).
const MAX_POINTER: usize = 0x3FFF;

/// What was written after the question.
pub struct Synthesized {
    pub end: usize,
    pub counts: [u16; 3],
    pub rcode: u8,
}

/// Scratch for following the synthesized name.
pub struct Scratch<'a> {
    pub name: &'a mut NameBuf,
    pub wild: &'a mut [u8; MAX_NAME + 2],
}

/// The DNAME a name lies below: its template, zone, node and owner length.
pub struct Below<'a> {
    pub dname: Template<'a>,
    pub zone: u32,
    pub node: u32,
    pub owner_len: usize,
}

/// Writes the answer for query `q` below the DNAME `first`, following the chain for
/// at most [`MAX_CHAIN`] links (Knot's limit); a loop ends where a name would be
/// rewritten a second time, so no record is written twice. `None` if it does not fit
/// in `limit` bytes.
#[cold]
pub fn synthesize(
    db: &ZoneSet,
    buf: &mut [u8],
    q: &Query,
    first: Below<'_>,
    limit: usize,
    s: Scratch<'_>,
) -> Option<Synthesized> {
    let dnssec = q.edns.is_some_and(|e| e.dnssec_ok);
    let mut out = Synthesized {
        end: q.question_end,
        counts: [0; 3],
        rcode: rcode::NOERROR,
    };
    // The name being rewritten: where it is written in `buf`, and its length.
    let (mut at, mut len) = (HEADER, q.name_len);
    let mut seen = [(0usize, 0usize); MAX_CHAIN];
    let mut dnames = [u32::MAX; MAX_CHAIN];
    let mut below = first;
    for link in 0..MAX_CHAIN {
        let name = &buf[at..at + len];
        let again = seen[..link]
            .iter()
            .any(|&(a, l)| l == len && buf[a..a + l].eq_ignore_ascii_case(name));
        if again {
            return Some(out);
        }
        seen[link] = (at, len);
        let t = below.dname;
        // The DNAME (its RRSIG behind it, with DO), once per answer.
        if t.counts[0] == 0 {
            return None;
        }
        if !dnames.contains(&below.node) {
            dnames[link] = below.node;
            if out.end + t.bytes.len() > limit {
                return None;
            }
            copy_template(buf, out.end, &t, t.bytes.len(), (at, len), false)?;
            out.end += t.bytes.len();
            out.counts[0] += t.counts[0];
        }
        // The DNAME's owner is a 2-byte pointer, so its RDATA (the uncompressed target)
        // starts 12 bytes in.
        let target_len = get16(t.bytes, 10) as usize;
        let target = &t.bytes[12..12 + target_len];
        let prefix_len = len - below.owner_len;
        let new_len = prefix_len + target_len;
        if new_len > MAX_NAME {
            out.rcode = rcode::YXDOMAIN;
            return Some(out);
        }
        let (cname_at, rdata_at) = (out.end, out.end + 12);
        let end = rdata_at + new_len;
        if end > limit || rdata_at > MAX_POINTER {
            return None;
        }
        // Owner: the name rewritten; TTL: the DNAME's.
        put16(buf, cname_at, 0xC000 | at as u16);
        put16(buf, cname_at + 2, rtype::CNAME);
        put16(buf, cname_at + 4, super::wire::CLASS_IN);
        buf[cname_at + 6..cname_at + 10].copy_from_slice(&t.bytes[6..10]);
        put16(buf, cname_at + 10, new_len as u16);
        // The new name written out whole: validating resolvers (BIND) want the CNAME they
        // would synthesize themselves, uncompressed.
        buf.copy_within(at..at + prefix_len, rdata_at);
        buf[rdata_at + prefix_len..end].copy_from_slice(target);
        out.end = end;
        out.counts[0] += 1;
        // The synthesized CNAME answers a CNAME query.
        if q.qtype == rtype::CNAME {
            return Some(out);
        }
        (at, len) = (rdata_at, new_len);
        let (_, labels) = read_name(&buf[at..at + len], 0, s.name).ok()?;
        let chased = db.chase(below.zone, s.name, len, labels, q.qtype, dnssec, s.wild);
        let (t, proofs, wild) = match chased {
            Some((
                Answer::Dname {
                    dname,
                    zone,
                    node,
                    owner_len,
                },
                _,
            )) => {
                // A sixth link ends the answer where it stands, as Knot ends it.
                if link + 1 == MAX_CHAIN {
                    return Some(out);
                }
                below = Below {
                    dname,
                    zone,
                    node,
                    owner_len,
                };
                continue;
            }
            Some((Answer::Template(t), wild)) => (t, None, wild),
            Some((
                Answer::Denial {
                    t,
                    chain,
                    proofs,
                    n,
                },
                wild,
            )) => (t, Some((chain, proofs, n)), wild),
            // Outside the zone: the client resolves on.
            Some((Answer::Refused, _)) | None => return Some(out),
        };
        let p = out.end;
        if p + t.bytes.len() > limit {
            return None;
        }
        copy_template(buf, p, &t, t.bytes.len(), (at, len), wild)?;
        out.end = p + t.bytes.len();
        out.counts = [
            out.counts[0] + t.counts[0],
            out.counts[1] + t.counts[1],
            out.counts[2] + t.counts[2],
        ];
        // A signed denial's NSECs, behind its authority section (it has no additional);
        // the zone's apex is the end of the name looked up.
        if let Some((chain, proofs, n)) = proofs {
            let apex_at = at + len - chain.apex_len as usize;
            for &i in &proofs[..n] {
                let (end, count) = chain.write(i as usize, buf, out.end, limit, apex_at)?;
                out.end = end;
                out.counts[1] += count;
            }
        }
        out.rcode = t.rcode;
        return Some(out);
    }
    Some(out)
}

/// Copies the first `keep` bytes of template `t` to `buf[p..]`, for the name written
/// at `name.0` (`name.1` bytes long) instead of its model question: pointers into the
/// model go to the same suffix of that name, pointers into the template move with it,
/// and with `wild` the owners that stand for the query name (a wildcard's) point at
/// the name. `None` if a pointer would not reach.
pub fn copy_template(
    buf: &mut [u8],
    p: usize,
    t: &Template<'_>,
    keep: usize,
    name: (usize, usize),
    wild: bool,
) -> Option<()> {
    let (name_at, name_len) = name;
    buf[p..p + keep].copy_from_slice(&t.bytes[..keep]);
    let model_len = t.model_len as usize;
    let base = HEADER + model_len + 4;
    for &f in t.fixups.iter().take_while(|&&f| (f as usize) < keep) {
        let at = p + f as usize;
        let v = (get16(buf, at) & 0x3FFF) as usize;
        let moved = if v >= base {
            p + (v - base)
        } else {
            // A suffix of the model question: the same suffix of the name.
            name_at + (v - HEADER) + name_len - model_len
        };
        if moved > MAX_POINTER {
            return None;
        }
        put16(buf, at, 0xC000 | moved as u16);
    }
    if wild {
        // Owners written as the question itself: pointers to it that are not in the
        // fixups (a shared NODATA template's owner points at its model, the apex).
        let mut at = 0;
        while at < keep {
            let qname = t.bytes[at..at + 2] == [0xC0, HEADER as u8];
            if qname && !t.fixups.contains(&(at as u16)) {
                put16(buf, p + at, 0xC000 | name_at as u16);
            }
            at = rr_end(t.bytes, at);
        }
    }
    Some(())
}
