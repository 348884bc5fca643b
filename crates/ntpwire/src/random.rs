//! The cheap random bits NTP asks for: the bits of a timestamp below the clock's precision,
//! a client's random transmit timestamp, a rate limiter's leak. Unpredictable enough that a
//! spoofer or a middlebox cannot guess them, never secret: xorshift64.

/// A xorshift64 generator.
#[derive(Debug, Clone, Copy)]
pub struct XorShift64(u64);

impl XorShift64 {
    /// A generator seeded with `seed` (any value: zero is made odd).
    pub fn new(seed: u64) -> Self {
        XorShift64(seed | 1)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// True with probability 2^-bits (`bits` below 64).
    #[inline]
    pub fn one_in(&mut self, bits: u8) -> bool {
        self.next_u64() & ((1u64 << bits) - 1) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_stuck_and_about_fair() {
        let mut r = XorShift64::new(0);
        assert_ne!(r.next_u64(), 0);
        let hits = (0..4096).filter(|_| r.one_in(2)).count();
        assert!((800..1250).contains(&hits), "{hits}");
    }
}
