//! Sections to wire bytes: compressed templates, and plain records for zone transfers
//! and NSEC entries.

use super::{Owner, Rr, Sections, ZoneRecords};
use crate::dns::db::Template;
use crate::dns::wire::{label_offsets, rtype, CLASS_IN, HEADER, MAX_NAME};
use crate::dns::zone::{Part, Record};

/// Appends one record in wire form, uncompressed, with `owner` and `ttl`.
pub(super) fn plain_rr(out: &mut Vec<u8>, owner: &[u8], r: &Record, ttl: u32) {
    out.extend_from_slice(owner);
    out.extend_from_slice(&r.rtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    let len_at = out.len();
    out.extend_from_slice(&[0, 0]);
    for p in &r.rdata {
        match p {
            Part::Bytes(b) => out.extend_from_slice(b),
            Part::Name { wire, .. } => out.extend_from_slice(wire),
        }
    }
    let len = (out.len() - len_at - 2) as u16;
    out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
}

/// All records of a zone in wire form, uncompressed, the SOA first; and its length.
pub(super) fn transfer_bytes(zr: &ZoneRecords<'_>) -> (Box<[u8]>, usize) {
    let mut out = Vec::new();
    let soa = zr.by_node[0].iter().filter(|r| r.rtype == rtype::SOA);
    let rest = zr
        .by_node
        .iter()
        .flatten()
        .chain(&zr.chain)
        .filter(|r| r.rtype != rtype::SOA);
    let mut soa_len = 0;
    for (i, r) in soa.chain(rest).enumerate() {
        plain_rr(&mut out, &r.owner, r, r.ttl);
        if i == 0 {
            soa_len = out.len();
        }
    }
    (out.into_boxed_slice(), soa_len)
}

/// Writes names with compression against earlier names, tracking pointers that move
/// when the real question is longer than the model.
struct Renderer {
    out: Vec<u8>,
    /// Lower-case suffixes already written, with their message offset.
    table: Vec<(Vec<u8>, u16)>,
    fixups: Vec<u16>,
    base: usize,
}

impl Renderer {
    fn new(model: &[u8], owner_is_qname: bool) -> Self {
        let mut table = Vec::new();
        for off in label_offsets(model) {
            if model[off] == 0 || (off == 0 && owner_is_qname) {
                continue;
            }
            table.push((model[off..].to_ascii_lowercase(), (HEADER + off) as u16));
        }
        Renderer {
            out: Vec::new(),
            table,
            fixups: Vec::new(),
            base: HEADER + model.len() + 4,
        }
    }

    fn name(&mut self, wire: &[u8], compress: bool) {
        let offs = label_offsets(wire);
        for off in offs {
            if wire[off] == 0 {
                break;
            }
            let key = wire[off..].to_ascii_lowercase();
            if compress {
                if let Some(&(_, at)) = self.table.iter().find(|(k, _)| *k == key) {
                    self.fixups.push(self.out.len() as u16);
                    self.out.extend_from_slice(&(0xC000 | at).to_be_bytes());
                    return;
                }
            }
            let at = self.base + self.out.len();
            // Leave room for the shift by a longer question.
            if at < 0x3FFF - MAX_NAME {
                self.table.push((key, at as u16));
            }
            let len = wire[off] as usize;
            self.out.extend_from_slice(&wire[off..off + 1 + len]);
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
        for p in &rr.rec.rdata {
            match p {
                Part::Bytes(b) => self.out.extend_from_slice(b),
                Part::Name { wire, compress } => self.name(wire, *compress),
            }
        }
        let len = (self.out.len() - len_at - 2) as u16;
        self.out[len_at..len_at + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// Renders sections against a model question `model` (with `owner_is_qname`, the
/// model's own name is never a compression target: its owner is the query name).
pub(super) fn render(s: &Sections<'_>, model: &[u8], owner_is_qname: bool) -> Template {
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
    Template {
        rcode: s.rcode,
        aa: s.aa,
        counts: [
            s.sec[0].len() as u16,
            s.sec[1].len() as u16,
            s.sec[2].len() as u16,
        ],
        model_len: model.len() as u16,
        additional_at,
        bytes: r.out.into_boxed_slice(),
        fixups: r.fixups.into_boxed_slice(),
    }
}
