//! Signed answers: each RRset with its RRSIGs, and the NSECs a denial needs.

use super::render::plain_rr;
use super::resolve::rrset;
use super::{Denial, Owner, Rr, Sections, ZoneRecords};
use crate::dns::db::ZoneSet;
use crate::dns::dnssec::{canonical_cmp, NsecChain, NSEC, RRSIG};
use crate::dns::wire::{label_offsets, rtype};
use crate::dns::zone::Part;

/// What signing a zone's answers needs: its NSEC owners in canonical order.
pub(super) struct Signing<'a> {
    zi: usize,
    zr: &'a ZoneRecords<'a>,
    /// (lower-case owner, node) of every NSEC, in canonical order.
    nsec: Vec<(Vec<u8>, u32)>,
}

impl<'a> Signing<'a> {
    /// `None` for an unsigned zone (no RRSIG records).
    pub(super) fn new(set: &ZoneSet, zi: usize, zr: &'a ZoneRecords<'a>) -> Option<Self> {
        if !zr.data.records.iter().any(|r| r.rtype == RRSIG) {
            return None;
        }
        let z = &set.zones[zi];
        let mut nsec: Vec<(Vec<u8>, u32)> = (0..z.node_name.len())
            .filter(|&n| zr.by_node[n].iter().any(|r| r.rtype == NSEC))
            .map(|n| (z.node_name[n].to_vec(), n as u32))
            .collect();
        nsec.sort_by(|a, b| canonical_cmp(&a.0, &b.0));
        Some(Signing { zi, zr, nsec })
    }

    /// The runtime form: each NSEC with its RRSIGs, uncompressed.
    pub(super) fn chain(&self) -> NsecChain {
        let mut c = NsecChain::default();
        for (owner, n) in &self.nsec {
            let start = c.bytes.len() as u32;
            let mut count = 0;
            for rr in self.nsec_proof(*n) {
                let name = match &rr.owner {
                    Owner::Name(w) => w.as_slice(),
                    Owner::Qname => owner.as_slice(),
                };
                plain_rr(&mut c.bytes, name, rr.rec, rr.ttl);
                count += 1;
            }
            c.owners.push(owner.clone().into_boxed_slice());
            c.spans.push((start, c.bytes.len() as u32, count));
        }
        c
    }

    /// The RRSIGs at node `n` covering `covered`, with `owner` and `ttl`.
    fn rrsigs(&self, n: u32, owner: &Owner, covered: u16, ttl: u32) -> Vec<Rr<'a>> {
        self.zr.by_node[n as usize]
            .iter()
            .filter(|r| r.rtype == RRSIG)
            .filter(|r| matches!(r.rdata.first(), Some(Part::Bytes(b)) if b.len() >= 2 && u16::from_be_bytes([b[0], b[1]]) == covered))
            .map(|rec| Rr {
                owner: owner.clone(),
                rec,
                ttl,
                node: n,
            })
            .collect()
    }

    /// The NSEC at node `n` and its RRSIGs.
    fn nsec_proof(&self, n: u32) -> Vec<Rr<'a>> {
        let owner = Owner::Name(self.zr.by_node[n as usize][0].owner.clone());
        let mut v = rrset(self.zr, n as usize, &owner, NSEC);
        let ttl = v.first().map_or(0, |r| r.ttl);
        v.extend(self.rrsigs(n, &owner, NSEC, ttl));
        v
    }

    /// The node of the NSEC that covers lower-case wire `name` (or owns it).
    fn covering(&self, name: &[u8]) -> Option<u32> {
        let after = self
            .nsec
            .partition_point(|(o, _)| canonical_cmp(o, name) != std::cmp::Ordering::Greater);
        let i = if after == 0 {
            self.nsec.len().checked_sub(1)?
        } else {
            after - 1
        };
        Some(self.nsec[i].1)
    }

    /// `s` with the RRSIGs of each RRset and the NSECs its denial needs. The additional
    /// section of a wildcard answer is left out (an NSEC is added behind it per query).
    pub(super) fn sign(&self, set: &ZoneSet, s: &Sections<'a>, wild: bool) -> Sections<'a> {
        let mut out = Sections {
            rcode: s.rcode,
            aa: s.aa,
            ..Sections::default()
        };
        for (i, sec) in s.sec.iter().enumerate() {
            if i == 2 {
                // Additional records go unsigned, as Knot sends them; a wildcard
                // answer's are left out (an NSEC is added behind it per query).
                if !wild {
                    out.sec[2] = sec.clone();
                }
                continue;
            }
            let mut k = 0;
            while k < sec.len() {
                let first = &sec[k];
                let same = |r: &Rr<'_>| r.node == first.node && r.rec.rtype == first.rec.rtype;
                let end = k + sec[k..].iter().take_while(|r| same(r)).count();
                out.sec[i].extend(sec[k..end].iter().cloned());
                if first.rec.rtype != RRSIG {
                    let sigs = self.rrsigs(first.node, &first.owner, first.rec.rtype, first.ttl);
                    out.sec[i].extend(sigs);
                }
                k = end;
            }
        }
        let mut proofs: Vec<u32> = Vec::new();
        match &s.denial {
            Some(Denial::NoData(n)) => {
                let z = &set.zones[self.zi];
                let has = self.zr.by_node[*n as usize].iter().any(|r| r.rtype == NSEC);
                proofs.extend(if has {
                    Some(*n)
                } else {
                    self.covering(&z.node_name[*n as usize])
                });
            }
            Some(Denial::NxDomain(name)) => {
                let z = &set.zones[self.zi];
                proofs.extend(self.covering(name));
                let ce = label_offsets(name)
                    .into_iter()
                    .skip(1)
                    .map(|o| &name[o..])
                    .find(|s| z.nodes.contains_key(*s));
                if let Some(ce) = ce {
                    let star = [b"\x01*".as_slice(), ce].concat();
                    proofs.extend(self.covering(&star).filter(|p| !proofs.contains(p)));
                }
            }
            Some(Denial::Referral(n)) => {
                let owner = Owner::Name(self.zr.by_node[*n as usize][0].owner.clone());
                let ds = rrset(self.zr, *n as usize, &owner, rtype::DS);
                if ds.is_empty() {
                    proofs.push(*n);
                } else {
                    let ttl = ds[0].ttl;
                    out.sec[1].extend(ds);
                    out.sec[1].extend(self.rrsigs(*n, &owner, rtype::DS, ttl));
                }
            }
            None => {}
        }
        for p in proofs {
            out.sec[1].extend(self.nsec_proof(p));
        }
        out
    }

    /// A signed referral: the DS and its RRSIG, or the NSEC proving there is none.
    pub(super) fn sign_referral(
        &self,
        set: &ZoneSet,
        mut r: Sections<'a>,
        n: usize,
    ) -> Sections<'a> {
        r.denial = Some(Denial::Referral(n as u32));
        self.sign(set, &r, false)
    }
}
