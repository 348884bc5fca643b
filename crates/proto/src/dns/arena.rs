//! Compact storage for a zone of millions of names: every name and every pre-rendered
//! answer lives in one shared byte arena, addressed by `u32` offsets, so the served data
//! costs a few words per node and per answer instead of one allocation each.

use super::hash::hash_name;
use super::template::{Template, Tid};
use hashbrown::HashTable;

/// A zone's node names (lower-case wire form) back to back, and a hash table of node
/// indexes for finding them: each name is stored once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    bytes: Vec<u8>,
    /// Where name `n` starts in `bytes`; it ends where `n + 1` starts.
    at: Vec<u32>,
    /// (node, where its name starts): a lookup compares the name with one load. A wire
    /// name is prefix-free (its label lengths say where it ends), so the bytes at the
    /// start equal to the name looked up are that whole name.
    index: HashTable<(u32, u32)>,
}

impl Names {
    /// Name of node `n`.
    #[inline]
    pub fn name(&self, n: u32) -> &[u8] {
        name_in(&self.bytes, &self.at, n)
    }

    /// The node named `name` (lower-case wire form), if it exists.
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<&u32> {
        let bytes = &self.bytes;
        let same =
            |&(_, at): &(u32, u32)| bytes.get(at as usize..at as usize + name.len()) == Some(name);
        self.index.find(hash_name(name), same).map(|(n, _)| n)
    }

    pub fn contains_key(&self, name: &[u8]) -> bool {
        self.get(name).is_some()
    }

    /// Names stored (found or not).
    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The names `name(0)`, `name(1)`, ... (wire form, any case: stored lower-cased),
    /// `hashes[i]` being [`hash_name_nocase`](super::hash::hash_name_nocase) of name `i`, each stored once; and the
    /// node of each. Nodes are numbered in the order their names first come, as adding
    /// the names one by one would number them.
    ///
    /// The table is filled in the order of its buckets, not of the names: adding a
    /// million names one by one misses the cache once or twice each, at random places
    /// of a table of tens of megabytes, and that was a fifth of a large zone's load
    /// (perf). Sorted, the writes go through the table once, in order.
    pub fn intern_all<'a>(hashes: &[u64], name: impl Fn(usize) -> &'a [u8]) -> (Names, Vec<u32>) {
        let count = hashes.len();
        let mut index: HashTable<(u32, u32)> = HashTable::with_capacity(count);
        // hashbrown's first bucket for hash h is h & (buckets - 1), and it has
        // capacity * 8 / 7 buckets, a power of two: if that ever changes, only the
        // order of the writes, not the table, is different.
        let mask =
            ((index.capacity() * 8 / 7).next_power_of_two() as u64 - 1) & u64::from(u32::MAX);
        // (hash, name): the hash beside the name, not read from `hashes` at random.
        let mut order: Vec<(u64, u32)> = hashes
            .iter()
            .enumerate()
            .map(|(i, &h)| (h, i as u32))
            .collect();
        // Equal names have equal hashes: the first of them comes first.
        order.sort_unstable_by_key(|&(h, i)| (h & mask, i));
        // The first name equal to name i (i itself if none came before), then its node.
        let mut node = vec![0u32; count];
        for &(h, i) in &order {
            let i = i as usize;
            // Name i is read only to compare (reading it for every name would miss the
            // cache as often as the table did).
            let same = |&(j, _): &(u32, u32)| name(j as usize).eq_ignore_ascii_case(name(i));
            match index.entry(h, same, |&(j, _)| hashes[j as usize]) {
                hashbrown::hash_table::Entry::Occupied(o) => node[i] = o.get().0,
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert((i as u32, 0));
                    node[i] = i as u32;
                }
            }
        }
        drop(order);
        let mut names = Names {
            bytes: Vec::new(),
            at: Vec::with_capacity(index.len()),
            index,
        };
        for i in 0..count {
            let first = node[i] as usize;
            node[i] = if first == i {
                names.at.push(names.bytes.len() as u32);
                names
                    .bytes
                    .extend(name(i).iter().map(u8::to_ascii_lowercase));
                names.at.len() as u32 - 1
            } else {
                node[first]
            };
        }
        let at = &names.at;
        for e in names.index.iter_mut() {
            let n = node[e.0 as usize];
            *e = (n, at[n as usize]);
        }
        (names, node)
    }

    /// Makes the names for which `hide` holds unfindable (they keep their index).
    pub fn hide(&mut self, hide: impl Fn(&[u8]) -> bool) {
        let (bytes, at) = (&self.bytes, &self.at);
        self.index
            .retain(|&mut (n, _)| !hide(name_in(bytes, at, n)));
    }

    /// Gives back the room kept for growth.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.at.shrink_to_fit();
        let (bytes, at) = (&self.bytes, &self.at);
        self.index
            .shrink_to_fit(|&(m, _)| hash_name(name_in(bytes, at, m)));
    }
}

/// Name `n` of the arena `bytes` whose names start at `at`.
#[inline]
fn name_in<'a>(bytes: &'a [u8], at: &[u32], n: u32) -> &'a [u8] {
    let n = n as usize;
    let end = at.get(n + 1).map_or(bytes.len(), |&e| e as usize);
    &bytes[at[n] as usize..end]
}

impl std::ops::Index<&[u8]> for Names {
    type Output = u32;

    /// The node named `name`; panics if there is none (build-time lookups of names
    /// known to exist).
    fn index(&self, name: &[u8]) -> &u32 {
        self.get(name).expect("a node that exists")
    }
}

/// Where one template's parts are in [`Templates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    bytes_at: u32,
    fixups_at: u32,
    counts: [u16; 3],
    bytes_len: u16,
    fixups_len: u16,
    model_len: u16,
    additional_at: u16,
    rcode: u8,
    aa: bool,
}

/// Every pre-rendered answer of a zone set: 24 bytes of bookkeeping each, the
/// sections and fixups in two shared arenas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Templates {
    meta: Vec<Meta>,
    bytes: Vec<u8>,
    fixups: Vec<u16>,
}

impl Templates {
    /// Template `tid`.
    #[inline]
    pub fn get(&self, tid: Tid) -> Template<'_> {
        let m = &self.meta[tid as usize];
        let b = m.bytes_at as usize;
        let f = m.fixups_at as usize;
        Template {
            rcode: m.rcode,
            aa: m.aa,
            counts: m.counts,
            model_len: m.model_len,
            additional_at: m.additional_at,
            bytes: &self.bytes[b..b + m.bytes_len as usize],
            fixups: &self.fixups[f..f + m.fixups_len as usize],
        }
    }

    /// Stores a copy of `t`.
    pub fn push(&mut self, t: Template<'_>) -> Tid {
        self.meta.push(Meta {
            bytes_at: self.bytes.len() as u32,
            fixups_at: self.fixups.len() as u32,
            counts: t.counts,
            bytes_len: t.bytes.len() as u16,
            fixups_len: t.fixups.len() as u16,
            model_len: t.model_len,
            additional_at: t.additional_at,
            rcode: t.rcode,
            aa: t.aa,
        });
        self.bytes.extend_from_slice(t.bytes);
        self.fixups.extend_from_slice(t.fixups);
        (self.meta.len() - 1) as Tid
    }

    pub fn len(&self) -> usize {
        self.meta.len()
    }

    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Gives back the room kept for growth.
    pub fn shrink_to_fit(&mut self) {
        self.meta.shrink_to_fit();
        self.bytes.shrink_to_fit();
        self.fixups.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_without_case_is_the_hash_of_the_lower_case_name() {
        let mixed: Vec<u8> = (0u8..=255)
            .chain(b"\x07ExAmPlE\x03COM\x00".iter().copied())
            .collect();
        for len in 0..mixed.len() {
            let m = &mixed[..len];
            assert_eq!(
                super::super::hash::hash_name_nocase(m),
                hash_name(&m.to_ascii_lowercase()),
                "{m:?}"
            );
        }
    }

    #[test]
    fn names_are_found_once_and_can_be_hidden() {
        let names: [&[u8]; 5] = [
            b"\x01a\x00",
            b"\x01B\x01a\x00",
            b"\x01A\x00",
            b"\x01c\x00",
            b"\x01b\x01A\x00",
        ];
        let hashes: Vec<u64> = names
            .iter()
            .map(|n| super::super::hash::hash_name_nocase(n))
            .collect();
        let (mut n, nodes) = Names::intern_all(&hashes, |i| names[i]);
        // Numbered as they first come, each name once, stored lower-cased.
        assert_eq!(nodes, [0, 1, 0, 2, 1]);
        assert_eq!((n.get(b"\x01b\x01a\x00"), n.len()), (Some(&1), 3));
        assert_eq!(n.name(1), b"\x01b\x01a\x00");
        assert!(!n.contains_key(b"\x01d\x00") && n.contains_key(b"\x01c\x00"));
        n.hide(|name| name.len() > 3);
        assert!(!n.contains_key(b"\x01b\x01a\x00"));
        assert_eq!((n[b"\x01a\x00".as_slice()], n.name(1).len()), (0, 5));
    }

    #[test]
    fn many_names_are_numbered_as_they_first_come() {
        // Names with repeats far apart, in no order: every one found at its node.
        let names: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| format!("\x05h{:04}\x00", (i * 7919) % 13_001).into_bytes())
            .collect();
        let hashes: Vec<u64> = names.iter().map(|n| hash_name(n)).collect();
        let (n, nodes) = Names::intern_all(&hashes, |i| &names[i]);
        let mut first = std::collections::HashMap::new();
        for (i, name) in names.iter().enumerate() {
            let next = first.len() as u32;
            assert_eq!(
                nodes[i],
                *first.entry(name.clone()).or_insert(next),
                "name {i}"
            );
            assert_eq!(n.get(name), Some(&nodes[i]));
            assert_eq!(n.name(nodes[i]), name.as_slice());
        }
        assert_eq!(n.len(), first.len());
    }

    #[test]
    fn templates_come_back_as_stored() {
        let mut ts = Templates::default();
        let t = Template {
            rcode: 3,
            aa: true,
            counts: [1, 2, 3],
            model_len: 9,
            additional_at: 4,
            bytes: &[1, 2, 3, 4, 5],
            fixups: &[0, 2],
        };
        let empty = Template {
            bytes: &[],
            fixups: &[],
            ..t
        };
        let (i, j) = (ts.push(t), ts.push(empty));
        assert_eq!((ts.get(i), ts.get(j), ts.len()), (t, empty, 2));
    }

    #[test]
    fn a_built_zone_keeps_each_record_once_for_transfers() {
        use super::super::{build, zone};
        let text = b"$ORIGIN a.\n$TTL 60\nw A 192.0.2.1\n@ SOA ns h 1 2 3 4 5\n\
            W A 192.0.2.1\nx.y.z AAAA ::1\nw A 192.0.2.2\n";
        let zd = std::sync::Arc::new(zone::parse_zone(text, "t").unwrap());
        let set = build::build(std::slice::from_ref(&zd)).unwrap();
        let z = &set.zones[0];
        // Nodes: the apex, w, x.y.z and its empty non-terminals y.z and z.
        assert_eq!(z.nodes.len(), 5);
        assert!(z.nodes.contains_key(b"\x01z\x01a\x00"));
        let w = *z.nodes.get(b"\x01w\x01a\x00").unwrap();
        assert_eq!(z.node_name(w), b"\x01w\x01a\x00");
        assert_eq!(z.answers(w).len(), 1);
        // Two A records at w (the repeat in another case dropped), 16 bytes each.
        let t = set.template(z.template_for(w, super::super::wire::rtype::A));
        assert_eq!((t.counts, t.bytes.len()), ([2, 0, 0], 32));
        // The transfer: the SOA first, then each record once.
        let sent: Vec<u16> = z
            .transfer
            .iter()
            .map(|&i| zd.rec(i as usize).rtype)
            .collect();
        assert_eq!(sent, [6, 1, 1, 28]);
        assert!(std::sync::Arc::ptr_eq(z.records.as_ref().unwrap(), &zd));
    }
}
