//! Response rate limiting, as Knot and BIND do it: an authoritative server that answers
//! spoofed queries at full speed is a reflection amplifier.
//!
//! Responses are counted per second in buckets keyed by the client's network (/24 for
//! IPv4, IPv4-mapped included, /56 for IPv6), the kind of response, and the name it is
//! about: the query name for an answer or NODATA at an existing name, but the zone for
//! NXDOMAIN, the wildcard for an answer it synthesized, the DNAME for a name below it,
//! and the delegation for a referral, so that random labels do not each get a bucket.
//! Past the rate, responses are dropped, except every `slip`-th which goes out as a
//! bare TC=1 answer, so a real client behind a spoofed network retries over TCP (which
//! is never limited). Each worker keeps its own table (no sharing, no locks) and allows
//! its share of the rate.
//!
//! The table is hashed with SipHash under a random key, so a client cannot aim keys at
//! one place, and it is set-associative: a key only takes the slot of a key whose count
//! is from an earlier second (which no longer counts). When every slot of its set holds
//! a count of this second, the new key shares the set's overflow count: counts merge, so
//! an overflow limits more, never less, and no key can reset another's count.

use super::prefix::Net;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::time::Instant;

/// Keys per set, and sets per worker (a power of two): 32,768 keys per second.
const WAYS: usize = 8;
const SETS: usize = 1 << 12;
/// The client network: IPv4 /24, IPv6 /56 (as Knot and BIND).
const NET_V4: u8 = 24;
const NET_V6: u8 = 56;

/// Kinds of responses, counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Class {
    Positive = 0,
    NxDomain = 1,
    NoData = 2,
    Referral = 3,
    Error = 4,
}

/// What to do with a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Send,
    /// Send a bare TC=1 answer instead.
    Slip,
    Drop,
}

/// A count of one second; key 0 is a free slot.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    key: u64,
    second: u32,
    count: u32,
}

impl Slot {
    /// Counts one more in `second`, starting over if the count is from another.
    fn bump(&mut self, second: u32) -> u32 {
        if self.second != second {
            (self.second, self.count) = (second, 0);
        }
        self.count = self.count.saturating_add(1);
        self.count
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Set {
    slots: [Slot; WAYS],
    /// Shared by the keys that found every slot busy this second.
    overflow: Slot,
}

/// Settings of the limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrlConfig {
    /// Responses per second per bucket, for this worker.
    pub rate: u32,
    /// Every `slip`-th limited response goes out truncated (0: all are dropped).
    pub slip: u32,
}

/// One worker's limiter.
#[derive(Debug, Clone)]
pub struct Rrl {
    cfg: RrlConfig,
    sets: Box<[Set]>,
    /// The hash key, random per limiter.
    seed: RandomState,
    start: Instant,
    limited: u32,
    pub dropped: u64,
    pub slipped: u64,
    /// Keys that found their set full and shared its overflow count.
    pub overflowed: u64,
}

impl Rrl {
    pub fn new(cfg: RrlConfig) -> Self {
        Rrl {
            cfg,
            sets: vec![Set::default(); SETS].into_boxed_slice(),
            seed: RandomState::new(),
            start: Instant::now(),
            limited: 0,
            dropped: 0,
            slipped: 0,
            overflowed: 0,
        }
    }

    /// Counts a response of `class` about lower-case wire name `name` to `ip`.
    pub fn check(&mut self, ip: IpAddr, class: Class, name: &[u8]) -> Decision {
        let second = self.start.elapsed().as_secs() as u32;
        self.check_at(ip, class, name, second)
    }

    /// The key of a response: never 0 (a free slot).
    fn key(&self, ip: IpAddr, class: Class, name: &[u8]) -> u64 {
        self.seed
            .hash_one((Net::of(ip, NET_V4, NET_V6), class, name))
            .max(1)
    }

    /// [`Rrl::check`] at a given second since start (for tests).
    pub fn check_at(&mut self, ip: IpAddr, class: Class, name: &[u8], second: u32) -> Decision {
        let key = self.key(ip, class, name);
        let set = &mut self.sets[(key >> 32) as usize & (SETS - 1)];
        let count = match set.slots.iter().position(|s| s.key == key) {
            Some(i) => set.slots[i].bump(second),
            // A free slot, or one whose count is from an earlier second.
            None => match set
                .slots
                .iter()
                .position(|s| s.key == 0 || s.second != second)
            {
                Some(i) => {
                    set.slots[i] = Slot {
                        key,
                        second,
                        count: 0,
                    };
                    set.slots[i].bump(second)
                }
                None => {
                    self.overflowed += 1;
                    set.overflow.bump(second)
                }
            },
        };
        if count <= self.cfg.rate {
            return Decision::Send;
        }
        self.limited = self.limited.wrapping_add(1);
        if self.cfg.slip > 0 && self.limited.is_multiple_of(self.cfg.slip) {
            self.slipped += 1;
            Decision::Slip
        } else {
            self.dropped += 1;
            Decision::Drop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_per_network_class_and_second_and_slips() {
        let mut r = Rrl::new(RrlConfig { rate: 3, slip: 2 });
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let same_net: IpAddr = "192.0.2.200".parse().unwrap();
        let other: IpAddr = "198.51.100.1".parse().unwrap();
        let n = b"\x01a\x00";
        let mut got = Vec::new();
        for i in 0..7 {
            let ip = if i % 2 == 0 { a } else { same_net };
            got.push(r.check_at(ip, Class::Positive, n, 5));
        }
        use Decision::*;
        assert_eq!(got, [Send, Send, Send, Drop, Slip, Drop, Slip]);
        assert_eq!(r.check_at(other, Class::Positive, n, 5), Send);
        assert_eq!(r.check_at(a, Class::NxDomain, n, 5), Send);
        assert_eq!(r.check_at(a, Class::Positive, b"\x01b\x00", 5), Send);
        // A new second starts a new count.
        assert_eq!(r.check_at(a, Class::Positive, n, 6), Send);
        assert_eq!((r.dropped, r.slipped), (2, 2));
        let v6: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let v6_same56: IpAddr = "2001:db8:0:ff::2".parse().unwrap();
        let mut r = Rrl::new(RrlConfig { rate: 1, slip: 0 });
        assert_eq!(r.check_at(v6, Class::Error, b"", 0), Send);
        assert_eq!(r.check_at(v6_same56, Class::Error, b"", 0), Drop);
        // An IPv4 client seen through a dual-stack socket is its IPv4 /24.
        let mapped: IpAddr = "::ffff:192.0.2.9".parse().unwrap();
        assert_eq!(r.check_at(a, Class::Error, b"", 0), Send);
        assert_eq!(r.check_at(mapped, Class::Error, b"", 0), Drop);
        let other_mapped: IpAddr = "::ffff:192.0.3.9".parse().unwrap();
        assert_eq!(r.check_at(other_mapped, Class::Error, b"", 0), Send);
    }

    #[test]
    fn no_key_resets_another_keys_count() {
        let mut r = Rrl::new(RrlConfig { rate: 3, slip: 0 });
        let victim: IpAddr = "192.0.2.1".parse().unwrap();
        let name = b"\x03www\x07example\x00";
        for _ in 0..3 {
            assert_eq!(r.check_at(victim, Class::Positive, name, 0), Decision::Send);
        }
        // Ten times the table's keys in the same second, from other networks.
        for i in 0..(10 * SETS * WAYS) as u32 {
            let ip = IpAddr::from((i << 8).to_be_bytes());
            r.check_at(ip, Class::Positive, name, 0);
        }
        assert!(r.overflowed > 0, "the table overflowed");
        assert_eq!(
            r.check_at(victim, Class::Positive, name, 0),
            Decision::Drop,
            "the victim's count survived"
        );
        // Next second, the stale counts give way.
        let before = r.overflowed;
        assert_eq!(r.check_at(victim, Class::Positive, name, 1), Decision::Send);
        let fresh: IpAddr = "203.0.113.1".parse().unwrap();
        assert_eq!(r.check_at(fresh, Class::Positive, name, 1), Decision::Send);
        assert_eq!(r.overflowed, before);
    }

    #[test]
    fn the_hash_is_keyed_per_limiter() {
        let cfg = RrlConfig { rate: 1, slip: 0 };
        let (a, b) = (Rrl::new(cfg), Rrl::new(cfg));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let differ = (0..16u8)
            .filter(|&i| {
                a.key(ip, Class::Positive, &[1, i, 0]) != b.key(ip, Class::Positive, &[1, i, 0])
            })
            .count();
        assert_eq!(differ, 16, "two limiters hash alike");
    }
}
