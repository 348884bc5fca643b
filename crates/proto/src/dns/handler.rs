//! The hot path: parse the query in place, pick a pre-rendered template, copy it after
//! the question (which is already where the response needs it), patch the header.

use super::db::{Answer, Template, ZoneSet};
use super::wire::{
    parse_query, put16, rcode, rtype, DropReason, NameBuf, Parsed, Query, CLASS_IN, HEADER,
    MAX_NAME,
};
use firehose_engine::{Handler, Peer, Verdict};
use std::sync::Arc;

/// Largest UDP response the server sends by default (the DNS flag day 2020 value).
pub const DEFAULT_MAX_UDP: u16 = 1232;
/// Size of the OPT record we append.
const OPT_LEN: usize = 11;

/// What the handler has done, per worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsStats {
    /// Responses per rcode (index 16 is BADVERS).
    pub rcode: [u64; 17],
    /// Responses sent with TC because the answer did not fit.
    pub truncated: u64,
    /// Datagrams shorter than a header, dropped.
    pub dropped_short: u64,
    /// Datagrams with QR set (responses), dropped.
    pub dropped_response: u64,
}

/// An authoritative DNS responder for the engine. Cheap to clone: the zones are shared.
#[derive(Clone)]
pub struct DnsHandler {
    db: Arc<ZoneSet>,
    max_udp: u16,
    name: Box<NameBuf>,
    wild: Box<[u8; MAX_NAME + 2]>,
    stats: DnsStats,
}

impl DnsHandler {
    /// A handler serving `db`, sending UDP responses of at most `max_udp` bytes (at
    /// least 512) to EDNS clients.
    pub fn new(db: Arc<ZoneSet>, max_udp: u16) -> Self {
        DnsHandler {
            db,
            max_udp: max_udp.max(512),
            name: Box::default(),
            wild: Box::new([0; MAX_NAME + 2]),
            stats: DnsStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &DnsStats {
        &self.stats
    }

    /// Writes the header of a response with `counts` (QD, AN, NS, AR).
    #[inline]
    fn header(&mut self, buf: &mut [u8], aa: bool, tc: bool, rc: u8, counts: [u16; 4]) {
        let opcode_rd = buf[2] & 0x79;
        buf[2] = 0x80 | opcode_rd | (aa as u8) << 2 | (tc as u8) << 1;
        // RA and AD stay clear; CD is echoed (RFC 4035 §3.2.2).
        buf[3] = (buf[3] & 0x10) | rc;
        for (i, c) in counts.into_iter().enumerate() {
            put16(buf, 4 + 2 * i, c);
        }
    }

    /// Appends our OPT record at `at`; returns the new length.
    #[inline]
    fn opt(&self, buf: &mut [u8], at: usize, ext_rcode: u8, dnssec_ok: bool) -> usize {
        let [hi, lo] = self.max_udp.to_be_bytes();
        let rr = [
            0,
            0,
            rtype::OPT as u8,
            hi,
            lo,
            ext_rcode,
            0,
            (dnssec_ok as u8) << 7,
            0,
            0,
            0,
        ];
        buf[at..at + OPT_LEN].copy_from_slice(&rr);
        at + OPT_LEN
    }

    /// A response with the question and no records (errors, truncation).
    fn bare(&mut self, buf: &mut [u8], q: &Query, rc: u16, aa: bool, tc: bool) -> Verdict {
        self.stats.rcode[rc as usize] += 1;
        let mut end = q.question_end;
        let mut ar = 0;
        if let Some(e) = q.edns {
            end = self.opt(buf, end, (rc >> 4) as u8, e.dnssec_ok);
            ar = 1;
        }
        self.header(buf, aa, tc, (rc & 0xF) as u8, [1, 0, 0, ar]);
        Verdict::Reply(end)
    }

    fn answer(&mut self, buf: &mut [u8], q: &Query) -> Verdict {
        if q.edns.is_some_and(|e| e.version != 0) {
            return self.bare(buf, q, rcode::BADVERS, false, false);
        }
        if q.qclass != CLASS_IN {
            return self.bare(buf, q, rcode::REFUSED as u16, false, false);
        }
        match q.qtype {
            rtype::OPT => return self.bare(buf, q, rcode::FORMERR as u16, false, false),
            // IXFR, AXFR, MAILB, MAILA: no transfers here.
            251..=254 => return self.bare(buf, q, rcode::NOTIMP as u16, false, false),
            _ => {}
        }
        let t: &Template = match self.db.answer(&self.name, q, &mut self.wild) {
            Answer::Refused => return self.bare(buf, q, rcode::REFUSED as u16, false, false),
            Answer::Template(t) => t,
        };
        let limit = match q.edns {
            Some(e) => e.udp_size.clamp(512, self.max_udp) as usize,
            None => 512,
        }
        .min(buf.len());
        let opt = if q.edns.is_some() { OPT_LEN } else { 0 };
        let start = q.question_end;
        let end = start + t.bytes.len();
        if end + opt > limit {
            self.stats.truncated += 1;
            let (rc, aa) = (t.rcode as u16, t.aa);
            return self.bare(buf, q, rc, aa, true);
        }
        buf[start..end].copy_from_slice(&t.bytes);
        let delta = q.name_len as i32 - t.model_len as i32;
        if delta != 0 {
            for &f in t.fixups.iter() {
                let at = start + f as usize;
                let ptr = u16::from_be_bytes([buf[at], buf[at + 1]]);
                let moved = ((ptr & 0x3FFF) as i32 + delta) as u16;
                put16(buf, at, 0xC000 | moved);
            }
        }
        let mut len = end;
        let [an, ns, mut ar] = t.counts;
        if let Some(e) = q.edns {
            len = self.opt(buf, end, 0, e.dnssec_ok);
            ar += 1;
        }
        let (aa, rc) = (t.aa, t.rcode);
        self.stats.rcode[rc as usize] += 1;
        self.header(buf, aa, false, rc, [1, an, ns, ar]);
        Verdict::Reply(len)
    }
}

impl Handler for DnsHandler {
    fn handle(&mut self, buf: &mut [u8], len: usize, _peer: &Peer<'_>) -> Verdict {
        match parse_query(&buf[..len], &mut self.name) {
            Parsed::Query(q) => self.answer(buf, &q),
            Parsed::Drop(DropReason::Short) => {
                self.stats.dropped_short += 1;
                Verdict::Drop
            }
            Parsed::Drop(DropReason::Response) => {
                self.stats.dropped_response += 1;
                Verdict::Drop
            }
            Parsed::NotImp(question_end) => {
                self.stats.rcode[rcode::NOTIMP as usize] += 1;
                let qd = question_end.is_some() as u16;
                self.header(buf, false, false, rcode::NOTIMP, [qd, 0, 0, 0]);
                Verdict::Reply(question_end.unwrap_or(HEADER))
            }
            Parsed::FormErr(_) => {
                // The question cannot be trusted: answer with the header alone.
                self.stats.rcode[rcode::FORMERR as usize] += 1;
                self.header(buf, false, false, rcode::FORMERR, [0; 4]);
                Verdict::Reply(HEADER)
            }
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        vec![
            ("dns_noerror", s.rcode[0]),
            ("dns_formerr", s.rcode[1]),
            ("dns_nxdomain", s.rcode[3]),
            ("dns_notimp", s.rcode[4]),
            ("dns_refused", s.rcode[5]),
            ("dns_badvers", s.rcode[16]),
            ("dns_truncated", s.truncated),
            ("dns_dropped_short", s.dropped_short),
            ("dns_dropped_response", s.dropped_response),
        ]
    }
}
