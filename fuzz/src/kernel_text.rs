//! The kernel descriptions `firehose drops` reads to name what it counts: /proc/kallsyms
//! (a drop's location as `function+0xoffset`) and a tracepoint's `format` file under tracefs
//! (the record's field offsets and the drop reasons' names).
//!
//! Input: one control byte (kallsyms or a format file), then the text. What must hold: no
//! panic; kallsyms: every code symbol listed at a nonzero address is found at offset 0 by
//! that address and named as one of the symbols there, an address past it at that
//! distance or less, and `hidden` exactly when symbols were listed but none had an address;
//! a format file: every field named by an identifier, with a type, found by its name, and
//! every symbolic value found under its field.

use firehose_host::kernel::{kallsyms, tracepoint};

pub fn check(data: &[u8]) {
    let Some((&c, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if c & 1 == 0 {
        check_kallsyms(text);
    } else {
        check_format(text);
    }
}

fn check_kallsyms(text: &str) {
    let Ok(s) = kallsyms::parse(text) else {
        return;
    };
    let mut listed = 0;
    let mut code: Vec<(u64, &str)> = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "w" | "W") {
            continue;
        }
        listed += 1;
        let addr = u64::from_str_radix(addr, 16).expect("parse took it as hexadecimal");
        if addr != 0 {
            code.push((addr, name));
        }
    }
    assert_eq!(
        s.len(),
        code.len(),
        "every code symbol with an address is kept"
    );
    assert_eq!(s.hidden, listed > 0 && code.is_empty());
    assert_eq!(s.locate(0), None);
    for &(addr, _) in code.iter().take(64) {
        let l = s.locate(addr).expect("a symbol's own address is located");
        assert_eq!(l.offset, 0, "{addr:#x} is a symbol's start");
        assert!(
            code.iter().any(|&(a, n)| a == addr && n == l.function),
            "{addr:#x} named {l}, not a symbol at that address"
        );
        let _ = l.to_string();
        if let Some(past) = addr.checked_add(0x1a4) {
            let p = s.locate(past).expect("an address past a symbol is located");
            assert!(p.offset <= 0x1a4);
        }
    }
    let _ = s.locate(u64::MAX);
}

fn check_format(text: &str) {
    let Ok(f) = tracepoint::parse(text) else {
        return;
    };
    assert!(!f.fields.is_empty(), "a format has fields");
    for d in &f.fields {
        assert!(!d.name.is_empty() && !d.ty.is_empty(), "{d:?}");
        assert!(
            d.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{d:?}"
        );
        let found = f.field(&d.name).expect("a field is found by its name");
        assert_eq!(found.name, d.name);
    }
    for (field, table) in &f.symbols {
        for (v, name) in table.iter().take(64) {
            assert_eq!(f.symbol(field, *v), Some(name.as_str()));
        }
    }
}

/// The samples of crates/host/tests (kallsyms cut to its first lines), each whole and cut
/// in the middle of a line.
pub fn seeds() -> Vec<Vec<u8>> {
    let kallsyms: String = include_str!("../../crates/host/tests/samples/proc_kallsyms.txt")
        .lines()
        .take(200)
        .map(|l| format!("{l}\n"))
        .collect();
    let mut out = Vec::new();
    for (c, t) in [
        (0u8, kallsyms.as_str()),
        (0, "0000000000000000 T _text\n0000000000000000 t foo\n"),
        (0, "ffffffffc0a01230 t nft_do_chain\t[nf_tables]\nffffffff820a64d0 t udp_queue_rcv_one_skb\n"),
        (1, include_str!("../../crates/host/tests/samples/tracefs_kfree_skb_format.txt")),
        (1, include_str!("../../crates/host/tests/samples/tracefs_xdp_exception_format.txt")),
        (1, include_str!("../../crates/host/tests/samples/tracefs_xdp_redirect_err_format.txt")),
    ] {
        out.push([&[c][..], t.as_bytes()].concat());
        let mut cut = t.len() / 2;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push([&[c][..], &t.as_bytes()[..cut]].concat());
    }
    out
}
