//! BTF (`/sys/kernel/btf/vmlinux`), which `firehose drops` reads for the kernel's structure
//! offsets: the type table is indexed, then members are looked up through anonymous
//! structs and unions.
//!
//! Input: a BTF blob. What must hold: no panic and no endless walk; a blob that indexes
//! answers every look-up of the names in its string section (structs, members, dotted
//! paths) with a byte offset or none.

use firehose_host::kernel::btf::Btf;

pub fn check(data: &[u8]) {
    let Ok(btf) = Btf::parse(data) else {
        return;
    };
    let _ = btf.len();
    // Names: the NUL-separated strings of the blob (its string section among them).
    let names: Vec<&str> = data
        .split(|&b| b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
        .filter(|s| !s.is_empty() && s.len() < 64)
        .take(12)
        .collect();
    for s in &names {
        if btf.struct_id(s).is_none() {
            assert_eq!(btf.offset_of(s, "x"), None, "no struct, no offset");
            continue;
        }
        for m in &names {
            let _ = btf.offset_of(s, m);
            let _ = btf.offset_of(s, &format!("{m}.{s}"));
        }
    }
}

/// A blob shaped like a kernel's: `struct outer { int a; union { struct { int b; int c; };
/// }; myint d; }`, a bitfield struct, and a struct whose anonymous member is itself.
pub fn seeds() -> Vec<Vec<u8>> {
    let strings = b"\0int\0outer\0a\0b\0c\0d\0myint\0bits\0e\0self\0".to_vec();
    let s = |name: &str| {
        let needle = format!("\0{name}\0");
        strings
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .expect("a name in the strings") as u32
            + 1
    };
    let mut t = Vec::new();
    let mut ty = |name: u32, kind: u32, vlen: u32, flag: bool, st: u32, extra: &[u32]| {
        let info = (kind << 24) | vlen | if flag { 1 << 31 } else { 0 };
        for w in [name, info, st].iter().chain(extra) {
            t.extend_from_slice(&w.to_le_bytes());
        }
    };
    ty(s("int"), 1, 0, false, 4, &[32]); // 1: int
    ty(0, 4, 2, false, 8, &[s("b"), 1, 0, s("c"), 1, 32]); // 2: anonymous struct
    ty(0, 5, 1, false, 8, &[0, 2, 0]); // 3: anonymous union
    ty(s("myint"), 8, 0, false, 1, &[]); // 4: typedef
    ty(
        s("outer"),
        4,
        3,
        false,
        16,
        &[s("a"), 1, 0, 0, 3, 32, s("d"), 4, 96],
    ); // 5
    ty(s("bits"), 4, 1, true, 4, &[s("e"), 1, (3 << 24) | 8]); // 6: bitfield
    ty(s("self"), 4, 2, false, 8, &[0, 7, 0, s("a"), 1, 32]); // 7: contains itself
    let mut b = Vec::new();
    b.extend_from_slice(&0xeb9fu16.to_le_bytes());
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
    let mut out = vec![b.clone()];
    out.push(b[..b.len() - 9].to_vec());
    out.push(b"\x9f\xeb\x01\x00".to_vec());
    out
}
