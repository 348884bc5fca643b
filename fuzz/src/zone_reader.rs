//! The fast zone reader against NLnet Labs' scanner. `parse_zone` reads a plain master
//! file with firehose's own reader and leaves everything else to the scanner;
//! `parse_zone_with_domain` reads every file with the scanner. On any input the two
//! must load the same zone (records, bytes, apex) or fail with the same message: the
//! fast reader accepts nothing the scanner refuses and reads nothing differently.
//!
//! Input: zone file text.

use firehose_proto::dns::zone::{parse_zone, parse_zone_with_domain};

pub fn check(data: &[u8]) {
    let shown = || String::from_utf8_lossy(data).into_owned();
    match (
        parse_zone(data, "fuzz.zone"),
        parse_zone_with_domain(data, "fuzz.zone"),
    ) {
        (Ok(fast), Ok(domain)) => assert!(fast == domain, "zones differ for:\n{}", shown()),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "for:\n{}", shown()),
        (a, b) => panic!(
            "{:?} against the scanner's {:?} for:\n{}",
            a.err(),
            b.err(),
            shown()
        ),
    }
}

/// The `zone` target's seeds (the test zones, a zone of every special type) and plain
/// master files in each form the fast reader takes: `$TTL` or not, blank owners, class
/// and TTL in either order, parentheses, comments, every type it reads.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = crate::zone::seeds();
    for plain in [
        "$ORIGIN a.test.\n$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n",
        "$ORIGIN a.test.\n@ 100 IN SOA ns1 h ( 1 ; serial\n 2 3 4 5 )\n\tIN 60 NS ns1\n\
         ns1 AAAA 2001:db8::1\nm MX 10 ns1\nc CNAME ns1\nd DNAME b.test.\n4.3 PTR ns1\n\
         t TXT \"a b\" c \"\"\n*.w A 10.0.0.1\n_s._tcp TXT x",
        "$ORIGIN A.Test.\n@ SOA ns1.a.test. h.a.test. 1 2 3 4 5\nx 60 A 1.2.3.4\ny a 1.2.3.5\n",
    ] {
        out.push(plain.as_bytes().to_vec());
    }
    out
}
