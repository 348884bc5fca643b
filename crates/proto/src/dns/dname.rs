//! Answers below a DNAME (RFC 6672): the DNAME RR, a CNAME synthesized from the query
//! name, and, when the new name is in the same zone, its answer.
//!
//! Everything is written straight into the response buffer: the DNAME template is
//! copied like any other; the CNAME's target is the query's leading labels followed by
//! the DNAME's target; the followed answer's template is copied behind and its
//! compression pointers redirected from its model question to the new name.

use super::db::{Answer, Template, ZoneSet};
use super::wire::{put16, read_name, rtype, NameBuf, Query, HEADER, MAX_NAME};

/// Response code YXDOMAIN: the synthesized name would be too long (RFC 6672 §2.2).
const YXDOMAIN: u8 = 6;

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

/// Writes the answer for query `q` (whose lower-case name is `qname`) below the DNAME
/// whose template is `dname` and whose owner is `owner_len` bytes long, in zone `zone`.
/// `None` if it does not fit in `limit` bytes.
#[allow(clippy::too_many_arguments)]
#[cold]
pub fn synthesize(
    db: &ZoneSet,
    buf: &mut [u8],
    q: &Query,
    qname: &NameBuf,
    dname: Template<'_>,
    zone: u32,
    owner_len: usize,
    limit: usize,
    s: Scratch<'_>,
) -> Option<Synthesized> {
    let start = q.question_end;
    let dn_end = start + dname.bytes.len();
    // The DNAME comes first (its RRSIG after it, with DO).
    if dname.counts[0] == 0 || dn_end > limit {
        return None;
    }
    buf[start..dn_end].copy_from_slice(dname.bytes);
    let delta = q.name_len - dname.model_len as usize;
    for &f in dname.fixups.iter() {
        let at = start + f as usize;
        let ptr = u16::from_be_bytes([buf[at], buf[at + 1]]) & 0x3FFF;
        put16(buf, at, 0xC000 | (ptr + delta as u16));
    }
    // The DNAME's owner is a 2-byte pointer, so its RDATA (the uncompressed target)
    // starts 12 bytes in.
    let target_at = start + 12;
    let target_len = u16::from_be_bytes([buf[start + 10], buf[start + 11]]) as usize;
    let prefix_len = q.name_len - owner_len;
    let new_len = prefix_len + target_len;
    if new_len > MAX_NAME {
        return Some(Synthesized {
            end: dn_end,
            counts: [dname.counts[0], 0, 0],
            rcode: YXDOMAIN,
        });
    }
    let rdata_at = dn_end + 12;
    let end = rdata_at + new_len;
    if end > limit || target_at > 0x3FFF {
        return None;
    }
    // Owner: the query name; TTL: the DNAME's.
    buf[dn_end..dn_end + 2].copy_from_slice(&[0xC0, HEADER as u8]);
    put16(buf, dn_end + 2, rtype::CNAME);
    put16(buf, dn_end + 4, super::wire::CLASS_IN);
    buf.copy_within(start + 6..start + 10, dn_end + 6);
    put16(buf, dn_end + 10, new_len as u16);
    // The new name written out whole: validating resolvers (BIND) want the CNAME they
    // would synthesize themselves, uncompressed.
    buf.copy_within(HEADER..HEADER + prefix_len, rdata_at);
    buf.copy_within(target_at..target_at + target_len, rdata_at + prefix_len);
    let mut out = Synthesized {
        end,
        counts: [dname.counts[0] + 1, 0, 0],
        rcode: 0,
    };
    if q.qtype == rtype::CNAME {
        return Some(out);
    }
    let mut wire = [0u8; MAX_NAME];
    wire[..prefix_len].copy_from_slice(&qname.bytes[..prefix_len]);
    wire[prefix_len..new_len].copy_from_slice(&buf[target_at..target_at + target_len]);
    let (_, labels) = read_name(&wire[..new_len], 0, s.name).ok()?;
    let dnssec = q.edns.is_some_and(|e| e.dnssec_ok);
    let (t, proofs) = match db.chase(zone, s.name, new_len, labels, q.qtype, dnssec, s.wild) {
        Some(Answer::Template(t)) => (t, None),
        Some(Answer::Denial {
            t,
            chain,
            proofs,
            n,
        }) => (t, Some((chain, proofs, n))),
        _ => return Some(out),
    };
    let p = end;
    if p + t.bytes.len() > limit || p + t.bytes.len() > 0x3FFF {
        return None;
    }
    buf[p..p + t.bytes.len()].copy_from_slice(t.bytes);
    let base = HEADER + t.model_len as usize + 4;
    for &f in t.fixups.iter() {
        let at = p + f as usize;
        let v = (u16::from_be_bytes([buf[at], buf[at + 1]]) & 0x3FFF) as usize;
        let moved = if v >= base {
            p + (v - base)
        } else {
            // A suffix of the model question: the same suffix of the new name, which
            // is the CNAME's RDATA (its labels, then the DNAME target).
            rdata_at + v - HEADER + (new_len - t.model_len as usize)
        };
        put16(buf, at, 0xC000 | moved as u16);
    }
    out.end = p + t.bytes.len();
    out.counts = [dname.counts[0] + 1 + t.counts[0], t.counts[1], t.counts[2]];
    // A signed denial's NSECs, behind its authority section (it has no additional).
    if let Some((chain, proofs, n)) = proofs {
        for &i in &proofs[..n] {
            let (bytes, count) = chain.entry(i as usize);
            if out.end + bytes.len() > limit {
                return None;
            }
            buf[out.end..out.end + bytes.len()].copy_from_slice(bytes);
            out.end += bytes.len();
            out.counts[1] += count;
        }
    }
    out.rcode = t.rcode;
    Some(out)
}
