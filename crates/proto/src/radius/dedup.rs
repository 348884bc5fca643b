//! Duplicate detection (RFC 5080 §2.2.2): a request with the same source address and
//! port, code, Identifier and Request Authenticator as one answered within the window
//! gets the same reply, from here, without being processed again.
//!
//! One cache per worker (no locks): reuseport hashes a client's address and port to
//! one socket, so its retransmissions reach the worker that answered it. Replies sit in
//! one circular byte arena and entries in a ring, both allocated at start; the oldest
//! entry makes room for the newest, and an entry whose bytes were overwritten or whose
//! window passed is not used. An entry evicted while still inside its window is counted,
//! so an operator sees when the cache is too small for the request rate.

use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Identifies a request for duplicate detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    addr: [u8; 16],
    port: u16,
    code: u8,
    id: u8,
    auth: [u8; 16],
}

impl Key {
    /// The key of a request from `peer` whose header is `header` (its first 20 bytes).
    #[inline]
    pub fn new(peer: SocketAddr, header: &[u8]) -> Key {
        let addr = match peer.ip() {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        let mut auth = [0u8; 16];
        auth.copy_from_slice(&header[4..20]);
        Key {
            addr,
            port: peer.port(),
            code: header[0],
            id: header[1],
            auth,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    key: Option<Key>,
    /// The key's hash, kept so an eviction finds its table entry without hashing again.
    hash: u64,
    /// Where the reply starts in the arena, counted from the start of the run.
    pos: u64,
    len: u16,
    at_ns: u64,
}

/// Average reply bytes the arena is sized for; longer replies shorten the window.
pub const BYTES_PER_ENTRY: usize = 128;

/// A worker's cache of recent replies.
pub struct DupCache {
    /// Slot indexes, hashed by their slot's key.
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
    slots: Box<[Slot]>,
    next: usize,
    arena: Box<[u8]>,
    head: u64,
    window_ns: u64,
    epoch: Instant,
    /// Entries evicted while still inside their window.
    pub evicted_young: u64,
}

impl DupCache {
    /// A cache of `entries` replies kept for `window`.
    pub fn new(entries: usize, window: Duration) -> DupCache {
        let entries = entries.max(1);
        DupCache {
            table: HashTable::with_capacity(entries),
            hasher: DefaultHashBuilder::default(),
            slots: vec![
                Slot {
                    key: None,
                    hash: 0,
                    pos: 0,
                    len: 0,
                    at_ns: 0,
                };
                entries
            ]
            .into(),
            next: 0,
            arena: vec![0u8; entries * BYTES_PER_ENTRY].into(),
            head: 0,
            window_ns: window.as_nanos().min(u64::MAX as u128) as u64,
            epoch: Instant::now(),
            evicted_young: 0,
        }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Copies the cached reply to `key` into `out` and returns its length, if there is
    /// one still valid.
    #[inline]
    pub fn get(&self, key: &Key, out: &mut [u8]) -> Option<usize> {
        let h = self.hasher.hash_one(key);
        let slots = &self.slots;
        let &i = self
            .table
            .find(h, |&i| slots[i as usize].key.as_ref() == Some(key))?;
        let s = &slots[i as usize];
        let len = s.len as usize;
        if self.head - s.pos > self.arena.len() as u64
            || self.now_ns().saturating_sub(s.at_ns) > self.window_ns
            || len > out.len()
        {
            return None;
        }
        let at = (s.pos % self.arena.len() as u64) as usize;
        out[..len].copy_from_slice(&self.arena[at..at + len]);
        Some(len)
    }

    /// Remembers `reply` as the answer to `key`. A reply larger than the arena is not
    /// kept.
    pub fn insert(&mut self, key: Key, reply: &[u8]) {
        let a = self.arena.len() as u64;
        if reply.len() as u64 > a {
            return;
        }
        // Replies are contiguous: skip to the arena's start when one would wrap.
        let mut pos = self.head;
        if pos % a + reply.len() as u64 > a {
            pos += a - pos % a;
        }
        let now = self.now_ns();
        let i = self.next;
        self.next = if i + 1 == self.slots.len() { 0 } else { i + 1 };
        let old = self.slots[i];
        if old.key.is_some() {
            if let Ok(e) = self.table.find_entry(old.hash, |&j| j == i as u32) {
                e.remove();
                if now.saturating_sub(old.at_ns) <= self.window_ns {
                    self.evicted_young += 1;
                }
            }
        }
        // A key answered again (its entry expired) keeps only its newest slot.
        let h = self.hasher.hash_one(key);
        let slots = &mut self.slots;
        if let Ok(e) = self
            .table
            .find_entry(h, |&j| slots[j as usize].key.as_ref() == Some(&key))
        {
            let (j, _) = e.remove();
            slots[j as usize].key = None;
        }
        let at = (pos % a) as usize;
        self.arena[at..at + reply.len()].copy_from_slice(reply);
        self.head = pos + reply.len() as u64;
        self.slots[i] = Slot {
            key: Some(key),
            hash: h,
            pos,
            len: reply.len() as u16,
            at_ns: now,
        };
        let slots = &self.slots;
        self.table
            .insert_unique(h, i as u32, |&j| slots[j as usize].hash);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16, id: u8) -> Key {
        let mut h = [0u8; 20];
        h[0] = 1;
        h[1] = id;
        h[4..20].copy_from_slice(&[7; 16]);
        Key::new(SocketAddr::from(([127, 0, 0, 1], port)), &h)
    }

    #[test]
    fn answers_a_duplicate_until_evicted() {
        let mut c = DupCache::new(2, Duration::from_secs(5));
        let mut out = [0u8; 64];
        c.insert(key(1, 1), b"one");
        assert_eq!(c.get(&key(1, 1), &mut out), Some(3));
        assert_eq!(&out[..3], b"one");
        assert_eq!(c.get(&key(2, 1), &mut out), None, "another port");
        assert_eq!(c.get(&key(1, 2), &mut out), None, "another id");
        c.insert(key(1, 2), b"two");
        c.insert(key(1, 3), b"three");
        assert_eq!(c.get(&key(1, 1), &mut out), None, "evicted by the third");
        assert_eq!(c.evicted_young, 1);
        assert_eq!(c.get(&key(1, 3), &mut out), Some(5));
    }

    #[test]
    fn a_key_answered_again_keeps_its_newest_reply_only() {
        let mut c = DupCache::new(4, Duration::from_secs(5));
        let mut out = [0u8; 64];
        c.insert(key(1, 1), b"old");
        c.insert(key(1, 1), b"new!");
        assert_eq!(c.get(&key(1, 1), &mut out), Some(4));
        assert_eq!(&out[..4], b"new!");
        assert_eq!(c.table.len(), 1);
        // Evicting the slot the first answer left does not take the newest away.
        for id in 2..5 {
            c.insert(key(1, id), b"x");
        }
        assert_eq!(c.get(&key(1, 1), &mut out), Some(4));
        assert_eq!(c.evicted_young, 0);
    }

    #[test]
    fn overwritten_bytes_and_expired_entries_are_not_used() {
        // Two entries, 256 bytes of arena: a long reply overwrites the first's bytes.
        let mut c = DupCache::new(2, Duration::from_secs(5));
        let mut out = [0u8; 300];
        c.insert(key(1, 1), &[1; 100]);
        c.insert(key(1, 2), &[2; 200]);
        assert_eq!(c.get(&key(1, 2), &mut out), Some(200));
        assert_eq!(&out[..200], &[2; 200]);
        assert_eq!(c.get(&key(1, 1), &mut out), None, "bytes reused");
        c.insert(key(1, 3), &[3; 1000]);
        assert_eq!(c.get(&key(1, 3), &mut out), None, "larger than the arena");
        let mut c = DupCache::new(4, Duration::ZERO);
        c.insert(key(1, 1), b"x");
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(c.get(&key(1, 1), &mut out), None, "window passed");
    }
}
