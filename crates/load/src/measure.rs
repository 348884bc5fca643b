//! Per-response measurements beyond latency that can be negative (NTP's offset; its delay
//! too, when a clock steps mid-exchange): two HDR histograms, one per sign, read as one
//! distribution.

use crate::report::{new_histogram, LatencyUs, HIST_MAX_NS};
use hdrhistogram::Histogram;

/// A distribution of signed ns values, each kept to 3 significant digits.
#[derive(Debug, Clone)]
pub struct SignedHistogram {
    /// Values >= 0 (0 recorded as 1 ns).
    pos: Histogram<u64>,
    /// Magnitudes of values < 0.
    neg: Histogram<u64>,
    sum: i128,
}

impl Default for SignedHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl SignedHistogram {
    pub fn new() -> Self {
        SignedHistogram {
            pos: new_histogram(),
            neg: new_histogram(),
            sum: 0,
        }
    }

    /// Records `ns` (magnitudes beyond 60 s are kept as 60 s).
    #[inline]
    pub fn record(&mut self, ns: i64) {
        let m = ns.unsigned_abs().clamp(1, HIST_MAX_NS);
        let h = if ns < 0 { &mut self.neg } else { &mut self.pos };
        let _ = h.record(m);
        self.sum += i128::from(ns);
    }

    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.pos.len() + self.neg.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `other`'s values.
    pub fn add(&mut self, other: &SignedHistogram) {
        // Both have the same bounds: adding cannot fail.
        let _ = self.pos.add(&other.pos);
        let _ = self.neg.add(&other.neg);
        self.sum += other.sum;
    }

    /// The value at quantile `q` (0 to 1) of the whole distribution, in ns.
    pub fn quantile(&self, q: f64) -> i64 {
        let (n_neg, n) = (self.neg.len(), self.len());
        if n == 0 {
            return 0;
        }
        let rank = (q.clamp(0.0, 1.0) * n as f64).ceil().max(1.0) as u64;
        if rank <= n_neg {
            // The rank-th smallest is the (n_neg - rank + 1)-th largest magnitude.
            let qq = (n_neg - rank + 1) as f64 / n_neg as f64;
            -(self.neg.value_at_quantile(qq) as i64)
        } else {
            let qq = (rank - n_neg) as f64 / self.pos.len() as f64;
            self.pos.value_at_quantile(qq) as i64
        }
    }

    /// Min, percentiles, max and mean in µs (all zero when empty).
    pub fn summary_us(&self) -> LatencyUs {
        if self.is_empty() {
            return LatencyUs::default();
        }
        let us = |ns: i64| ns as f64 / 1000.0;
        let min = if self.neg.is_empty() {
            self.pos.min() as i64
        } else {
            -(self.neg.max() as i64)
        };
        let max = if self.pos.is_empty() {
            -(self.neg.min() as i64)
        } else {
            self.pos.max() as i64
        };
        LatencyUs {
            min: us(min),
            p50: us(self.quantile(0.50)),
            p90: us(self.quantile(0.90)),
            p99: us(self.quantile(0.99)),
            p999: us(self.quantile(0.999)),
            p9999: us(self.quantile(0.9999)),
            max: us(max),
            mean: self.sum as f64 / self.len() as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal within the histogram's 3 significant digits.
    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 1e-3 + 1e-3
    }

    #[test]
    fn quantiles_run_across_the_sign() {
        let mut h = SignedHistogram::new();
        for v in -50..50i64 {
            h.record(v * 1000);
        }
        assert_eq!(h.len(), 100);
        let s = h.summary_us();
        assert!(near(s.min, -50.0) && near(s.max, 49.0), "{s:?}");
        assert!(near(h.quantile(0.01) as f64, -50_000.0));
        assert!(
            near(h.quantile(0.50) as f64, -1_000.0),
            "the 50th of 100 values"
        );
        assert_eq!(h.quantile(0.51), 1, "0 is kept as 1 ns");
        assert!(near(s.p90, 39.0), "{s:?}");
        assert!((s.mean + 0.5).abs() < 1e-9, "{s:?}");
        let mut all_neg = SignedHistogram::new();
        all_neg.record(-5_000);
        all_neg.record(-7_000);
        let s = all_neg.summary_us();
        assert!(
            near(s.min, -7.0) && near(s.p50, -7.0) && near(s.max, -5.0),
            "{s:?}"
        );
        h.add(&all_neg);
        assert_eq!(h.len(), 102);
        assert_eq!(SignedHistogram::new().summary_us(), LatencyUs::default());
    }
}
