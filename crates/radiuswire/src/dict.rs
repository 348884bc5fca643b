//! The attribute dictionary: names to numbers and types, and values from text to wire.
//!
//! Standard attributes come from [`table`]. Anything else is written raw as FreeRADIUS
//! writes unknown attributes, `Attr-N = 0x...`, `Attr-26.VENDOR.TYPE = 0x...` or
//! `Vendor-VENDOR-Attr-TYPE = 0x...`; Vendor-Specific attributes are never interpreted,
//! only carried.

mod table;

use std::net::{Ipv4Addr, Ipv6Addr};

/// How a value is written on the wire (RFC 8044's data types, as far as the standard
/// attributes need them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 text (`string` in FreeRADIUS's dictionary).
    Text,
    Octets,
    /// 32-bit unsigned, big-endian; may have named values.
    Integer,
    Ipv4,
    Ipv6,
    /// Reserved octet, prefix length, prefix (RFC 3162 §2.3).
    Ipv6Prefix,
    /// Seconds since 1970, 32-bit.
    Date,
    /// Vendor-Specific: written raw only.
    Vsa,
}

/// A dictionary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attribute {
    pub number: u8,
    pub name: &'static str,
    pub kind: Kind,
    /// Takes a tag (RFC 2868): `Tunnel-Type:1 = VLAN`.
    pub tagged: bool,
    /// Hidden with the shared secret (User-Password, Tunnel-Password).
    pub encrypted: bool,
}

/// The entry named `name` (case-insensitive, as FreeRADIUS looks names up).
pub fn by_name(name: &str) -> Option<&'static Attribute> {
    table::ATTRIBUTES
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(name))
}

/// The entry of attribute number `n`.
pub fn by_number(n: u8) -> Option<&'static Attribute> {
    table::ATTRIBUTES.iter().find(|a| a.number == n)
}

/// The number of the named value `name` of integer attribute `attr`.
pub fn value_by_name(attr: u8, name: &str) -> Option<u32> {
    table::VALUES
        .iter()
        .find(|(a, n, _)| *a == attr && n.eq_ignore_ascii_case(name))
        .map(|&(_, _, v)| v)
}

/// The name of value `v` of integer attribute `attr`, if it has one.
pub fn value_name(attr: u8, v: u32) -> Option<&'static str> {
    table::VALUES
        .iter()
        .find(|(a, _, x)| *a == attr && *x == v)
        .map(|&(_, n, _)| n)
}

/// A value as written in a file: a bare word, or a quoted string with its escapes
/// already undone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text<'a> {
    Bare(&'a str),
    Quoted(String),
}

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        match self {
            Text::Bare(s) => s,
            Text::Quoted(s) => s,
        }
    }
}

/// Where an attribute name written in a file points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A dictionary attribute, with its tag (0 when none was given).
    Known(&'static Attribute, u8),
    /// A raw attribute number: the value must be hex.
    Raw(u8),
    /// A raw vendor attribute (vendor, type), sent inside a Vendor-Specific.
    Vendor(u32, u8),
}

/// Resolves a name as written in a users file (`Session-Timeout`, `Tunnel-Type:1`,
/// `Attr-26`, `Attr-26.9.1`, `Vendor-9-Attr-1`).
pub fn resolve(name: &str) -> Result<Target, String> {
    if let Some(rest) = strip_prefix_ci(name, "Attr-") {
        let mut parts = rest.split('.');
        let n = parts
            .next()
            .and_then(|p| p.parse::<u8>().ok())
            .filter(|&n| n > 0);
        let Some(n) = n else {
            return Err(format!("'{name}' is not Attr-N with N from 1 to 255"));
        };
        return match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) => Ok(Target::Raw(n)),
            (Some(v), Some(t), None) if n == 26 => match (v.parse(), t.parse()) {
                (Ok(v), Ok(t)) => Ok(Target::Vendor(v, t)),
                _ => Err(format!("'{name}' is not Attr-26.VENDOR.TYPE")),
            },
            _ => Err(format!("'{name}' is not Attr-N or Attr-26.VENDOR.TYPE")),
        };
    }
    if let Some(rest) = strip_prefix_ci(name, "Vendor-") {
        if let Some((v, t)) = rest.split_once('-') {
            if let (Ok(v), Some(t)) = (v.parse::<u32>(), strip_prefix_ci(t, "Attr-")) {
                return t
                    .parse()
                    .map(|t| Target::Vendor(v, t))
                    .map_err(|_| format!("'{name}' is not Vendor-VENDOR-Attr-TYPE"));
            }
        }
    }
    let (base, tag) = match name.split_once(':') {
        Some((b, t)) => match t.parse::<u8>() {
            Ok(t) if (1..=31).contains(&t) => (b, t),
            _ => return Err(format!("'{name}': a tag is a number from 1 to 31")),
        },
        None => (name, 0),
    };
    let a = by_name(base).ok_or_else(|| {
        format!("unknown attribute '{base}' (standard attributes by name; others as Attr-N = 0x... or Vendor-V-Attr-T = 0x...)")
    })?;
    if tag != 0 && !a.tagged {
        return Err(format!("'{base}' takes no tag"));
    }
    Ok(Target::Known(a, tag))
}

fn strip_prefix_ci<'a>(s: &'a str, p: &str) -> Option<&'a str> {
    (s.len() >= p.len() && s.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
        .then(|| &s[p.len()..])
}

/// The bytes of `0x...` (an even number of hex digits, at least two).
pub fn hex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.is_empty() || h.len() % 2 != 0 || !h.is_ascii() {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
        .collect()
}

/// The wire value of `text` for `target`: for a vendor attribute, the whole
/// Vendor-Specific value (vendor id, type, length, data).
pub fn encode(target: Target, text: &Text<'_>) -> Result<Vec<u8>, String> {
    let s = text.as_str();
    let raw = || hex(s).ok_or_else(|| format!("'{s}' is not a hex string (0x...)"));
    let v = match target {
        Target::Raw(_) => raw()?,
        Target::Vendor(vendor, typ) => {
            let data = raw()?;
            if data.len() > 247 {
                return Err("a vendor attribute holds at most 247 bytes".into());
            }
            let mut v = vendor.to_be_bytes().to_vec();
            v.extend([typ, (data.len() + 2) as u8]);
            v.extend(data);
            v
        }
        Target::Known(a, tag) => encode_known(a, tag, text)?,
    };
    if v.len() > 253 {
        return Err(format!("a value holds at most 253 bytes, not {}", v.len()));
    }
    Ok(v)
}

fn encode_known(a: &Attribute, tag: u8, text: &Text<'_>) -> Result<Vec<u8>, String> {
    let s = text.as_str();
    let bad = |what: &str| format!("{}: '{s}' is not {what}", a.name);
    let mut v = match a.kind {
        Kind::Text => {
            if let (Text::Bare(_), Some(h)) = (text, hex(s)) {
                h
            } else {
                s.as_bytes().to_vec()
            }
        }
        Kind::Octets | Kind::Vsa => match (text, hex(s)) {
            (_, Some(h)) => h,
            (Text::Quoted(q), None) if a.kind == Kind::Octets => q.as_bytes().to_vec(),
            _ => return Err(bad("a hex string (0x...)")),
        },
        Kind::Integer | Kind::Date => {
            let n = parse_u32(s)
                .or_else(|| value_by_name(a.number, s))
                .ok_or_else(|| bad("a number or a named value of this attribute"))?;
            n.to_be_bytes().to_vec()
        }
        Kind::Ipv4 => s
            .parse::<Ipv4Addr>()
            .map_err(|_| bad("an IPv4 address"))?
            .octets()
            .to_vec(),
        Kind::Ipv6 => s
            .parse::<Ipv6Addr>()
            .map_err(|_| bad("an IPv6 address"))?
            .octets()
            .to_vec(),
        Kind::Ipv6Prefix => {
            let (addr, len) = s.split_once('/').unwrap_or((s, "128"));
            let addr: Ipv6Addr = addr.parse().map_err(|_| bad("an IPv6 prefix"))?;
            let len: u8 = len
                .parse()
                .ok()
                .filter(|&l| l <= 128)
                .ok_or_else(|| bad("an IPv6 prefix"))?;
            let mut v = vec![0, len];
            v.extend(&addr.octets()[..len.div_ceil(8) as usize]);
            v
        }
    };
    if a.tagged {
        match a.kind {
            // A tagged integer carries its tag in the high octet (RFC 2868 §3).
            Kind::Integer => v[0] = tag,
            _ if tag != 0 => v.insert(0, tag),
            _ => {}
        }
    }
    Ok(v)
}

fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_values() {
        let a = by_name("session-timeout").unwrap();
        assert_eq!((a.number, a.kind), (27, Kind::Integer));
        assert_eq!(by_number(80).unwrap().name, "Message-Authenticator");
        assert_eq!(value_by_name(6, "Framed-User"), Some(2));
        assert_eq!(value_name(40, 1), Some("Start"));
        assert!(table::ATTRIBUTES.len() > 100);
        // Numbers are unique.
        for (i, a) in table::ATTRIBUTES.iter().enumerate() {
            assert!(table::ATTRIBUTES[i + 1..]
                .iter()
                .all(|b| b.number != a.number));
        }
    }

    #[test]
    fn values_to_wire() {
        let k = |n: &str| resolve(n).unwrap();
        let q = |s: &str| Text::Quoted(s.into());
        assert_eq!(
            encode(k("Session-Timeout"), &Text::Bare("3600")).unwrap(),
            3600u32.to_be_bytes()
        );
        assert_eq!(
            encode(k("Service-Type"), &Text::Bare("Framed-User")).unwrap(),
            [0, 0, 0, 2]
        );
        assert_eq!(
            encode(k("Framed-IP-Address"), &Text::Bare("10.0.0.1")).unwrap(),
            [10, 0, 0, 1]
        );
        assert_eq!(encode(k("Reply-Message"), &q("hi")).unwrap(), b"hi");
        assert_eq!(encode(k("Class"), &Text::Bare("0x0102")).unwrap(), [1, 2]);
        assert_eq!(
            encode(k("Tunnel-Type:1"), &Text::Bare("VLAN")).unwrap(),
            [1, 0, 0, 13]
        );
        assert_eq!(
            encode(k("Tunnel-Private-Group-Id"), &q("10")).unwrap(),
            b"10"
        );
        assert_eq!(
            encode(k("Framed-IPv6-Prefix"), &Text::Bare("2001:db8::/32")).unwrap(),
            [0, 32, 0x20, 0x01, 0x0d, 0xb8]
        );
        assert_eq!(
            encode(k("Attr-26.9.1"), &Text::Bare("0x783d79")).unwrap(),
            [0, 0, 0, 9, 1, 5, b'x', b'=', b'y']
        );
        assert_eq!(k("Vendor-9-Attr-1"), Target::Vendor(9, 1));
        assert_eq!(k("Attr-26"), Target::Raw(26));
        assert!(encode(k("Attr-26"), &q("x=y")).is_err());
        assert!(encode(k("Session-Timeout"), &Text::Bare("soon")).is_err());
        assert!(resolve("No-Such-Attribute").is_err());
        assert!(resolve("Reply-Message:1").is_err());
        assert!(resolve("Attr-0").is_err());
    }
}
