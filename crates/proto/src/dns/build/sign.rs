//! Signed answers: each RRset with its RRSIGs, and the NSEC or NSEC3 records a denial
//! needs.

use super::nsec3::{self, Nsec3Build};
use super::render::plain_rr;
use super::resolve::rrset;
use super::{BuildError, Denial, Owner, Rr, Sections, ZoneRecords, NO_NODE};
use crate::dns::db::{Zone, ZoneSet};
use crate::dns::dnssec::{canonical_cmp, NsecChain, NSEC, RRSIG};
use crate::dns::wire::{label_offsets, rtype};

/// What signing a zone's answers needs: its NSEC owners in canonical order.
pub(super) struct Signing<'a> {
    zi: usize,
    zr: &'a ZoneRecords<'a>,
    /// (lower-case owner, node) of every NSEC, in canonical order.
    nsec: Vec<(Vec<u8>, u32)>,
    /// The NSEC3 chain, if the zone has an NSEC3PARAM (it then denies with NSEC3).
    pub(super) nsec3: Option<Nsec3Build<'a>>,
}

impl<'a> Signing<'a> {
    /// `None` for an unsigned zone (no RRSIG records).
    pub(super) fn new(
        set: &ZoneSet,
        zi: usize,
        zr: &'a ZoneRecords<'a>,
    ) -> Result<Option<Self>, BuildError> {
        if !zr.data.records.iter().any(|r| r.rtype == RRSIG) {
            return Ok(None);
        }
        let z = &set.zones[zi];
        let mut nsec: Vec<(Vec<u8>, u32)> = (0..z.nodes.len())
            .filter(|&n| zr.recs(n).any(|r| r.rtype == NSEC))
            .map(|n| (z.node_name(n as u32).to_vec(), n as u32))
            .collect();
        nsec.sort_by(|a, b| canonical_cmp(&a.0, &b.0));
        let nsec3 = nsec3::load(z, zr)?;
        Ok(Some(Signing {
            zi,
            zr,
            nsec,
            nsec3,
        }))
    }

    /// The runtime form: each NSEC with its RRSIGs, uncompressed.
    pub(super) fn chain(&self) -> NsecChain {
        let mut c = NsecChain::default();
        c.entries.apex_len = self.zr.data.apex.len() as u16;
        for (owner, n) in &self.nsec {
            let start = c.entries.bytes.len();
            let mut count = 0;
            for rr in self.nsec_proof(*n) {
                let name = match &rr.owner {
                    Owner::Name(w) => &w[..],
                    Owner::Qname => owner.as_slice(),
                };
                plain_rr(&mut c.entries.bytes, name, rr.rec, rr.ttl);
                count += 1;
            }
            c.owners.push(owner.clone().into_boxed_slice());
            c.entries.close(start, count);
        }
        c
    }

    /// The RRSIGs at node `n` covering `covered`, with `owner` and `ttl`.
    fn rrsigs(&self, n: u32, owner: &Owner, covered: u16, ttl: u32) -> Vec<Rr<'a>> {
        self.zr
            .recs(n as usize)
            .filter(|r| r.rtype == RRSIG)
            .filter(|r| nsec3::covered(r) == Some(covered))
            .map(|rec| Rr {
                owner: owner.clone(),
                rec,
                ttl,
                node: n,
                synth: None,
            })
            .collect()
    }

    /// The NSEC at node `n` and its RRSIGs.
    fn nsec_proof(&self, n: u32) -> Vec<Rr<'a>> {
        let owner = Owner::Name(self.zr.owner_of(n as usize));
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
            // A wildcard answer's additional records are left out (an NSEC is added
            // behind it per query); the others carry their RRSIGs as Knot's do, all
            // behind the records, so that trimming a full answer drops RRSIGs first
            // (RFC 4035 §3.1.1 makes them optional there).
            if i == 2 && wild {
                continue;
            }
            let mut sigs_behind = Vec::new();
            let mut k = 0;
            while k < sec.len() {
                let first = &sec[k];
                let same = |r: &Rr<'_>| r.node == first.node && r.rec.rtype == first.rec.rtype;
                let end = k + sec[k..].iter().take_while(|r| same(r)).count();
                out.sec[i].extend(sec[k..end].iter().cloned());
                // A synthesized CNAME is not signed (RFC 6672 §5.3.1).
                if first.rec.rtype != RRSIG && first.node != NO_NODE {
                    let sigs = self.rrsigs(first.node, &first.owner, first.rec.rtype, first.ttl);
                    match i {
                        2 => sigs_behind.extend(sigs),
                        _ => out.sec[i].extend(sigs),
                    }
                }
                k = end;
            }
            out.sec[i].extend(sigs_behind);
        }
        let z = &set.zones[self.zi];
        match &self.nsec3 {
            Some(n3) => self.nsec3_denial(n3, z, s, &mut out),
            None => self.nsec_denial(z, s, &mut out),
        }
        out
    }

    /// Appends the NSEC3 records (and a referral's DS) that `s` needs to `out`.
    fn nsec3_denial(
        &self,
        n3: &Nsec3Build<'a>,
        z: &Zone,
        s: &Sections<'a>,
        out: &mut Sections<'a>,
    ) {
        let mut proofs = Vec::new();
        match &s.denial {
            Some(Denial::NoData(n)) => n3.nodata(z, *n, &mut proofs),
            Some(Denial::NxDomain(name)) => n3.nxdomain(z, name, &mut proofs),
            Some(Denial::Referral(n)) => match self.ds(*n) {
                Some(ds) => out.sec[1].extend(ds),
                None => n3.nodata(z, *n, &mut proofs),
            },
            None => {}
        }
        let nodata_at = match s.denial {
            Some(Denial::NoData(n)) => n,
            _ => u32::MAX,
        };
        for (target, w) in &s.wild_hits {
            n3.wildcard_hit(z, target, *w, *w == nodata_at, &mut proofs);
        }
        out.sec[1].extend(n3.records(&proofs));
    }

    /// Appends the NSEC records (and a referral's DS) that `s` needs to `out`.
    fn nsec_denial(&self, z: &Zone, s: &Sections<'a>, out: &mut Sections<'a>) {
        // Each CNAME target answered from a wildcard: the NSEC covering it.
        let mut proofs: Vec<u32> = s
            .wild_hits
            .iter()
            .filter_map(|(target, _)| self.covering(target))
            .collect();
        match &s.denial {
            Some(Denial::NoData(n)) => {
                let has = self.zr.recs(*n as usize).any(|r| r.rtype == NSEC);
                proofs.extend(if has {
                    Some(*n)
                } else {
                    self.covering(z.node_name(*n))
                });
            }
            Some(Denial::NxDomain(name)) => {
                proofs.extend(self.covering(name));
                let ce = label_offsets(name)
                    .into_iter()
                    .skip(1)
                    .map(|o| &name[o..])
                    .find(|s| z.nodes.contains_key(s));
                if let Some(ce) = ce {
                    let star = [b"\x01*".as_slice(), ce].concat();
                    proofs.extend(self.covering(&star));
                }
            }
            Some(Denial::Referral(n)) => match self.ds(*n) {
                Some(ds) => out.sec[1].extend(ds),
                None => proofs.push(*n),
            },
            None => {}
        }
        let mut seen = Vec::with_capacity(proofs.len());
        for p in proofs {
            if !seen.contains(&p) {
                seen.push(p);
                out.sec[1].extend(self.nsec_proof(p));
            }
        }
    }

    /// The DS RRset at cut `n` with its RRSIGs, if it has one.
    fn ds(&self, n: u32) -> Option<Vec<Rr<'a>>> {
        let owner = Owner::Name(self.zr.owner_of(n as usize));
        let mut ds = rrset(self.zr, n as usize, &owner, rtype::DS);
        let ttl = ds.first()?.ttl;
        ds.extend(self.rrsigs(n, &owner, rtype::DS, ttl));
        Some(ds)
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
