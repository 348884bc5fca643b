//! The served data after loading: zones, their nodes, and pre-rendered answers.
//!
//! Every answer the responder can give is rendered once at start into a [`Template`]:
//! the answer, authority and additional sections as wire bytes, compressed against a
//! *model* question name at offset 12. At run time the real question may be longer
//! than the model (a wildcard, a name below a delegation, an NXDOMAIN); every pointer
//! that does not point at the whole question is then shifted by the length difference.
//! Lookups hash lower-case wire names held in fixed scratch buffers: nothing allocates.

use super::dnssec::{Entries, NsecChain};
use super::nsec3::{Nsec3Zone, Proofs};
use super::wire::{rtype, NameBuf, Query, MAX_NAME};
use super::zone::ZoneData;
use std::sync::Arc;

pub use super::arena::{Names, Templates};
pub use super::hash::NameMap;
pub use super::template::{Template, Tid};

/// A name that exists in a zone (has records, or is an empty non-terminal).
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// The zone cut at or above this node (strictly below the apex), if any: queries
    /// here are answered with that cut's referral.
    pub cut: Option<u32>,
    /// The referral, if this node is a zone cut.
    pub referral: Option<Tid>,
    /// In a signed zone: the templates for DO=1 queries.
    pub dnssec: Option<Box<SignedNode>>,
    /// Where the node's (query type, template) pairs with a specific answer start in
    /// [`Zone::answers`], and how many there are.
    pub answers_at: u32,
    pub answers_len: u16,
    /// The node owns a DNAME: names below it are synthesized (RFC 6672).
    pub dname: bool,
    /// Template for other query types (NODATA, or the CNAME chased for a type that
    /// no zone holds).
    pub other: Tid,
    /// Template for QTYPE=ANY (RFC 8482: one RRset).
    pub any: Tid,
}

/// The DO=1 templates of a node, in the same places as the plain ones.
#[derive(Debug, Clone, Default)]
pub struct SignedNode {
    /// Parallel to [`Node::answers`].
    pub answers: Box<[Tid]>,
    pub other: Tid,
    pub any: Tid,
    pub referral: Option<Tid>,
}

/// What a signed zone needs beyond its templates.
#[derive(Debug, Clone, Default)]
pub struct SignedZone {
    /// NXDOMAIN with the SOA and its RRSIG (the NSECs are added per query).
    pub nxdomain: Tid,
    pub chain: NsecChain,
    /// Present if the zone is signed with NSEC3 (then `chain` is empty).
    pub nsec3: Option<Box<Nsec3Zone>>,
}

impl Zone {
    /// The (query type, template) pairs of node `n` with a specific answer.
    #[inline]
    pub fn answers(&self, n: u32) -> &[(u16, Tid)] {
        let node = &self.node[n as usize];
        let at = node.answers_at as usize;
        &self.answers[at..at + node.answers_len as usize]
    }

    /// The template for `qtype` at node `n`, signed if `dnssec` and the node has
    /// signed ones.
    #[inline]
    pub fn pick(&self, n: u32, qtype: u16, dnssec: bool) -> Tid {
        let node = &self.node[n as usize];
        match (&node.dnssec, dnssec) {
            (Some(d), true) => {
                if qtype == rtype::ANY {
                    return d.any;
                }
                match self.answers(n).iter().position(|&(t, _)| t == qtype) {
                    Some(i) => d.answers[i],
                    None => d.other,
                }
            }
            _ => self.template_for(n, qtype),
        }
    }

    /// The unsigned template for `qtype` at node `n`.
    #[inline]
    pub fn template_for(&self, n: u32, qtype: u16) -> Tid {
        let node = &self.node[n as usize];
        if qtype == rtype::ANY {
            return node.any;
        }
        for &(t, id) in self.answers(n) {
            if t == qtype {
                return id;
            }
        }
        node.other
    }

    /// The serial of the zone's SOA, from the records kept for transfers (`None` if
    /// it was built without them).
    pub fn serial(&self) -> Option<u32> {
        let soa = self.records.as_ref()?.rec(*self.transfer.first()? as usize);
        let s = soa.rdata.get(soa.rdata.len().checked_sub(20)?..)?;
        Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// Name of node `n` (lower-case wire form).
    #[inline]
    pub fn node_name(&self, n: u32) -> &[u8] {
        self.nodes.name(n)
    }
}

/// One zone, ready to serve.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Lower-case wire name of the apex.
    pub apex: Box<[u8]>,
    /// Labels in the apex, not counting the root.
    pub apex_labels: usize,
    /// Labels in the deepest node: longer names need no lookup to be found missing.
    pub max_labels: usize,
    /// Node names and the index finding them.
    pub nodes: Names,
    pub node: Vec<Node>,
    /// Every node's (query type, template) pairs, node after node.
    pub answers: Vec<(u16, Tid)>,
    /// NXDOMAIN and NODATA: the SOA in the authority section, compressed against the apex.
    pub nxdomain: Tid,
    pub nodata: Tid,
    /// The zone's records as loaded, which zone transfers stream (RFC 5936) and a
    /// reload falls back on; `None` if built without them.
    pub records: Option<Arc<ZoneData>>,
    /// Indexes in `records` in the order a zone transfer sends them, the SOA first;
    /// empty if transfers are off.
    pub transfer: Vec<u32>,
    /// Present if the zone is signed (holds RRSIGs).
    pub dnssec: Option<Box<SignedZone>>,
}

/// Where a name lands inside a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The name exists (node index).
    Exact(u32),
    /// The name does not exist, but a wildcard (node index) covers it.
    Wildcard(u32),
    /// The name exists below a zone cut, or its closest encloser does (cut node index).
    Referral(u32),
    /// An ancestor (node index) owns a DNAME that rewrites the name.
    Dname(u32),
    /// Neither the name nor a wildcard exists.
    NxDomain,
}

/// What the responder should send for a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer<'a> {
    /// The name is in none of our zones.
    Refused,
    Template(Template<'a>),
    /// A signed denial: the template, then up to three NSEC or NSEC3 entries of
    /// `chain` (their indexes in `proofs[..n]`) added to the authority section.
    Denial {
        t: Template<'a>,
        chain: &'a Entries,
        proofs: [u32; 3],
        n: usize,
    },
    /// Below the DNAME of node `node` in zone `zone`: the DNAME RRset's template
    /// (rendered against the owner's name, `owner_len` bytes) starts the answer.
    Dname {
        dname: Template<'a>,
        zone: u32,
        node: u32,
        owner_len: usize,
    },
}

/// All zones served.
#[derive(Debug, Clone, Default)]
pub struct ZoneSet {
    pub zones: Vec<Zone>,
    pub apexes: NameMap<u32>,
    /// Labels in the deepest apex, so a long query name costs few lookups.
    pub max_apex_labels: usize,
    pub templates: Templates,
}

impl ZoneSet {
    /// Template `tid`.
    #[inline]
    pub fn template(&self, tid: Tid) -> Template<'_> {
        self.templates.get(tid)
    }

    /// The zone with the longest apex that `name` ends with, and the index of the
    /// label where that apex starts.
    #[inline]
    pub fn zone_for(&self, nb: &NameBuf, name_len: usize, labels: usize) -> Option<(u32, usize)> {
        self.zone_from(nb, name_len, labels, 0)
    }

    /// Like [`Self::zone_for`], for apexes starting at label `first` or later.
    #[inline]
    fn zone_from(
        &self,
        nb: &NameBuf,
        name_len: usize,
        labels: usize,
        first: usize,
    ) -> Option<(u32, usize)> {
        (labels.saturating_sub(self.max_apex_labels).max(first)..=labels)
            .find_map(|i| self.apexes.get(nb.suffix(i, name_len)).map(|&z| (z, i)))
    }

    /// The answer for `qtype` at `nb` if it is a name of zone `zi` (for following a
    /// DNAME's synthesized CNAME, RFC 6672 §3.1): another DNAME as [`Answer::Dname`],
    /// and whether the answer came from a wildcard (its owners are then the name
    /// looked up, written as pointers to the question). `None` outside the zone.
    #[allow(clippy::too_many_arguments)]
    pub fn chase(
        &self,
        zi: u32,
        nb: &NameBuf,
        name_len: usize,
        labels: usize,
        qtype: u16,
        dnssec: bool,
        wild: &mut [u8; MAX_NAME + 2],
    ) -> Option<(Answer<'_>, bool)> {
        let (z, apex_at) = self.zone_for(nb, name_len, labels)?;
        if z != zi {
            return None;
        }
        let z = &self.zones[zi as usize];
        let tid = match self.find(z, nb, name_len, labels, apex_at, wild) {
            Found::Exact(n) => z.pick(n, qtype, dnssec),
            Found::Referral(c) => {
                let cut = &z.node[c as usize];
                let signed = cut
                    .dnssec
                    .as_ref()
                    .filter(|_| dnssec)
                    .and_then(|d| d.referral);
                signed.or(cut.referral)?
            }
            Found::NxDomain => match z.dnssec.as_deref().filter(|_| dnssec) {
                Some(sz) => {
                    return Some((self.nx_denial(z, sz, nb, name_len, apex_at, wild), false))
                }
                None => z.nxdomain,
            },
            Found::Wildcard(n) => {
                let a = self.wildcard(z, n, nb, name_len, labels, qtype, dnssec);
                return Some((a, true));
            }
            Found::Dname(n) => return Some((self.dname(z, zi, n, dnssec), false)),
        };
        Some((Answer::Template(self.template(tid)), false))
    }

    /// The answer below the DNAME at node `n` of zone `zi` (`z`).
    fn dname<'a>(&'a self, z: &Zone, zi: u32, n: u32, dnssec: bool) -> Answer<'a> {
        Answer::Dname {
            dname: self.template(z.pick(n, rtype::DNAME, dnssec)),
            zone: zi,
            node: n,
            owner_len: z.node_name(n).len(),
        }
    }

    /// The answer from the wildcard at node `n` for the name in `nb`, with the proofs
    /// a signed zone adds (the name does not exist; RFC 4035 §3.1.3.3, RFC 5155 §7.2.6).
    #[allow(clippy::too_many_arguments)]
    fn wildcard<'a>(
        &'a self,
        z: &'a Zone,
        n: u32,
        nb: &NameBuf,
        name_len: usize,
        labels: usize,
        qtype: u16,
        dnssec: bool,
    ) -> Answer<'a> {
        let node = &z.node[n as usize];
        let tid = z.pick(n, qtype, dnssec);
        let signed = z.dnssec.as_deref().filter(|_| dnssec);
        if let Some(n3) = signed.and_then(|sz| sz.nsec3.as_deref()) {
            // The closest encloser is the wildcard's parent.
            let enc = z.nodes.get(&z.node_name(n)[2..]).copied();
            let nodata = self.template(tid).counts[0] == 0;
            let qname = nb.suffix(0, name_len);
            let p = n3.wildcard(enc.unwrap_or(0), n, qname, labels, nodata);
            return self.nsec3_denial(n3, tid, p);
        }
        if let Some(sz) = signed {
            // The NSEC proving the query name itself does not exist, unless it
            // is the wildcard's own, already in its NODATA answer.
            let qname = nb.suffix(0, name_len);
            // (Not so for a CNAME chased for a type no zone holds: its answer
            // is not empty.)
            let nodata = node.dnssec.as_ref().is_some_and(|d| d.other == tid)
                && self.template(tid).counts[0] == 0;
            let own =
                sz.chain.covering(qname).map(|i| &*sz.chain.owners[i]) == Some(z.node_name(n));
            let names = if nodata && own {
                [&[][..], &[]]
            } else {
                [qname, &[]]
            };
            return self.denial(sz, tid, names);
        }
        Answer::Template(self.template(tid))
    }

    /// Signed NXDOMAIN: the name is covered, and so is the wildcard at its closest
    /// encloser (RFC 4035 §3.1.3.2).
    fn nx_denial<'a>(
        &'a self,
        z: &Zone,
        sz: &'a SignedZone,
        nb: &NameBuf,
        name_len: usize,
        apex_at: usize,
        wild: &mut [u8; MAX_NAME + 2],
    ) -> Answer<'a> {
        let (ce, ce_node) = (1..=apex_at)
            .map(|i| nb.suffix(i, name_len))
            .find_map(|s| z.nodes.get(s).map(|&n| (s, n)))
            .unwrap_or((&z.apex, 0));
        if let Some(n3) = &sz.nsec3 {
            let p = n3.nxdomain(ce_node, nb.suffix(0, name_len), apex_at + z.apex_labels);
            return self.nsec3_denial(n3, sz.nxdomain, p);
        }
        wild[0] = 1;
        wild[1] = b'*';
        wild[2..2 + ce.len()].copy_from_slice(ce);
        let star = &wild[..2 + ce.len()];
        self.denial(sz, sz.nxdomain, [nb.suffix(0, name_len), star])
    }

    /// Finds `name` (in `nb`, `labels` labels) in zone `z` whose apex starts at label
    /// `apex_at`. `wild` is scratch space for building the wildcard name.
    pub fn find(
        &self,
        z: &Zone,
        nb: &NameBuf,
        name_len: usize,
        labels: usize,
        apex_at: usize,
        wild: &mut [u8; MAX_NAME + 2],
    ) -> Found {
        if labels <= z.max_labels {
            if let Some(&n) = z.nodes.get(nb.suffix(0, name_len)) {
                return match z.node[n as usize].cut {
                    Some(c) => Found::Referral(c),
                    None => Found::Exact(n),
                };
            }
        }
        // The closest encloser: the longest existing ancestor (the apex always exists).
        // Suffixes deeper than the deepest node cannot exist, so they are not looked up.
        for i in labels.saturating_sub(z.max_labels).max(1)..=apex_at {
            let Some(&n) = z.nodes.get(nb.suffix(i, name_len)) else {
                continue;
            };
            if let Some(c) = z.node[n as usize].cut {
                return Found::Referral(c);
            }
            if z.node[n as usize].dname {
                return Found::Dname(n);
            }
            let enc = nb.suffix(i, name_len);
            wild[0] = 1;
            wild[1] = b'*';
            wild[2..2 + enc.len()].copy_from_slice(enc);
            return match z.nodes.get(&wild[..2 + enc.len()]) {
                Some(&w) => Found::Wildcard(w),
                None => Found::NxDomain,
            };
        }
        Found::NxDomain
    }

    /// The answer to a parsed query whose lower-case name is in `nb`.
    #[inline]
    pub fn answer(&self, nb: &NameBuf, q: &Query, wild: &mut [u8; MAX_NAME + 2]) -> Answer<'_> {
        let Some((mut zi, mut apex_at)) = self.zone_for(nb, q.name_len, q.labels) else {
            return Answer::Refused;
        };
        // DS at a child apex we also serve: the parent answers (RFC 4035 §3.1.4.1).
        if q.qtype == rtype::DS && apex_at == 0 {
            if let Some(p) = self.zone_from(nb, q.name_len, q.labels, 1) {
                (zi, apex_at) = p;
            }
        }
        let z = &self.zones[zi as usize];
        let dnssec = q.edns.is_some_and(|e| e.dnssec_ok);
        let signed = z.dnssec.as_deref().filter(|_| dnssec);
        let tid = match self.find(z, nb, q.name_len, q.labels, apex_at, wild) {
            Found::Exact(n) => z.pick(n, q.qtype, dnssec),
            Found::Wildcard(n) => {
                return self.wildcard(z, n, nb, q.name_len, q.labels, q.qtype, dnssec)
            }
            Found::Referral(c) => {
                let cut = &z.node[c as usize];
                // DS lives on the parent side of the cut (RFC 4035 §3.1.4.1).
                if q.qtype == rtype::DS && z.node_name(c).len() == q.name_len {
                    z.pick(c, rtype::DS, dnssec)
                } else {
                    let signed_ref = cut.dnssec.as_ref().filter(|_| dnssec);
                    signed_ref
                        .and_then(|d| d.referral)
                        .or(cut.referral)
                        .unwrap_or(z.nodata)
                }
            }
            Found::Dname(n) => return self.dname(z, zi, n, dnssec),
            Found::NxDomain => match signed {
                Some(sz) => return self.nx_denial(z, sz, nb, q.name_len, apex_at, wild),
                None => z.nxdomain,
            },
        };
        Answer::Template(self.template(tid))
    }

    /// Template `tid` with the NSEC3 entries `p`.
    fn nsec3_denial<'a>(&'a self, n3: &'a Nsec3Zone, tid: Tid, p: Proofs) -> Answer<'a> {
        Answer::Denial {
            t: self.template(tid),
            chain: &n3.chain.entries,
            proofs: p.idx,
            n: p.n,
        }
    }

    /// Template `tid` with the NSECs covering `names` (the second may be empty).
    fn denial<'a>(&'a self, sz: &'a SignedZone, tid: Tid, names: [&[u8]; 2]) -> Answer<'a> {
        let mut proofs = [0u32; 3];
        let mut n = 0;
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            if let Some(i) = sz.chain.covering(name) {
                if n == 0 || proofs[0] != i as u32 {
                    proofs[n] = i as u32;
                    n += 1;
                }
            }
        }
        Answer::Denial {
            t: self.template(tid),
            chain: &sz.chain.entries,
            proofs,
            n,
        }
    }
}
