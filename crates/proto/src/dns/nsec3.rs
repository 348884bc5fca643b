//! NSEC3 hashed denial (RFC 5155): the owner-name hash and the chain ordered by hash.
//!
//! A zone signed with NSEC3 names each NSEC3 record by the base32hex of an iterated,
//! salted SHA-1 of an existing name. Denying a name that does not exist means hashing
//! names derived from the query at run time (the closest encloser, the next closer name,
//! the wildcard), so the hash here works on the stack and never allocates.

use super::dnssec::Entries;
use sha1_smol::Sha1;

/// Record types of NSEC3 data.
pub const NSEC3: u16 = 50;
pub const NSEC3PARAM: u16 = 51;

/// Length of a SHA-1 digest, the only NSEC3 hash algorithm defined (number 1).
pub const HASH_LEN: usize = 20;

/// The zone's hash parameters, from its NSEC3PARAM record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub iterations: u16,
    pub salt: Box<[u8]>,
}

impl Params {
    /// Reads NSEC3PARAM RDATA (algorithm, flags, iterations, salt length, salt); `None`
    /// for an algorithm other than SHA-1 or a malformed record.
    pub fn from_rdata(rd: &[u8]) -> Option<Params> {
        let (&alg, rest) = rd.split_first()?;
        let salt_len = *rest.get(3)? as usize;
        let salt = rest.get(4..4 + salt_len)?;
        (alg == 1 && rest.len() == 4 + salt_len).then(|| Params {
            iterations: u16::from_be_bytes([rest[1], rest[2]]),
            salt: salt.into(),
        })
    }

    /// The hash of lower-case wire `name` (RFC 5155 §5): SHA-1 of the name and the
    /// salt, then `iterations` more times of the previous digest and the salt.
    pub fn hash(&self, name: &[u8]) -> [u8; HASH_LEN] {
        let mut h = Sha1::new();
        h.update(name);
        h.update(&self.salt);
        let mut d = h.digest().bytes();
        for _ in 0..self.iterations {
            let mut h = Sha1::new();
            h.update(&d);
            h.update(&self.salt);
            d = h.digest().bytes();
        }
        d
    }
}

const BASE32HEX: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// A digest as the first label of an NSEC3 owner: 32 lower-case base32hex characters.
pub fn encode(h: &[u8; HASH_LEN]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut bits = 0u32;
    let mut acc = 0u64;
    let mut k = 0;
    for &b in h {
        acc = (acc << 8) | b as u64;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out[k] = BASE32HEX[((acc >> bits) & 31) as usize];
            k += 1;
        }
    }
    out
}

/// The digest an NSEC3 owner label names (either case); `None` if it is not one.
pub fn decode(label: &[u8]) -> Option<[u8; HASH_LEN]> {
    if label.len() != 32 {
        return None;
    }
    let mut out = [0u8; HASH_LEN];
    let (mut acc, mut bits, mut k) = (0u64, 0u32, 0);
    for &c in label {
        let v = match c.to_ascii_lowercase() {
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'v' => c - b'a' + 10,
            _ => return None,
        };
        acc = (acc << 5) | v as u64;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out[k] = (acc >> bits) as u8;
            k += 1;
        }
    }
    Some(out)
}

/// A zone's NSEC3 records, each with its RRSIGs, ordered by hash, ready to append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nsec3Chain {
    /// The digest each NSEC3 owner names, ascending.
    pub hashes: Vec<[u8; HASH_LEN]>,
    /// The first 8 bytes of each digest as a number: a search compares these (a third
    /// of the memory, no byte-by-byte compare) and the whole digests only on a tie.
    keys: Vec<u64>,
    /// Per hash, its NSEC3 and RRSIGs.
    pub entries: Entries,
}

/// The search key of a digest.
fn key(h: &[u8; HASH_LEN]) -> u64 {
    u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
}

impl Nsec3Chain {
    /// Appends an owner digest, greater than those before it.
    pub fn push_hash(&mut self, h: [u8; HASH_LEN]) {
        self.keys.push(key(&h));
        self.hashes.push(h);
    }

    /// Like `binary_search` on the digests.
    fn search(&self, h: &[u8; HASH_LEN]) -> Result<usize, usize> {
        let k = key(h);
        let lo = self.keys.partition_point(|&x| x < k);
        let ties = self.keys[lo..].partition_point(|&x| x == k);
        match self.hashes[lo..lo + ties].binary_search(h) {
            Ok(i) => Ok(lo + i),
            Err(i) => Err(lo + i),
        }
    }

    /// Index of the NSEC3 whose owner hash is `h`.
    pub fn matching(&self, h: &[u8; HASH_LEN]) -> Option<usize> {
        self.search(h).ok()
    }

    /// Index of the NSEC3 that covers `h`: the last owner hash before it, the last
    /// entry for a hash before the first (the chain wraps). `None` if `h` is an owner.
    pub fn covering(&self, h: &[u8; HASH_LEN]) -> Option<usize> {
        match self.search(h) {
            Ok(_) => None,
            Err(0) => self.hashes.len().checked_sub(1),
            Err(i) => Some(i - 1),
        }
    }
}

/// No NSEC3 entry.
pub const NONE: u32 = u32::MAX;

/// The NSEC3 entries the denials at or below one node use, found at load time so a
/// query hashes only the one name that depends on it (the next closer name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeProofs {
    /// The NSEC3 matching the node's name, or [`NONE`] (glue, an opt-out delegation).
    pub own: u32,
    /// The NSEC3 matching the closest provable encloser of names below the node: the
    /// node itself if it has one, else its nearest ancestor that does.
    pub cpe: u32,
    /// The NSEC3 covering the wildcard at that encloser.
    pub star: u32,
    /// Labels in that encloser (the root not counted).
    pub cpe_labels: u8,
}

impl Default for NodeProofs {
    fn default() -> Self {
        NodeProofs {
            own: NONE,
            cpe: NONE,
            star: NONE,
            cpe_labels: 0,
        }
    }
}

/// Up to three distinct NSEC3 entries for one answer, in the order added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proofs {
    pub idx: [u32; 3],
    pub n: usize,
    /// An entry the answer holds already (never added again).
    known: u32,
}

impl Proofs {
    /// No entries yet; `known` is one the answer carries already (or [`NONE`]).
    pub fn new(known: u32) -> Self {
        Proofs {
            idx: [NONE; 3],
            n: 0,
            known,
        }
    }

    /// Adds entry `i` unless it is [`NONE`] or already there (RFC 5155 §7.2: each
    /// NSEC3 once).
    pub fn push(&mut self, i: u32) {
        if i != NONE && i != self.known && !self.idx[..self.n].contains(&i) && self.n < 3 {
            self.idx[self.n] = i;
            self.n += 1;
        }
    }
}

/// The next closer name of `name` (`labels` labels) to an encloser of `enc_labels`
/// labels: its suffix one label longer than the encloser (RFC 5155 §1.3).
pub fn next_closer(name: &[u8], labels: usize, enc_labels: usize) -> &[u8] {
    let mut at = 0;
    for _ in 0..labels.saturating_sub(enc_labels + 1) {
        at += 1 + name[at] as usize;
    }
    &name[at..]
}

/// What a zone signed with NSEC3 needs to deny at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nsec3Zone {
    pub params: Params,
    pub chain: Nsec3Chain,
    /// Per node of the zone, by node index.
    pub nodes: Vec<NodeProofs>,
}

impl Nsec3Zone {
    /// The NSEC3 covering the hash of lower-case wire `name` ([`NONE`] if one matches).
    pub fn cover(&self, name: &[u8]) -> u32 {
        let h = self.params.hash(name);
        self.chain.covering(&h).map_or(NONE, |i| i as u32)
    }

    /// The closest encloser proof (RFC 5155 §7.2.1) for lower-case wire `name` of
    /// `labels` labels, whose closest existing ancestor (or itself) is node `ce`: the
    /// NSEC3 matching the closest provable encloser and the one covering the next
    /// closer name.
    pub fn encloser_proof(&self, ce: u32, name: &[u8], labels: usize, p: &mut Proofs) {
        let np = self.nodes[ce as usize];
        p.push(np.cpe);
        p.push(self.cover(next_closer(name, labels, np.cpe_labels as usize)));
    }

    /// NXDOMAIN (RFC 5155 §7.2.2) for `name` below node `ce`: the closest encloser
    /// proof and the NSEC3 covering the wildcard at the encloser.
    pub fn nxdomain(&self, ce: u32, name: &[u8], labels: usize) -> Proofs {
        let mut p = Proofs::new(NONE);
        self.encloser_proof(ce, name, labels, &mut p);
        p.push(self.nodes[ce as usize].star);
        p
    }

    /// An answer synthesized from the wildcard node `wild` whose parent is node `enc`:
    /// the NSEC3 covering the next closer name (RFC 5155 §7.2.6); for NODATA also the
    /// NSEC3 matching the closest encloser (§7.2.5; the wildcard's own NSEC3 is in the
    /// answer already).
    pub fn wildcard(
        &self,
        enc: u32,
        wild: u32,
        name: &[u8],
        labels: usize,
        nodata: bool,
    ) -> Proofs {
        let np = self.nodes[enc as usize];
        let mut p = Proofs::new(NONE);
        if nodata {
            p = Proofs::new(self.nodes[wild as usize].own);
            p.push(np.cpe);
        }
        p.push(self.cover(next_closer(name, labels, np.cpe_labels as usize)));
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(name: &str) -> Vec<u8> {
        let mut w = Vec::new();
        for l in name.split('.').filter(|l| !l.is_empty()) {
            w.push(l.len() as u8);
            w.extend_from_slice(l.as_bytes());
        }
        w.push(0);
        w
    }

    #[test]
    fn hashes_are_rfc5155_appendix_a() {
        // NSEC3PARAM 1 0 12 aabbccdd
        let p = Params::from_rdata(&[1, 0, 0, 12, 4, 0xaa, 0xbb, 0xcc, 0xdd]).unwrap();
        assert_eq!(p.iterations, 12);
        for (name, want) in [
            ("example", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
            ("a.example", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
            ("ai.example", "gjeqe526plbf1g8mklp59enfd789njgi"),
            ("ns1.example", "2t7b4g4vsa5smi47k61mv5bv1a22bojr"),
            ("x.y.w.example", "2vptu5timamqttgl4luu9kg21e0aor3s"),
            ("*.w.example", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
        ] {
            let h = p.hash(&wire(name));
            assert_eq!(&encode(&h), want.as_bytes(), "{name}");
            assert_eq!(decode(want.to_ascii_uppercase().as_bytes()), Some(h));
        }
        assert_eq!(decode(b"0p9mhaveqvm6t7vbl5lop2u3t2rp3toz"), None);
        assert_eq!(Params::from_rdata(&[2, 0, 0, 12, 0]), None, "not SHA-1");
        assert_eq!(
            Params::from_rdata(&[1, 0, 0, 12, 4, 0xaa]),
            None,
            "short salt"
        );
    }

    #[test]
    fn covering_wraps_and_matching_is_exact() {
        let mut c = Nsec3Chain::default();
        let mut tie = [5; HASH_LEN];
        tie[19] = 7;
        for h in [[2; HASH_LEN], [5; HASH_LEN], tie, [9; HASH_LEN]] {
            c.push_hash(h);
        }
        assert_eq!(c.matching(&[5; HASH_LEN]), Some(1));
        assert_eq!(c.matching(&tie), Some(2));
        assert_eq!(c.covering(&[5; HASH_LEN]), None);
        // Same first 8 bytes as two owners: the whole digest decides.
        let mut between = [5; HASH_LEN];
        between[19] = 6;
        assert_eq!(c.covering(&between), Some(1));
        between[19] = 8;
        assert_eq!(c.covering(&between), Some(2));
        assert_eq!(c.covering(&[6; HASH_LEN]), Some(2));
        assert_eq!(c.covering(&[1; HASH_LEN]), Some(3));
        assert_eq!(c.covering(&[10; HASH_LEN]), Some(3));
    }
}
