//! Per-source response rate limiting as chrony's `ratelimit` directive does it.
//!
//! Each source address has a token bucket: a response costs one `interval` (2^interval
//! seconds) of credit, credit accrues with time up to `burst` responses' worth. A request
//! finding too little credit is answered anyway with probability 2^-leak (so a spoofed
//! flood cannot silence the real owner of an address), else sent a Kiss-o'-Death RATE with
//! probability 2^-kod (kod 0: never), else dropped. chrony also notices clients that poll
//! faster when they get no answer (the request rate after a drop more than twice the rate
//! after an answer) and then inverts the leak, answering most requests: sending them
//! nothing only makes more traffic. All of this is kept here the same way, per worker, in
//! a fixed table (no allocation per request) that forgets the least recently seen source of
//! a full set, as chrony's client log does.

use std::hash::BuildHasher;
use std::net::IpAddr;

/// The limits, in chrony's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitConfig {
    /// log2 of the least mean interval between responses to one source, in seconds
    /// (chrony: -19 to 12, default 3).
    pub interval: i8,
    /// Responses a source may get back to back (chrony: 1 to 255, default 8).
    pub burst: u8,
    /// log2 of the inverse of the rate at which limited requests are answered anyway
    /// (chrony: 1 to 4, default 2: one in four).
    pub leak: u8,
    /// log2 of the inverse of the rate at which limited requests get a KoD RATE, among
    /// those not leaked (chrony: 0 to 4; 0 sends none).
    pub kod: u8,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            interval: 3,
            burst: 8,
            leak: 2,
            kod: 0,
        }
    }
}

impl RateLimitConfig {
    /// Checks the ranges chrony accepts; the error names the setting and its range.
    pub fn check(&self) -> Result<(), String> {
        if !(-19..=12).contains(&self.interval) {
            return Err(format!(
                "rate limit interval {} is out of range: -19 (2^-19 s) to 12 (4096 s)",
                self.interval
            ));
        }
        if self.burst == 0 {
            return Err("rate limit burst must be 1 to 255".into());
        }
        if !(1..=4).contains(&self.leak) {
            return Err(format!(
                "rate limit leak {} is out of range: 1 (one in two) to 4 (one in 16)",
                self.leak
            ));
        }
        if self.kod > 4 {
            return Err(format!(
                "rate limit kod {} is out of range: 0 (none) to 4 (one in 16)",
                self.kod
            ));
        }
        Ok(())
    }

    /// One response's cost in ns.
    fn interval_ns(&self) -> u64 {
        if self.interval >= 0 {
            1_000_000_000u64 << self.interval
        } else {
            (1_000_000_000u64 >> -self.interval).max(1)
        }
    }
}

/// What to do with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Within the limit.
    Pass,
    /// Over the limit, answered anyway (the leak, or a client that polls faster unanswered).
    Leak,
    /// Over the limit: send a Kiss-o'-Death RATE.
    Kod,
    /// Over the limit: send nothing.
    Drop,
}

/// Sources per set; a full set forgets its least recently seen source.
const WAYS: usize = 16;
/// Log2 intervals are kept in quarter octaves, as chrony's RATE_SCALE.
const SCALE: i16 = 4;
/// An interval estimate not yet known.
const UNKNOWN: i16 = i16::MIN;

#[derive(Debug, Clone, Copy, Default)]
struct Record {
    key: u128,
    used: bool,
    last_ns: u64,
    credit_ns: u64,
    /// Estimated log2 interval (x4) between requests after an answered one, and after a
    /// dropped one.
    iv: i16,
    iv_after_drop: i16,
    dropped: bool,
}

/// One worker's rate limiter.
pub struct RateLimiter {
    cfg: RateLimitConfig,
    cost_ns: u64,
    cap_ns: u64,
    sets: Vec<[Record; WAYS]>,
    hasher: hashbrown::DefaultHashBuilder,
    rng: firehose_ntpwire::XorShift64,
    /// Sources forgotten to make room (the table is too small for the clients seen).
    pub evictions: u64,
}

impl RateLimiter {
    /// A limiter remembering about `sources` addresses (rounded up to a power of two
    /// times the set size).
    pub fn new(cfg: RateLimitConfig, sources: usize) -> Self {
        let sets = sources.div_ceil(WAYS).max(1).next_power_of_two();
        let cost_ns = cfg.interval_ns();
        let hasher = hashbrown::DefaultHashBuilder::default();
        RateLimiter {
            cfg,
            cost_ns,
            cap_ns: cost_ns.saturating_mul(u64::from(cfg.burst)),
            sets: vec![[Record::default(); WAYS]; sets],
            rng: firehose_ntpwire::XorShift64::new(hasher.hash_one(0x5eed_u64)),
            hasher,
            evictions: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RateLimitConfig {
        &self.cfg
    }

    /// Sources the table can hold.
    pub fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    /// Decides about one request from `ip` arriving at `now_ns` (any clock that does not
    /// run backwards much: a step back only stops credit accruing until it catches up).
    pub fn check(&mut self, ip: IpAddr, now_ns: u64) -> Limit {
        let key = match ip {
            IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
            IpAddr::V6(v6) => u128::from(v6),
        };
        let (s, w) = self.touch(key, now_ns);
        let r = self.sets[s][w];
        if r.credit_ns >= self.cost_ns {
            let r = &mut self.sets[s][w];
            r.credit_ns -= self.cost_ns;
            r.dropped = false;
            return Limit::Pass;
        }
        // Requests coming more than twice as often once unanswered: answer most of them.
        let inverted =
            r.iv_after_drop != UNKNOWN && r.iv != UNKNOWN && r.iv_after_drop < r.iv - SCALE;
        let leaked = self.one_in(self.cfg.leak) != inverted;
        let out = if leaked {
            Limit::Leak
        } else if self.cfg.kod > 0 && self.one_in(self.cfg.kod) {
            Limit::Kod
        } else {
            Limit::Drop
        };
        let r = &mut self.sets[s][w];
        if out == Limit::Leak {
            r.credit_ns = 0;
        }
        // A KoD is an answer: the client's next interval counts as after an answer.
        r.dropped = out == Limit::Drop;
        out
    }

    /// True with probability 2^-bits (the leak must be unpredictable to a spoofer).
    fn one_in(&mut self, bits: u8) -> bool {
        self.rng.one_in(bits)
    }

    fn set_of(&self, key: u128) -> usize {
        (self.hasher.hash_one(key) as usize) & (self.sets.len() - 1)
    }

    /// The (set, way) of the source's record, credited for the time since its last request,
    /// with its interval estimates updated; a new source starts with a full bucket.
    fn touch(&mut self, key: u128, now_ns: u64) -> (usize, usize) {
        let s = self.set_of(key);
        let cap = self.cap_ns;
        let set = &mut self.sets[s];
        let Some(w) = set.iter().position(|r| r.used && r.key == key) else {
            let w = match set.iter().position(|r| !r.used) {
                Some(w) => w,
                None => {
                    self.evictions += 1;
                    (0..WAYS).min_by_key(|&i| set[i].last_ns).unwrap_or(0)
                }
            };
            set[w] = Record {
                key,
                used: true,
                last_ns: now_ns,
                credit_ns: cap,
                iv: UNKNOWN,
                iv_after_drop: UNKNOWN,
                dropped: false,
            };
            return (s, w);
        };
        let r = &mut set[w];
        if now_ns >= r.last_ns {
            let elapsed = now_ns - r.last_ns;
            r.credit_ns = r.credit_ns.saturating_add(elapsed).min(cap);
            let est = if r.dropped {
                &mut r.iv_after_drop
            } else {
                &mut r.iv
            };
            update_interval(est, log2_x4(elapsed));
            r.last_ns = now_ns;
        }
        (s, w)
    }
}

/// log2 of `ns` in quarter octaves (0 for 0).
fn log2_x4(ns: u64) -> i16 {
    if ns == 0 {
        return 0;
    }
    let whole = 63 - ns.leading_zeros() as i16;
    // The two bits below the leading one pick the quarter.
    let frac = if whole >= 2 {
        ((ns >> (whole - 2)) & 3) as i16
    } else {
        0
    };
    whole * SCALE + frac
}

/// chrony's rough moving average: an estimate moves one quarter octave towards a shorter
/// interval at a time, but halfway (at once, if far) towards a longer one.
fn update_interval(est: &mut i16, sample: i16) {
    if *est == UNKNOWN {
        *est = sample;
    } else if sample < *est {
        *est -= 1;
    } else if sample > *est {
        *est = if sample - *est > SCALE * 5 / 2 {
            sample - SCALE * 5 / 2
        } else {
            (*est + sample + 1) / 2
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn limiter(interval: i8, burst: u8, leak: u8, kod: u8) -> RateLimiter {
        let cfg = RateLimitConfig {
            interval,
            burst,
            leak,
            kod,
        };
        cfg.check().unwrap();
        RateLimiter::new(cfg, 64)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_burst_passes_then_the_interval_rules() {
        let mut l = limiter(0, 4, 4, 0);
        let a = ip("192.0.2.1");
        let t0 = 1_000 * S;
        for k in 0..4 {
            assert_eq!(l.check(a, t0 + k), Limit::Pass, "burst {k}");
        }
        // The fifth back to back is over; most are dropped (leak 4: one in 16 passes).
        let over: Vec<Limit> = (0..64).map(|k| l.check(a, t0 + 10 + k)).collect();
        assert!(
            over.iter().filter(|&&x| x == Limit::Drop).count() > 40,
            "{over:?}"
        );
        assert!(!over.contains(&Limit::Kod), "kod 0 sends none");
        // A second later one response's worth of credit has accrued.
        assert_eq!(l.check(a, t0 + S + 100), Limit::Pass);
        // Another source is untouched.
        assert_eq!(l.check(ip("2001:db8::1"), t0), Limit::Pass);
    }

    #[test]
    fn kiss_of_death_replaces_some_drops() {
        let mut l = limiter(3, 1, 4, 1);
        let a = ip("198.51.100.7");
        assert_eq!(l.check(a, 10 * S), Limit::Pass);
        let over: Vec<Limit> = (1..=400).map(|k| l.check(a, 10 * S + k)).collect();
        let kod = over.iter().filter(|&&x| x == Limit::Kod).count();
        let drop = over.iter().filter(|&&x| x == Limit::Drop).count();
        // kod 1: about half of what is not leaked.
        assert!(kod > 100 && drop > 100, "kod {kod} drop {drop}");
    }

    #[test]
    fn leak_one_in_two_answers_about_half() {
        let mut l = limiter(6, 1, 1, 0);
        let a = ip("203.0.113.5");
        l.check(a, S);
        let leaked = (1..=1000)
            .filter(|k| l.check(a, S + k * 1000) == Limit::Leak)
            .count();
        assert!((350..650).contains(&leaked), "{leaked}");
    }

    #[test]
    fn a_full_table_forgets_the_oldest_source() {
        let mut l = RateLimiter::new(
            RateLimitConfig {
                interval: 10,
                burst: 1,
                leak: 4,
                kod: 0,
            },
            1,
        );
        assert_eq!(l.capacity(), WAYS);
        for k in 0..=WAYS as u32 {
            let a = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + k));
            assert_eq!(l.check(a, S + u64::from(k)), Limit::Pass);
        }
        assert_eq!(l.evictions, 1);
        // 10.0.0.0 was forgotten: it starts again with a full bucket.
        assert_eq!(l.check(ip("10.0.0.0"), 2 * S), Limit::Pass);
    }

    #[test]
    fn quarter_octaves() {
        assert_eq!(log2_x4(1), 0);
        assert_eq!(log2_x4(4), 8);
        assert_eq!(log2_x4(6), 10);
        assert_eq!(log2_x4(1 << 30), 120);
        let mut e = UNKNOWN;
        update_interval(&mut e, 100);
        assert_eq!(e, 100);
        update_interval(&mut e, 80);
        assert_eq!(e, 99, "towards shorter one step at a time");
        update_interval(&mut e, 120);
        assert_eq!(e, 110, "towards longer by at most 2.5 octaves behind");
    }

    #[test]
    fn ranges_are_chrony_s() {
        for bad in [
            RateLimitConfig {
                interval: 13,
                ..Default::default()
            },
            RateLimitConfig {
                interval: -20,
                ..Default::default()
            },
            RateLimitConfig {
                burst: 0,
                ..Default::default()
            },
            RateLimitConfig {
                leak: 0,
                ..Default::default()
            },
            RateLimitConfig {
                leak: 5,
                ..Default::default()
            },
            RateLimitConfig {
                kod: 5,
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert_eq!(RateLimitConfig::default().interval_ns(), 8 * S);
        let fine = RateLimitConfig {
            interval: -19,
            ..Default::default()
        };
        assert_eq!(fine.interval_ns(), 1907);
    }
}
