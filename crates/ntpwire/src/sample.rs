//! The offset and delay of one client/server exchange (RFC 5905 §8), computed in one place
//! for everything that measures NTP exchanges: the generator's histograms now, kernel
//! transmit stamps of the client later (they change `t1`, not the arithmetic).
//!
//! `t1` the client's transmit, `t2` the server's receive, `t3` the server's transmit, `t4`
//! the client's receive; `t1` and `t4` on the client's clock, `t2` and `t3` on the server's.

use crate::time::Timestamp;

/// The four timestamps of an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub t1: Timestamp,
    pub t2: Timestamp,
    pub t3: Timestamp,
    pub t4: Timestamp,
}

/// What an exchange measures, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The server's clock minus the client's: ((t2 - t1) + (t3 - t4)) / 2.
    pub offset_ns: i64,
    /// The round trip less the server's hold: (t4 - t1) - (t3 - t2).
    pub delay_ns: i64,
    /// How long the server held the request: t3 - t2.
    pub hold_ns: i64,
}

impl Exchange {
    /// An exchange whose client times are Unix ns (CLOCK_REALTIME).
    pub fn new(t1_unix_ns: u64, t2: Timestamp, t3: Timestamp, t4_unix_ns: u64) -> Exchange {
        Exchange {
            t1: Timestamp::from_unix_ns(t1_unix_ns),
            t2,
            t3,
            t4: Timestamp::from_unix_ns(t4_unix_ns),
        }
    }

    /// The offset, delay and hold time.
    pub fn sample(&self) -> Sample {
        let a = self.t2.diff_ns(self.t1);
        let b = self.t3.diff_ns(self.t4);
        let hold = self.t3.diff_ns(self.t2);
        Sample {
            offset_ns: ((i128::from(a) + i128::from(b)) / 2) as i64,
            delay_ns: self.t4.diff_ns(self.t1).saturating_sub(hold),
            hold_ns: hold,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_ahead_by_a_millisecond_with_a_symmetric_path() {
        // Client sends at 0, the path takes 100 us each way, the server holds 20 us and runs
        // 1 ms ahead.
        let base = 1_795_633_304_000_000_000u64;
        let server = |ns: u64| Timestamp::from_unix_ns(base + 1_000_000 + ns);
        let x = Exchange::new(base, server(100_000), server(120_000), base + 220_000);
        let s = x.sample();
        assert!((s.offset_ns - 1_000_000).abs() <= 1, "{s:?}");
        assert!((s.delay_ns - 200_000).abs() <= 1, "{s:?}");
        assert!((s.hold_ns - 20_000).abs() <= 1, "{s:?}");
    }

    #[test]
    fn a_server_behind_gives_a_negative_offset() {
        let base = 1_700_000_000_000_000_000u64;
        let server = |ns: u64| Timestamp::from_unix_ns(base - 5_000_000 + ns);
        let s = Exchange::new(base, server(50_000), server(50_000), base + 100_000).sample();
        assert!((s.offset_ns + 5_000_000).abs() <= 1, "{s:?}");
        assert!((s.delay_ns - 100_000).abs() <= 1, "{s:?}");
    }
}
