//! Domain names in presentation format (RFC 1035 §5.1: dots between labels, `\X` and
//! `\DDD` escapes) and in wire format (length-prefixed labels ending in the root's zero).

use crate::message::MAX_NAME;

/// Longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL: usize = 63;

/// Why a name in presentation format cannot be put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("'{0}' has an empty label (a leading dot or two dots in a row)")]
    EmptyLabel(String),
    #[error("'{0}' has a label longer than 63 bytes")]
    LongLabel(String),
    #[error("'{0}' is longer than 255 bytes in wire form")]
    LongName(String),
    #[error(
        "'{text}' has a bad escape at byte {at}: expected \\DDD (three digits, 000-255) \
         or a backslash before one character"
    )]
    BadEscape { text: String, at: usize },
}

/// Appends a name in presentation format (`"www.Example.com."`, `"a\.b.com"`,
/// `"\065.com"` or `"."`) to `out` in wire form, case kept. A missing final dot is
/// implied: query files write absolute names without it. On error `out` is unchanged.
pub fn name_from_text(text: &str, out: &mut Vec<u8>) -> Result<(), NameError> {
    let start = out.len();
    let r = append_name(text, out);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn append_name(text: &str, out: &mut Vec<u8>) -> Result<(), NameError> {
    let start = out.len();
    let b = text.as_bytes();
    if b == b"." {
        out.push(0);
        return Ok(());
    }
    // Index in `out` of the current label's length byte.
    let mut len_at = out.len();
    out.push(0);
    let mut i = 0;
    while i < b.len() {
        let c = match b[i] {
            b'.' => {
                close_label(text, out, len_at)?;
                len_at = out.len();
                out.push(0);
                i += 1;
                continue;
            }
            b'\\' => {
                let (c, used) = unescape(&b[i + 1..]).ok_or_else(|| NameError::BadEscape {
                    text: text.to_string(),
                    at: i,
                })?;
                i += 1 + used;
                c
            }
            c => {
                i += 1;
                c
            }
        };
        out.push(c);
    }
    // An open label that is still empty (the text was empty or ended in an unescaped
    // dot) is the root; otherwise close it and add the root.
    if out.len() > len_at + 1 {
        close_label(text, out, len_at)?;
        out.push(0);
    }
    if out.len() - start > MAX_NAME {
        return Err(NameError::LongName(text.to_string()));
    }
    Ok(())
}

/// Writes the length of the label that starts at `len_at`; refuses empty and long ones.
fn close_label(text: &str, out: &mut [u8], len_at: usize) -> Result<(), NameError> {
    let len = out.len() - len_at - 1;
    if len == 0 {
        return Err(NameError::EmptyLabel(text.to_string()));
    }
    if len > MAX_LABEL {
        return Err(NameError::LongLabel(text.to_string()));
    }
    out[len_at] = len as u8;
    Ok(())
}

/// The byte an escape stands for and how many bytes after the backslash it used.
fn unescape(rest: &[u8]) -> Option<(u8, usize)> {
    let first = *rest.first()?;
    if !first.is_ascii_digit() {
        return Some((first, 1));
    }
    let d = rest.get(..3)?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = d.iter().fold(0u16, |v, c| v * 10 + u16::from(c - b'0'));
    u8::try_from(v).ok().map(|v| (v, 3))
}

/// Renders a wire name as text with a trailing dot, for messages; bytes that are not
/// printable, dots and backslashes inside labels are written `\DDD`.
pub fn name_to_text(wire: &[u8]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < wire.len() && wire[i] != 0 {
        let len = wire[i] as usize;
        let end = (i + 1 + len).min(wire.len());
        for &c in &wire[i + 1..end] {
            if c.is_ascii_graphic() && c != b'.' && c != b'\\' {
                s.push(c as char);
            } else {
                s.push_str(&format!("\\{c:03}"));
            }
        }
        s.push('.');
        i = end;
    }
    if s.is_empty() {
        s.push('.');
    }
    s
}

/// Byte offsets of each label of a wire name (the root's zero byte last).
pub fn label_offsets(wire: &[u8]) -> Vec<usize> {
    let mut offs = Vec::new();
    let mut i = 0;
    while i < wire.len() {
        offs.push(i);
        if wire[i] == 0 {
            break;
        }
        i += 1 + wire[i] as usize;
    }
    offs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(text: &str) -> Result<Vec<u8>, NameError> {
        let mut w = Vec::new();
        name_from_text(text, &mut w).map(|()| w)
    }

    #[test]
    fn names_round_trip_as_text() {
        let w = wire("a.b.").unwrap();
        assert_eq!(w, b"\x01a\x01b\x00");
        assert_eq!(name_to_text(&w), "a.b.");
        assert_eq!(name_to_text(b"\x00"), ".");
        assert_eq!(label_offsets(&w), vec![0, 2, 4]);
        assert_eq!(wire("a.b").unwrap(), w, "the final dot is implied");
        assert_eq!(
            wire("Www.Example.COM").unwrap(),
            b"\x03Www\x07Example\x03COM\x00"
        );
        assert_eq!(wire(".").unwrap(), b"\x00");
        assert_eq!(wire("").unwrap(), b"\x00");
    }

    #[test]
    fn escapes_put_any_byte_in_a_label() {
        assert_eq!(wire(r"a\.b.c.").unwrap(), b"\x03a.b\x01c\x00");
        assert_eq!(wire(r"\065\\x.").unwrap(), b"\x03A\\x\x00");
        assert_eq!(wire(r"\000\255.").unwrap(), b"\x02\x00\xff\x00");
        assert_eq!(wire(r"a\ b").unwrap(), b"\x03a b\x00");
        assert_eq!(wire(r"a\.").unwrap(), b"\x02a.\x00", "an escaped final dot");
        // Whatever name_to_text writes reads back to the same wire bytes.
        for w in [
            &b"\x03a.b\x01c\x00"[..],
            b"\x02\x00\xff\x00",
            b"\x02\\ \x00",
        ] {
            assert_eq!(wire(&name_to_text(w)).unwrap(), w);
        }
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        let e = wire("a..b").unwrap_err();
        assert_eq!(e, NameError::EmptyLabel("a..b".into()));
        assert!(
            e.to_string().starts_with("'a..b' has an empty label"),
            "{e}"
        );
        assert!(matches!(wire(".a"), Err(NameError::EmptyLabel(_))));
        assert!(matches!(wire("a.."), Err(NameError::EmptyLabel(_))));
        let long = "x".repeat(64);
        assert_eq!(wire(&long), Err(NameError::LongLabel(long.clone())));
        assert!(wire(&"x".repeat(63)).is_ok());
        let name = vec!["x".repeat(63); 4].join(".");
        assert_eq!(wire(&name), Err(NameError::LongName(name.clone())));
        for (text, at) in [(r"a\", 1), (r"\25", 0), (r"a.\256", 2), (r"\1x2", 0)] {
            let e = wire(text).unwrap_err();
            assert_eq!(
                e,
                NameError::BadEscape {
                    text: text.into(),
                    at
                }
            );
            assert!(e.to_string().contains(r"expected \DDD"), "{e}");
        }
        let mut out = vec![7];
        assert!(name_from_text("a..b", &mut out).is_err());
        assert_eq!(out, [7], "nothing appended on error");
    }
}
