//! Loading RFC 1035 master files into plain records.
//!
//! NLnet Labs' `domain` scans the text (directives, relative names, escapes, every
//! record type); each record is then kept as owner + type + TTL + RDATA split into
//! raw bytes and embedded names, which is all the answer builder needs: the names are
//! where compression and additional-section processing happen.

use super::wire::{name_to_text, rtype};
use domain::base::iana::Class;
use domain::base::name::ToName;
use domain::base::rdata::ComposeRecordData;
use domain::zonefile::inplace::{Entry, Zonefile};
use std::path::Path;

/// Why a zone could not be loaded. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    #[error("cannot read zone file {path}: {err}")]
    Io { path: String, err: std::io::Error },
    /// A syntax error in the entry ending at `line`.
    #[error("{path}:{line}: {msg}")]
    Syntax {
        path: String,
        line: usize,
        msg: String,
    },
    /// The records parse but do not form a zone we can serve.
    #[error("{path}: {msg}")]
    Invalid { path: String, msg: String },
}

/// A piece of RDATA: raw bytes, or a domain name (which may be compressed on the wire
/// only for the RFC 1035 types; RFC 3597 §4 forbids it for later ones such as SRV).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Bytes(Vec<u8>),
    Name { wire: Vec<u8>, compress: bool },
}

/// One resource record of class IN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Owner in wire form, with the case of the zone file.
    pub owner: Vec<u8>,
    pub rtype: u16,
    pub ttl: u32,
    pub rdata: Vec<Part>,
}

impl Record {
    /// The names inside the RDATA (targets of NS, MX, CNAME, SRV...).
    pub fn target(&self) -> Option<&[u8]> {
        self.rdata.iter().find_map(|p| match p {
            Part::Name { wire, .. } => Some(wire.as_slice()),
            Part::Bytes(_) => None,
        })
    }
}

/// The records of one zone file.
#[derive(Debug, Clone)]
pub struct ZoneData {
    /// Where the records came from, for messages.
    pub source: String,
    /// The apex (owner of the SOA) in wire form, lower-cased.
    pub apex: Vec<u8>,
    pub records: Vec<Record>,
}

/// Reads and parses a zone file: a regular file of at most `max_size` bytes.
pub fn load_zone_file(path: &Path, max_size: u64) -> Result<ZoneData, ZoneError> {
    parse_zone(
        &read_zone_text(path, max_size)?,
        &path.display().to_string(),
    )
}

/// The bytes of a zone file, refusing devices, pipes and directories (which could be
/// read without end) and files over `max_size`.
pub fn read_zone_text(path: &Path, max_size: u64) -> Result<Vec<u8>, ZoneError> {
    use std::io::Read;
    let p = path.display().to_string();
    let io = |err| ZoneError::Io {
        path: p.clone(),
        err,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ZoneError::Invalid {
            path: p.clone(),
            msg: "is not a regular file; pass a zone file".into(),
        });
    }
    let too_big = || ZoneError::Invalid {
        path: p.clone(),
        msg: format!("is larger than {max_size} bytes; raise --zone-max-size to load it"),
    };
    if meta.len() > max_size {
        return Err(too_big());
    }
    let mut text = Vec::with_capacity(meta.len() as usize);
    // The file may grow while read: never past the limit.
    f.take(max_size + 1).read_to_end(&mut text).map_err(io)?;
    if text.len() as u64 > max_size {
        return Err(too_big());
    }
    Ok(text)
}

/// Wire form of a `domain` name.
fn wire_of(name: &impl ToName) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    for label in name.iter_labels() {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_slice());
    }
    out
}

/// Splits uncompressed RDATA of type `t` into bytes and names.
fn split_rdata(t: u16, raw: Vec<u8>) -> Result<Vec<Part>, String> {
    let name_at = |at: usize| -> Result<usize, String> {
        let mut i = at;
        loop {
            let len = *raw.get(i).ok_or("RDATA name runs past its end")? as usize;
            i += 1 + len;
            if len == 0 {
                return Ok(i);
            }
        }
    };
    let name = |a: usize, b: usize, compress: bool| Part::Name {
        wire: raw[a..b].to_vec(),
        compress,
    };
    let parts = match t {
        rtype::NS | rtype::CNAME | rtype::PTR => vec![name(0, name_at(0)?, true)],
        rtype::MX => {
            let e = name_at(2)?;
            vec![Part::Bytes(raw[..2].to_vec()), name(2, e, true)]
        }
        rtype::SRV => {
            let e = name_at(6)?;
            vec![Part::Bytes(raw[..6].to_vec()), name(6, e, false)]
        }
        rtype::SOA => {
            let m = name_at(0)?;
            let r = name_at(m)?;
            vec![
                name(0, m, true),
                name(m, r, true),
                Part::Bytes(raw[r..].to_vec()),
            ]
        }
        _ => vec![Part::Bytes(raw)],
    };
    Ok(parts)
}

/// Parses zone file text. `path` only names the source in errors.
pub fn parse_zone(text: &[u8], path: &str) -> Result<ZoneData, ZoneError> {
    let invalid = |msg: String| ZoneError::Invalid {
        path: path.to_string(),
        msg,
    };
    let mut zf = Zonefile::with_capacity(text.len());
    zf.extend_from_slice(text);
    // RFC 1035 lets the class be omitted; without this the scanner demands it on the
    // first record.
    zf.set_default_class(Class::IN);
    // A file without $ORIGIN may still use absolute names; relative ones then fail
    // with the scanner's "missing origin" at their line.
    let mut records: Vec<Record> = Vec::new();
    // Where each record starts, for messages about it (the scanner does not say).
    let outline = super::entries::outline(text);
    let mut lines: Vec<usize> = Vec::new();
    loop {
        let entry = match zf.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) => break,
            Err(e) => {
                let (line, msg) = error_line(&e.to_string(), text);
                return Err(ZoneError::Syntax {
                    path: path.to_string(),
                    line,
                    msg,
                });
            }
        };
        let rec = match entry {
            Entry::Record(r) => r,
            Entry::Include { path: inc, .. } => {
                return Err(invalid(format!(
                    "$INCLUDE {inc} is not supported; pass the included file as another --zone or inline it"
                )))
            }
        };
        let owner = wire_of(rec.owner());
        if rec.class() != Class::IN {
            return Err(invalid(format!(
                "record {} has class {}; only IN is served",
                name_to_text(&owner),
                rec.class()
            )));
        }
        let t = rec.rtype().to_int();
        let mut raw = Vec::new();
        rec.data().compose_rdata(&mut raw).map_err(|_| {
            invalid(format!(
                "cannot encode the RDATA of {}",
                name_to_text(&owner)
            ))
        })?;
        let rdata = split_rdata(t, raw)
            .map_err(|m| invalid(format!("{} type {t}: {m}", name_to_text(&owner))))?;
        let entry = outline.get(records.len());
        let line = entry.map_or(0, |e| e.line);
        // The scanner cuts `bad..name` at the empty label; find it in the text.
        let names_in_rdata = matches!(
            t,
            rtype::NS | rtype::CNAME | rtype::PTR | rtype::MX | rtype::SRV | rtype::SOA | DNAME
        );
        if let Some(&(_, at)) =
            entry
                .into_iter()
                .flat_map(|e| &e.double_dots)
                .find(|&&(token, _)| {
                    names_in_rdata || (token == 0 && entry.is_some_and(|e| e.owner_first))
                })
        {
            return Err(ZoneError::Syntax {
                path: path.to_string(),
                line: at,
                msg: "a name has an empty label (two dots in a row); write each label between single dots".into(),
            });
        }
        lines.push(line);
        records.push(Record {
            owner,
            rtype: t,
            ttl: rec.ttl().as_secs(),
            rdata,
        });
    }
    let soas: Vec<&Record> = records.iter().filter(|r| r.rtype == rtype::SOA).collect();
    let apex = match soas.as_slice() {
        [soa] => soa.owner.to_ascii_lowercase(),
        [] => {
            return Err(invalid(
                "no SOA record: a zone needs exactly one, at its apex".into(),
            ))
        }
        _ => {
            return Err(invalid(format!(
                "{} SOA records: a zone needs exactly one, at its apex",
                soas.len()
            )))
        }
    };
    // Owners holding something other than a CNAME, to find a CNAME beside other data
    // (its RRSIG and NSEC may stand beside it, RFC 4035 §2.5).
    let with_data: std::collections::HashSet<Vec<u8>> = records
        .iter()
        .filter(|r| !matches!(r.rtype, rtype::CNAME | RRSIG | NSEC))
        .map(|r| r.owner.to_ascii_lowercase())
        .collect();
    // The first CNAME and DNAME seen per owner: a second, different one is an error.
    let mut singles: std::collections::HashMap<(Vec<u8>, u16), &Record> = Default::default();
    for (r, &line) in records.iter().zip(&lines) {
        let owner = r.owner.to_ascii_lowercase();
        if matches!(r.rtype, rtype::CNAME | DNAME) {
            let first = singles.entry((owner.clone(), r.rtype)).or_insert(r);
            if first.rdata != r.rdata {
                let (what, rfc) = if r.rtype == rtype::CNAME {
                    ("CNAME", "RFC 2181 §10.1")
                } else {
                    ("DNAME", "RFC 6672 §2.4")
                };
                return Err(ZoneError::Syntax {
                    path: path.to_string(),
                    line,
                    msg: format!(
                        "{} has a second {what} record; {rfc} allows one per name",
                        name_to_text(&r.owner)
                    ),
                });
            }
        }
        if !is_subdomain(&owner, &apex) {
            return Err(invalid(format!(
                "record {} is outside the zone {} (the owner of the SOA)",
                name_to_text(&r.owner),
                name_to_text(&apex)
            )));
        }
        if r.rtype == rtype::CNAME && with_data.contains(&owner) {
            return Err(ZoneError::Syntax {
                path: path.to_string(),
                line,
                msg: format!(
                    "{} has a CNAME and other data; RFC 1034 §3.6.2 allows a CNAME alone",
                    name_to_text(&r.owner)
                ),
            });
        }
    }
    Ok(ZoneData {
        source: path.to_string(),
        apex,
        records,
    })
}

/// Record type DNAME (RFC 6672).
const DNAME: u16 = 39;
use super::dnssec::{NSEC, RRSIG};

/// Turns the scanner's "line:col: msg" into (line, msg). The scanner reports where it
/// stopped, after the offending token: an error about the last token of a line shows
/// at column 1 of the next line, and belongs to the line before. Only an unbalanced
/// parenthesis is reported where it stands.
fn error_line(scanner: &str, text: &[u8]) -> (usize, String) {
    let mut it = scanner.splitn(3, ':');
    let line = it.next().and_then(|l| l.parse::<usize>().ok());
    let col = it.next().and_then(|c| c.parse::<usize>().ok());
    match (line, col, it.next()) {
        (Some(l), Some(c), Some(msg)) => {
            let here = text.split(|&b| b == b'\n').nth(l - 1).unwrap_or_default();
            let at_paren = here.first().is_some_and(|b| *b == b'(' || *b == b')');
            let l = if c == 1 && l > 1 && !at_paren {
                l - 1
            } else {
                l
            };
            (l, msg.trim_start().to_string())
        }
        _ => (0, scanner.to_string()),
    }
}

/// True if lower-case wire name `name` equals `parent` or lies below it.
pub fn is_subdomain(name: &[u8], parent: &[u8]) -> bool {
    if name.len() < parent.len() || !name.ends_with(parent) {
        return false;
    }
    // The suffix must start on a label boundary.
    let cut = name.len() - parent.len();
    let mut i = 0;
    while i < cut {
        i += 1 + name[i] as usize;
    }
    i == cut
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZONE: &str = "$ORIGIN example.com.\n$TTL 300\n\
        @ IN SOA ns1 hostmaster 1 7200 3600 1209600 300\n\
        @ NS ns1\n\
        ns1 A 192.0.2.1\n\
        mail MX 10 mx.example.net.\n\
        _sip._udp SRV 0 5 5060 sip\n";

    #[test]
    fn parses_records_and_splits_names() {
        let z = parse_zone(ZONE.as_bytes(), "t.zone").unwrap();
        assert_eq!(z.apex, b"\x07example\x03com\x00");
        assert_eq!(z.records.len(), 5);
        let mx = &z.records[3];
        assert_eq!(mx.rtype, rtype::MX);
        assert_eq!(mx.ttl, 300);
        assert_eq!(mx.rdata[0], Part::Bytes(vec![0, 10]));
        assert_eq!(mx.target().unwrap(), b"\x02mx\x07example\x03net\x00");
        let srv = &z.records[4];
        assert!(matches!(
            &srv.rdata[1],
            Part::Name {
                compress: false,
                ..
            }
        ));
        let soa = &z.records[0];
        assert_eq!(soa.rdata.len(), 3);
        assert_eq!(
            soa.rdata[2],
            Part::Bytes(
                [0, 0, 0, 1, 0, 0, 0x1c, 0x20, 0, 0, 0x0e, 0x10, 0, 0x12, 0x75, 0, 0, 0, 1, 0x2c]
                    .to_vec()
            )
        );
    }

    #[test]
    fn reports_errors_with_file_and_line() {
        let bad =
            "$ORIGIN example.com.\n@ SOA ns1 h 1 2 3 4 5\n; note\n\nwww A 999.1.1.1\nx A 1.1.1.1\n";
        let e = parse_zone(bad.as_bytes(), "bad.zone")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "bad.zone:5: expected IPv4 address");
        let bad = "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nwww FOO 1\n";
        let e = parse_zone(bad.as_bytes(), "t.zone")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.zone:3: expected rtype");
        let e = parse_zone(b"$ORIGIN a.\nx A 1.2.3.4\n", "n.zone")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no SOA"), "{e}");
        let out = "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nb. A 1.2.3.4\n";
        let e = parse_zone(out.as_bytes(), "o.zone")
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the zone"), "{e}");
        let both = "$ORIGIN a.\n@ SOA ns h 1 2 3 4 5\nw CNAME x\nW A 1.2.3.4\n";
        let e = parse_zone(both.as_bytes(), "c.zone")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "c.zone:3: w.a. has a CNAME and other data; RFC 1034 §3.6.2 allows a CNAME alone"
        );
    }

    #[test]
    fn checks_as_strict_as_knot_with_lines() {
        let head = "$ORIGIN a.\n$TTL 60\n@ SOA ns h 1 2 3 4 5\n";
        let err = |body: &str| {
            parse_zone(format!("{head}{body}").as_bytes(), "z")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("w CNAME x\n; two\n\nw CNAME y\n"),
            "z:7: w.a. has a second CNAME record; RFC 2181 §10.1 allows one per name"
        );
        assert_eq!(
            err("d DNAME x.\nd DNAME y.\n"),
            "z:5: d.a. has a second DNAME record; RFC 6672 §2.4 allows one per name"
        );
        assert!(
            err("x A 1.2.3.4\nbad..name A 1.2.3.4\n").starts_with("z:5: a name has an empty label")
        );
        assert!(err("x NS bad..name.\n").starts_with("z:4: a name has an empty label"));
        // An error at column 1 stays on its line; one at the end of a line stays there.
        assert_eq!(err("x A 1.2.3.4\n) A 1.1.1.1\n"), "z:5: unbalanced parens");
        assert_eq!(
            err("x A 1.2.3.4\nw A 192.0.2\ny A 1.1.1.1\n"),
            "z:5: expected IPv4 address"
        );
        // The same CNAME twice is one record, not an error.
        assert!(parse_zone(format!("{head}w CNAME x\nw CNAME x\n").as_bytes(), "z").is_ok());
    }

    #[test]
    fn subdomains_respect_label_boundaries() {
        assert!(is_subdomain(b"\x01a\x01b\x00", b"\x01b\x00"));
        assert!(is_subdomain(b"\x01b\x00", b"\x01b\x00"));
        assert!(!is_subdomain(b"\x02ab\x00", b"\x01b\x00"));
        assert!(is_subdomain(b"\x01b\x00", b"\x00"));
    }
}
