//! Interleaved mode's memory (RFC 9769, chrony's `xleave`): for each response that may be
//! followed by an interleaved request, the receive timestamp it carried and when it really
//! left, so the next response to that client can carry the true transmit time.
//!
//! As chronyd (4.2 and later) keeps it: keyed by the receive timestamp we sent, not by the
//! client's address. A client in interleaved mode sends that timestamp back as its origin,
//! so several clients behind one address (NAT) or one client with several associations
//! each find their own entry, and a client whose every request comes from a new port (as
//! chronyd's do) is still found. The transmit time saved is the clock read just after the
//! response was written (chronyd's daemon stamp), replaced by the kernel's software stamp
//! when the socket returns it ([`Interleave::transmitted`]).
//!
//! Bounded as chronyd's client log: a fixed number of entries, the oldest forgotten first
//! (counted by the worker that made room). One table is shared by the workers, in shards
//! under a lock each: with reuseport, consecutive requests of a client on new ports land on
//! different workers. Only requests that ask for interleaved mode touch it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Entries the table keeps by default.
pub const DEFAULT_INTERLEAVED_ENTRIES: usize = 16384;
const SHARDS: usize = 16;
/// A kernel stamp later than the daemon's by more than this is not believed (chronyd's
/// MAX_TX_DELAY).
const MAX_TX_DELAY_NS: u64 = 1_000_000_000;

/// Where [`Interleave::save`] put a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// The receive timestamp the response must carry: its key.
    pub rx: u64,
    /// The oldest entry of its shard was forgotten to make room.
    pub evicted: bool,
}

/// When a response left, as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// ns since the Unix epoch.
    pub tx_ns: u64,
    /// The kernel's transmit stamp (else the clock read by the server after writing it).
    pub kernel: bool,
}

struct Shard {
    /// Receive timestamp sent (the NTP 64-bit value) -> when that response left.
    map: HashMap<u64, Sent>,
    /// Keys in insertion order, to forget the oldest; a key used already may still be
    /// here, absent from the map.
    order: VecDeque<u64>,
    cap: usize,
}

/// The shared table (see the module documentation).
pub struct Interleave {
    shards: Box<[Mutex<Shard>]>,
}

impl Interleave {
    /// A table of about `entries` entries (at least one per shard).
    pub fn new(entries: usize) -> Self {
        let cap = entries.div_ceil(SHARDS).max(1);
        Interleave {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::with_capacity(cap),
                        order: VecDeque::with_capacity(cap),
                        cap,
                    })
                })
                .collect(),
        }
    }

    /// Entries the table holds at most.
    pub fn capacity(&self) -> usize {
        self.shards.len() * self.lock(0).cap
    }

    fn shard_of(rx: u64) -> usize {
        // The low bits of a receive timestamp are random below the precision; mix them all.
        (rx.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % SHARDS
    }

    fn lock(&self, i: usize) -> std::sync::MutexGuard<'_, Shard> {
        // A worker that panicked holding the lock stops the server anyway; the table
        // itself is never left half-written.
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The response that carried receive timestamp `rx`, taken out: each is served
    /// interleaved once (chronyd disables it, so a replayed request gets a basic answer).
    pub fn take(&self, rx: u64) -> Option<Sent> {
        self.lock(Self::shard_of(rx)).map.remove(&rx)
    }

    /// Saves a response about to carry receive timestamp `rx` (odd) and leaving at `sent`,
    /// under `rx` or, when another response still holds `rx`, under the next odd value that
    /// is free and not in `avoid`; the response must carry the key it is saved under
    /// ([`Saved::rx`]). Two requests can arrive with one kernel stamp (a GSO or GRO packet
    /// is stamped once, then split), and two entries under one key would hand the first
    /// response's follow-up the time the other left.
    pub fn save(&self, rx: u64, avoid: [u64; 2], sent: Sent) -> Saved {
        let mut key = rx;
        loop {
            let mut s = self.lock(Self::shard_of(key));
            if avoid.contains(&key) || s.map.contains_key(&key) {
                drop(s);
                key = key.wrapping_add(2);
                continue;
            }
            let mut evicted = false;
            if s.order.len() == s.cap {
                if let Some(old) = s.order.pop_front() {
                    evicted = s.map.remove(&old).is_some();
                }
            }
            s.map.insert(key, sent);
            s.order.push_back(key);
            return Saved { rx: key, evicted };
        }
    }

    /// The kernel says the response that carried `rx` left at `tx_ns`: kept in place of
    /// the daemon's time when no earlier than it and at most a second later (chronyd's
    /// check); false when not kept (the entry was forgotten, or the stamp is implausible).
    pub fn transmitted(&self, rx: u64, tx_ns: u64) -> bool {
        let mut s = self.lock(Self::shard_of(rx));
        match s.map.get_mut(&rx) {
            Some(e) if !e.kernel && tx_ns >= e.tx_ns && tx_ns - e.tx_ns <= MAX_TX_DELAY_NS => {
                *e = Sent {
                    tx_ns,
                    kernel: true,
                };
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: [u64; 2] = [0, 0];

    fn daemon(tx_ns: u64) -> Sent {
        Sent {
            tx_ns,
            kernel: false,
        }
    }

    #[test]
    fn an_entry_is_served_once_and_the_kernel_stamp_replaces_the_daemons() {
        let t = Interleave::new(64);
        assert!(!t.save(0xabcd_0001, NONE, daemon(1_000)).evicted);
        // Earlier than the daemon's reading, or over a second later: not believed.
        assert!(!t.transmitted(0xabcd_0001, 999));
        assert!(!t.transmitted(0xabcd_0001, 1_000 + MAX_TX_DELAY_NS + 1));
        assert!(t.transmitted(0xabcd_0001, 1_500));
        // One kernel stamp per response.
        assert!(!t.transmitted(0xabcd_0001, 1_600));
        assert!(!t.transmitted(0x1234_0001, 1_500), "never saved");
        assert_eq!(
            t.take(0xabcd_0001),
            Some(Sent {
                tx_ns: 1_500,
                kernel: true
            })
        );
        assert_eq!(t.take(0xabcd_0001), None, "served once");
    }

    #[test]
    fn a_full_table_forgets_its_oldest_entries_and_says_so() {
        let t = Interleave::new(SHARDS * 4);
        assert_eq!(t.capacity(), SHARDS * 4);
        // Keys spread over the shards; the first 4 of each shard are forgotten once the
        // shard has seen 8.
        let keys: Vec<u64> = (0..2000u64).map(|i| (i << 20) | 1).collect();
        let mut evicted = 0;
        let mut per_shard = [0usize; SHARDS];
        let mut kept = Vec::new();
        for &k in &keys {
            let s = Interleave::shard_of(k);
            if per_shard[s] == 8 {
                continue;
            }
            per_shard[s] += 1;
            evicted += usize::from(t.save(k, NONE, daemon(k)).evicted);
            kept.push(k);
        }
        assert!(per_shard.iter().all(|&n| n == 8), "{per_shard:?}");
        assert_eq!(evicted, SHARDS * 4);
        let mut seen = [0usize; SHARDS];
        for &k in &kept {
            let s = Interleave::shard_of(k);
            seen[s] += 1;
            // The first four of each shard are gone, the last four answer.
            assert_eq!(t.take(k).is_some(), seen[s] > 4, "key {k:#x}, #{}", seen[s]);
        }
        // A taken entry leaves its place in the order: the next save evicts nothing live.
        let k = kept[kept.len() - 1];
        assert!(!t.save(k, NONE, daemon(1)).evicted);
    }

    #[test]
    fn a_receive_timestamp_held_by_another_response_moves_to_the_next_free_one() {
        let t = Interleave::new(64);
        let rx = 0x5555_0001;
        assert_eq!(t.save(rx, NONE, daemon(1_000)).rx, rx);
        // The same stamp again (one GSO packet's requests): the next odd value, skipping
        // one to avoid (the request's origin).
        let second = t.save(rx, [rx + 2, 0], daemon(2_000));
        assert_eq!(second.rx, rx + 4);
        assert!(t.transmitted(rx, 1_100));
        assert!(t.transmitted(rx + 4, 2_100));
        assert_eq!(t.take(rx).map(|s| s.tx_ns), Some(1_100));
        assert_eq!(t.take(rx + 4).map(|s| s.tx_ns), Some(2_100));
        // Taken, the key is free again.
        assert_eq!(t.save(rx, NONE, daemon(3_000)).rx, rx);
    }
}
