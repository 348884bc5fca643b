//! Answers before rendering: negative answers, RRsets, additional records, referrals,
//! and the CNAME chains followed inside a zone.

use super::{Denial, Owner, Rr, Sections, ZoneRecords, DNAME, MAX_CHAIN, NO_NODE};
use crate::dns::db::{Found, ZoneSet};
use crate::dns::dnssec::{NSEC, RRSIG};
use crate::dns::wire::{rcode, read_name, rtype, NameBuf, MAX_NAME};
use crate::dns::zone::{Part, Rec};

/// The SOA for a negative answer; its TTL is the smaller of its own and its MINIMUM
/// field (RFC 2308 §3).
pub(super) fn negative<'a>(zr: &ZoneRecords<'a>, rc: u8) -> Sections<'a> {
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
        synth: None,
    });
    s
}

/// The RRs of `qtype` at node `n`, with `owner`.
pub(super) fn rrset<'a>(zr: &ZoneRecords<'a>, n: usize, owner: &Owner, qtype: u16) -> Vec<Rr<'a>> {
    let recs: Vec<Rec<'a>> = zr.recs(n).filter(|r| r.rtype == qtype).collect();
    // One TTL per RRset (RFC 2181 §5.2): the first record's.
    let ttl = recs.first().map_or(0, |r| r.ttl);
    recs.into_iter()
        .map(|rec| Rr {
            owner: owner.clone(),
            rec,
            ttl,
            node: n as u32,
            synth: None,
        })
        .collect()
}

/// A/AAAA of in-zone targets of NS, MX and SRV records, for the additional section.
pub(super) fn additional<'a>(
    set: &ZoneSet,
    zi: usize,
    zr: &ZoneRecords<'a>,
    rrs: &[Rr<'a>],
) -> Vec<Rr<'a>> {
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
pub(super) fn referral<'a>(
    set: &ZoneSet,
    zi: usize,
    zr: &ZoneRecords<'a>,
    name: &[u8],
) -> Sections<'a> {
    let n = set.zones[zi].nodes[name] as usize;
    let owner = Owner::Name(zr.owner_of(n));
    let ns = rrset(zr, n, &owner, rtype::NS);
    let glue = additional(set, zi, zr, &ns);
    Sections {
        rcode: rcode::NOERROR,
        aa: false,
        sec: [Vec::new(), ns, glue],
        ..Sections::default()
    }
}

/// Looks up a wire name at build time.
pub(super) fn find_name(set: &ZoneSet, zi: usize, wire: &[u8]) -> Option<Found> {
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
/// CNAMEs, and the CNAMEs that DNAMEs synthesize (RFC 6672 §3.1, RFC 1034 §4.3.2
/// step 3), inside the zone, for at most [`MAX_CHAIN`] links as Knot does. A loop
/// ends the chain where it closes: no record is written twice.
pub(super) fn resolve_at<'a>(
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
    // The CNAME nodes whose CNAME is in the answer, and the DNAMEs.
    let mut visited = vec![n];
    let mut dnames: Vec<usize> = Vec::new();
    let mut links = 0;
    // The CNAME's own RRSIG and NSEC are answered where they are.
    let own = matches!(qtype, Some(rtype::CNAME | RRSIG | NSEC));
    loop {
        let cname = rrset(zr, n, &owner, rtype::CNAME);
        if own || cname.is_empty() {
            break;
        }
        if links == MAX_CHAIN {
            return s;
        }
        links += 1;
        let mut target = cname[0].rec.target().expect("CNAME has a target").to_vec();
        s.sec[0].extend(cname);
        // Where the target leads; a DNAME above it rewrites it and looks again.
        let found = loop {
            match find_name(set, zi, &target) {
                Some(Found::Dname(d)) => {
                    if links == MAX_CHAIN {
                        return s;
                    }
                    links += 1;
                    let Some(next) =
                        through_dname(set, zi, zr, d as usize, &target, &mut s, &mut dnames)
                    else {
                        return s;
                    };
                    target = next;
                }
                found => break found,
            }
        };
        match found {
            // A loop ends the chain where it closes, as Knot does.
            Some(Found::Exact(t) | Found::Wildcard(t)) if visited.contains(&(t as usize)) => {
                return s
            }
            Some(found @ (Found::Exact(t) | Found::Wildcard(t))) => {
                if matches!(found, Found::Wildcard(_)) {
                    s.wild_hits.push((target.to_ascii_lowercase(), t));
                }
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
            // Outside this zone: the client resolves on.
            Some(Found::Dname(_)) | None => return s,
        }
    }
    let rrs = qtype.map(|t| rrset(zr, n, &owner, t)).unwrap_or_default();
    if rrs.is_empty() {
        s.sec[1] = negative(zr, rcode::NOERROR).sec[1].clone();
        s.denial = Some(Denial::NoData(n as u32));
    } else {
        s.sec[2].extend(additional(set, zi, zr, &rrs));
        s.sec[0].extend(rrs);
    }
    s
}

/// Follows the DNAME at node `d` for `name` (a name below it): adds the DNAME (once
/// per answer) and the CNAME synthesized from it to the answer, and returns the new
/// name. `None` ends the chain: the new name would be too long (YXDOMAIN, RFC 6672
/// §2.2), or its CNAME is in the answer already (a loop).
fn through_dname<'a>(
    set: &ZoneSet,
    zi: usize,
    zr: &ZoneRecords<'a>,
    d: usize,
    name: &[u8],
    s: &mut Sections<'a>,
    dnames: &mut Vec<usize>,
) -> Option<Vec<u8>> {
    let dname = rrset(zr, d, &Owner::Name(zr.owner_of(d)), DNAME);
    let first = dname.first()?.clone();
    let owner_len = set.zones[zi].node_name(d as u32).len();
    let mut new = name[..name.len() - owner_len].to_vec();
    new.extend_from_slice(first.rec.rdata);
    let repeat = s.sec[0].iter().any(|r| {
        r.synth.is_some() && matches!(&r.owner, Owner::Name(o) if o.eq_ignore_ascii_case(name))
    });
    if repeat {
        return None;
    }
    if !dnames.contains(&d) {
        dnames.push(d);
        s.sec[0].extend(dname);
    }
    if new.len() > MAX_NAME {
        s.rcode = rcode::YXDOMAIN;
        return None;
    }
    s.sec[0].push(Rr {
        owner: Owner::Name(name.into()),
        rec: Rec {
            rtype: rtype::CNAME,
            ..first.rec
        },
        ttl: first.ttl,
        node: NO_NODE,
        synth: Some(new.as_slice().into()),
    });
    Some(new)
}
