//! NTP client requests (mode 3) with random transmit timestamps, as chronyd's client sends
//! them: the low 16 bits of the transmit timestamp carry the request id, the rest is random,
//! and the server echoes all 64 bits as the response's origin.
//!
//! Every response is validated before it completes its request: mode 4 (2 for a symmetric
//! request is never sent), origin equal to the transmit timestamp sent under that id, a
//! stratum of 1 to 15 (0 is a Kiss-o'-Death, counted by its code), leap not 3, and receive
//! and transmit timestamps present and in order. A response failing a check is counted by
//! reason ([`Workload::invalid`]) and leaves its request to be lost.
//!
//! Each valid response gives the exchange's offset, delay and the server's hold time
//! (transmit - receive), kept as histograms. The client's transmit time is CLOCK_REALTIME
//! read when the request is written (just before its batch is sent); its receive time is
//! the kernel's arrival stamp where the socket gives one (open loop, not spinning), else the
//! clock read when the response is matched (just after its batch is read). The generator's
//! batching adds to the delay, and any asymmetry of it to the offset, but not to the hold
//! time, which is the server's.
//!
//! With `interleaved` (chronyd's `xleave`), every request is in interleaved form: version
//! 4, its origin the receive timestamp of an earlier answer this thread has (one each,
//! oldest first; a random odd value before the first), its receive timestamp carrying the
//! request id too. An answer whose origin is that receive timestamp is interleaved: its
//! transmit timestamp is when the earlier answer left the server (the kernel's stamp), so
//! it completes the earlier exchange, measured again as `interleaved_offset`,
//! `interleaved_delay` and `interleaved_hold`; it must be no earlier than the transmit
//! timestamp that earlier answer carried (the server's clock read before sending it), and
//! no later than that answer reached us (else the server paired it with another's). An
//! answer with the transmit timestamp as origin is basic (the server did not remember the
//! earlier answer) and measured as any basic answer.

use crate::measure::SignedHistogram;
use crate::workload::Workload;
use firehose_ntpwire::packet::mode;
use firehose_ntpwire::{client_request, kod, parse, Exchange, Leap, RefId, Timestamp, XorShift64};
use firehose_sys::clock::realtime_ns;

/// How the generator builds requests.
#[derive(Debug, Clone, Copy)]
pub struct NtpLoad {
    /// NTP version of the requests (1 to 4).
    pub version: u8,
    /// Exchanges whose request was due before this many ns into the run (the warm-up)
    /// are validated but not measured.
    pub warmup_ns: u64,
    /// Requests in interleaved form (version 4 only; see the module documentation).
    pub interleaved: bool,
}

/// A completed exchange an interleaved request may ask about.
#[derive(Debug, Clone, Copy, Default)]
struct Done {
    t1_unix_ns: u64,
    /// The server's receive timestamp (t2), which the next request sends as its origin.
    receive: Timestamp,
    /// The transmit timestamp the answer carried (zero when it was interleaved itself).
    transmit: Timestamp,
    t4_unix_ns: u64,
    measured: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    transmit: Timestamp,
    t1_unix_ns: u64,
    measured: bool,
    /// Interleaved form: the request's receive timestamp (an answer's origin when
    /// interleaved) and the exchange asked about, if any.
    xleave: Option<(Timestamp, Option<Done>)>,
}

/// Completed exchanges kept for interleaved requests to ask about; the oldest is dropped.
const DONE_KEPT: usize = 4096;
/// Slack for timestamps fuzzed below the server's precision.
const FUZZ_SLACK_NS: i64 = 1_000;

/// The names of the failed checks, in slot order.
pub const INVALID: [&str; 9] = [
    "malformed",
    "bad_origin",
    "bad_mode",
    "kod_rate",
    "kod_other",
    "bad_stratum",
    "unsynchronised",
    "bad_timestamps",
    "bad_version",
];
const MALFORMED: usize = 0;
const BAD_ORIGIN: usize = 1;
const BAD_MODE: usize = 2;
const KOD_RATE: usize = 3;
const KOD_OTHER: usize = 4;
const BAD_STRATUM: usize = 5;
const UNSYNCHRONISED: usize = 6;
const BAD_TIMESTAMPS: usize = 7;
const BAD_VERSION: usize = 8;

/// Bits of the transmit timestamp that carry the request id.
const ID_BITS: u32 = 16;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

/// One generator thread's NTP requests and what their answers measured.
#[derive(Debug, Clone)]
pub struct NtpWorkload {
    cfg: NtpLoad,
    rng: XorShift64,
    sent: Box<[Sent]>,
    invalid: [u64; INVALID.len()],
    offset: SignedHistogram,
    delay: SignedHistogram,
    hold: SignedHistogram,
    done: std::collections::VecDeque<Done>,
    x_offset: SignedHistogram,
    x_delay: SignedHistogram,
    x_hold: SignedHistogram,
}

impl NtpWorkload {
    /// A workload from `cfg`, its transmit timestamps drawn from a generator seeded with
    /// `seed` (distinct per thread).
    pub fn new(cfg: NtpLoad, seed: u64) -> Result<Self, String> {
        if !(1..=4).contains(&cfg.version) {
            return Err(format!("NTP version {} is not 1 to 4", cfg.version));
        }
        if cfg.interleaved && cfg.version != 4 {
            return Err(format!(
                "interleaved mode is NTP version 4's; version {} was asked",
                cfg.version
            ));
        }
        Ok(NtpWorkload {
            cfg,
            rng: XorShift64::new(seed ^ 0x9E37_79B9_7F4A_7C15),
            sent: vec![Sent::default(); 1 << ID_BITS].into_boxed_slice(),
            invalid: [0; INVALID.len()],
            offset: SignedHistogram::new(),
            delay: SignedHistogram::new(),
            hold: SignedHistogram::new(),
            done: std::collections::VecDeque::new(),
            x_offset: SignedHistogram::new(),
            x_delay: SignedHistogram::new(),
            x_hold: SignedHistogram::new(),
        })
    }

    /// The same workload with its random sequence moved on by `k` (one per thread).
    pub fn reseed(&mut self, k: u64) {
        self.rng = XorShift64::new(self.rng.next_u64() ^ k.wrapping_mul(0xD1B5_4A32_D192_ED03));
    }

    /// A completed exchange, for a later interleaved request to ask about.
    fn keep(&mut self, sent: Sent, receive: Timestamp, transmit: Timestamp, t4: u64) {
        if self.done.len() == DONE_KEPT {
            self.done.pop_front();
        }
        self.done.push_back(Done {
            t1_unix_ns: sent.t1_unix_ns,
            receive,
            transmit,
            t4_unix_ns: t4,
            measured: sent.measured,
        });
    }

    fn fail(&mut self, slot: usize) -> bool {
        self.invalid[slot] += 1;
        false
    }

    /// The measured exchanges so far: offset, delay and hold time, in ns; and in
    /// interleaved mode the same from the interleaved answers.
    pub fn samples(&self) -> Vec<(&'static str, &SignedHistogram)> {
        let mut v = vec![
            ("offset", &self.offset),
            ("delay", &self.delay),
            ("hold", &self.hold),
        ];
        if self.cfg.interleaved {
            v.extend([
                ("interleaved_offset", &self.x_offset),
                ("interleaved_delay", &self.x_delay),
                ("interleaved_hold", &self.x_hold),
            ]);
        }
        v
    }

    /// An id-carrying random timestamp.
    fn random_with(&mut self, id: u64) -> Timestamp {
        Timestamp((self.rng.next_u64() & !ID_MASK) | (id & ID_MASK))
    }
}

impl Workload for NtpWorkload {
    fn id_bits(&self) -> u32 {
        ID_BITS
    }

    fn write_request(&mut self, id: u64, sent_ns: u64, buf: &mut [u8]) -> usize {
        let transmit = self.random_with(id);
        let n = client_request(buf, self.cfg.version, 6, transmit);
        let xleave = if self.cfg.interleaved {
            let prev = self.done.pop_front();
            // Before any answer, an odd origin of no answer: the server remembers its
            // answer all the same, so the next request can ask for it.
            let origin = prev.map_or(Timestamp(self.rng.next_u64() | 1), |d| d.receive);
            let mut receive = self.random_with(id);
            if receive == transmit {
                receive = Timestamp(receive.0 ^ (1 << 63));
            }
            origin.write(&mut buf[24..]);
            receive.write(&mut buf[32..]);
            Some((receive, prev))
        } else {
            None
        };
        self.sent[(id & ID_MASK) as usize] = Sent {
            transmit,
            t1_unix_ns: realtime_ns(),
            measured: sent_ns >= self.cfg.warmup_ns,
            xleave,
        };
        n
    }

    fn response_id(&mut self, resp: &[u8]) -> Option<(u64, u16)> {
        if resp.len() < firehose_ntpwire::HEADER_LEN {
            return None;
        }
        Some((Timestamp::read(&resp[24..]).0 & ID_MASK, 0))
    }

    fn matches(&mut self, id: u64, resp: &[u8]) -> bool {
        self.matches_at(id, resp, None)
    }

    fn matches_at(&mut self, id: u64, resp: &[u8], arrived_unix_ns: Option<u64>) -> bool {
        // The kernel's arrival stamp where the socket gives one (open loop), else now.
        let t4 = arrived_unix_ns.unwrap_or_else(realtime_ns);
        let sent = self.sent[(id & ID_MASK) as usize];
        let Ok(p) = parse(resp) else {
            return self.fail(MALFORMED);
        };
        let h = p.header;
        let earlier = match sent.xleave {
            _ if h.origin == sent.transmit => None,
            Some((receive, prev)) if h.origin == receive => Some(prev),
            _ => return self.fail(BAD_ORIGIN),
        };
        if h.mode != mode::SERVER {
            return self.fail(BAD_MODE);
        }
        if h.version != self.cfg.version {
            return self.fail(BAD_VERSION);
        }
        // A Kiss-o'-Death is stratum 0 with a code as its reference ID; chronyd's answer
        // while unsynchronised is stratum 0 too, with reference ID 0 and leap 3.
        let code = h.refid.to_be_bytes();
        if h.stratum == 0 && code[0].is_ascii_uppercase() {
            return self.fail(if RefId(h.refid) == kod::RATE {
                KOD_RATE
            } else {
                KOD_OTHER
            });
        }
        if h.leap == Leap::Unsynchronised {
            return self.fail(UNSYNCHRONISED);
        }
        if h.stratum == 0 {
            return self.fail(BAD_STRATUM);
        }
        if h.stratum > 15 {
            return self.fail(BAD_STRATUM);
        }
        if let Some(prev) = earlier {
            // Interleaved: the transmit timestamp completes the earlier exchange.
            let Some(prev) = prev else {
                // Nothing was asked about: the server answered interleaved at random.
                return self.fail(BAD_ORIGIN);
            };
            // It left after its request arrived, no earlier than the server's own reading
            // in it, and before it reached us.
            if h.receive.is_zero()
                || h.transmit.diff_ns(prev.receive) < 0
                || (!prev.transmit.is_zero() && h.transmit.diff_ns(prev.transmit) < -FUZZ_SLACK_NS)
                || h.transmit.diff_ns(Timestamp::from_unix_ns(prev.t4_unix_ns)) > FUZZ_SLACK_NS
            {
                return self.fail(BAD_TIMESTAMPS);
            }
            if prev.measured {
                let s = Exchange::new(prev.t1_unix_ns, prev.receive, h.transmit, prev.t4_unix_ns)
                    .sample();
                self.x_offset.record(s.offset_ns);
                self.x_delay.record(s.delay_ns);
                self.x_hold.record(s.hold_ns);
            }
            self.keep(sent, h.receive, Timestamp::ZERO, t4);
            return true;
        }
        if h.receive.is_zero() || h.transmit.is_zero() || h.transmit.diff_ns(h.receive) < 0 {
            return self.fail(BAD_TIMESTAMPS);
        }
        if self.cfg.interleaved {
            self.keep(sent, h.receive, h.transmit, t4);
        }
        if sent.measured {
            let s = Exchange::new(sent.t1_unix_ns, h.receive, h.transmit, t4).sample();
            self.offset.record(s.offset_ns);
            self.delay.record(s.delay_ns);
            self.hold.record(s.hold_ns);
        }
        true
    }

    fn invalid(&self) -> Vec<(&'static str, u64)> {
        INVALID.iter().copied().zip(self.invalid).collect()
    }

    fn measures(&self) -> Vec<(&'static str, SignedHistogram)> {
        self.samples()
            .iter()
            .map(|(n, h)| (*n, (*h).clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_ntpwire::{Header, Short};

    fn workload() -> NtpWorkload {
        NtpWorkload::new(
            NtpLoad {
                version: 4,
                warmup_ns: 0,
                interleaved: false,
            },
            7,
        )
        .unwrap()
    }

    /// A server `ahead_ns` ahead answering `req`, holding it 10 µs.
    fn answer(req: &[u8], ahead_ns: i64, edit: impl Fn(&mut Header)) -> Vec<u8> {
        let q = Header::read(req);
        let now = Timestamp::from_unix_ns(realtime_ns()).add_ns(ahead_ns);
        let mut h = Header {
            leap: Leap::None,
            version: q.version,
            mode: mode::SERVER,
            stratum: 2,
            poll: q.poll,
            precision: -24,
            root_delay: Short(0),
            root_dispersion: Short(0),
            refid: 0,
            reference: now,
            origin: q.transmit,
            receive: now,
            transmit: now.add_ns(10_000),
        };
        edit(&mut h);
        let mut b = vec![0u8; 48];
        h.write(&mut b);
        b
    }

    #[test]
    fn requests_carry_the_id_in_a_random_transmit_timestamp() {
        let mut w = workload();
        let (mut a, mut b) = ([0u8; 48], [0u8; 48]);
        assert_eq!(w.write_request(5, 0, &mut a), 48);
        w.write_request(5, 0, &mut b);
        let (ha, hb) = (Header::read(&a), Header::read(&b));
        assert_eq!((ha.mode, ha.version), (3, 4));
        assert_ne!(ha.transmit, hb.transmit, "random each time");
        assert_eq!(ha.transmit.0 & ID_MASK, 5);
        let resp = answer(&b, 0, |_| {});
        assert_eq!(w.response_id(&resp), Some((5, 0)));
        assert!(w.matches(5, &resp));
        // The first request's answer names an origin no longer outstanding.
        assert!(!w.matches(5, &answer(&a, 0, |_| {})));
        assert_eq!(w.invalid()[BAD_ORIGIN], ("bad_origin", 1));
    }

    #[test]
    fn offsets_delays_and_hold_times_are_measured() {
        let mut w = workload();
        let mut q = [0u8; 48];
        for id in 0..20 {
            w.write_request(id, 0, &mut q);
            assert!(w.matches(id, &answer(&q, 3_000_000, |_| {})));
        }
        let off = w.offset.summary_us();
        // 3 ms ahead, minus half of a tiny delay and the 10 µs hold's asymmetry.
        assert!((off.p50 - 3000.0).abs() < 500.0, "{off:?}");
        let hold = w.hold.summary_us();
        assert!((hold.p50 - 10.0).abs() < 0.1, "{hold:?}");
        assert_eq!(w.hold.len(), 20);
    }

    #[test]
    fn interleaved_answers_complete_the_earlier_exchange() {
        let mut w = NtpWorkload::new(
            NtpLoad {
                version: 4,
                warmup_ns: 0,
                interleaved: true,
            },
            3,
        )
        .unwrap();
        let mut q = [0u8; 48];
        // The first request asks about no answer of ours: an odd origin, a receive
        // timestamp with the id, apart from the transmit.
        w.write_request(0, 0, &mut q);
        let h0 = Header::read(&q);
        assert_eq!((h0.origin.0 & 1, h0.receive.0 & ID_MASK), (1, 0));
        assert_ne!(h0.receive, h0.transmit);
        // Written 20 µs in the past, so the server's times stay before the client's.
        let a0 = answer(&q, -20_000, |_| {});
        assert!(w.matches(0, &a0), "a basic answer");
        let a0 = Header::read(&a0);
        // The next asks about it; the answer carries when it left: 5 µs after its
        // transmit timestamp, so the interleaved delay is 5 µs less.
        w.write_request(1, 0, &mut q);
        let h1 = Header::read(&q);
        assert_eq!((h1.origin, h1.receive.0 & ID_MASK), (a0.receive, 1));
        let a1 = answer(&q, 0, |h| {
            h.origin = h1.receive;
            h.transmit = a0.transmit.add_ns(5_000);
        });
        assert_eq!(w.response_id(&a1), Some((1, 0)));
        assert!(w.matches(1, &a1), "an interleaved answer");
        assert_eq!((w.delay.len(), w.x_delay.len()), (1, 1));
        let (d, xd) = (w.delay.summary_us().p50, w.x_delay.summary_us().p50);
        assert!((d - xd - 5.0).abs() < 0.1, "{d} vs {xd}");
        // An interleaved answer saying the earlier answer left before its request arrived
        // is wrong.
        let a1_receive = Header::read(&a1).receive;
        w.write_request(2, 0, &mut q);
        let h2 = Header::read(&q);
        let a2 = answer(&q, 0, |h| {
            h.origin = h2.receive;
            h.transmit = a1_receive.add_ns(-1_000_000);
        });
        assert!(!w.matches(2, &a2));
        assert_eq!(w.invalid[BAD_TIMESTAMPS], 1);
        // Or that it left after it reached us (a stamp the server paired with another
        // answer).
        w.write_request(3, 0, &mut q);
        let a3 = answer(&q, 0, |_| {});
        assert!(w.matches(3, &a3), "a basic answer");
        w.write_request(4, 0, &mut q);
        let h4 = Header::read(&q);
        assert_eq!(h4.origin, Header::read(&a3).receive);
        let a4 = answer(&q, 0, |h| {
            h.origin = h4.receive;
            h.transmit = Timestamp::from_unix_ns(realtime_ns() + 1_000_000);
        });
        assert!(!w.matches(4, &a4));
        assert_eq!(w.invalid[BAD_TIMESTAMPS], 2);
        assert!(NtpWorkload::new(
            NtpLoad {
                version: 3,
                warmup_ns: 0,
                interleaved: true,
            },
            1
        )
        .is_err());
        let names: Vec<&str> = w.samples().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names[3..],
            [
                "interleaved_offset",
                "interleaved_delay",
                "interleaved_hold"
            ]
        );
    }

    #[test]
    fn failed_checks_are_counted_by_reason() {
        let mut w = workload();
        let mut q = [0u8; 48];
        type Edit = fn(&mut Header);
        let cases: [(usize, Edit); 8] = [
            (BAD_MODE, |h| h.mode = 2),
            (KOD_RATE, |h| {
                (h.stratum, h.refid, h.leap) = (0, kod::RATE.0, Leap::Unsynchronised)
            }),
            (KOD_OTHER, |h| (h.stratum, h.refid) = (0, kod::DENY.0)),
            (BAD_STRATUM, |h| h.stratum = 16),
            (UNSYNCHRONISED, |h| h.leap = Leap::Unsynchronised),
            // chronyd's unsynchronised answer: stratum 0, reference ID 0, leap 3.
            (UNSYNCHRONISED, |h| {
                (h.stratum, h.leap) = (0, Leap::Unsynchronised)
            }),
            (BAD_TIMESTAMPS, |h| h.receive = Timestamp::ZERO),
            (BAD_VERSION, |h| h.version = 3),
        ];
        for (id, (slot, edit)) in cases.iter().enumerate() {
            w.write_request(id as u64, 0, &mut q);
            let before = w.invalid[*slot];
            assert!(
                !w.matches(id as u64, &answer(&q, 0, edit)),
                "{}",
                INVALID[*slot]
            );
            assert_eq!(w.invalid[*slot], before + 1, "{}", INVALID[*slot]);
        }
        w.write_request(9, 0, &mut q);
        assert!(!w.matches(9, &q[..47]));
        assert_eq!(w.invalid[MALFORMED], 1);
        assert_eq!(w.offset.len(), 0, "nothing invalid is measured");
    }

    #[test]
    fn the_warm_up_is_validated_but_not_measured() {
        let mut w = NtpWorkload::new(
            NtpLoad {
                version: 4,
                warmup_ns: 1_000,
                interleaved: false,
            },
            1,
        )
        .unwrap();
        let mut q = [0u8; 48];
        w.write_request(1, 999, &mut q);
        assert!(w.matches(1, &answer(&q, 0, |_| {})));
        w.write_request(2, 1_000, &mut q);
        assert!(w.matches(2, &answer(&q, 0, |_| {})));
        assert_eq!(w.hold.len(), 1);
        assert!(NtpWorkload::new(
            NtpLoad {
                version: 5,
                warmup_ns: 0,
                interleaved: false,
            },
            1
        )
        .is_err());
    }
}
