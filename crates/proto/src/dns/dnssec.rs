//! Serving zones signed elsewhere (RFC 4035 §3.1): with DO set, RRSIGs go with every
//! authoritative RRset and denials carry the zone's NSEC records.
//!
//! Most of this is settled when the templates are rendered (a second, signed template
//! per answer). What depends on the query name at run time is the NSEC that covers a
//! name that does not exist (and the one covering the wildcard at its closest
//! encloser): those are kept here as self-contained, uncompressed byte strings, found
//! by a binary search in canonical order (RFC 4034 §6.1) and appended to the answer.

use std::cmp::Ordering;

/// The wire length of the uncompressed name at the start of `b`.
fn name_len(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let l = *b.get(i)? as usize;
        i += 1 + l;
        if l == 0 {
            return Some(i);
        }
    }
}

/// Record types of DNSSEC data.
pub const RRSIG: u16 = 46;
pub const NSEC: u16 = 47;
pub const DNSKEY: u16 = 48;

/// Starts of the labels of a wire name (not the root), in a fixed array.
fn label_starts(w: &[u8], out: &mut [u8; 128]) -> usize {
    let (mut i, mut n) = (0usize, 0usize);
    while i < w.len() && w[i] != 0 && n < out.len() {
        out[n] = i as u8;
        n += 1;
        i += 1 + w[i] as usize;
    }
    n
}

/// Canonical DNS name order of two lower-case wire names: label by label from the
/// right, each label as bytes, a name before its descendants.
pub fn canonical_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut sa, mut sb) = ([0u8; 128], [0u8; 128]);
    let (na, nb) = (label_starts(a, &mut sa), label_starts(b, &mut sb));
    for k in 1..=na.min(nb) {
        let (ia, ib) = (sa[na - k] as usize, sb[nb - k] as usize);
        let la = &a[ia + 1..ia + 1 + a[ia] as usize];
        let lb = &b[ib + 1..ib + 1 + b[ib] as usize];
        match la.cmp(lb) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    na.cmp(&nb)
}

/// Denial records (an NSEC or NSEC3 with its RRSIGs per entry) as self-contained,
/// uncompressed bytes, written into an answer's authority section by [`Self::write`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    /// Per entry: (start, end) in `bytes` and the number of records there.
    pub spans: Vec<(u32, u32, u16)>,
    pub bytes: Vec<u8>,
    /// Wire length of the zone's apex, the suffix every owner shares.
    pub apex_len: u16,
}

impl Entries {
    /// The bytes and record count of entry `i`, uncompressed.
    pub fn entry(&self, i: usize) -> (&[u8], u16) {
        let (s, e, n) = self.spans[i];
        (&self.bytes[s as usize..e as usize], n)
    }

    /// Writes entry `i` at `buf[at..]`, compressed as Knot compresses it: each owner
    /// ends in a pointer to the apex, written at `apex_at` (the question's suffix), and
    /// the records after the first, at the same owner, point at the first's. Only
    /// owners: RFC 4034 forbids compressing the names inside NSEC and RRSIG. Returns
    /// the end and the record count; `None` if it would pass `limit`.
    pub fn write(
        &self,
        i: usize,
        buf: &mut [u8],
        at: usize,
        limit: usize,
        apex_at: usize,
    ) -> Option<(usize, u16)> {
        const REACH: usize = 0x3FFF;
        let (e, count) = self.entry(i);
        let apex = self.apex_len as usize;
        let (mut r, mut w) = (0, at);
        let mut first: Option<(usize, &[u8])> = None;
        while r < e.len() {
            let owner_end = r + name_len(&e[r..])?;
            let owner = &e[r..owner_end];
            let rest =
                owner_end + 10 + u16::from_be_bytes([e[owner_end + 8], e[owner_end + 9]]) as usize;
            let same = first.filter(|&(p, o)| p <= REACH && o.eq_ignore_ascii_case(owner));
            let head = match same {
                Some(_) => 2,
                None if apex_at <= REACH && owner.len() >= apex => owner.len() - apex + 2,
                None => owner.len(),
            };
            if w + head + (rest - owner_end) > limit {
                return None;
            }
            match same {
                Some((p, _)) => buf[w..w + 2].copy_from_slice(&(0xC000 | p as u16).to_be_bytes()),
                None if head == owner.len() => buf[w..w + head].copy_from_slice(owner),
                None => {
                    let labels = owner.len() - apex;
                    buf[w..w + labels].copy_from_slice(&owner[..labels]);
                    buf[w + labels..w + head]
                        .copy_from_slice(&(0xC000 | apex_at as u16).to_be_bytes());
                }
            }
            if first.is_none() {
                first = Some((w, owner));
            }
            w += head;
            buf[w..w + rest - owner_end].copy_from_slice(&e[owner_end..rest]);
            w += rest - owner_end;
            r = rest;
        }
        Some((w, count))
    }

    /// Closes the entry started at byte `start` (records appended since, `count` of them).
    pub fn close(&mut self, start: usize, count: u16) {
        self.spans
            .push((start as u32, self.bytes.len() as u32, count));
    }
}

/// A zone's NSEC records, each with its RRSIGs, ready to append to an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NsecChain {
    /// Lower-case owners in canonical order.
    pub owners: Vec<Box<[u8]>>,
    /// Per owner, its NSEC and RRSIGs.
    pub entries: Entries,
}

impl NsecChain {
    /// Index of the NSEC whose owner is `name` or the closest before it (the one that
    /// covers it); the last one covers names before the first (the chain wraps).
    pub fn covering(&self, name: &[u8]) -> Option<usize> {
        if self.owners.is_empty() {
            return None;
        }
        let after = self
            .owners
            .partition_point(|o| canonical_cmp(o, name) != Ordering::Greater);
        Some(if after == 0 {
            self.owners.len() - 1
        } else {
            after - 1
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_order_is_rfc4034s_example() {
        // RFC 4034 §6.1's example, in order.
        let names: [&[u8]; 9] = [
            b"\x07example\x00",
            b"\x01a\x07example\x00",
            b"\x08yljkjljk\x01a\x07example\x00",
            b"\x01Z\x01a\x07example\x00",
            b"\x04zABC\x01a\x07example\x00",
            b"\x01z\x07example\x00",
            b"\x01\x01\x01z\x07example\x00",
            b"\x01*\x01z\x07example\x00",
            b"\x01\xc8\x01z\x07example\x00",
        ];
        let lower: Vec<Vec<u8>> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
        for w in lower.windows(2) {
            assert_eq!(
                canonical_cmp(&w[0], &w[1]),
                Ordering::Less,
                "{:?} < {:?}",
                w[0],
                w[1]
            );
        }
        let chain = NsecChain {
            owners: vec![lower[0].clone().into(), lower[5].clone().into()],
            entries: Entries::default(),
        };
        assert_eq!(chain.covering(&lower[3]), Some(0));
        assert_eq!(chain.covering(&lower[5]), Some(1));
        assert_eq!(chain.covering(&lower[8]), Some(1));
    }
}
