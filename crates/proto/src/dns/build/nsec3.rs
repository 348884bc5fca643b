//! NSEC3 at load time (RFC 5155): the chain read from the zone, kept out of the node
//! tree (its owners are hashes, not names a client looks up), and per node the
//! entries its denials use. Only the names a query brings (the next closer name) are
//! hashed when answering.

use super::render::plain_rr;
use super::{BuildError, Owner, Rr, ZoneRecords, NO_NODE};
use crate::dns::db::Zone;
use crate::dns::dnssec::RRSIG;
use crate::dns::nsec3::{
    decode, NodeProofs, Nsec3Chain, Nsec3Zone, Params, Proofs, HASH_LEN, NONE, NSEC3, NSEC3PARAM,
};
use crate::dns::wire::{label_offsets, name_to_text};
use crate::dns::zone::Rec;
use std::collections::BTreeMap;

/// The type an RRSIG covers.
pub(super) fn covered(r: &Rec<'_>) -> Option<u16> {
    let b = r.rdata;
    (b.len() >= 2).then(|| u16::from_be_bytes([b[0], b[1]]))
}

/// An NSEC3 record or an RRSIG over one: these live in the chain, not in the tree.
pub(super) fn in_chain(r: &Rec<'_>) -> bool {
    r.rtype == NSEC3 || (r.rtype == RRSIG && covered(r) == Some(NSEC3))
}

/// The raw RDATA of a record whose type has no embedded names.
fn raw<'a>(r: &Rec<'a>) -> &'a [u8] {
    r.rdata
}

/// The NSEC3 chain of one zone while its templates are built.
pub(super) struct Nsec3Build<'a> {
    /// The runtime form (copied into the zone once built).
    pub(super) zone: Nsec3Zone,
    /// Per entry, its NSEC3 and RRSIG records, for denials rendered at load time.
    recs: Vec<Vec<Rec<'a>>>,
}

/// Reads the NSEC3 chain of a zone whose apex holds an NSEC3PARAM (RFC 5155 §4): the
/// NSEC3 records with its parameters, by hash. `None` for a zone without NSEC3.
pub(super) fn load<'a>(
    z: &Zone,
    zr: &ZoneRecords<'a>,
) -> Result<Option<Nsec3Build<'a>>, BuildError> {
    let err = |msg: String| BuildError::Nsec3 {
        file: zr.data.source.clone(),
        msg,
    };
    // NSEC3PARAM with flags other than zero are ignored (RFC 5155 §4.1.2).
    let params: Vec<&[u8]> = zr
        .recs(0)
        .filter(|r| r.rtype == NSEC3PARAM)
        .map(|r| raw(&r))
        .filter(|rd| rd.get(1) == Some(&0))
        .collect();
    let has_chain = zr.chain.iter().any(|r| r.rtype == NSEC3);
    let Some(rd) = params.first() else {
        return if has_chain {
            Err(err(format!(
                "has NSEC3 records but no NSEC3PARAM with flags 0 at its apex {}; \
                 re-sign the zone (ldns-signzone -n, dnssec-signzone -3)",
                name_to_text(&zr.data.apex)
            )))
        } else {
            Ok(None)
        };
    };
    let params = Params::from_rdata(rd).ok_or_else(|| {
        err(format!(
            "NSEC3PARAM hash algorithm {} is not supported (only 1, SHA-1, is defined); \
             re-sign the zone with SHA-1",
            rd[0]
        ))
    })?;
    // The NSEC3 records made with these parameters (RFC 5155 §7.2), by hash; each
    // owner is one hash label directly below the apex.
    let apex = &zr.data.apex;
    let hash_of = |r: &Rec<'_>| -> Option<[u8; HASH_LEN]> {
        let lower = r.owner.to_ascii_lowercase();
        let len = *lower.first()? as usize;
        (lower.get(1 + len..) == Some(apex.as_slice()))
            .then(|| decode(&lower[1..1 + len]))
            .flatten()
    };
    let same_params = |rd: &[u8]| {
        let salt_len = *rd.get(4).unwrap_or(&0) as usize;
        rd.len() > 5 + salt_len
            && rd[0] == 1
            && u16::from_be_bytes([rd[2], rd[3]]) == params.iterations
            && rd[5..5 + salt_len] == *params.salt
    };
    let mut by_hash: BTreeMap<[u8; HASH_LEN], Vec<Rec<'a>>> = BTreeMap::new();
    for r in zr.chain.iter().filter(|r| r.rtype == NSEC3) {
        if let Some(h) = hash_of(r).filter(|_| same_params(raw(r))) {
            by_hash.entry(h).or_default().push(*r);
        }
    }
    for r in zr.chain.iter().filter(|r| r.rtype == RRSIG) {
        if let Some(v) = hash_of(r).and_then(|h| by_hash.get_mut(&h)) {
            v.push(*r);
        }
    }
    let mut chain = Nsec3Chain::default();
    chain.entries.apex_len = zr.data.apex.len() as u16;
    let mut recs = Vec::with_capacity(by_hash.len());
    for (h, rs) in by_hash {
        let start = chain.entries.bytes.len();
        for r in &rs {
            plain_rr(&mut chain.entries.bytes, r.owner, *r, r.ttl);
        }
        chain.entries.close(start, rs.len() as u16);
        chain.push_hash(h);
        recs.push(rs);
    }
    let mut zone = Nsec3Zone {
        params,
        chain,
        nodes: vec![NodeProofs::default(); z.nodes.len()],
    };
    node_proofs(z, &mut zone);
    Ok(Some(Nsec3Build { zone, recs }))
}

/// Appends the entries of `p` not in `out` yet.
fn add(out: &mut Vec<u32>, p: Proofs) {
    for &i in &p.idx[..p.n] {
        if !out.contains(&i) {
            out.push(i);
        }
    }
}

/// Labels in a lower-case wire name, the root not counted.
fn labels(name: &[u8]) -> usize {
    label_offsets(name).len() - 1
}

/// Fills in each node's entries, parents before children: a node without an NSEC3
/// (an empty non-terminal or delegation left out by opt-out) proves names below it
/// through its nearest ancestor that has one. Glue has none.
fn node_proofs(z: &Zone, n3: &mut Nsec3Zone) {
    let mut order: Vec<usize> = (0..z.nodes.len()).collect();
    order.sort_by_key(|&n| z.node_name(n as u32).len());
    let mut star = Vec::with_capacity(256);
    for n in order {
        let name = z.node_name(n as u32);
        let glue = z.node[n].cut.is_some_and(|c| c as usize != n);
        let own = if glue {
            NONE
        } else {
            let h = n3.params.hash(name);
            n3.chain.matching(&h).map_or(NONE, |i| i as u32)
        };
        n3.nodes[n] = if own != NONE {
            star.clear();
            star.extend_from_slice(b"\x01*");
            star.extend_from_slice(name);
            NodeProofs {
                own,
                cpe: own,
                star: n3.cover(&star),
                cpe_labels: labels(name) as u8,
            }
        } else {
            // Names below a DNAME are not in `nodes`: they keep no entries.
            let parent = label_offsets(name)
                .get(1)
                .and_then(|&o| z.nodes.get(&name[o..]));
            let inherited = parent.map(|&p| n3.nodes[p as usize]).unwrap_or_default();
            NodeProofs {
                own: NONE,
                ..inherited
            }
        };
    }
}

impl<'a> Nsec3Build<'a> {
    /// The records of entries `p`, to render behind a denial.
    pub(super) fn records(&self, p: &[u32]) -> Vec<Rr<'a>> {
        p.iter()
            .flat_map(|&i| &self.recs[i as usize])
            .map(|rec| Rr {
                owner: Owner::Name(rec.owner.into()),
                rec: *rec,
                ttl: rec.ttl,
                node: NO_NODE,
                synth: None,
            })
            .collect()
    }

    /// NODATA at node `n` (RFC 5155 §7.2.3): the NSEC3 matching it. A name without
    /// one (a delegation or an empty non-terminal that opt-out left out) gets the
    /// closest provable encloser proof, whose next closer NSEC3 has the opt-out flag
    /// (§7.2.4 for DS; Knot 3.2 sends the same for other types there).
    pub(super) fn nodata(&self, z: &Zone, n: u32, out: &mut Vec<u32>) {
        let mut p = Proofs::new(NONE);
        let own = self.zone.nodes[n as usize].own;
        let glue = z.node[n as usize].cut.is_some_and(|c| c != n);
        if own != NONE {
            p.push(own);
        } else if !glue {
            let name = z.node_name(n);
            self.zone.encloser_proof(n, name, labels(name), &mut p);
        }
        add(out, p);
    }

    /// NXDOMAIN for lower-case wire `name` (a CNAME's target, known at load time).
    pub(super) fn nxdomain(&self, z: &Zone, name: &[u8], out: &mut Vec<u32>) {
        let ce = label_offsets(name)
            .into_iter()
            .skip(1)
            .find_map(|o| z.nodes.get(&name[o..]).copied())
            .unwrap_or(0);
        add(out, self.zone.nxdomain(ce, name, labels(name)));
    }

    /// A CNAME target `name` answered from wildcard node `w`: the NSEC3 covering its
    /// next closer name, and with `nodata` the one matching the closest encloser.
    pub(super) fn wildcard_hit(
        &self,
        z: &Zone,
        name: &[u8],
        w: u32,
        nodata: bool,
        out: &mut Vec<u32>,
    ) {
        let parent = &z.node_name(w)[2..];
        let enc = z.nodes.get(parent).copied().unwrap_or(0);
        add(out, self.zone.wildcard(enc, w, name, labels(name), nodata));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::nsec3::next_closer;

    const BASE: &str = "$ORIGIN z.test.\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n\
        @ RRSIG SOA 13 2 300 20300101000000 20200101000000 1 z.test. AAAA\n\
        0p9mhaveqvm6t7vbl5lop2u3t2rp3tom NSEC3 1 0 0 - 2t7b4g4vsa5smi47k61mv5bv1a22bojr NS SOA RRSIG\n\
        0p9mhaveqvm6t7vbl5lop2u3t2rp3tom RRSIG NSEC3 13 3 300 20300101000000 20200101000000 1 z.test. AAAA\n\
        2t7b4g4vsa5smi47k61mv5bv1a22bojr NSEC3 1 0 0 ab 0p9mhaveqvm6t7vbl5lop2u3t2rp3tom A\n";

    fn build_text(extra: &str) -> Result<crate::dns::db::ZoneSet, BuildError> {
        let text = format!("{BASE}{extra}");
        let z = crate::dns::zone::parse_zone(text.as_bytes(), "t.zone").unwrap();
        super::super::build(&[z.into()])
    }

    #[test]
    fn a_chain_needs_an_nsec3param_with_sha1() {
        let e = build_text("").unwrap_err().to_string();
        assert!(
            e.starts_with("t.zone: has NSEC3 records but no NSEC3PARAM"),
            "{e}"
        );
        // Flags other than zero: ignored (RFC 5155 §4.1.2).
        let e = build_text("@ NSEC3PARAM 1 1 0 -\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no NSEC3PARAM"), "{e}");
        let e = build_text("@ NSEC3PARAM 2 0 0 -\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("hash algorithm 2 is not supported"), "{e}");
    }

    #[test]
    fn the_chain_stays_out_of_the_tree_with_the_zones_parameters_only() {
        let set = build_text("@ NSEC3PARAM 1 0 0 -\n").unwrap();
        let z = &set.zones[0];
        assert!(
            (0..z.nodes.len()).all(|n| z.node_name(n as u32).len() < 30),
            "no hashed owner is a node"
        );
        let n3 = z.dnssec.as_ref().unwrap().nsec3.as_ref().unwrap();
        // The NSEC3 with salt "ab" is not of this chain; the other has its RRSIG.
        assert_eq!(n3.chain.hashes.len(), 1);
        assert_eq!(n3.chain.entries.entry(0).1, 2);
        assert_eq!(
            n3.chain.hashes[0],
            decode(b"0p9mhaveqvm6t7vbl5lop2u3t2rp3tom").unwrap()
        );
    }

    #[test]
    fn next_closer_is_one_label_below_the_encloser() {
        let name = b"\x01a\x01b\x07example\x00";
        assert_eq!(next_closer(name, 3, 1), b"\x01b\x07example\x00");
        assert_eq!(next_closer(name, 3, 2), &name[..]);
        assert_eq!(next_closer(name, 3, 0), b"\x07example\x00");
    }

    #[test]
    fn proofs_are_distinct_and_skip_the_known_one() {
        let mut p = Proofs::new(4);
        for i in [1, NONE, 1, 4, 2, 3, 5] {
            p.push(i);
        }
        assert_eq!(&p.idx[..p.n], &[1, 2, 3]);
    }
}
