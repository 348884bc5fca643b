//! A zone transfer (AXFR, RFC 5936) streamed from the event loop: messages are built
//! as the socket drains, so a large zone never sits whole in a connection's queue.

use super::super::db::ZoneSet;
use super::super::wire::{put16, HEADER};
use std::sync::Arc;

/// Largest transfer message we build (well under 65535, as other servers do).
const AXFR_MESSAGE: usize = 16384;

/// Where a transfer has got to.
pub(super) struct Transfer {
    db: Arc<ZoneSet>,
    zone: usize,
    /// The query's ID and the response flags (QR, AA, RD echoed).
    id: [u8; 2],
    flags: u8,
    /// The question, repeated in the first message only.
    question: Vec<u8>,
    /// 0: every record; 1: the SOA again; 2: done.
    seg: u8,
    at: usize,
}

impl Transfer {
    /// A transfer of zone `zone` of `db` answering `query` (whose question ends at `qend`).
    pub(super) fn new(db: Arc<ZoneSet>, zone: usize, query: &[u8], qend: usize) -> Self {
        Transfer {
            db,
            zone,
            id: [query[0], query[1]],
            flags: 0x84 | (query[2] & 0x01),
            question: query[HEADER..qend].to_vec(),
            seg: 0,
            at: 0,
        }
    }

    /// Appends length-prefixed messages to `out` until it holds `high` bytes or the zone
    /// is sent; true when it is.
    pub(super) fn fill(&mut self, out: &mut Vec<u8>, high: usize) -> bool {
        while out.len() < high {
            if !self.next_message(out) {
                return true;
            }
        }
        self.seg == 2
    }

    /// Appends the next message; false when there is none left.
    fn next_message(&mut self, out: &mut Vec<u8>) -> bool {
        if self.seg == 2 {
            return false;
        }
        let z = &self.db.zones[self.zone];
        let start = out.len();
        let first = self.seg == 0 && self.at == 0;
        out.extend_from_slice(&[0, 0, self.id[0], self.id[1], self.flags, 0, 0]);
        out.extend_from_slice(&[first as u8, 0, 0, 0, 0, 0, 0]);
        if first {
            out.extend_from_slice(&self.question);
        }
        let mut count = 0u16;
        // Every record, then the SOA again (RFC 5936 §2.2), written from the zone's
        // records as loaded.
        let order = &z.transfer;
        while self.seg < 2 {
            let next = match (self.seg, &z.records) {
                (0, Some(r)) => order.get(self.at).map(|&i| (r, i)),
                (1, Some(r)) if self.at == 0 => order.first().map(|&i| (r, i)),
                _ => None,
            };
            let Some((recs, i)) = next else {
                (self.seg, self.at) = (self.seg + 1, 0);
                continue;
            };
            let before = out.len();
            recs.rec(i as usize).write_plain(out);
            if count > 0 && out.len() - start - 2 > AXFR_MESSAGE {
                out.truncate(before);
                break;
            }
            count += 1;
            self.at += 1;
        }
        let len = (out.len() - start - 2) as u16;
        put16(out, start, len);
        put16(out, start + 2 + 6, count);
        true
    }
}
