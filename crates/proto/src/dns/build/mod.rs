//! Turning zone records into a [`ZoneSet`]: nodes, zone cuts, and a template for every
//! answer, resolved once (CNAME chains, additional records, negative answers).

mod nsec3;
mod render;
mod resolve;
mod sign;

use super::db::{NameMap, Node, SignedNode, SignedZone, Template, Tid, Zone, ZoneSet};
use super::wire::{label_offsets, name_to_text, rcode, rtype};
use super::zone::{is_subdomain, Record, ZoneData};
use render::{render, transfer_bytes};
use resolve::{negative, referral, resolve_at, rrset};
use sign::Signing;

/// Record type DNAME (RFC 6672).
pub const DNAME: u16 = 39;
use std::collections::BTreeSet;

/// Why zones cannot be served together.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{a} and {b} both define the zone {apex}; pass each zone once")]
    DuplicateZone { a: String, b: String, apex: String },
    /// The zone's NSEC3 data cannot be served.
    #[error("{file}: {msg}")]
    Nsec3 { file: String, msg: String },
}

/// Longest CNAME chain followed inside a zone.
const MAX_CHAIN: usize = 8;

/// An owner as it goes on the wire: the query name itself (wildcard synthesis), or a
/// fixed name.
#[derive(Debug, Clone)]
enum Owner {
    Qname,
    Name(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Rr<'a> {
    owner: Owner,
    rec: &'a Record,
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
    /// CNAME targets (lower-case wire) answered from a wildcard node, in chain order:
    /// a signed answer proves that no closer name exists.
    wild_hits: Vec<(Vec<u8>, u32)>,
}

/// Loaded records of one zone, grouped by node.
struct ZoneRecords<'a> {
    data: &'a ZoneData,
    /// Records per node index (same order as the zone's nodes).
    by_node: Vec<Vec<&'a Record>>,
    /// NSEC3 records and their RRSIGs, which are not in the node tree.
    chain: Vec<&'a Record>,
}

/// Builds the served data from loaded zones, ready for zone transfers too.
pub fn build(zones: &[ZoneData]) -> Result<ZoneSet, BuildError> {
    build_for(zones, true)
}

/// Builds the served data; with `transfers`, also keeps every zone's records in wire
/// form for AXFR (as much memory again as the zone's wire size).
pub fn build_for(zones: &[ZoneData], transfers: bool) -> Result<ZoneSet, BuildError> {
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
        let (zone, by_node) = index_zone(zd);
        set.max_apex_labels = set.max_apex_labels.max(zone.apex_labels);
        set.zones.push(zone);
        let chain = zd.records.iter().filter(|r| nsec3::in_chain(r)).collect();
        groups.push(ZoneRecords {
            data: zd,
            by_node,
            chain,
        });
    }
    // Every type held anywhere: a CNAME node needs a chased answer for each of them.
    let all_types: BTreeSet<u16> = zones
        .iter()
        .flat_map(|z| z.records.iter().map(|r| r.rtype))
        .collect();
    for (zi, group) in groups.iter().enumerate() {
        fill_templates(&mut set, zi, group, &all_types)?;
        if transfers {
            (set.zones[zi].axfr, set.zones[zi].soa_len) = transfer_bytes(group);
        }
    }
    Ok(set)
}

/// Creates the nodes (with empty non-terminals) and zone cuts of one zone.
fn index_zone(zd: &ZoneData) -> (Zone, Vec<Vec<&Record>>) {
    let mut nodes: NameMap<u32> = NameMap::default();
    let mut node_name: Vec<Box<[u8]>> = Vec::new();
    let mut by_node: Vec<Vec<&Record>> = Vec::new();
    let mut intern = |name: &[u8], nodes: &mut NameMap<u32>| -> u32 {
        if let Some(&n) = nodes.get(name) {
            return n;
        }
        let n = node_name.len() as u32;
        nodes.insert(name.into(), n);
        node_name.push(name.into());
        by_node.push(Vec::new());
        n
    };
    intern(&zd.apex, &mut nodes);
    let records = || zd.records.iter().filter(|r| !nsec3::in_chain(r));
    for r in records() {
        let lower = r.owner.to_ascii_lowercase();
        intern(&lower, &mut nodes);
        // Ancestors up to the apex exist too (empty non-terminals).
        for off in label_offsets(&lower) {
            if lower.len() - off <= zd.apex.len() {
                break;
            }
            intern(&lower[off..], &mut nodes);
        }
    }
    for r in records() {
        let n = nodes[r.owner.to_ascii_lowercase().as_slice()];
        let recs = &mut by_node[n as usize];
        if !recs
            .iter()
            .any(|o| o.rtype == r.rtype && o.rdata == r.rdata)
        {
            recs.push(r);
        }
    }
    let is_cut =
        |n: usize| *node_name[n] != *zd.apex && by_node[n].iter().any(|r| r.rtype == rtype::NS);
    let mut node = vec![Node::default(); node_name.len()];
    // Names below a DNAME are occluded (RFC 6672 §2.4): not found, so lookups stop at
    // the DNAME owner.
    let dnames: Vec<usize> = (0..node_name.len())
        .filter(|&n| by_node[n].iter().any(|r| r.rtype == DNAME))
        .collect();
    for &d in &dnames {
        node[d].dname = true;
        let owner = node_name[d].clone();
        nodes.retain(|name, _| name.len() <= owner.len() || !is_subdomain(name, &owner));
    }
    for (i, name) in node_name.iter().enumerate() {
        // The highest cut at or above the node wins: everything below it is glue.
        node[i].cut = label_offsets(name)
            .into_iter()
            .rev()
            .filter(|&off| name.len() - off > zd.apex.len())
            .filter_map(|off| nodes.get(&name[off..]).copied())
            .find(|&a| is_cut(a as usize));
    }
    let zone = Zone {
        max_labels: node_name
            .iter()
            .map(|n| label_offsets(n).len() - 1)
            .max()
            .unwrap_or(0),
        apex_labels: label_offsets(&zd.apex).len() - 1,
        apex: zd.apex.clone().into_boxed_slice(),
        nodes,
        node,
        node_name,
        nxdomain: 0,
        nodata: 0,
        axfr: Box::default(),
        soa_len: 0,
        dnssec: None,
    };
    (zone, by_node)
}

fn push(set: &mut ZoneSet, t: Template) -> Tid {
    set.templates.push(t);
    (set.templates.len() - 1) as Tid
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
    for n in 0..set.zones[zi].node.len() {
        let z = &set.zones[zi];
        let name = z.node_name[n].to_vec();
        let recs = &zr.by_node[n];
        let mut node = Node {
            cut: z.node[n].cut,
            dname: z.node[n].dname,
            other: nodata,
            any: nodata,
            ..Node::default()
        };
        let mut signed = SignedNode::default();
        let mut signed_answers = Vec::new();
        // NODATA here: the zone's plain one, and a signed one proving this node.
        let mut nodata_here = Sections {
            denial: Some(Denial::NoData(n as u32)),
            ..negative(zr, rcode::NOERROR)
        };
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
                node.answers.push((rtype::DS, tid));
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
            let has_cname = recs.iter().any(|r| r.rtype == rtype::CNAME);
            let types: BTreeSet<u16> = if has_cname {
                all_types.iter().copied().chain([rtype::CNAME]).collect()
            } else {
                recs.iter().map(|r| r.rtype).collect()
            };
            for t in types {
                let s = resolve_at(set, zi, zr, n, &owner, Some(t));
                let (tid, st) = pair(set, sg, &s, &name, wild);
                node.answers.push((t, tid));
                signed_answers.push(st.unwrap_or(tid));
            }
            if has_cname {
                nodata_here = resolve_at(set, zi, zr, n, &owner, None);
                node.other = push(set, render(&nodata_here, &name, wild));
            }
            // RFC 8482 allows any one RRset; the lowest type is what Knot picks too. Its
            // answer was rendered above: share it.
            if let Some(first) = recs.iter().map(|r| r.rtype).min() {
                if let Some(i) = node.answers.iter().position(|&(t, _)| t == first) {
                    node.any = node.answers[i].1;
                    signed.any = signed_answers[i];
                }
            }
        }
        if let Some(sg) = sg {
            let wild = name.starts_with(b"\x01*");
            let t = render(&sg.sign(set, &nodata_here, wild), &name, wild);
            signed.other = push(set, t);
            if node.any == nodata {
                signed.any = signed.other;
            }
            signed.answers = signed_answers.into_boxed_slice();
            node.dnssec = Some(Box::new(signed));
        }
        set.zones[zi].node[n] = node;
    }
    Ok(())
}
