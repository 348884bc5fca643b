//! Serving zones signed elsewhere (RFC 4035 §3.1): with DO set, RRSIGs go with every
//! authoritative RRset and denials carry the zone's NSEC records.
//!
//! Most of this is settled when the templates are rendered (a second, signed template
//! per answer). What depends on the query name at run time is the NSEC that covers a
//! name that does not exist (and the one covering the wildcard at its closest
//! encloser): those are kept here as self-contained, uncompressed byte strings, found
//! by a binary search in canonical order (RFC 4034 §6.1) and appended to the answer.

use std::cmp::Ordering;

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
/// uncompressed bytes, ready to append to an answer's authority section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries {
    /// Per entry: (start, end) in `bytes` and the number of records there.
    pub spans: Vec<(u32, u32, u16)>,
    pub bytes: Vec<u8>,
}

impl Entries {
    /// The bytes and record count of entry `i`.
    pub fn entry(&self, i: usize) -> (&[u8], u16) {
        let (s, e, n) = self.spans[i];
        (&self.bytes[s as usize..e as usize], n)
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
