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
}

#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    transmit: Timestamp,
    t1_unix_ns: u64,
    measured: bool,
}

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
}

impl NtpWorkload {
    /// A workload from `cfg`, its transmit timestamps drawn from a generator seeded with
    /// `seed` (distinct per thread).
    pub fn new(cfg: NtpLoad, seed: u64) -> Result<Self, String> {
        if !(1..=4).contains(&cfg.version) {
            return Err(format!("NTP version {} is not 1 to 4", cfg.version));
        }
        Ok(NtpWorkload {
            cfg,
            rng: XorShift64::new(seed ^ 0x9E37_79B9_7F4A_7C15),
            sent: vec![Sent::default(); 1 << ID_BITS].into_boxed_slice(),
            invalid: [0; INVALID.len()],
            offset: SignedHistogram::new(),
            delay: SignedHistogram::new(),
            hold: SignedHistogram::new(),
        })
    }

    /// The same workload with its random sequence moved on by `k` (one per thread).
    pub fn reseed(&mut self, k: u64) {
        self.rng = XorShift64::new(self.rng.next_u64() ^ k.wrapping_mul(0xD1B5_4A32_D192_ED03));
    }

    fn fail(&mut self, slot: usize) -> bool {
        self.invalid[slot] += 1;
        false
    }

    /// The measured exchanges so far: offset, delay and hold time, in ns.
    pub fn samples(&self) -> [(&'static str, &SignedHistogram); 3] {
        [
            ("offset", &self.offset),
            ("delay", &self.delay),
            ("hold", &self.hold),
        ]
    }
}

impl Workload for NtpWorkload {
    fn id_bits(&self) -> u32 {
        ID_BITS
    }

    fn write_request(&mut self, id: u64, sent_ns: u64, buf: &mut [u8]) -> usize {
        let transmit = Timestamp((self.rng.next_u64() & !ID_MASK) | (id & ID_MASK));
        let n = client_request(buf, self.cfg.version, 6, transmit);
        self.sent[(id & ID_MASK) as usize] = Sent {
            transmit,
            t1_unix_ns: realtime_ns(),
            measured: sent_ns >= self.cfg.warmup_ns,
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
        if h.origin != sent.transmit {
            return self.fail(BAD_ORIGIN);
        }
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
        if h.receive.is_zero() || h.transmit.is_zero() || h.transmit.diff_ns(h.receive) < 0 {
            return self.fail(BAD_TIMESTAMPS);
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
                warmup_ns: 0
            },
            1
        )
        .is_err());
    }
}
