//! Hashing of lower-case wire names for the zone's own tables (node names, apexes,
//! owners at load). Fast and unkeyed: the names are the zone's, and a client can only
//! look names up, never insert one, so it cannot flood a table with collisions. (Tables a
//! client fills, as response rate limiting's, use a keyed hash instead.)

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast non-cryptographic hasher for wire names.
#[derive(Default, Clone, Copy)]
pub struct NameHasher(u64);

impl Hasher for NameHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = mix(self.0, bytes, |w| w, |b| b);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The hash of [`NameHasher`] over `bytes`, each 8-byte word and each trailing byte
/// passed through `word` and `byte` first.
#[inline(always)]
fn mix(mut h: u64, bytes: &[u8], word: impl Fn(u64) -> u64, byte: impl Fn(u8) -> u8) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ word(w)).wrapping_mul(K);
    }
    for &b in chunks.remainder() {
        h = (h.rotate_left(5) ^ byte(b) as u64).wrapping_mul(K);
    }
    h
}

/// The [`NameHasher`] hash of `name`, for tables that keep their names elsewhere.
#[inline]
pub fn hash_name(name: &[u8]) -> u64 {
    mix(0, name, |w| w, |b| b)
}

/// [`hash_name`] of `name` lower-cased, without copying it.
#[inline]
pub fn hash_name_nocase(name: &[u8]) -> u64 {
    // Eight bytes at a time: set 0x20 in each byte from 'A' to 'Z'.
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    let lower = |w: u64| {
        let low7 = w & !HIGH;
        let above_z = low7.wrapping_add(ONES * (0x7f - b'Z' as u64));
        let from_a = low7.wrapping_add(ONES * (0x80 - b'A' as u64));
        let upper = from_a & !above_z & !w & HIGH;
        w | (upper >> 2)
    };
    mix(0, name, lower, |b| b.to_ascii_lowercase())
}

/// A map keyed by lower-case wire names.
pub type NameMap<V> = HashMap<Box<[u8]>, V, BuildHasherDefault<NameHasher>>;
