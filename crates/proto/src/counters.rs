//! A protocol handler's own counters (RADIUS, NTP): one fixed array of (name, value) pairs
//! bumped in place and published as it is, so the hot path never allocates or touches an
//! atomic. Each protocol names its slots and their names in its `counters` module.

/// `N` counters with fixed names, cumulative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters<const N: usize> {
    counts: [(&'static str, u64); N],
}

impl<const N: usize> Counters<N> {
    /// All zero, named `names` (stable: they are JSON keys and metric names).
    pub fn new(names: &[&'static str; N]) -> Self {
        debug_assert!(
            names
                .iter()
                .enumerate()
                .all(|(i, n)| !names[i + 1..].contains(n)),
            "counter names are unique"
        );
        Counters {
            counts: std::array::from_fn(|i| (names[i], 0)),
        }
    }

    /// Adds one to counter `slot`.
    #[inline]
    pub fn bump(&mut self, slot: usize) {
        self.counts[slot].1 += 1;
    }

    /// Sets counter `slot` (for counts kept elsewhere, e.g. by a cache).
    #[inline]
    pub fn set(&mut self, slot: usize, v: u64) {
        self.counts[slot].1 = v;
    }

    /// Counter `slot`.
    pub fn get(&self, slot: usize) -> u64 {
        self.counts[slot].1
    }

    /// The counters as (name, value), fixed names in a fixed order.
    pub fn named(&self) -> &[(&'static str, u64)] {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_keep_their_names_and_slots() {
        let mut c = Counters::new(&["a", "b"]);
        c.bump(1);
        c.bump(1);
        c.set(0, 7);
        assert_eq!(c.named(), &[("a", 7), ("b", 2)]);
        assert_eq!(c.get(1), 2);
    }
}
