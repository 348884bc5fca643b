//! A fast reader for the master files most zones are written as: `$ORIGIN` and `$TTL`,
//! owners (`@`, relative, absolute, or blank for the previous one), TTL and class in
//! either order, parentheses and comments, and the types A, AAAA, NS, CNAME, PTR,
//! DNAME, MX, TXT and SOA written plainly.
//!
//! It reads only what it is sure of and gives up on anything else (an escape, another
//! type or class, a directive it does not know, an error of any kind): the caller then
//! reads the whole file with NLnet Labs' `domain` scanner, which also writes every error
//! message. So a file this reads yields the very records `domain` yields for it
//! (`the_fast_path_reads_as_domain_does` checks it on every test zone, with variants),
//! three to four times faster; everything else is read as before.

use super::wire::{rtype, MAX_NAME};
use super::zone::Record;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The TTL of a record that states none, when no `$TTL` and no earlier record did (what
/// `domain` uses).
const DEFAULT_TTL: u32 = 3600;
/// Longest character-string (RFC 1035 §3.3).
const MAX_STRING: usize = 255;

/// A token of an entry.
#[derive(Debug, Clone, Copy)]
enum Tok<'a> {
    Word(&'a [u8]),
    Quoted(&'a [u8]),
}

/// The records and the byte arena of `text`, or `None` to have it read by `domain`.
pub(super) fn scan(text: &[u8]) -> Option<(Vec<Record>, Vec<u8>)> {
    let lines = text.iter().filter(|&&b| b == b'\n').count();
    let mut s = Scan {
        records: Vec::with_capacity(lines + 1),
        data: Vec::with_capacity(text.len() / 2),
        origin: None,
        dollar_ttl: None,
        last_ttl: None,
        owner: None,
    };
    let mut lex = Lexer { t: text, i: 0 };
    let mut toks: Vec<Tok<'_>> = Vec::with_capacity(16);
    while let Some(blank_owner) = lex.entry(&mut toks)? {
        s.entry(&toks, blank_owner)?;
    }
    Some((s.records, s.data))
}

/// Splits the text into entries of tokens.
struct Lexer<'a> {
    t: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    /// Reads the next entry into `toks`: `Some(true)` if it starts with blank space (the
    /// previous owner), `Some(false)` if at column 1; `None` at the end. The outer
    /// `None` gives up.
    fn entry(&mut self, toks: &mut Vec<Tok<'a>>) -> Option<Option<bool>> {
        toks.clear();
        let t = self.t;
        let mut depth = 0u32;
        let mut blank = None;
        loop {
            let Some(&c) = t.get(self.i) else {
                // The end of the text ends an entry, unless a parenthesis is open.
                return (depth == 0).then(|| blank.filter(|_| !toks.is_empty()));
            };
            match c {
                b'\n' => {
                    self.i += 1;
                    if depth == 0 && !toks.is_empty() {
                        return Some(blank);
                    }
                    if depth == 0 {
                        blank = None;
                    }
                }
                b' ' | b'\t' | b'\r' => {
                    if blank.is_none() && toks.is_empty() && depth == 0 {
                        blank = Some(true);
                    }
                    self.i += 1;
                }
                b';' => {
                    while self.i < t.len() && t[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                // An entry that starts with a parenthesis or a quote is for `domain`.
                b'(' | b')' | b'"' if blank.is_none() => return None,
                b'(' => {
                    depth += 1;
                    self.i += 1;
                }
                b')' => {
                    depth = depth.checked_sub(1)?;
                    self.i += 1;
                }
                b'"' => {
                    let start = self.i + 1;
                    let len = t[start..].iter().position(|&b| b == b'"')?;
                    let s = &t[start..start + len];
                    if !s.iter().all(|&b| plain(b) || b == b' ') {
                        return None;
                    }
                    self.i = start + len + 1;
                    // A quote glued to what follows is for `domain` to judge.
                    if t.get(self.i).is_some_and(|&b| !ends_word(b)) {
                        return None;
                    }
                    toks.push(Tok::Quoted(s));
                }
                _ => {
                    blank.get_or_insert(false);
                    let start = self.i;
                    while self.i < t.len() && !ends_word(t[self.i]) {
                        self.i += 1;
                    }
                    let w = &t[start..self.i];
                    if !w.iter().all(|&b| plain(b)) || t.get(self.i) == Some(&b'"') {
                        return None;
                    }
                    toks.push(Tok::Word(w));
                }
            }
        }
    }
}

/// A printable ASCII byte other than the escape: what this reads inside a word or a
/// quoted string (anything else is for `domain`).
fn plain(b: u8) -> bool {
    b.is_ascii_graphic() && b != b'\\'
}

/// Whether `b` ends an unquoted word.
fn ends_word(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | b';' | b'(' | b')' | b'"')
}

/// The state the entries read so far leave.
struct Scan {
    records: Vec<Record>,
    data: Vec<u8>,
    /// `$ORIGIN` in wire form, as written.
    origin: Option<Vec<u8>>,
    dollar_ttl: Option<u32>,
    /// The last TTL a record stated (used without `$TTL`).
    last_ttl: Option<u32>,
    /// Where the previous record's owner is in `data`.
    owner: Option<(usize, usize)>,
}

impl Scan {
    fn entry(&mut self, toks: &[Tok<'_>], blank_owner: bool) -> Option<()> {
        let mut it = toks.iter().copied();
        if !blank_owner {
            let Tok::Word(first) = it.next()? else {
                return None;
            };
            if first.first() == Some(&b'$') {
                return self.directive(first, it);
            }
            let at = self.data.len();
            if first == b"@" {
                self.data.extend_from_slice(self.origin.as_deref()?);
            } else {
                put_name(first, self.origin.as_deref(), &mut self.data)?;
            }
            let len = self.data.len() - at;
            // Records in a row at one owner share its bytes, as when `domain` reads them.
            self.owner = match self.owner {
                Some((o, l)) if self.data[o..o + l] == self.data[at..] => {
                    self.data.truncate(at);
                    Some((o, l))
                }
                _ => Some((at, len)),
            };
        }
        let (owner_at, owner_len) = self.owner?;
        let (mut ttl, mut class) = (None, false);
        let t = loop {
            let Tok::Word(w) = it.next()? else {
                return None;
            };
            if w.iter().all(u8::is_ascii_digit) && ttl.is_none() {
                ttl = Some(number(w).filter(|&n| n <= i32::MAX as u32)?);
            } else if w.eq_ignore_ascii_case(b"IN") && !class {
                class = true;
            } else {
                break type_of(w)?;
            }
        };
        if ttl.is_some() {
            self.last_ttl = ttl;
        }
        let ttl = ttl
            .or(self.dollar_ttl)
            .or(self.last_ttl)
            .unwrap_or(DEFAULT_TTL);
        let rdata_at = self.data.len();
        self.rdata(t, &mut it)?;
        if it.next().is_some() {
            return None;
        }
        let rdata_len = u16::try_from(self.data.len() - rdata_at).ok()?;
        if self.data.len() > u32::MAX as usize {
            return None;
        }
        self.records.push(Record::new(
            owner_at as u32,
            owner_len as u8,
            t,
            ttl,
            rdata_at as u32,
            rdata_len,
        ));
        Some(())
    }

    /// `$ORIGIN` (absolute) and `$TTL` (seconds); any other directive gives up.
    fn directive<'a>(
        &mut self,
        name: &[u8],
        mut args: impl Iterator<Item = Tok<'a>>,
    ) -> Option<()> {
        let (Some(Tok::Word(arg)), None) = (args.next(), args.next()) else {
            return None;
        };
        match name {
            b"$ORIGIN" if arg.ends_with(b".") => {
                let mut o = Vec::with_capacity(arg.len() + 1);
                put_name(arg, None, &mut o)?;
                self.origin = Some(o);
            }
            b"$TTL" => self.dollar_ttl = Some(number(arg).filter(|&n| n <= i32::MAX as u32)?),
            _ => return None,
        }
        Some(())
    }

    /// Writes the RDATA of type `t` from the tokens left.
    fn rdata<'a>(&mut self, t: u16, it: &mut impl Iterator<Item = Tok<'a>>) -> Option<()> {
        let mut word = || match it.next() {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        };
        let origin = self.origin.as_deref();
        let out = &mut self.data;
        match t {
            rtype::A => out.extend_from_slice(&parse::<Ipv4Addr>(word()?)?.octets()),
            rtype::AAAA => out.extend_from_slice(&parse::<Ipv6Addr>(word()?)?.octets()),
            rtype::NS | rtype::CNAME | rtype::PTR | rtype::DNAME => put_name(word()?, origin, out)?,
            rtype::MX => {
                let pref = u16::try_from(number(word()?)?).ok()?;
                out.extend_from_slice(&pref.to_be_bytes());
                put_name(word()?, origin, out)?;
            }
            rtype::SOA => {
                put_name(word()?, origin, out)?;
                put_name(word()?, origin, out)?;
                for _ in 0..5 {
                    out.extend_from_slice(&number(word()?)?.to_be_bytes());
                }
            }
            rtype::TXT => {
                let mut any = false;
                for tok in it {
                    let (Tok::Word(s) | Tok::Quoted(s)) = tok;
                    if s.len() > MAX_STRING {
                        return None;
                    }
                    out.push(s.len() as u8);
                    out.extend_from_slice(s);
                    any = true;
                }
                any.then_some(())?;
            }
            _ => return None,
        }
        Some(())
    }
}

/// The types read here, by mnemonic (any case).
fn type_of(w: &[u8]) -> Option<u16> {
    const TYPES: [(&[u8], u16); 9] = [
        (b"A", rtype::A),
        (b"AAAA", rtype::AAAA),
        (b"NS", rtype::NS),
        (b"CNAME", rtype::CNAME),
        (b"PTR", rtype::PTR),
        (b"DNAME", rtype::DNAME),
        (b"MX", rtype::MX),
        (b"TXT", rtype::TXT),
        (b"SOA", rtype::SOA),
    ];
    TYPES
        .iter()
        .find(|(m, _)| m.eq_ignore_ascii_case(w))
        .map(|&(_, t)| t)
}

/// A decimal number that fits 32 bits.
fn number(w: &[u8]) -> Option<u32> {
    if w.is_empty() || w.len() > 10 || !w.iter().all(u8::is_ascii_digit) {
        return None;
    }
    u32::try_from(w.iter().fold(0u64, |n, &d| n * 10 + (d - b'0') as u64)).ok()
}

/// An address written as `std` reads it (as `domain` does).
fn parse<T: std::str::FromStr>(w: &[u8]) -> Option<T> {
    std::str::from_utf8(w).ok()?.parse().ok()
}

/// Appends the wire form of name `w`: absolute with a final dot, else followed by
/// `origin`. Labels of letters, digits, `-`, `_`, `*` and `/` only (anything else, and
/// `@` inside RDATA, is left to `domain`).
fn put_name(w: &[u8], origin: Option<&[u8]>, out: &mut Vec<u8>) -> Option<()> {
    let start = out.len();
    let (body, absolute) = match w.strip_suffix(b".") {
        Some(b) => (b, true),
        None => (w, false),
    };
    if !body.is_empty() {
        for label in body.split(|&b| b == b'.') {
            let ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'*' | b'/');
            if label.is_empty() || label.len() > 63 || !label.iter().all(ok) {
                return None;
            }
            out.push(label.len() as u8);
            out.extend_from_slice(label);
        }
    } else if !absolute {
        return None;
    }
    if absolute {
        out.push(0);
    } else {
        out.extend_from_slice(origin?);
    }
    (out.len() - start <= MAX_NAME).then_some(())
}

#[cfg(test)]
mod tests {
    use super::super::zone::{parse_zone, parse_zone_with_domain, scan_with_domain};
    use super::*;

    /// When the fast path reads `text`, `domain` must read the same records and bytes,
    /// and loading it both ways must give the same zone (records, bytes, apex) or the
    /// same error. Returns whether the fast path read it (else both ways are one).
    fn agree(text: &[u8]) -> bool {
        let Some(fast) = scan(text) else {
            return false;
        };
        let shown = || String::from_utf8_lossy(text).into_owned();
        match (parse_zone(text, "t"), parse_zone_with_domain(text, "t")) {
            (Ok(a), Ok(b)) => assert!(a == b, "zones differ for:\n{}", shown()),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "for:\n{}", shown()),
            (a, b) => panic!(
                "{:?} against domain's {:?} for:\n{}",
                a.err(),
                b.err(),
                shown()
            ),
        }
        let slow = scan_with_domain(text, "t").unwrap_or_else(|e| {
            panic!(
                "the fast path read what domain refuses ({e}):\n{}",
                String::from_utf8_lossy(text)
            )
        });
        assert!(
            fast == slow,
            "records differ for:\n{}",
            String::from_utf8_lossy(text)
        );
        true
    }

    const CASES: &[&str] = &[
        // $TTL for records without one; without $TTL the last stated TTL; else 3600.
        "$ORIGIN a.\n$TTL 300\n@ SOA ns h 1 2 3 4 5\nx 60 A 1.2.3.4\ny A 1.2.3.5\n",
        "$ORIGIN a.\n@ 100 SOA ns h 1 2 3 4 5\nx 60 A 1.2.3.4\ny A 1.2.3.5\n",
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nx A 1.2.3.4\n$TTL 9\ny A 1.2.3.4\n",
        // Class and TTL in either order; case; blank owners; absolute and relative names.
        "$ORIGIN Ex.Test.\n@ IN 60 SOA ns1 HostMaster 1 2 3 4 5\n  IN NS ns1\n\tNS ns2.ex.test.\n\
         ns1 60 IN A 192.0.2.1\nNS2 a 192.0.2.2\nwww in cname Ex.test.\nw2 CNAME www\n",
        // Parentheses, comments, empty lines, TXT forms, MX, AAAA, DNAME, PTR.
        "; head\n$ORIGIN a.test.\n\n@ SOA ( ns1 ; mname\n  h 2026112301 ; serial\n  7200 3600 1209600 300 )\n\
         txt TXT \"v=spf1 -all\" word \"\" \"a;b(c)\"\nm MX 10 m2\nm MX 20 mail.b.test.\n\
         v6 AAAA 2001:db8::1\nd DNAME x.test.\n4.3 PTR host\n*.w A 10.0.0.1\n_s._tcp TXT x\n",
        // Left to domain: escapes, other types, @ in RDATA, units, $INCLUDE, errors.
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nx TXT \"a\\\"b\"\n",
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nx SRV 0 0 1 y\n",
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nz MX 10 @\n",
        "$ORIGIN a.\n$TTL 1h\n@ SOA ns h 1 2 3 4 5\n",
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nx A 999.1.1.1\n",
        "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nbad..name A 1.1.1.1\n",
        "@ SOA ns h 1 2 3 4 5\n",
    ];

    #[test]
    fn the_fast_path_reads_as_domain_does() {
        let read: Vec<bool> = CASES.iter().map(|c| agree(c.as_bytes())).collect();
        assert_eq!(&read[..5], [true; 5], "the plain cases are read fast");
        assert!(
            read[5..].iter().all(|r| !r),
            "the others are left to domain: {read:?}"
        );
        // Every zone file of the repository: the test zones and the examples.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut fast = 0;
        let mut texts: Vec<Vec<u8>> = CASES.iter().map(|c| c.as_bytes().to_vec()).collect();
        for dir in [root.join("tests/data"), root.join("../../examples")] {
            for e in std::fs::read_dir(dir).unwrap() {
                let path = e.unwrap().path();
                if path.extension().is_some_and(|x| x == "zone") {
                    let text = std::fs::read(path).unwrap();
                    fast += usize::from(agree(&text));
                    texts.push(text);
                }
            }
        }
        assert!(texts.len() >= CASES.len() + 8, "the zone files were found");
        assert!(fast >= 4, "{fast} zone files read fast");
        // Variants: bytes dropped, doubled and replaced, at places picked by a fixed
        // sequence; whenever the fast path reads one, domain must read the same.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let alphabet = b" \t\n;()\".@$0123456789aAzZ-_*/\\:";
        let (mut tried, mut read) = (0, 0);
        for text in &texts {
            for _ in 0..400 {
                let mut v = text.clone();
                for _ in 0..1 + next(3) {
                    let at = next(v.len());
                    match next(3) {
                        0 => {
                            v.remove(at);
                        }
                        1 => v.insert(at, v[at]),
                        _ => v[at] = alphabet[next(alphabet.len())],
                    }
                }
                tried += 1;
                read += usize::from(agree(&v));
            }
        }
        eprintln!(
            "{fast} test zones and {read} of {tried} variants read fast, as domain reads them"
        );
        assert!(
            read > tried / 10,
            "only {read} of {tried} variants were read fast"
        );
    }
}
