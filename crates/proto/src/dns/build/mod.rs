//! Turning zone records into a [`ZoneSet`]: nodes, zone cuts, and a template for every
//! answer, resolved once (CNAME chains, additional records, negative answers).

mod nsec3;
mod plain;
mod render;
mod resolve;
mod sign;

use super::db::{Names, Node, SignedNode, SignedZone, Tid, Zone, ZoneSet};
use super::hash::hash_name_nocase;
use super::wire::rtype::DNAME;
use super::wire::{label_offsets, name_to_text, rcode, rtype};
use super::zone::{is_subdomain, Rec, ZoneData};
use render::{render, Rendered};
use resolve::{negative, referral, resolve_at, rrset};
use sign::Signing;

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

/// Why zones cannot be served together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{a} and {b} both define the zone {apex}; pass each zone once")]
    DuplicateZone { a: String, b: String, apex: String },
    /// The zone's NSEC3 data cannot be served.
    #[error("{file}: {msg}")]
    Nsec3 { file: String, msg: String },
}

/// Most CNAME and DNAME links followed inside a zone for one answer (Knot's limit:
/// a sixth link ends the answer where it stands).
pub const MAX_CHAIN: usize = 5;

/// An owner as it goes on the wire: the query name itself (wildcard synthesis), or a
/// fixed name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Qname,
    /// Shared: every record of an answer carries its owner.
    Name(Rc<[u8]>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rr<'a> {
    owner: Owner,
    rec: Rec<'a>,
    ttl: u32,
    /// The node the record is at (where its RRSIGs are); [`NO_NODE`] for records
    /// that are at none (a CNAME synthesized from a DNAME, NSEC3 records).
    node: u32,
    /// The RDATA of a CNAME synthesized from a DNAME (RFC 6672 §3.1), which no zone
    /// holds; `rec` is then the DNAME it came from, with type CNAME.
    synth: Option<Rc<[u8]>>,
}

/// The node of a record that is at none.
const NO_NODE: u32 = u32::MAX;

/// What a negative answer must prove in a signed zone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Denial {
    /// The node exists without the type: its NSEC (or the one covering it).
    NoData(u32),
    /// The (lower-case wire) name does not exist.
    NxDomain(Vec<u8>),
    /// A referral to the cut at this node: its DS, or the NSEC proving there is none.
    Referral(u32),
}

/// An answer before rendering.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sections<'a> {
    rcode: u8,
    aa: bool,
    sec: [Vec<Rr<'a>>; 3],
    denial: Option<Denial>,
    /// CNAME targets (lower-case wire) answered from a wildcard node, in chain order:
    /// a signed answer proves that no closer name exists.
    wild_hits: Vec<(Vec<u8>, u32)>,
}

/// Loaded records of one zone, grouped by node.
struct ZoneRecords<'a> {
    data: &'a ZoneData,
    /// Indexes of the records, node after node (same order as the zone's nodes),
    /// without repeats of a record.
    order: Vec<u32>,
    /// Where each node's records start in `order`.
    starts: Vec<u32>,
    /// NSEC3 records and their RRSIGs, which are not in the node tree, and their
    /// indexes in the zone's records.
    chain: Vec<Rec<'a>>,
    chain_at: Vec<u32>,
    /// Per node, what its records hold ([`HAS_NS`] and the others), so that questions
    /// about a node's types need no pass over its records.
    kinds: Vec<u8>,
}

/// Bits of [`ZoneRecords::kinds`].
const HAS_NS: u8 = 1;
const HAS_CNAME: u8 = 2;
const HAS_DNAME: u8 = 4;
/// A record of a type that keeps its node off the plain path ([`plain::is_plain`]).
const NOT_PLAIN: u8 = 8;

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
    build_with(zones, transfers, true)
}

/// [`build_for`]; `plain_path` renders plain nodes straight out ([`plain`]), which a
/// test turns off to compare with the general path.
fn build_with(
    zones: &[Arc<ZoneData>],
    transfers: bool,
    plain_path: bool,
) -> Result<ZoneSet, BuildError> {
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
        fill_templates(&mut set, zi, &group, &all_types, plain_path)?;
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
    // The names to intern, in order: the apex, then each run of records at one owner
    // (records in a row at one owner share it) and its ancestors up to the apex (empty
    // non-terminals). Item i is (record, where its name starts in the record's owner).
    let runs = zd.owner_runs() + 1;
    let mut items: Vec<(u32, u8)> = Vec::with_capacity(runs);
    let mut hashes: Vec<u64> = Vec::with_capacity(runs);
    items.push((APEX_ITEM, 0));
    hashes.push(hash_name_nocase(&zd.apex));
    // The item of every record's owner, later its node.
    let mut node_of: Vec<u32> = Vec::with_capacity(zd.records.len());
    let mut last: Option<(&[u8], u32)> = None;
    for (i, r) in zd.iter().enumerate() {
        // NSEC3 records and their RRSIGs live in the chain, not in the tree.
        if nsec3::in_chain(&r) {
            node_of.push(NOT_IN_TREE);
            continue;
        }
        if let Some((_, item)) = last.filter(|(o, _)| std::ptr::eq(*o, r.owner)) {
            node_of.push(item);
            continue;
        }
        let item = items.len() as u32;
        for off in std::iter::once(0).chain(label_starts(r.owner).skip(1)) {
            if off > 0 && r.owner.len() - off <= zd.apex.len() {
                break;
            }
            items.push((i as u32, off as u8));
            hashes.push(hash_name_nocase(&r.owner[off..]));
        }
        node_of.push(item);
        last = Some((r.owner, item));
    }
    let name = |i: usize| match items[i] {
        (APEX_ITEM, _) => zd.apex.as_slice(),
        (r, off) => &zd.rec(r as usize).owner[off as usize..],
    };
    let (mut nodes, node_of_item) = Names::intern_all(&hashes, name);
    drop(hashes);
    for n in node_of.iter_mut().filter(|n| **n != NOT_IN_TREE) {
        *n = node_of_item[*n as usize];
    }
    drop(node_of_item);
    // Records grouped by node (a counting sort), each record once.
    let count = nodes.len();
    let mut starts = vec![0u32; count + 1];
    for &n in node_of.iter().filter(|&&n| n != NOT_IN_TREE) {
        starts[n as usize + 1] += 1;
    }
    for i in 0..count {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut order = vec![0u32; zd.records.len()];
    let mut kinds = vec![0u8; count];
    let mut chain_at = Vec::new();
    for (i, &n) in node_of.iter().enumerate() {
        if n == NOT_IN_TREE {
            chain_at.push(i as u32);
            continue;
        }
        let (a, at) = (starts[n as usize] as usize, fill[n as usize] as usize);
        let r = zd.rec(i);
        kinds[n as usize] |= match r.rtype {
            rtype::NS => HAS_NS | NOT_PLAIN,
            rtype::CNAME => HAS_CNAME | NOT_PLAIN,
            DNAME => HAS_DNAME | NOT_PLAIN,
            _ if plain::is_plain(&r) => 0,
            _ => NOT_PLAIN,
        };
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
        chain: chain_at.iter().map(|&i| zd.rec(i as usize)).collect(),
        chain_at,
        kinds,
    };
    let is_cut = |n: usize| n != 0 && zr.kinds[n] & HAS_NS != 0;
    let mut node = vec![Node::default(); count];
    // Names below a DNAME are occluded (RFC 6672 §2.4): not found, so lookups stop at
    // the DNAME owner.
    let dnames: Vec<usize> = (0..count)
        .filter(|&n| zr.kinds[n] & HAS_DNAME != 0)
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

/// The node of a record kept out of the node tree (the NSEC3 chain).
const NOT_IN_TREE: u32 = u32::MAX;
/// The item of `index_zone` that is the apex (no record's owner).
const APEX_ITEM: u32 = u32::MAX;

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

fn fill_templates(
    set: &mut ZoneSet,
    zi: usize,
    zr: &ZoneRecords<'_>,
    all_types: &BTreeSet<u16>,
    plain_path: bool,
) -> Result<(), BuildError> {
    let apex = zr.data.apex.clone();
    let signing = Signing::new(set, zi, zr)?;
    let sg = signing.as_ref();
    let (nx, nx_signed) = pair(set, sg, &negative(zr, rcode::NXDOMAIN), &apex, false);
    let nodata = push(set, render(&negative(zr, rcode::NOERROR), &apex, false));
    set.zones[zi].nxdomain = nx;
    set.zones[zi].nodata = nodata;
    if let (Some(sg), Some(t)) = (sg, nx_signed) {
        set.zones[zi].dnssec = Some(Box::new(SignedZone {
            nxdomain: t,
            chain: sg.chain(),
            nsec3: sg.nsec3.as_ref().map(|b| Box::new(b.zone.clone())),
        }));
    }
    let mut scratch = plain::Scratch::default();
    let mut answers: Vec<(u16, Tid)> = Vec::new();
    for n in 0..set.zones[zi].node.len() {
        let z = &set.zones[zi];
        let recs = zr.recs(n);
        answers.clear();
        let (cut, dname) = (z.node[n].cut, z.node[n].dname);
        let wild = z.node_name(n as u32).starts_with(b"\x01*");
        let plain = plain_path && sg.is_none() && n != 0 && cut.is_none() && !dname && !wild;
        if plain && zr.kinds[n] & NOT_PLAIN == 0 {
            let name_len = z.node_name(n as u32).len();
            plain::answers(set, recs, name_len, &mut scratch, &mut answers);
            let z = &mut set.zones[zi];
            // RFC 8482: the lowest type's RRset, as below.
            let any = answers.first().map_or(nodata, |&(_, tid)| tid);
            z.node[n] = Node {
                answers_at: z.answers.len() as u32,
                answers_len: answers.len() as u16,
                other: nodata,
                any,
                ..Node::default()
            };
            z.answers.extend_from_slice(&answers);
            continue;
        }
        let name: Rc<[u8]> = z.node_name(n as u32).into();
        let mut node = Node {
            cut,
            dname,
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
                    ..Sections::default()
                };
                let (tid, st) = pair(set, sg, &s, &name, false);
                answers.push((rtype::DS, tid));
                signed_answers.push(st.unwrap_or(tid));
            }
        }
        if node.cut.is_none() {
            let owner = if wild {
                Owner::Qname
            } else {
                Owner::Name(name.clone())
            };
            let has_cname = zr.kinds[n] & HAS_CNAME != 0;
            let types: BTreeSet<u16> = if has_cname {
                all_types.iter().copied().chain([rtype::CNAME]).collect()
            } else {
                recs.clone().map(|r| r.rtype).collect()
            };
            // At a CNAME, every type no zone holds gets the chain to a NODATA: so does
            // each type the chain's end lacks, which `other` answers without a template
            // of its own.
            let other = has_cname.then(|| resolve_at(set, zi, zr, n, &owner, None));
            for t in types {
                let s = resolve_at(set, zi, zr, n, &owner, Some(t));
                if t != rtype::CNAME && other.as_ref() == Some(&s) {
                    continue;
                }
                let (tid, st) = pair(set, sg, &s, &name, wild);
                answers.push((t, tid));
                signed_answers.push(st.unwrap_or(tid));
            }
            if let Some(s) = other {
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
        z.answers.extend_from_slice(&answers);
        z.node[n] = node;
    }
    Ok(())
}

/// The records of a zone in the order a transfer sends them: the SOA first, then
/// every other record (each once), node after node, then the NSEC3 chain.
fn transfer_order(zr: &ZoneRecords<'_>) -> Vec<u32> {
    let rtype_of = |i: &u32| zr.data.records[*i as usize].rtype;
    let all = zr.order.iter().chain(&zr.chain_at);
    let soa = all.clone().filter(|i| rtype_of(i) == rtype::SOA).take(1);
    soa.chain(all.filter(|i| rtype_of(i) != rtype::SOA))
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_nodes_render_as_the_general_path() {
        // Plain nodes (several types, several records, TTLs that differ in an RRset,
        // case, an empty non-terminal) beside ones that are not.
        let text = "$ORIGIN p.test.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
            a A 192.0.2.2\nA 60 TXT \"x\"\na 90 A 192.0.2.3\na AAAA 2001:db8::1\n\
            b.c.d TXT \"deep\"\nm MX 10 a\nm A 192.0.2.4\nc2 CNAME a\n\
            caa CAA 0 issue \"ca.test\"\n*.w A 192.0.2.5\nsub NS ns.sub\nns.sub A 192.0.2.6\n";
        let zd = Arc::new(crate::dns::zone::parse_zone(text.as_bytes(), "p.zone").unwrap());
        let fast = build_with(std::slice::from_ref(&zd), true, true).unwrap();
        let general = build_with(std::slice::from_ref(&zd), true, false).unwrap();
        assert_eq!(fast.templates, general.templates);
        let (f, g) = (&fast.zones[0], &general.zones[0]);
        assert_eq!(f.answers, g.answers);
        for (a, b) in f.node.iter().zip(&g.node) {
            assert_eq!(
                (a.answers_at, a.answers_len, a.other, a.any),
                (b.answers_at, b.answers_len, b.other, b.any)
            );
        }
    }
}
