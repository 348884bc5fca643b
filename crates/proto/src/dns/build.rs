//! Turning zone records into a [`ZoneSet`]: nodes, zone cuts, and a template for every
//! answer, resolved once (CNAME chains, additional records, negative answers).

use super::db::{Found, Names, Node, SignedNode, SignedZone, Template, Tid, Zone, ZoneSet};
use super::dnssec::{canonical_cmp, NsecChain, NSEC, RRSIG};
use super::wire::{
    label_offsets, name_to_text, rcode, read_name, rtype, NameBuf, CLASS_IN, HEADER, MAX_NAME,
};
use super::zone::{is_subdomain, Part, Rec, ZoneData};
use std::rc::Rc;
use std::sync::Arc;

/// Record type DNAME (RFC 6672).
pub const DNAME: u16 = 39;
use std::collections::BTreeSet;

/// Why zones cannot be served together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{a} and {b} both define the zone {apex}; pass each zone once")]
    DuplicateZone { a: String, b: String, apex: String },
}

/// Longest CNAME chain followed inside a zone.
const MAX_CHAIN: usize = 8;

/// An owner as it goes on the wire: the query name itself (wildcard synthesis), or a
/// fixed name.
#[derive(Debug, Clone)]
enum Owner {
    Qname,
    /// Shared: every record of an answer carries its owner.
    Name(Rc<[u8]>),
}

#[derive(Debug, Clone)]
struct Rr<'a> {
    owner: Owner,
    rec: Rec<'a>,
    ttl: u32,
    /// The node the record is at (where its RRSIGs are).
    node: u32,
}

/// What a negative answer must prove in a signed zone.
#[derive(Debug, Clone)]
enum Denial {
    /// The node exists without the type: its NSEC (or the one covering it).
    NoData(u32),
    /// The (lower-case wire) name does not exist.
    NxDomain(Vec<u8>),
    /// A referral to the cut at this node: its DS, or the NSEC proving there is none.
    Referral(u32),
}

/// An answer before rendering.
#[derive(Debug, Default)]
struct Sections<'a> {
    rcode: u8,
    aa: bool,
    sec: [Vec<Rr<'a>>; 3],
    denial: Option<Denial>,
}

/// Loaded records of one zone, grouped by node.
struct ZoneRecords<'a> {
    data: &'a ZoneData,
    /// Indexes of the records, node after node (same order as the zone's nodes),
    /// without repeats of a record.
    order: Vec<u32>,
    /// Where each node's records start in `order`.
    starts: Vec<u32>,
}

impl<'a> ZoneRecords<'a> {
    /// The records at node `n`.
    fn recs(&self, n: usize) -> impl Iterator<Item = Rec<'a>> + Clone + '_ {
        let (a, b) = (self.starts[n] as usize, self.starts[n + 1] as usize);
        self.order[a..b].iter().map(|&i| self.data.rec(i as usize))
    }

    /// The owner of node `n`'s first record, in the case of the zone file.
    fn owner_of(&self, n: usize) -> Rc<[u8]> {
        self.recs(n).next().map_or(Rc::from([]), |r| r.owner.into())
    }
}

/// Builds the served data from loaded zones, ready for zone transfers too.
pub fn build(zones: &[Arc<ZoneData>]) -> Result<ZoneSet, BuildError> {
    build_for(zones, true)
}

/// Builds the served data; with `transfers`, also keeps the order in which AXFR
/// sends every zone's records (4 bytes per record; the records themselves are kept
/// either way, for reloads).
pub fn build_for(zones: &[Arc<ZoneData>], transfers: bool) -> Result<ZoneSet, BuildError> {
    let mut set = ZoneSet::default();
    let mut groups = Vec::new();
    for (zi, zd) in zones.iter().enumerate() {
        if let Some(&other) = set.apexes.get(zd.apex.as_slice()) {
            return Err(BuildError::DuplicateZone {
                a: zones[other as usize].source.clone(),
                b: zd.source.clone(),
                apex: name_to_text(&zd.apex),
            });
        }
        set.apexes
            .insert(zd.apex.clone().into_boxed_slice(), zi as u32);
        let (mut zone, zr) = index_zone(zd);
        zone.records = Some(zd.clone());
        set.max_apex_labels = set.max_apex_labels.max(zone.apex_labels);
        set.zones.push(zone);
        groups.push(zr);
    }
    // Every type held anywhere: a CNAME node needs a chased answer for each of them.
    let all_types: BTreeSet<u16> = zones
        .iter()
        .flat_map(|z| z.records.iter().map(|r| r.rtype))
        .collect();
    for (zi, group) in groups.into_iter().enumerate() {
        fill_templates(&mut set, zi, &group, &all_types);
        let z = &mut set.zones[zi];
        z.answers.shrink_to_fit();
        z.nodes.shrink_to_fit();
        if transfers {
            z.transfer = transfer_order(&group);
        }
    }
    set.templates.shrink_to_fit();
    Ok(set)
}

/// Creates the nodes (with empty non-terminals) and zone cuts of one zone.
fn index_zone(zd: &ZoneData) -> (Zone, ZoneRecords<'_>) {
    // About one node per run of records at one owner.
    let mut nodes = Names::with_capacity(zd.owner_runs() + 1);
    nodes.intern(&zd.apex);
    // The node of every record.
    let mut node_of: Vec<u32> = Vec::with_capacity(zd.records.len());
    let mut lower = Vec::with_capacity(MAX_NAME);
    let mut last: Option<(&[u8], u32)> = None;
    for r in zd.iter() {
        // Records in a row at one owner share it.
        if let Some((_, n)) = last.filter(|(o, _)| std::ptr::eq(*o, r.owner)) {
            node_of.push(n);
            continue;
        }
        lower.clear();
        lower.extend(r.owner.iter().map(u8::to_ascii_lowercase));
        let n = nodes.intern(&lower);
        // Ancestors up to the apex exist too (empty non-terminals).
        for off in label_starts(&lower).skip(1) {
            if lower.len() - off <= zd.apex.len() {
                break;
            }
            nodes.intern(&lower[off..]);
        }
        node_of.push(n);
        last = Some((r.owner, n));
    }
    // Records grouped by node (a counting sort), each record once.
    let count = nodes.len();
    let mut starts = vec![0u32; count + 1];
    for &n in &node_of {
        starts[n as usize + 1] += 1;
    }
    for i in 0..count {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut order = vec![0u32; zd.records.len()];
    for (i, &n) in node_of.iter().enumerate() {
        let (a, at) = (starts[n as usize] as usize, fill[n as usize] as usize);
        let r = zd.rec(i);
        let seen = order[a..at].iter().any(|&o| {
            let o = zd.rec(o as usize);
            o.rtype == r.rtype && o.rdata == r.rdata
        });
        if !seen {
            order[at] = i as u32;
            fill[n as usize] += 1;
        }
    }
    drop(node_of);
    // Close the gaps repeats left.
    let mut kept = 0usize;
    for n in 0..count {
        let (a, e) = (starts[n] as usize, fill[n] as usize);
        starts[n] = kept as u32;
        order.copy_within(a..e, kept);
        kept += e - a;
    }
    starts[count] = kept as u32;
    order.truncate(kept);
    let zr = ZoneRecords {
        data: zd,
        order,
        starts,
    };
    let is_cut = |n: usize| n != 0 && zr.recs(n).any(|r| r.rtype == rtype::NS);
    let mut node = vec![Node::default(); count];
    // Names below a DNAME are occluded (RFC 6672 §2.4): not found, so lookups stop at
    // the DNAME owner.
    let dnames: Vec<usize> = (0..count)
        .filter(|&n| zr.recs(n).any(|r| r.rtype == DNAME))
        .collect();
    for &d in &dnames {
        node[d].dname = true;
        let owner = nodes.name(d as u32).to_vec();
        nodes.hide(|name| name.len() > owner.len() && is_subdomain(name, &owner));
    }
    let mut starts = Vec::new();
    for (i, nd) in node.iter_mut().enumerate() {
        let name = nodes.name(i as u32);
        // The highest cut at or above the node wins: everything below it is glue. The
        // node itself is the last candidate and needs no lookup.
        starts.clear();
        starts.extend(label_starts(name).skip(1));
        nd.cut = starts
            .iter()
            .rev()
            .filter(|&&off| name.len() - off > zd.apex.len())
            .filter_map(|&off| nodes.get(&name[off..]).copied())
            .chain(Some(i as u32).filter(|_| i != 0))
            .find(|&a| is_cut(a as usize));
    }
    let max_labels = (0..count)
        .map(|n| label_starts(nodes.name(n as u32)).count())
        .max()
        .unwrap_or(0);
    let zone = Zone {
        max_labels,
        apex_labels: label_offsets(&zd.apex).len() - 1,
        apex: zd.apex.clone().into_boxed_slice(),
        nodes,
        node,
        answers: Vec::new(),
        nxdomain: 0,
        nodata: 0,
        records: None,
        transfer: Vec::new(),
        dnssec: None,
    };
    (zone, zr)
}

/// Where the labels of wire name `name` start (not its root).
fn label_starts(name: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = *name.get(at)? as usize;
        if len == 0 {
            return None;
        }
        let here = at;
        at += 1 + len;
        Some(here)
    })
}

fn push(set: &mut ZoneSet, t: Rendered) -> Tid {
    set.templates.push(t.template())
}

/// Renders `s` against `model`, and its signed form when the zone is signed.
fn pair(
    set: &mut ZoneSet,
    sg: Option<&Signing<'_>>,
    s: &Sections<'_>,
    model: &[u8],
    wild: bool,
) -> (Tid, Option<Tid>) {
    let plain = push(set, render(s, model, wild));
    let signed = sg.map(|sg| {
        let t = render(&sg.sign(set, s, wild), model, wild);
        push(set, t)
    });
    (plain, signed)
}

fn fill_templates(set: &mut ZoneSet, zi: usize, zr: &ZoneRecords<'_>, all_types: &BTreeSet<u16>) {
    let apex = zr.data.apex.clone();
    let signing = Signing::new(set, zi, zr);
    let sg = signing.as_ref();
    let (nx, nx_signed) = pair(set, sg, &negative(zr, rcode::NXDOMAIN), &apex, false);
    let nodata = push(set, render(&negative(zr, rcode::NOERROR), &apex, false));
    set.zones[zi].nxdomain = nx;
    set.zones[zi].nodata = nodata;
    if let (Some(sg), Some(t)) = (sg, nx_signed) {
        set.zones[zi].dnssec = Some(Box::new(SignedZone {
            nxdomain: t,
            chain: sg.chain(),
        }));
    }
    for n in 0..set.zones[zi].node.len() {
        let z = &set.zones[zi];
        let name: Rc<[u8]> = z.node_name(n as u32).into();
        let recs = zr.recs(n);
        let mut answers: Vec<(u16, Tid)> = Vec::new();
        let mut node = Node {
            cut: z.node[n].cut,
            dname: z.node[n].dname,
            other: nodata,
            any: nodata,
            ..Node::default()
        };
        let mut signed = SignedNode::default();
        let mut signed_answers = Vec::new();
        // NODATA here: the zone's plain one, and a signed one proving this node (made
        // only when signing: it is the same for every plain node).
        let mut nodata_here = None;
        if node.cut == Some(n as u32) {
            let r = referral(set, zi, zr, &name);
            node.referral = Some(push(set, render(&r, &name, false)));
            if let Some(sg) = sg {
                let t = render(&sg.sign_referral(set, r, n), &name, false);
                signed.referral = Some(push(set, t));
            }
            // DS is the parent's side of the cut (RFC 4035 §3.1.4.1): answered here.
            let ds = rrset(zr, n, &Owner::Name(name.clone()), rtype::DS);
            if !ds.is_empty() {
                let s = Sections {
                    rcode: rcode::NOERROR,
                    aa: true,
                    sec: [ds, Vec::new(), Vec::new()],
                    denial: None,
                };
                let (tid, st) = pair(set, sg, &s, &name, false);
                answers.push((rtype::DS, tid));
                signed_answers.push(st.unwrap_or(tid));
            }
        }
        if node.cut.is_none() {
            let wild = name.starts_with(b"\x01*");
            let owner = if wild {
                Owner::Qname
            } else {
                Owner::Name(name.clone())
            };
            let has_cname = recs.clone().any(|r| r.rtype == rtype::CNAME);
            let types: BTreeSet<u16> = if has_cname {
                all_types.iter().copied().chain([rtype::CNAME]).collect()
            } else {
                recs.clone().map(|r| r.rtype).collect()
            };
            for t in types {
                let s = resolve_at(set, zi, zr, n, &owner, Some(t));
                let (tid, st) = pair(set, sg, &s, &name, wild);
                answers.push((t, tid));
                signed_answers.push(st.unwrap_or(tid));
            }
            if has_cname {
                let s = resolve_at(set, zi, zr, n, &owner, None);
                node.other = push(set, render(&s, &name, wild));
                nodata_here = Some(s);
            }
            // RFC 8482 allows any one RRset; the lowest type is what Knot picks too. Its
            // answer was rendered above: share it.
            if let Some(first) = recs.map(|r| r.rtype).min() {
                if let Some(i) = answers.iter().position(|&(t, _)| t == first) {
                    node.any = answers[i].1;
                    signed.any = signed_answers[i];
                }
            }
        }
        if let Some(sg) = sg {
            let wild = name.starts_with(b"\x01*");
            let nodata_here = nodata_here.unwrap_or_else(|| Sections {
                denial: Some(Denial::NoData(n as u32)),
                ..negative(zr, rcode::NOERROR)
            });
            let t = render(&sg.sign(set, &nodata_here, wild), &name, wild);
            signed.other = push(set, t);
            if node.any == nodata {
                signed.any = signed.other;
            }
            signed.answers = signed_answers.into_boxed_slice();
            node.dnssec = Some(Box::new(signed));
        }
        let z = &mut set.zones[zi];
        node.answers_at = z.answers.len() as u32;
        node.answers_len = answers.len() as u16;
        z.answers.extend(answers);
        z.node[n] = node;
    }
}

/// What signing a zone's answers needs: its NSEC owners in canonical order.
struct Signing<'a> {
    zi: usize,
    zr: &'a ZoneRecords<'a>,
    /// (lower-case owner, node) of every NSEC, in canonical order.
    nsec: Vec<(Vec<u8>, u32)>,
}

impl<'a> Signing<'a> {
    /// `None` for an unsigned zone (no RRSIG records).
    fn new(set: &ZoneSet, zi: usize, zr: &'a ZoneRecords<'a>) -> Option<Self> {
        if !zr.data.records.iter().any(|r| r.rtype == RRSIG) {
            return None;
        }
        let z = &set.zones[zi];
        let mut nsec: Vec<(Vec<u8>, u32)> = (0..z.nodes.len())
            .filter(|&n| zr.recs(n).any(|r| r.rtype == NSEC))
            .map(|n| (z.node_name(n as u32).to_vec(), n as u32))
            .collect();
        nsec.sort_by(|a, b| canonical_cmp(&a.0, &b.0));
        Some(Signing { zi, zr, nsec })
    }

    /// The runtime form: each NSEC with its RRSIGs, uncompressed.
    fn chain(&self) -> NsecChain {
        let mut c = NsecChain::default();
        for (owner, n) in &self.nsec {
            let start = c.bytes.len() as u32;
            let mut count = 0;
            for rr in self.nsec_proof(*n) {
                let name = match &rr.owner {
                    Owner::Name(w) => &w[..],
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
        self.zr
            .recs(n as usize)
            .filter(|r| r.rtype == RRSIG)
            .filter(|r| {
                r.rdata.len() >= 2 && u16::from_be_bytes([r.rdata[0], r.rdata[1]]) == covered
            })
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
    fn sign(&self, set: &ZoneSet, s: &Sections<'a>, wild: bool) -> Sections<'a> {
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
                let has = self.zr.recs(*n as usize).any(|r| r.rtype == NSEC);
                proofs.extend(if has {
                    Some(*n)
                } else {
                    self.covering(z.node_name(*n))
                });
            }
            Some(Denial::NxDomain(name)) => {
                let z = &set.zones[self.zi];
                proofs.extend(self.covering(name));
                let ce = label_offsets(name)
                    .into_iter()
                    .skip(1)
                    .map(|o| &name[o..])
                    .find(|s| z.nodes.contains_key(s));
                if let Some(ce) = ce {
                    let star = [b"\x01*".as_slice(), ce].concat();
                    proofs.extend(self.covering(&star).filter(|p| !proofs.contains(p)));
                }
            }
            Some(Denial::Referral(n)) => {
                let owner = Owner::Name(self.zr.owner_of(*n as usize));
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
    fn sign_referral(&self, set: &ZoneSet, mut r: Sections<'a>, n: usize) -> Sections<'a> {
        r.denial = Some(Denial::Referral(n as u32));
        self.sign(set, &r, false)
    }
}

/// Appends one record in wire form, uncompressed, with `owner` and `ttl`.
fn plain_rr(out: &mut Vec<u8>, owner: &[u8], r: Rec<'_>, ttl: u32) {
    Rec { owner, ttl, ..r }.write_plain(out);
}

/// The records of a zone in the order a transfer sends them: the SOA first, then
/// every other record (each once), node after node.
fn transfer_order(zr: &ZoneRecords<'_>) -> Vec<u32> {
    let soa = zr
        .order
        .iter()
        .copied()
        .filter(|&i| zr.data.records[i as usize].rtype == rtype::SOA);
    let rest = zr
        .order
        .iter()
        .copied()
        .filter(|&i| zr.data.records[i as usize].rtype != rtype::SOA);
    soa.take(1).chain(rest).collect()
}

/// The SOA for a negative answer; its TTL is the smaller of its own and its MINIMUM
/// field (RFC 2308 §3).
fn negative<'a>(zr: &ZoneRecords<'a>, rc: u8) -> Sections<'a> {
    let soa = zr
        .recs(0)
        .find(|r| r.rtype == rtype::SOA)
        .expect("a loaded zone has its SOA at the apex");
    let minimum = match soa.parts().last() {
        Some(Part::Bytes(b)) if b.len() == 20 => u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
        _ => soa.ttl,
    };
    let mut s = Sections {
        rcode: rc,
        aa: true,
        ..Sections::default()
    };
    s.sec[1].push(Rr {
        owner: Owner::Name(zr.data.apex.as_slice().into()),
        rec: soa,
        ttl: soa.ttl.min(minimum),
        node: 0,
    });
    s
}

/// The RRs of `qtype` at node `n`, with `owner`.
fn rrset<'a>(zr: &ZoneRecords<'a>, n: usize, owner: &Owner, qtype: u16) -> Vec<Rr<'a>> {
    let recs: Vec<Rec<'a>> = zr.recs(n).filter(|r| r.rtype == qtype).collect();
    // One TTL per RRset (RFC 2181 §5.2): the first record's.
    let ttl = recs.first().map_or(0, |r| r.ttl);
    recs.into_iter()
        .map(|rec| Rr {
            owner: owner.clone(),
            rec,
            ttl,
            node: n as u32,
        })
        .collect()
}

/// A/AAAA of in-zone targets of NS, MX and SRV records, for the additional section.
fn additional<'a>(set: &ZoneSet, zi: usize, zr: &ZoneRecords<'a>, rrs: &[Rr<'a>]) -> Vec<Rr<'a>> {
    let mut out: Vec<Rr<'a>> = Vec::new();
    let mut seen: Vec<&[u8]> = Vec::new();
    let mut lower = [0u8; MAX_NAME];
    for rr in rrs {
        if !matches!(rr.rec.rtype, rtype::NS | rtype::MX | rtype::SRV) {
            continue;
        }
        let Some(target) = rr.rec.target() else {
            continue;
        };
        if seen.iter().any(|s| s.eq_ignore_ascii_case(target)) {
            continue;
        }
        seen.push(target);
        let lower = &mut lower[..target.len()];
        lower.copy_from_slice(target);
        lower.make_ascii_lowercase();
        if let Some(&n) = set.zones[zi].nodes.get(lower) {
            let owner = Owner::Name(target.into());
            for t in [rtype::A, rtype::AAAA] {
                out.extend(rrset(zr, n as usize, &owner, t));
            }
        }
    }
    out
}

/// The referral for a cut at `name`: its NS set and their glue.
fn referral<'a>(set: &ZoneSet, zi: usize, zr: &ZoneRecords<'a>, name: &[u8]) -> Sections<'a> {
    let n = set.zones[zi].nodes[name] as usize;
    let owner = Owner::Name(zr.owner_of(n));
    let ns = rrset(zr, n, &owner, rtype::NS);
    let glue = additional(set, zi, zr, &ns);
    Sections {
        rcode: rcode::NOERROR,
        aa: false,
        sec: [Vec::new(), ns, glue],
        denial: None,
    }
}

/// Looks up a wire name at build time.
fn find_name(set: &ZoneSet, zi: usize, wire: &[u8]) -> Option<Found> {
    let mut nb = NameBuf::default();
    let (end, labels) = read_name(wire, 0, &mut nb).ok()?;
    let (z, apex_at) = set.zone_for(&nb, end, labels)?;
    if z as usize != zi {
        return None;
    }
    let mut wild = [0u8; MAX_NAME + 2];
    Some(set.find(&set.zones[zi], &nb, end, labels, apex_at, &mut wild))
}

/// The answer at node `n` for `qtype` (`None`: a type no zone holds), following
/// CNAMEs inside the zone.
fn resolve_at<'a>(
    set: &ZoneSet,
    zi: usize,
    zr: &ZoneRecords<'a>,
    n: usize,
    owner: &Owner,
    qtype: Option<u16>,
) -> Sections<'a> {
    let mut s = Sections {
        rcode: rcode::NOERROR,
        aa: true,
        ..Sections::default()
    };
    let (mut n, mut owner) = (n, owner.clone());
    let mut visited = vec![n];
    for _ in 0..MAX_CHAIN {
        let cname = rrset(zr, n, &owner, rtype::CNAME);
        // The CNAME's own RRSIG and NSEC are answered where they are.
        let own = matches!(qtype, Some(rtype::CNAME | RRSIG | NSEC));
        if !own && !cname.is_empty() {
            let target = cname[0].rec.target().expect("CNAME has a target").to_vec();
            s.sec[0].extend(cname);
            match find_name(set, zi, &target) {
                // A loop ends the chain where it closes, as Knot does.
                Some(Found::Exact(t) | Found::Wildcard(t)) if visited.contains(&(t as usize)) => {
                    return s
                }
                Some(Found::Exact(t) | Found::Wildcard(t)) => {
                    visited.push(t as usize);
                    (n, owner) = (t as usize, Owner::Name(target.into()));
                }
                Some(Found::NxDomain) => {
                    let neg = negative(zr, rcode::NXDOMAIN);
                    s.rcode = neg.rcode;
                    s.sec[1] = neg.sec[1].clone();
                    s.denial = Some(Denial::NxDomain(target.to_ascii_lowercase()));
                    return s;
                }
                // Below a delegation: the referral goes with the CNAME (RFC 1034
                // §4.3.2 step 3b), still authoritative for the CNAME.
                Some(Found::Referral(c)) => {
                    let cut = set.zones[zi].node_name(c).to_vec();
                    let r = referral(set, zi, zr, &cut);
                    [_, s.sec[1], s.sec[2]] = r.sec;
                    s.denial = Some(Denial::Referral(c));
                    return s;
                }
                // Outside this zone or through a DNAME: the client resolves on.
                Some(Found::Dname(_)) | None => return s,
            }
            continue;
        }
        let rrs = qtype.map(|t| rrset(zr, n, &owner, t)).unwrap_or_default();
        if rrs.is_empty() {
            s.sec[1] = negative(zr, rcode::NOERROR).sec[1].clone();
            s.denial = Some(Denial::NoData(n as u32));
        } else {
            s.sec[2].extend(additional(set, zi, zr, &rrs));
            s.sec[0].extend(rrs);
        }
        return s;
    }
    s
}

/// Writes names with compression against earlier names, tracking pointers that move
/// when the real question is longer than the model.
struct Renderer {
    out: Vec<u8>,
    /// Lower-case copies of the names written (and of the model), back to back.
    lower: Vec<u8>,
    /// Suffixes already written: (start in `lower`, length, message offset).
    table: Vec<(u32, u16, u16)>,
    fixups: Vec<u16>,
    base: usize,
}

impl Renderer {
    fn new(model: &[u8], owner_is_qname: bool) -> Self {
        let mut r = Renderer {
            out: Vec::with_capacity(64),
            lower: model.to_ascii_lowercase(),
            table: Vec::new(),
            fixups: Vec::new(),
            base: HEADER + model.len() + 4,
        };
        let mut off = 0;
        while off < model.len() && model[off] != 0 {
            if off > 0 || !owner_is_qname {
                r.table.push((
                    off as u32,
                    (model.len() - off) as u16,
                    (HEADER + off) as u16,
                ));
            }
            off += 1 + model[off] as usize;
        }
        r
    }

    /// The message offset of an earlier copy of lower-case suffix `key`.
    fn find(&self, key: &[u8]) -> Option<u16> {
        self.table.iter().find_map(|&(s, l, at)| {
            let s = s as usize;
            (self.lower[s..s + l as usize] == *key).then_some(at)
        })
    }

    fn name(&mut self, wire: &[u8], compress: bool) {
        let start = self.lower.len();
        self.lower.extend(wire.iter().map(u8::to_ascii_lowercase));
        let mut off = 0;
        while off < wire.len() && wire[off] != 0 {
            if compress {
                let key = &self.lower[start + off..start + wire.len()];
                if let Some(at) = self.find(key) {
                    self.fixups.push(self.out.len() as u16);
                    self.out.extend_from_slice(&(0xC000 | at).to_be_bytes());
                    return;
                }
            }
            let at = self.base + self.out.len();
            // Leave room for the shift by a longer question.
            if at < 0x3FFF - MAX_NAME {
                let len = (wire.len() - off) as u16;
                self.table.push(((start + off) as u32, len, at as u16));
            }
            let len = wire[off] as usize;
            self.out.extend_from_slice(&wire[off..off + 1 + len]);
            off += 1 + len;
        }
        self.out.push(0);
    }

    fn rr(&mut self, rr: &Rr<'_>) {
        match &rr.owner {
            Owner::Qname => self.out.extend_from_slice(&[0xC0, HEADER as u8]),
            Owner::Name(n) => self.name(n, true),
        }
        self.out.extend_from_slice(&rr.rec.rtype.to_be_bytes());
        self.out.extend_from_slice(&CLASS_IN.to_be_bytes());
        self.out.extend_from_slice(&rr.ttl.to_be_bytes());
        let len_at = self.out.len();
        self.out.extend_from_slice(&[0, 0]);
        for p in rr.rec.parts() {
            match p {
                Part::Bytes(b) => self.out.extend_from_slice(b),
                Part::Name { wire, compress } => self.name(wire, compress),
            }
        }
        let len = (self.out.len() - len_at - 2) as u16;
        self.out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// Renders sections against a model question `model` (with `owner_is_qname`, the
/// model's own name is never a compression target: its owner is the query name).
fn render(s: &Sections<'_>, model: &[u8], owner_is_qname: bool) -> Rendered {
    let mut r = Renderer::new(model, owner_is_qname);
    let mut additional_at = 0;
    for (i, sec) in s.sec.iter().enumerate() {
        if i == 2 {
            additional_at = r.out.len() as u16;
        }
        for rr in sec {
            r.rr(rr);
        }
    }
    Rendered {
        rcode: s.rcode,
        aa: s.aa,
        counts: [
            s.sec[0].len() as u16,
            s.sec[1].len() as u16,
            s.sec[2].len() as u16,
        ],
        model_len: model.len() as u16,
        additional_at,
        bytes: r.out,
        fixups: r.fixups,
    }
}

/// A template as rendered, before it is stored in the zone set's arena.
struct Rendered {
    rcode: u8,
    aa: bool,
    counts: [u16; 3],
    model_len: u16,
    additional_at: u16,
    bytes: Vec<u8>,
    fixups: Vec<u16>,
}

impl Rendered {
    fn template(&self) -> Template<'_> {
        Template {
            rcode: self.rcode,
            aa: self.aa,
            counts: self.counts,
            model_len: self.model_len,
            additional_at: self.additional_at,
            bytes: &self.bytes,
            fixups: &self.fixups,
        }
    }
}
