//! Response rate limiting, as Knot and NSD do it: an authoritative server that answers
//! spoofed queries at full speed is a reflection amplifier.
//!
//! Responses are counted per second in buckets keyed by the client's network (/24 for
//! IPv4, /56 for IPv6), the kind of response, and the name it is about (the query
//! name; the zone for NXDOMAIN, so random names do not each get a bucket). Past the
//! rate, responses are dropped, except every `slip`-th which goes out as a bare TC=1
//! answer, so a real client behind a spoofed network retries over TCP (which is never
//! limited). Each worker keeps its own table (no sharing, no locks) and allows its
//! share of the rate.

use super::db::NameHasher;
use std::hash::Hasher;
use std::net::IpAddr;
use std::time::Instant;

/// Buckets per worker (a power of two). A collision only merges two keys' counts.
const BUCKETS: usize = 1 << 14;

/// Kinds of responses, counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    key: u64,
    second: u32,
    count: u32,
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
    table: Box<[Bucket]>,
    start: Instant,
    limited: u32,
    pub dropped: u64,
    pub slipped: u64,
}

impl Rrl {
    pub fn new(cfg: RrlConfig) -> Self {
        Rrl {
            cfg,
            table: vec![Bucket::default(); BUCKETS].into_boxed_slice(),
            start: Instant::now(),
            limited: 0,
            dropped: 0,
            slipped: 0,
        }
    }

    /// Counts a response of `class` about lower-case wire name `name` to `ip`.
    pub fn check(&mut self, ip: IpAddr, class: Class, name: &[u8]) -> Decision {
        let second = self.start.elapsed().as_secs() as u32;
        self.check_at(ip, class, name, second)
    }

    /// [`Rrl::check`] at a given second since start (for tests).
    pub fn check_at(&mut self, ip: IpAddr, class: Class, name: &[u8], second: u32) -> Decision {
        let mut h = NameHasher::default();
        match ip {
            IpAddr::V4(a) => h.write(&a.octets()[..3]),
            IpAddr::V6(a) => h.write(&a.octets()[..7]),
        }
        h.write(&[class as u8]);
        h.write(name);
        let key = h.finish() | 1;
        let b = &mut self.table[key as usize & (BUCKETS - 1)];
        if b.key != key || b.second != second {
            *b = Bucket {
                key,
                second,
                count: 0,
            };
        }
        b.count = b.count.saturating_add(1);
        if b.count <= self.cfg.rate {
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
    }
}
