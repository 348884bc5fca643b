//! Numbers with names: record types, classes and response codes, and their mnemonics
//! as zone files, query files and dig write them.

/// Record types the responder knows by name (others are served by number).
pub mod rtype {
    pub const A: u16 = 1;
    pub const NS: u16 = 2;
    pub const CNAME: u16 = 5;
    pub const SOA: u16 = 6;
    pub const PTR: u16 = 12;
    pub const MX: u16 = 15;
    pub const TXT: u16 = 16;
    pub const AAAA: u16 = 28;
    pub const SRV: u16 = 33;
    pub const DNAME: u16 = 39;
    pub const OPT: u16 = 41;
    pub const DS: u16 = 43;
    /// Incremental zone transfer (RFC 1995).
    pub const IXFR: u16 = 251;
    /// Full zone transfer (RFC 5936).
    pub const AXFR: u16 = 252;
    pub const ANY: u16 = 255;
    pub const CAA: u16 = 257;
}

/// Response codes (the low 4 bits in the header; BADVERS lives in the OPT record).
pub mod rcode {
    pub const NOERROR: u8 = 0;
    pub const FORMERR: u8 = 1;
    pub const SERVFAIL: u8 = 2;
    pub const NXDOMAIN: u8 = 3;
    pub const NOTIMP: u8 = 4;
    pub const REFUSED: u8 = 5;
    /// A name that should not exist does: a DNAME's new name is too long (RFC 6672 §2.2).
    pub const YXDOMAIN: u8 = 6;
    /// Not authoritative for the zone (a transfer of a name that is no apex of ours).
    pub const NOTAUTH: u8 = 9;
    /// Extended rcode 16: the upper 8 bits (1) go in the OPT TTL, the header keeps 0.
    pub const BADVERS: u16 = 16;
}

/// The class IN.
pub const CLASS_IN: u16 = 1;

/// Record types accepted by mnemonic; any other is written `TYPEnnn` (RFC 3597).
const TYPES: &[(&str, u16)] = &[
    ("A", rtype::A),
    ("NS", rtype::NS),
    ("CNAME", rtype::CNAME),
    ("SOA", rtype::SOA),
    ("NULL", 10),
    ("WKS", 11),
    ("PTR", rtype::PTR),
    ("HINFO", 13),
    ("MX", rtype::MX),
    ("TXT", rtype::TXT),
    ("AAAA", rtype::AAAA),
    ("SRV", rtype::SRV),
    ("NAPTR", 35),
    ("KX", 36),
    ("CERT", 37),
    ("DNAME", rtype::DNAME),
    ("OPT", rtype::OPT),
    ("APL", 42),
    ("DS", rtype::DS),
    ("SSHFP", 44),
    ("IPSECKEY", 45),
    ("RRSIG", 46),
    ("NSEC", 47),
    ("DNSKEY", 48),
    ("DHCID", 49),
    ("NSEC3", 50),
    ("NSEC3PARAM", 51),
    ("TLSA", 52),
    ("SMIMEA", 53),
    ("HIP", 55),
    ("CDS", 59),
    ("CDNSKEY", 60),
    ("OPENPGPKEY", 61),
    ("CSYNC", 62),
    ("ZONEMD", 63),
    ("SVCB", 64),
    ("HTTPS", 65),
    ("SPF", 99),
    ("EUI48", 108),
    ("EUI64", 109),
    ("TKEY", 249),
    ("TSIG", 250),
    ("IXFR", rtype::IXFR),
    ("AXFR", rtype::AXFR),
    ("MAILB", 253),
    ("MAILA", 254),
    ("ANY", rtype::ANY),
    ("URI", 256),
    ("CAA", rtype::CAA),
];

/// Classes accepted by mnemonic; any other is written `CLASSnnn` (RFC 3597).
const CLASSES: &[(&str, u16)] = &[("IN", CLASS_IN), ("CH", 3), ("HS", 4), ("ANY", 255)];

/// Looks `s` up in `table` ignoring case, or reads `{prefix}nnn`.
fn from_name(table: &[(&str, u16)], prefix: &str, s: &str) -> Option<u16> {
    let up = s.to_ascii_uppercase();
    if let Some(&(_, t)) = table.iter().find(|(n, _)| *n == up) {
        return Some(t);
    }
    let digits = up.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The mnemonic of `n` in `table`, or `{prefix}nnn`.
fn to_name(table: &[(&str, u16)], prefix: &str, n: u16) -> String {
    match table.iter().find(|(_, v)| *v == n) {
        Some((name, _)) => (*name).to_string(),
        None => format!("{prefix}{n}"),
    }
}

/// The type number of a mnemonic such as `AAAA`, `aaaa` or `TYPE65`.
pub fn type_from_name(s: &str) -> Option<u16> {
    from_name(TYPES, "TYPE", s)
}

/// The mnemonic of a type number (`AAAA`), or `TYPEnnn` for one without.
pub fn type_name(t: u16) -> String {
    to_name(TYPES, "TYPE", t)
}

/// The class number of a mnemonic such as `IN`, `ch` or `CLASS3`.
pub fn class_from_name(s: &str) -> Option<u16> {
    from_name(CLASSES, "CLASS", s)
}

/// The mnemonic of a class number (`IN`), or `CLASSnnn` for one without.
pub fn class_name(c: u16) -> String {
    to_name(CLASSES, "CLASS", c)
}

/// Name of a response code, as dig prints it.
pub fn rcode_name(code: u16) -> String {
    match code {
        0 => "NOERROR".into(),
        1 => "FORMERR".into(),
        2 => "SERVFAIL".into(),
        3 => "NXDOMAIN".into(),
        4 => "NOTIMP".into(),
        5 => "REFUSED".into(),
        6 => "YXDOMAIN".into(),
        7 => "YXRRSET".into(),
        8 => "NXRRSET".into(),
        9 => "NOTAUTH".into(),
        10 => "NOTZONE".into(),
        16 => "BADVERS".into(),
        n => format!("RCODE{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_by_mnemonic_and_by_number() {
        assert_eq!(type_from_name("aaaa"), Some(rtype::AAAA));
        assert_eq!(type_from_name("SOA"), Some(rtype::SOA));
        assert_eq!(type_from_name("TYPE65"), Some(65));
        assert_eq!(type_from_name("type65535"), Some(65535));
        assert_eq!(type_from_name("TYPE65536"), None);
        assert_eq!(type_from_name("TYPE"), None);
        assert_eq!(type_from_name("TYPE+1"), None);
        assert_eq!(type_from_name("BOGUS"), None);
        assert_eq!(type_name(rtype::MX), "MX");
        assert_eq!(type_name(999), "TYPE999");
        for &(name, t) in TYPES {
            assert_eq!(type_from_name(&type_name(t)), Some(t), "{name}");
        }
    }

    #[test]
    fn classes_by_mnemonic_and_by_number() {
        assert_eq!(class_from_name("in"), Some(CLASS_IN));
        assert_eq!(class_from_name("CH"), Some(3));
        assert_eq!(class_from_name("CLASS254"), Some(254));
        assert_eq!(class_from_name("XX"), None);
        assert_eq!(class_name(CLASS_IN), "IN");
        assert_eq!(class_name(254), "CLASS254");
    }

    #[test]
    fn rcodes_are_named_as_dig_names_them() {
        assert_eq!(rcode_name(u16::from(rcode::NXDOMAIN)), "NXDOMAIN");
        assert_eq!(rcode_name(rcode::BADVERS), "BADVERS");
        assert_eq!(rcode_name(11), "RCODE11");
    }
}
