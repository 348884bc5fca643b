//! The hot path: parse a request, decide whether and how to answer it as chronyd decides
//! (mode, authentication, rate limit), and write the 48-byte response over the request.
//!
//! The receive timestamp is the kernel's arrival stamp when the backend gives one, else the
//! clock read first thing; the transmit timestamp is read last, just before the response
//! is handed back. As chronyd does, the bits below the clock's precision are random, a
//! receive timestamp ends in a 1 bit and a transmit timestamp in a 0 bit (so an interleaved
//! request, whose origin is one of our receive timestamps, can be told apart).
//!
//! Interleaved mode (chronyd's rules, `NCR_ProcessRxUnknown`): a version 4 request whose
//! origin ends in a 1 bit (one of our receive timestamps) and whose receive and transmit
//! differ asks for it. If that origin is a response we remember ([`Interleave`]), the
//! answer is interleaved: origin = the request's receive timestamp, transmit = when that
//! earlier response really left (the kernel's stamp where the socket gave it), and the
//! entry is used up. Either way the new response is remembered, and the kernel is asked
//! for its transmit stamp ([`Request::want_tx_stamp`], tagged with the receive timestamp
//! it carries). A KoD, an older version or a basic request never touches the table.

use super::counters::{slot, NtpStats};
use super::interleave::{Interleave, Sent};
use super::ratelimit::{Limit, RateLimitConfig, RateLimiter};
use super::state::{LiveState, ServerState};
use firehose_engine::{Handler, Request, Verdict};
use firehose_ntpwire::packet::mode;
use firehose_ntpwire::{kod, parse, Auth, Header, Leap, Timestamp, HEADER_LEN};
use firehose_sys::clock::realtime_ns;
use std::hash::BuildHasher;
use std::sync::Arc;

/// Sources the rate limiter remembers per worker by default.
pub const DEFAULT_RATELIMIT_SOURCES: usize = 16384;

/// The server's fixed settings.
#[derive(Clone)]
pub struct NtpOptions {
    /// log2 of the clock's precision in seconds (see [`super::state::measure_precision`]).
    pub precision: i8,
    /// Per-source rate limiting, off when `None` (chronyd's default).
    pub ratelimit: Option<RateLimitConfig>,
    /// Sources the rate limiter remembers per worker.
    pub ratelimit_sources: usize,
    /// Interleaved mode's table, shared by the workers; `None` answers every request in
    /// basic mode (an I/O path without transmit stamps).
    pub interleaved: Option<Arc<Interleave>>,
}

/// An NTP server for the engine: one per worker.
pub struct NtpHandler {
    live: Arc<LiveState>,
    generation: u64,
    state: ServerState,
    precision: i8,
    /// Bits of a timestamp below the precision, randomised in every response.
    fuzz_mask: u64,
    /// The least poll suggested to clients: the rate limit's interval.
    min_poll: i8,
    limiter: Option<RateLimiter>,
    interleaved: Option<Arc<Interleave>>,
    rng: firehose_ntpwire::XorShift64,
    stats: NtpStats,
}

impl NtpHandler {
    /// A handler announcing whatever `live` publishes.
    pub fn new(live: Arc<LiveState>, opts: &NtpOptions) -> Self {
        let (generation, state) = live.get();
        let below = (32 + i32::from(opts.precision)).clamp(0, 32) as u32;
        NtpHandler {
            live,
            generation,
            state: *state,
            precision: opts.precision,
            fuzz_mask: if below == 0 { 0 } else { (1u64 << below) - 1 },
            min_poll: opts.ratelimit.map_or(i8::MIN, |r| r.interval),
            limiter: opts
                .ratelimit
                .map(|r| RateLimiter::new(r, opts.ratelimit_sources)),
            interleaved: opts.interleaved.clone(),
            rng: firehose_ntpwire::XorShift64::new(
                hashbrown::DefaultHashBuilder::default().hash_one(realtime_ns()),
            ),
            stats: NtpStats::new(&super::counters::NAMES),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &NtpStats {
        &self.stats
    }

    /// Sources the rate limiter forgot to make room, if it runs.
    pub fn ratelimit_evictions(&self) -> Option<u64> {
        self.limiter.as_ref().map(|l| l.evictions)
    }

    #[inline]
    fn drop(&mut self, s: usize) -> Verdict {
        self.stats.bump(s);
        Verdict::Drop
    }

    /// `t` with the bits below the precision made random.
    #[inline]
    fn fuzz(&mut self, t: Timestamp) -> Timestamp {
        Timestamp((t.0 & !self.fuzz_mask) | (self.rng.next_u64() & self.fuzz_mask))
    }

    fn respond(&mut self, req: &mut Request<'_>) -> Verdict {
        // Read first, counted only for a request answered.
        let (rx_ns, rx_from) = match req.rx_time_ns() {
            Some(t) => (t, slot::RX_KERNEL),
            None => (realtime_ns(), slot::RX_DAEMON),
        };
        let peer = req.peer().addr();
        let (buf, len, _) = req.parts();
        // Control and private messages by their first byte, whatever their length (an ntpq
        // request is 12 bytes): counted as what they are, never parsed further.
        match buf[..len].first().map(|b| b & 7) {
            Some(mode::CONTROL) => return self.drop(slot::DROPPED_CONTROL),
            Some(mode::PRIVATE) => return self.drop(slot::DROPPED_PRIVATE),
            _ => {}
        }
        let Ok(p) = parse(&buf[..len]) else {
            return self.drop(slot::DROPPED_MALFORMED);
        };
        let rq = p.header;
        let (reply_mode, kind) = match rq.mode {
            mode::CLIENT => (mode::SERVER, slot::CLIENT),
            mode::SYMMETRIC_ACTIVE => (mode::SYMMETRIC_PASSIVE, slot::SYMMETRIC),
            // NTPv1 had no mode: a request from a port other than 123 is a client's.
            mode::RESERVED if rq.version == 1 && peer.is_some_and(|a| a.port() != 123) => {
                (mode::SERVER, slot::CLIENT)
            }
            _ => return self.drop(slot::DROPPED_MODE),
        };
        // As chronyd: the rate limit counts every request of an answerable mode, then
        // authentication decides.
        let limit = match (&mut self.limiter, peer) {
            (Some(l), Some(a)) => {
                let limit = l.check(a.ip(), rx_ns);
                self.stats.set(slot::RATELIMIT_EVICTIONS, l.evictions);
                limit
            }
            _ => Limit::Pass,
        };
        match p.auth {
            Auth::None => {}
            Auth::Nts => return self.drop(slot::DROPPED_NTS),
            Auth::Symmetric { .. } | Auth::CryptoNak | Auth::MsSntp => {
                return self.drop(slot::DROPPED_AUTH)
            }
        }
        match limit {
            Limit::Pass => {}
            Limit::Leak => self.stats.bump(slot::RATELIMIT_LEAKED),
            Limit::Kod => self.stats.bump(slot::KOD_RATE),
            Limit::Drop => return self.drop(slot::RATELIMIT_DROPPED),
        }
        if self.live.generation() != self.generation {
            let (g, s) = self.live.get();
            (self.generation, self.state) = (g, *s);
        }
        let st = self.state;
        let (leap, stratum, refid) = if limit == Limit::Kod {
            (Leap::Unsynchronised, 0, kod::RATE.0)
        } else {
            (st.leap, st.stratum, st.refid.0)
        };
        if leap == Leap::Unsynchronised && limit != Limit::Kod {
            self.stats.bump(slot::UNSYNCHRONISED);
        }
        let reference = if st.reference_ns == 0 {
            Timestamp::ZERO
        } else {
            self.fuzz(Timestamp::from_unix_ns(st.reference_ns))
        };
        // Interleaved mode, asked for (see the module documentation) and found or not.
        let asks = self.interleaved.is_some()
            && limit != Limit::Kod
            && rq.version == 4
            && rq.origin.0 & 1 == 1
            && rq.receive != rq.transmit;
        let earlier = match &self.interleaved {
            Some(t) if asks => t.take(rq.origin.0),
            _ => None,
        };
        let origin = if earlier.is_some() {
            rq.receive
        } else {
            rq.transmit
        };
        // Never a receive timestamp equal to the origin, or to the one the client last
        // had from us (its interleaved origin).
        let mut receive = Timestamp(self.fuzz(Timestamp::from_unix_ns(rx_ns)).0 | 1);
        while receive == origin || (asks && receive == rq.origin) {
            receive = Timestamp(receive.0.wrapping_add(2));
        }
        let mut h = Header {
            leap,
            version: rq.version.min(4),
            mode: reply_mode,
            stratum,
            poll: rq.poll.max(self.min_poll),
            precision: self.precision,
            root_delay: st.root_delay,
            root_dispersion: st.root_dispersion,
            refid,
            reference,
            origin,
            receive,
            transmit: Timestamp::ZERO,
        };
        // The transmit timestamp last, as late as this path allows; in interleaved mode,
        // when the earlier response left.
        let tx_ns = earlier.map_or_else(realtime_ns, |e| e.tx_ns);
        let mut transmit = Timestamp(self.fuzz(Timestamp::from_unix_ns(tx_ns)).0 & !1);
        if transmit == origin {
            transmit = Timestamp(transmit.0.wrapping_add(2));
        }
        h.transmit = transmit;
        h.write(buf);
        if let (true, Some(t)) = (asks, &self.interleaved) {
            // Remembered with the clock read after writing (chronyd reads it again just
            // before its send), until the kernel says when it left.
            let sent = Sent {
                tx_ns: realtime_ns(),
                kernel: false,
            };
            let saved = t.save(receive.0, [origin.0, rq.origin.0], sent);
            if saved.rx != receive.0 {
                // Another response holds this receive timestamp: carry the key saved.
                Timestamp(saved.rx).write(&mut buf[32..40]);
            }
            if saved.evicted {
                self.stats.bump(slot::INTERLEAVED_EVICTIONS);
            }
            req.want_tx_stamp(saved.rx);
        }
        self.stats.bump(rx_from);
        match earlier {
            Some(e) => {
                self.stats.bump(slot::INTERLEAVED);
                self.stats.bump(if e.kernel {
                    slot::TX_KERNEL
                } else {
                    slot::TX_DAEMON
                });
            }
            None => {
                if asks {
                    self.stats.bump(slot::INTERLEAVED_MISSED);
                }
                self.stats.bump(slot::TX_DAEMON);
            }
        }
        if limit != Limit::Kod {
            self.stats.bump(kind);
        }
        Verdict::Reply(HEADER_LEN)
    }
}

impl Handler for NtpHandler {
    fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
        self.respond(req)
    }

    fn transmitted(&mut self, tag: u64, tx_time_ns: u64) {
        if let Some(t) = &self.interleaved {
            t.transmitted(tag, tx_time_ns);
        }
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        self.stats.named()
    }
}
