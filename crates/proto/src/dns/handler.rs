//! The hot path: parse the query in place, pick a pre-rendered template, copy it after
//! the question (which is already where the response needs it), patch the header.

use super::counters::{slot, DnsStats};
use super::db::{Answer, Found, Template, ZoneSet};
use super::dname::{synthesize, Below, Scratch};
use super::live::LiveZones;
use super::options::{self, OptionsConfig, EXTRA_MAX};
use super::prefix::Prefix;
use super::rrl::{Class, Decision, Rrl, RrlConfig};
use super::wire::{
    get16, parse_query, put16, rcode, rtype, DropReason, NameBuf, Parsed, Query, CLASS_IN, HEADER,
    MAX_NAME,
};
use firehose_engine::{Handler, Peer, Request, Verdict};
use std::sync::Arc;

/// Largest UDP response the server sends by default (the DNS flag day 2020 value).
pub const DEFAULT_MAX_UDP: u16 = 1232;
/// Largest DNS message over TCP (the 2-byte length prefix).
pub const MAX_TCP_MESSAGE: usize = 65535;
/// Size of the OPT record we append, without options.
const OPT_LEN: usize = 11;
/// EDNS option code of edns-tcp-keepalive (RFC 7828).
pub const OPT_TCP_KEEPALIVE: u16 = 11;

/// How the response leaves: the size limit and the transport's own OPT options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    /// Over TCP; `keepalive` is the idle timeout to advertise (units of 100 ms) when the
    /// query carried edns-tcp-keepalive.
    Tcp {
        keepalive: Option<u16>,
    },
}

/// An authoritative DNS responder for the engine. Cheap to clone: the zones are shared.
#[derive(Clone)]
pub struct DnsHandler {
    live: Arc<LiveZones>,
    generation: u64,
    db: Arc<ZoneSet>,
    max_udp: u16,
    name: Box<NameBuf>,
    /// The name a DNAME rewrites the query name to.
    target: Box<NameBuf>,
    wild: Box<[u8; MAX_NAME + 2]>,
    stats: DnsStats,
    /// Response rate limiting of UDP answers, if on.
    rrl: Option<Box<Rrl>>,
    /// NSID and cookies, if either is on.
    options: Option<Arc<OptionsConfig>>,
    /// Our EDNS options for the current response, and their length.
    extra: Box<[u8; EXTRA_MAX]>,
    extra_len: usize,
    /// The current query carried a valid server cookie (exempt from rate limiting).
    cookie_ok: bool,
    /// Who may transfer zones: an IXFR from them gets our SOA (RFC 1995 §2, §4).
    allow_transfer: Arc<[Prefix]>,
}

impl DnsHandler {
    /// A handler serving `db`, sending UDP responses of at most `max_udp` bytes (at
    /// least 512) to EDNS clients.
    pub fn new(db: Arc<ZoneSet>, max_udp: u16) -> Self {
        Self::live(LiveZones::new(db), max_udp)
    }

    /// A handler serving whatever `live` publishes (reloads included).
    pub fn live(live: Arc<LiveZones>, max_udp: u16) -> Self {
        let (generation, db) = live.get();
        DnsHandler {
            live,
            generation,
            db,
            max_udp: max_udp.max(512),
            name: Box::default(),
            target: Box::default(),
            wild: Box::new([0; MAX_NAME + 2]),
            stats: DnsStats::default(),
            rrl: None,
            options: None,
            extra: Box::new([0; EXTRA_MAX]),
            extra_len: 0,
            cookie_ok: false,
            allow_transfer: Arc::new([]),
        }
    }

    /// Answers IXFR from the addresses in `allow` (others get REFUSED): with our SOA
    /// alone, which tells a client whose copy is older to ask again over TCP, where the
    /// TCP side sends the whole zone (RFC 1995 §2, §4).
    pub fn with_transfers(mut self, allow: &[Prefix]) -> Self {
        self.allow_transfer = allow.into();
        self
    }

    /// Answers NSID and cookie options as `cfg` says (nothing if both are off).
    pub fn with_options(mut self, cfg: OptionsConfig) -> Self {
        let on = cfg.nsid.is_some() || cfg.cookie_secret.is_some();
        self.options = on.then(|| Arc::new(cfg));
        self
    }

    /// Names the counters for TCP (`dns_tcp_*`).
    pub fn counted_as_tcp(mut self) -> Self {
        self.stats = DnsStats::tcp();
        self
    }

    /// Limits the rate of UDP responses (each handler, that is each worker, applies
    /// `cfg` on its own).
    pub fn with_rrl(mut self, cfg: RrlConfig) -> Self {
        self.rrl = Some(Box::new(Rrl::new(cfg)));
        self
    }

    /// Counters so far.
    pub fn stats(&self) -> &DnsStats {
        &self.stats
    }

    /// The zone set this handler answers from now.
    pub fn zones(&mut self) -> &Arc<ZoneSet> {
        self.refresh();
        &self.db
    }

    /// Picks up a newly published zone set: one atomic load when nothing changed.
    #[inline]
    fn refresh(&mut self) {
        if self.live.generation() != self.generation {
            (self.generation, self.db) = self.live.get();
        }
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

    /// Length of our OPT record for `tr`, with the options this query asked for.
    #[inline]
    fn opt_len(&self, tr: Transport) -> usize {
        let keepalive = match tr {
            Transport::Tcp {
                keepalive: Some(_), ..
            } => 6,
            _ => 0,
        };
        OPT_LEN + keepalive + self.extra_len
    }

    /// Appends our OPT record at `at`; returns the new length. Our options (keepalive,
    /// NSID, cookie) are left out when they do not fit the buffer; the bare record always
    /// fits, as it is written where the query's own OPT (at least as long) was.
    #[inline]
    fn opt(
        &self,
        buf: &mut [u8],
        at: usize,
        ext_rcode: u8,
        dnssec_ok: bool,
        tr: Transport,
    ) -> usize {
        let fits = at + self.opt_len(tr) <= buf.len();
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
        let mut end = at + OPT_LEN;
        if !fits {
            return end;
        }
        if let Transport::Tcp {
            keepalive: Some(t), ..
        } = tr
        {
            put16(buf, end, OPT_TCP_KEEPALIVE);
            put16(buf, end + 2, 2);
            put16(buf, end + 4, t);
            end += 6;
        }
        if self.extra_len > 0 {
            buf[end..end + self.extra_len].copy_from_slice(&self.extra[..self.extra_len]);
            end += self.extra_len;
        }
        put16(buf, at + 9, (end - at - OPT_LEN) as u16);
        end
    }

    /// A response with the question and no records (errors, truncation).
    fn bare(
        &mut self,
        buf: &mut [u8],
        q: &Query,
        rc: u16,
        aa: bool,
        tc: bool,
        tr: Transport,
    ) -> Verdict {
        self.stats.response(rc);
        let mut end = q.question_end;
        let mut ar = 0;
        if let Some(e) = q.edns {
            end = self.opt(buf, end, (rc >> 4) as u8, e.dnssec_ok, tr);
            ar = 1;
        }
        self.header(buf, aa, tc, (rc & 0xF) as u8, [1, 0, 0, ar]);
        Verdict::Reply(end)
    }

    fn answer(&mut self, buf: &mut [u8], q: &Query, tr: Transport, peer: &Peer<'_>) -> Verdict {
        if q.edns.is_some_and(|e| e.version != 0) {
            return self.bare(buf, q, rcode::BADVERS, false, false, tr);
        }
        if q.qclass != CLASS_IN {
            return self.bare(buf, q, rcode::REFUSED as u16, false, false, tr);
        }
        match q.qtype {
            rtype::OPT => return self.bare(buf, q, rcode::FORMERR as u16, false, false, tr),
            rtype::IXFR => return self.ixfr(buf, q, tr, peer),
            // AXFR (over TCP, handled before this), MAILB, MAILA.
            252..=254 => return self.bare(buf, q, rcode::NOTIMP as u16, false, false, tr),
            _ => {}
        }
        let limit = match (tr, q.edns) {
            (Transport::Tcp { .. }, _) => MAX_TCP_MESSAGE,
            (Transport::Udp, Some(e)) => e.udp_size.clamp(512, self.max_udp) as usize,
            (Transport::Udp, None) => 512,
        }
        .min(buf.len());
        let opt = if q.edns.is_some() {
            self.opt_len(tr)
        } else {
            0
        };
        let t: Template<'_> = match self.db.answer(&self.name, q, &mut self.wild) {
            Answer::Refused => return self.bare(buf, q, rcode::REFUSED as u16, false, false, tr),
            Answer::Template(t) => t,
            Answer::Denial {
                t,
                chain,
                proofs,
                n,
            } => {
                // A signed template (no additional section) and the NSECs behind it.
                let start = q.question_end;
                let mut end = start + t.bytes.len();
                let apex_at = HEADER + q.name_len - chain.apex_len as usize;
                let room = limit.saturating_sub(opt);
                let mut fits = end <= room;
                let [an, mut ns, mut ar] = t.counts;
                if fits {
                    buf[start..end].copy_from_slice(t.bytes);
                    shift_pointers(buf, start, &t, t.bytes.len(), q.name_len);
                    for &p in &proofs[..n] {
                        match chain.write(p as usize, buf, end, room, apex_at) {
                            Some((e, count)) => (end, ns) = (e, ns + count),
                            None => fits = false,
                        }
                    }
                }
                if !fits {
                    self.stats.bump(slot::TRUNCATED);
                    return self.bare(buf, q, t.rcode as u16, t.aa, true, tr);
                }
                let (aa, rc) = (t.aa, t.rcode);
                if let Some(e) = q.edns {
                    end = self.opt(buf, end, 0, e.dnssec_ok, tr);
                    ar += 1;
                }
                self.stats.response(rc);
                self.header(buf, aa, false, rc, [1, an, ns, ar]);
                return Verdict::Reply(end);
            }
            Answer::Dname {
                dname,
                zone,
                node,
                owner_len,
            } => {
                let scratch = Scratch {
                    name: &mut self.target,
                    wild: &mut self.wild,
                };
                let below = Below {
                    dname,
                    zone,
                    node,
                    owner_len,
                };
                let synth = synthesize(&self.db, buf, q, below, limit - opt, scratch);
                let Some(s) = synth else {
                    self.stats.bump(slot::TRUNCATED);
                    return self.bare(buf, q, 0, true, true, tr);
                };
                let mut len = s.end;
                let [an, ns, mut ar] = s.counts;
                if let Some(e) = q.edns {
                    len = self.opt(buf, len, 0, e.dnssec_ok, tr);
                    ar += 1;
                }
                self.stats.response(s.rcode);
                self.header(buf, true, false, s.rcode, [1, an, ns, ar]);
                return Verdict::Reply(len);
            }
        };
        let start = q.question_end;
        let [an, ns, mut ar] = t.counts;
        let mut keep = t.bytes.len();
        let mut tc = false;
        if start + keep + opt > limit {
            // RFC 2181 §9: drop additional records first; TC only if the answer and
            // authority sections themselves do not fit.
            let room = limit.saturating_sub(start + opt);
            if (t.additional_at as usize) > room {
                self.stats.bump(slot::TRUNCATED);
                return self.bare(buf, q, t.rcode as u16, t.aa, true, tr);
            }
            (keep, ar) = t.additional_fitting(room);
            self.stats.bump(slot::ADDITIONAL_TRIMMED);
            // A referral without all its glue is incomplete (RFC 9471 §3).
            tc = t.is_referral();
        }
        let end = start + keep;
        buf[start..end].copy_from_slice(&t.bytes[..keep]);
        shift_pointers(buf, start, &t, keep, q.name_len);
        let mut len = end;
        if let Some(e) = q.edns {
            len = self.opt(buf, end, 0, e.dnssec_ok, tr);
            ar += 1;
        }
        let (aa, rc) = (t.aa, t.rcode);
        self.stats.response(rc);
        self.header(buf, aa, tc, rc, [1, an, ns, ar]);
        Verdict::Reply(len)
    }

    /// Answers the message `buf[..len]` from `peer` in place for transport `tr`.
    pub fn respond(
        &mut self,
        buf: &mut [u8],
        len: usize,
        tr: Transport,
        peer: &Peer<'_>,
    ) -> Verdict {
        self.refresh();
        self.extra_len = 0;
        self.cookie_ok = false;
        match parse_query(&buf[..len], &mut self.name) {
            Parsed::Query(q) => {
                self.stats.query(q.qtype);
                if self.options.is_some()
                    && q.edns.is_some()
                    && !self.read_options(buf, len, &q, peer)
                {
                    // A cookie of a forbidden length (RFC 7873 §5.2.2).
                    self.bare(buf, &q, rcode::FORMERR as u16, false, false, tr)
                } else {
                    self.answer(buf, &q, tr, peer)
                }
            }
            Parsed::Drop(DropReason::Short) => {
                self.stats.bump(slot::DROPPED_SHORT);
                Verdict::Drop
            }
            Parsed::Drop(DropReason::Response) => {
                self.stats.bump(slot::DROPPED_RESPONSE);
                Verdict::Drop
            }
            Parsed::NotImp(question_end) => {
                self.stats.response(rcode::NOTIMP);
                let qd = question_end.is_some() as u16;
                let end = question_end.unwrap_or(HEADER);
                self.error_reply(buf, len, end, rcode::NOTIMP, qd, tr)
            }
            Parsed::FormErr(_) => {
                // The question cannot be trusted: answer with the header alone (and our
                // OPT when the query's own OPT is readable, RFC 6891 §7).
                self.stats.response(rcode::FORMERR);
                self.error_reply(buf, len, HEADER, rcode::FORMERR, 0, tr)
            }
        }
    }

    /// An IXFR query: FORMERR without the client's SOA (RFC 1995 §3), REFUSED to those
    /// not allowed to transfer, NOTAUTH for a name that is no apex of ours, and else our
    /// SOA alone: the client's copy is current, or it asked over UDP, where a whole
    /// zone does not fit (RFC 1995 §2); the TCP side sends a behind client the zone.
    #[cold]
    fn ixfr(&mut self, buf: &mut [u8], q: &Query, tr: Transport, peer: &Peer<'_>) -> Verdict {
        let rc = if q.ixfr_serial.is_none() {
            rcode::FORMERR
        } else if !self.may_transfer(peer) {
            rcode::REFUSED
        } else if !self.db.apexes.contains_key(&self.name.bytes[..q.name_len]) {
            rcode::NOTAUTH
        } else {
            let soa = Query {
                qtype: rtype::SOA,
                ..*q
            };
            return self.answer(buf, &soa, tr, peer);
        };
        self.bare(buf, q, rc as u16, false, false, tr)
    }

    /// Whether `peer` may transfer zones.
    pub fn may_transfer(&self, peer: &Peer<'_>) -> bool {
        peer.addr()
            .is_some_and(|a| self.allow_transfer.iter().any(|p| p.contains(a.ip())))
    }

    /// Reads the query's EDNS options and prepares ours; false if they are malformed.
    #[cold]
    fn read_options(&mut self, buf: &[u8], len: usize, q: &Query, peer: &Peer<'_>) -> bool {
        let Some(cfg) = self.options.as_deref() else {
            return true;
        };
        let ip = cfg.cookie_secret.and(peer.addr()).map(|a| a.ip());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        let rdata = buf.get(q.question_end + OPT_LEN..len).unwrap_or_default();
        let asked = options::read(rdata, cfg, ip, now);
        self.cookie_ok = asked.cookie_valid;
        self.extra_len = options::write(&mut self.extra, &asked, cfg, ip, now);
        !asked.cookie_malformed
    }

    /// Answers the query `buf[..len]` with rcode `rc` and no records (a transfer that
    /// is not allowed, say). `None` if it is not a readable query.
    pub fn refuse(&mut self, buf: &mut [u8], len: usize, rc: u8, tr: Transport) -> Option<usize> {
        self.extra_len = 0;
        match parse_query(&buf[..len], &mut self.name) {
            Parsed::Query(q) => match self.bare(buf, &q, rc as u16, false, false, tr) {
                Verdict::Reply(n) => Some(n),
                _ => None,
            },
            _ => None,
        }
    }

    /// An error reply of the first `end` bytes, with an OPT if the query had one right
    /// after them.
    fn error_reply(
        &mut self,
        buf: &mut [u8],
        len: usize,
        end: usize,
        rc: u8,
        qd: u16,
        tr: Transport,
    ) -> Verdict {
        let opt = (get16(buf, 6) == 0 && get16(buf, 8) == 0 && get16(buf, 10) == 1)
            .then(|| opt_spans_rest(&buf[..len], end))
            .flatten();
        let (end, ar) = match opt {
            Some(dnssec_ok) => (self.opt(buf, end, 0, dnssec_ok, tr), 1),
            None => (end, 0),
        };
        self.header(buf, false, false, rc, [qd, 0, 0, ar]);
        Verdict::Reply(end)
    }
}

/// Moves the compression pointers of template `t`, copied to `buf[start..start +
/// keep]`, for a question name of `name_len` bytes instead of the model's.
#[inline]
fn shift_pointers(buf: &mut [u8], start: usize, t: &Template<'_>, keep: usize, name_len: usize) {
    let delta = name_len as i32 - t.model_len as i32;
    if delta == 0 {
        return;
    }
    for &f in t.fixups.iter() {
        if f as usize >= keep {
            break;
        }
        let at = start + f as usize;
        let ptr = u16::from_be_bytes([buf[at], buf[at + 1]]);
        let moved = ((ptr & 0x3FFF) as i32 + delta) as u16;
        put16(buf, at, 0xC000 | moved);
    }
}

/// If `msg[at..]` is exactly one OPT record at the root, its DO bit.
fn opt_spans_rest(msg: &[u8], at: usize) -> Option<bool> {
    let rr = msg.get(at..at + OPT_LEN)?;
    let ok = rr[0] == 0
        && get16(rr, 1) == rtype::OPT
        && at + OPT_LEN + get16(rr, 9) as usize == msg.len();
    ok.then_some(rr[7] & 0x80 != 0)
}

/// Whether the query `msg` (whose question ends at `question_end`) carries the EDNS
/// option `code`.
pub fn has_edns_option(msg: &[u8], question_end: usize, code: u16) -> bool {
    let Some(rdata) = msg.get(question_end + OPT_LEN..) else {
        return false;
    };
    let mut o = 0;
    while o + 4 <= rdata.len() {
        if get16(rdata, o) == code {
            return true;
        }
        o += 4 + get16(rdata, o + 2) as usize;
    }
    false
}

impl DnsHandler {
    /// Applies response rate limiting to the response `buf[..n]` for `peer`.
    #[cold]
    fn limit(&mut self, buf: &mut [u8], n: usize, peer: &Peer<'_>) -> Verdict {
        let (Some(rrl), Some(addr)) = (self.rrl.as_mut(), peer.addr()) else {
            return Verdict::Reply(n);
        };
        let rc = buf[3] & 0xF;
        let (qd, an) = (get16(buf, 4), get16(buf, 6));
        let aa = buf[2] & 0x04 != 0;
        // The echoed question's name is in `self.name`, lower-cased; find its length.
        let (mut name_len, mut labels) = (0, 0);
        if qd == 1 {
            while HEADER + name_len < n && buf[HEADER + name_len] != 0 {
                name_len += 1 + buf[HEADER + name_len] as usize;
                labels += 1;
            }
            name_len += 1;
        }
        let class = match (rc, an > 0, aa) {
            (rcode::NXDOMAIN, _, _) if qd == 1 => Class::NxDomain,
            (rcode::NOERROR, true, _) => Class::Positive,
            (rcode::NOERROR, false, true) => Class::NoData,
            (rcode::NOERROR, false, false) => Class::Referral,
            _ => Class::Error,
        };
        let key = match class {
            Class::Error => &[][..],
            _ => rrl_name(&self.db, &self.name, name_len, labels, &mut self.wild),
        };
        let decision = rrl.check(addr.ip(), class, key);
        self.stats.set(slot::RRL_DROPPED, rrl.dropped);
        self.stats.set(slot::RRL_SLIPPED, rrl.slipped);
        match decision {
            Decision::Send => Verdict::Reply(n),
            Decision::Drop => Verdict::Drop,
            Decision::Slip if qd == 1 => {
                // The question alone, TC=1: a real client retries over TCP.
                buf[2] |= 0x02;
                for i in [6, 8, 10] {
                    put16(buf, i, 0);
                }
                Verdict::Reply(HEADER + name_len + 4)
            }
            Decision::Slip => {
                // No question to send back truncated (a FORMERR, say): this slip sends
                // nothing, so it is counted as a drop, not as a slip.
                rrl.slipped -= 1;
                rrl.dropped += 1;
                self.stats.set(slot::RRL_DROPPED, rrl.dropped);
                self.stats.set(slot::RRL_SLIPPED, rrl.slipped);
                Verdict::Drop
            }
        }
    }
}

/// The name response rate limiting counts a response under (as Knot and BIND): the
/// query name where it exists, but the wildcard that synthesized the answer, the
/// DNAME above the name, the delegation of a referral, and the zone for a name that
/// does not exist, so that random labels share one count. Empty outside our zones.
#[cold]
fn rrl_name<'a>(
    db: &'a ZoneSet,
    name: &'a NameBuf,
    name_len: usize,
    labels: usize,
    wild: &mut [u8; MAX_NAME + 2],
) -> &'a [u8] {
    let Some((zi, apex_at)) = db.zone_for(name, name_len, labels) else {
        return &[];
    };
    let z = &db.zones[zi as usize];
    match db.find(z, name, name_len, labels, apex_at, wild) {
        Found::Exact(_) => name.suffix(0, name_len),
        Found::Wildcard(n) | Found::Referral(n) | Found::Dname(n) => z.node_name(n),
        Found::NxDomain => name.suffix(apex_at, name_len),
    }
}

impl Handler for DnsHandler {
    fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
        let (buf, len, peer) = req.parts();
        let v = self.respond(buf, len, Transport::Udp, peer);
        match v {
            Verdict::Reply(n) if self.rrl.is_some() && !self.cookie_ok => self.limit(buf, n, peer),
            v => v,
        }
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        self.stats.named()
    }
}
