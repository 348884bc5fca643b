//! The answers of a plain node, written straight out: in an unsigned zone, a node that
//! is no zone cut, no wildcard, no DNAME and not the apex, whose records all have types
//! without names in their RDATA (A, AAAA, TXT, ...), answers each type with its RRset
//! alone: no chain to follow, no additional records, nothing to compress but the owner,
//! which is the question. That is most nodes of a large zone, and rendering them
//! without building sections is most of what keeps loading fast. The bytes are those
//! the general renderer writes (`plain_nodes_render_as_the_general_path` checks).

use super::super::db::{Tid, ZoneSet};
use super::super::template::Template;
use super::super::wire::{rcode, rtype, CLASS_IN, HEADER};
use super::super::zone::Rec;

/// Whether a record leaves its node plain: no name in its RDATA, and no special meaning.
pub(super) fn is_plain(r: &Rec<'_>) -> bool {
    !matches!(
        r.rtype,
        rtype::NS
            | rtype::CNAME
            | rtype::PTR
            | rtype::MX
            | rtype::SRV
            | rtype::SOA
            | rtype::DNAME
            | rtype::DS
    )
}

/// Buffers reused from node to node.
#[derive(Default)]
pub(super) struct Scratch<'a> {
    recs: Vec<Rec<'a>>,
    bytes: Vec<u8>,
    fixups: Vec<u16>,
}

/// Renders one template per type of `recs` (a plain node's records, its name
/// `name_len` bytes long) and appends (type, template) to `out`, types ascending.
pub(super) fn answers<'a>(
    set: &mut ZoneSet,
    recs: impl Iterator<Item = Rec<'a>>,
    name_len: usize,
    s: &mut Scratch<'a>,
    out: &mut Vec<(u16, Tid)>,
) {
    s.recs.clear();
    s.recs.extend(recs);
    // By type, in file order within a type (a stable sort).
    s.recs.sort_by_key(|r| r.rtype);
    let mut k = 0;
    while k < s.recs.len() {
        let t = s.recs[k].rtype;
        let end = k + s.recs[k..].iter().take_while(|r| r.rtype == t).count();
        // One TTL per RRset (RFC 2181 §5.2): the first record's.
        let ttl = s.recs[k].ttl;
        s.bytes.clear();
        s.fixups.clear();
        for r in &s.recs[k..end] {
            // The owner is the question: a pointer to it, moved if it is not.
            s.fixups.push(s.bytes.len() as u16);
            s.bytes.extend_from_slice(&[0xC0, HEADER as u8]);
            s.bytes.extend_from_slice(&t.to_be_bytes());
            s.bytes.extend_from_slice(&CLASS_IN.to_be_bytes());
            s.bytes.extend_from_slice(&ttl.to_be_bytes());
            s.bytes
                .extend_from_slice(&(r.rdata.len() as u16).to_be_bytes());
            s.bytes.extend_from_slice(r.rdata);
        }
        let tid = set.templates.push(Template {
            rcode: rcode::NOERROR,
            aa: true,
            counts: [(end - k) as u16, 0, 0],
            model_len: name_len as u16,
            additional_at: s.bytes.len() as u16,
            bytes: &s.bytes,
            fixups: &s.fixups,
        });
        out.push((t, tid));
        k = end;
    }
}
