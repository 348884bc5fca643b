//! NTP's two time formats: the 64-bit timestamp (32 bits of seconds since 1900, 32 bits of
//! fraction) and the 32-bit short format (16.16 seconds) of root delay and dispersion.
//!
//! Differences of timestamps are taken modulo 2^64 and read as signed, as RFC 5905 does, so
//! they are right across the era boundary of 2036 for any two times within 68 years.

/// Seconds from 1900-01-01 (NTP's epoch) to 1970-01-01 (Unix's).
pub const UNIX_TO_NTP_SECS: u64 = 2_208_988_800;
const NS_PER_SEC: u64 = 1_000_000_000;

/// A 64-bit NTP timestamp, as it is on the wire (big-endian when written).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The zero timestamp, which RFC 5905 reserves for "unknown".
    pub const ZERO: Timestamp = Timestamp(0);

    /// The timestamp of a Unix time in ns (CLOCK_REALTIME); seconds wrap into NTP era 1
    /// after 2036-02-07.
    #[inline]
    pub fn from_unix_ns(ns: u64) -> Self {
        let secs = (ns / NS_PER_SEC + UNIX_TO_NTP_SECS) & 0xFFFF_FFFF;
        let frac = ((ns % NS_PER_SEC) << 32) / NS_PER_SEC;
        Timestamp(secs << 32 | frac)
    }

    /// The Unix time in ns this timestamp stands for, taking the NTP era nearest to
    /// `near_unix_ns` (e.g. now).
    pub fn to_unix_ns(self, near_unix_ns: u64) -> i128 {
        i128::from(near_unix_ns) + i128::from(self.diff_ns(Timestamp::from_unix_ns(near_unix_ns)))
    }

    /// `self - earlier` in ns, modulo the era (correct within 68 years either way).
    #[inline]
    pub fn diff_ns(self, earlier: Timestamp) -> i64 {
        let d = self.0.wrapping_sub(earlier.0) as i64;
        ((i128::from(d) * i128::from(NS_PER_SEC)) >> 32) as i64
    }

    /// The timestamp `ns` later (negative: earlier), modulo the era.
    #[inline]
    pub fn add_ns(self, ns: i64) -> Timestamp {
        let d = (i128::from(ns) << 32) / i128::from(NS_PER_SEC);
        Timestamp(self.0.wrapping_add(d as u64))
    }

    /// Whole seconds since the era began.
    pub fn seconds(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The fraction of a second, in units of 2^-32 s.
    pub fn fraction(self) -> u32 {
        self.0 as u32
    }

    /// True for the zero timestamp.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Reads the 8 big-endian bytes at `b[0..8]`.
    #[inline]
    pub fn read(b: &[u8]) -> Timestamp {
        Timestamp(u64::from_be_bytes(b[..8].try_into().expect("8 bytes")))
    }

    /// Writes the 8 big-endian bytes into `b[0..8]`.
    #[inline]
    pub fn write(self, b: &mut [u8]) {
        b[..8].copy_from_slice(&self.0.to_be_bytes());
    }
}

impl std::fmt::Display for Timestamp {
    /// The hex form ntpq and chronyd's logs use: `seconds.fraction`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:08x}.{:08x}", self.seconds(), self.fraction())
    }
}

/// NTP's 32-bit short format: 16 bits of seconds, 16 of fraction (root delay and root
/// dispersion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Short(pub u32);

impl Short {
    /// The short format of `ns`, rounded up (a bound must not shrink), at most
    /// 65535.99998 s.
    pub fn from_ns(ns: u64) -> Short {
        let v = (u128::from(ns) << 16).div_ceil(u128::from(NS_PER_SEC));
        Short(v.min(u128::from(u32::MAX)) as u32)
    }

    /// The value in ns.
    pub fn to_ns(self) -> u64 {
        (u64::from(self.0) * NS_PER_SEC) >> 16
    }

    /// The value in seconds.
    pub fn to_secs(self) -> f64 {
        f64::from(self.0) / 65536.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_round_trip_within_a_nanosecond() {
        // 2026-11-25T19:01:44.100839Z, as chronyd stamped a capture.
        let ns = 1_795_633_304_100_839_000u64;
        let t = Timestamp::from_unix_ns(ns);
        assert_eq!(t.seconds() as u64, ns / NS_PER_SEC + UNIX_TO_NTP_SECS);
        let back = t.to_unix_ns(ns + 3_000_000_000);
        assert!((back - ns as i128).abs() <= 1, "{back} vs {ns}");
        assert_eq!(Timestamp::from_unix_ns(0).0, UNIX_TO_NTP_SECS << 32);
    }

    #[test]
    fn the_2036_era_boundary_is_crossed_by_differences() {
        // The last second of era 0 and the first of era 1.
        let before = (1u64 << 32) - UNIX_TO_NTP_SECS - 1;
        let a = Timestamp::from_unix_ns(before * NS_PER_SEC);
        let b = Timestamp::from_unix_ns((before + 2) * NS_PER_SEC);
        assert_eq!(a.seconds(), u32::MAX);
        assert_eq!(b.seconds(), 1, "era 1 starts again from 0");
        assert_eq!(b.diff_ns(a), 2_000_000_000);
        assert_eq!(a.diff_ns(b), -2_000_000_000);
        assert_eq!(
            b.to_unix_ns(before * NS_PER_SEC),
            i128::from((before + 2) * NS_PER_SEC)
        );
    }

    #[test]
    fn differences_and_additions_agree() {
        let t = Timestamp::from_unix_ns(1_700_000_000_123_456_789);
        for d in [
            -5_000_000_001i64,
            -1,
            0,
            1,
            999,
            1_000_000_000,
            86_400_000_000_000,
        ] {
            let u = t.add_ns(d);
            assert!((u.diff_ns(t) - d).abs() <= 1, "{d}: {}", u.diff_ns(t));
        }
    }

    #[test]
    fn short_format_rounds_up_and_saturates() {
        assert_eq!(Short::from_ns(1_000_000_000), Short(0x0001_0000));
        assert_eq!(Short::from_ns(0), Short(0));
        assert_eq!(Short::from_ns(1), Short(1), "rounded up, never to zero");
        assert_eq!(Short::from_ns(u64::MAX), Short(u32::MAX));
        assert_eq!(Short(0x0001_8000).to_ns(), 1_500_000_000);
        assert_eq!(Short(0x0000_8000).to_secs(), 0.5);
    }

    #[test]
    fn timestamps_print_as_ntpq_does() {
        assert_eq!(
            Timestamp(0xeeb1_af18_1799_99d1).to_string(),
            "eeb1af18.179999d1"
        );
    }
}
