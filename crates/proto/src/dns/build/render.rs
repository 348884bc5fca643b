//! Sections to wire bytes: compressed templates, and plain records for zone transfers
//! and NSEC entries.

use super::{Owner, Rr, Sections};
use crate::dns::db::Template;
use crate::dns::wire::{CLASS_IN, HEADER, MAX_NAME};
use crate::dns::zone::{Part, Rec};

/// Appends one record in wire form, uncompressed, with `owner` and `ttl`.
pub(super) fn plain_rr(out: &mut Vec<u8>, owner: &[u8], r: Rec<'_>, ttl: u32) {
    Rec { owner, ttl, ..r }.write_plain(out);
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
        if let Some(target) = &rr.synth {
            // Written whole, as a validating resolver synthesizes it itself.
            self.name(target, false);
        }
        for p in rr.rec.parts().filter(|_| rr.synth.is_none()) {
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
pub(super) fn render(s: &Sections<'_>, model: &[u8], owner_is_qname: bool) -> Rendered {
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
pub(super) struct Rendered {
    rcode: u8,
    aa: bool,
    counts: [u16; 3],
    model_len: u16,
    additional_at: u16,
    bytes: Vec<u8>,
    fixups: Vec<u16>,
}

impl Rendered {
    pub(super) fn template(&self) -> Template<'_> {
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
