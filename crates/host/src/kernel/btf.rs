//! BTF (/sys/kernel/btf/vmlinux): the kernel's own description of its types, to learn where
//! a field sits in a structure on this kernel (`sk_buff.network_header`, `sock.sk_socket`)
//! instead of hard-coding offsets that move between versions and configurations.
//!
//! Only what offsets need is decoded: the type table is indexed once, and a look-up walks
//! a structure's members, descending into anonymous structs and unions as C does.

/// The bytes were not BTF, or a record ran past the end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("BTF: {0}")]
pub struct BtfError(pub String);

const MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// An indexed BTF blob.
#[derive(Debug)]
pub struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Byte offset in `types` of type id `i + 1` (id 0 is void).
    index: Vec<u32>,
    /// Named structs and unions with members, by name (the first of a name wins).
    structs: std::collections::HashMap<&'a str, u32>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A type's header: name, kind, member count, kind_flag, and size or referenced type.
#[derive(Debug, Clone, Copy)]
struct Head {
    name_off: u32,
    kind: u32,
    vlen: u32,
    kind_flag: bool,
    size_or_type: u32,
}

impl<'a> Btf<'a> {
    /// Indexes a little-endian BTF blob (the only byte order this crate's targets use).
    pub fn parse(data: &'a [u8]) -> Result<Btf<'a>, BtfError> {
        let bad = |w: &str| BtfError(w.to_string());
        let magic = u16::from_le_bytes([
            *data.first().ok_or_else(|| bad("empty"))?,
            *data.get(1).ok_or_else(|| bad("truncated header"))?,
        ]);
        if magic != MAGIC {
            return Err(bad("not BTF (bad magic, or big-endian)"));
        }
        let field = |i: usize| u32_at(data, 4 + 4 * i).ok_or_else(|| bad("truncated header"));
        let hdr_len = field(0)? as usize;
        let (type_off, type_len) = (field(1)? as usize, field(2)? as usize);
        let (str_off, str_len) = (field(3)? as usize, field(4)? as usize);
        let section = |off: usize, len: usize, what: &str| {
            let start = hdr_len.checked_add(off);
            let end = start.and_then(|s| s.checked_add(len));
            match (start, end) {
                (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
                _ => Err(BtfError(format!("{what} section out of bounds"))),
            }
        };
        let types = section(type_off, type_len, "type")?;
        let strings = section(str_off, str_len, "string")?;
        let mut index = Vec::new();
        let mut at = 0usize;
        while at < types.len() {
            index.push(at as u32);
            let h = head(types, at).ok_or_else(|| bad("truncated type"))?;
            let extra = match h.kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * h.vlen as usize,
                KIND_ENUM | KIND_FUNC_PROTO => 8 * h.vlen as usize,
                0..=19 => 0,
                k => return Err(BtfError(format!("unknown kind {k} at byte {at}"))),
            };
            at += 12 + extra;
        }
        if at != types.len() {
            return Err(bad("the last type runs past the type section"));
        }
        let mut btf = Btf {
            types,
            strings,
            index,
            structs: std::collections::HashMap::new(),
        };
        for id in 1..=btf.index.len() as u32 {
            if let Some((_, h)) = btf.head(id) {
                if matches!(h.kind, KIND_STRUCT | KIND_UNION) && h.vlen > 0 && h.name_off != 0 {
                    btf.structs.entry(btf.name(h.name_off)).or_insert(id);
                }
            }
        }
        Ok(btf)
    }

    /// The number of types (ids 1..=n).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when there are no types.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn name(&self, off: u32) -> &'a str {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        std::str::from_utf8(&s[..end]).unwrap_or("")
    }

    fn head(&self, id: u32) -> Option<(usize, Head)> {
        let at = *self.index.get((id as usize).checked_sub(1)?)? as usize;
        Some((at, head(self.types, at)?))
    }

    /// The id of the struct (or union) named `name`.
    pub fn struct_id(&self, name: &str) -> Option<u32> {
        self.structs.get(name).copied()
    }

    /// Strips typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> Option<(u32, Head)> {
        for _ in 0..32 {
            let (_, h) = self.head(id)?;
            match h.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = h.size_or_type
                }
                _ => return Some((id, h)),
            }
        }
        None
    }

    /// The byte offset of `member` in struct `name`, found through anonymous members;
    /// a dotted path (`__sk_common.skc_num`) descends into named members. None when absent
    /// or a bitfield.
    pub fn offset_of(&self, name: &str, member: &str) -> Option<u32> {
        let id = self.struct_id(name)?;
        let mut bits = 0u32;
        let mut cur = id;
        for part in member.split('.') {
            let (b, ty) = self.find_member(cur, part, 0)?;
            // A dotted path adds one offset per part: a sum that overflows is a broken file.
            bits = bits.checked_add(b)?;
            cur = ty;
        }
        bits.is_multiple_of(8).then_some(bits / 8)
    }

    /// (bit offset, type id) of `name` inside struct/union `id`, searching anonymous members.
    fn find_member(&self, id: u32, name: &str, depth: u32) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        let (_, h) = self.resolve(id)?;
        if !matches!(h.kind, KIND_STRUCT | KIND_UNION) {
            return None;
        }
        let (at, _) = self.head(self.resolve(id)?.0)?;
        for k in 0..h.vlen as usize {
            let m = at + 12 + 12 * k;
            let m_name = u32_at(self.types, m)?;
            let m_type = u32_at(self.types, m + 4)?;
            let raw = u32_at(self.types, m + 8)?;
            let (bit, bitfield) = if h.kind_flag {
                (raw & 0x00ff_ffff, raw >> 24 != 0)
            } else {
                (raw, false)
            };
            if m_name == 0 {
                if let Some((b, t)) = self.find_member(m_type, name, depth + 1) {
                    // Offsets come from the file: a sum that overflows is a broken file.
                    return Some((bit.checked_add(b)?, t));
                }
            } else if self.name(m_name) == name {
                return (!bitfield).then_some((bit, m_type));
            }
        }
        None
    }
}

fn head(types: &[u8], at: usize) -> Option<Head> {
    let info = u32_at(types, at + 4)?;
    Some(Head {
        name_off: u32_at(types, at)?,
        kind: (info >> 24) & 0x1f,
        vlen: info & 0xffff,
        kind_flag: info >> 31 != 0,
        size_or_type: u32_at(types, at + 8)?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a BTF blob: `struct outer { int a; union { struct { int b; int c; }; }; int d; }`
    /// with `d` behind a typedef, and a bitfield `e` in a kind_flag struct.
    pub(crate) fn sample() -> Vec<u8> {
        let strings = b"\0int\0outer\0a\0b\0c\0d\0myint\0bits\0e\0".to_vec();
        let s = |name: &str| {
            let needle = format!("\0{name}\0");
            strings
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut t = Vec::new();
        let mut ty = |name: u32, kind: u32, vlen: u32, flag: bool, st: u32, extra: &[u32]| {
            let info = (kind << 24) | vlen | if flag { 1 << 31 } else { 0 };
            for w in [name, info, st].iter().chain(extra) {
                t.extend_from_slice(&w.to_le_bytes());
            }
        };
        ty(s("int"), KIND_INT, 0, false, 4, &[32]); // 1
        ty(0, KIND_STRUCT, 2, false, 8, &[s("b"), 1, 0, s("c"), 1, 32]); // 2: anon struct
        ty(0, KIND_UNION, 1, false, 8, &[0, 2, 0]); // 3: anon union
        ty(s("myint"), KIND_TYPEDEF, 0, false, 1, &[]); // 4
        ty(
            s("outer"),
            KIND_STRUCT,
            3,
            false,
            16,
            &[s("a"), 1, 0, 0, 3, 32, s("d"), 4, 96],
        ); // 5
        ty(
            s("bits"),
            KIND_STRUCT,
            1,
            true,
            4,
            &[s("e"), 1, (3 << 24) | 8],
        ); // 6
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        for w in [
            24u32,
            0,
            t.len() as u32,
            t.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&t);
        b.extend_from_slice(&strings);
        b
    }

    #[test]
    fn members_through_anonymous_unions_and_structs() {
        let data = sample();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.len(), 6);
        assert_eq!(btf.offset_of("outer", "a"), Some(0));
        assert_eq!(btf.offset_of("outer", "b"), Some(4));
        assert_eq!(btf.offset_of("outer", "c"), Some(8));
        assert_eq!(btf.offset_of("outer", "d"), Some(12));
        assert_eq!(btf.offset_of("outer", "zz"), None);
        assert_eq!(btf.offset_of("nope", "a"), None);
        // A bitfield has no byte offset.
        assert_eq!(btf.offset_of("bits", "e"), None);
    }

    #[test]
    fn truncated_or_foreign_bytes_are_errors() {
        let data = sample();
        for cut in [0, 1, 5, 23, 30, data.len() - 1] {
            assert!(Btf::parse(&data[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Btf::parse(b"\x9f\xeb\x01\x00").is_err());
        assert!(Btf::parse(b"ELF.....................").is_err());
    }
}
