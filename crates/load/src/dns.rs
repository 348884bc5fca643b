//! DNS queries from a dnsperf-style query file ("name TYPE" per line).
//!
//! Each line is rendered to wire form once (with `firehose-dnswire`, the wire format the
//! responder uses too); sending copies the bytes and patches the 16-bit message id. The
//! question sent under each id is remembered, so an answer counts only if it echoes that
//! question (names compared ignoring case).

use crate::workload::Workload;
use firehose_dnswire::{
    question_end, rcode_name, type_from_name, Edns, Header, QueryBuilder, HEADER,
};
use std::path::Path;

/// Why a query file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum QueryFileError {
    #[error("cannot read query file {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}:{line}: {msg}")]
    Line {
        path: String,
        line: usize,
        msg: String,
    },
    #[error("{path}: no queries (expected lines such as \"www.example.com A\")")]
    Empty { path: String },
}

/// Queries read from a file, rendered to wire form.
#[derive(Debug, Clone)]
pub struct DnsWorkload {
    /// All queries back to back; query `i` is `wire[offs[i]..offs[i + 1]]`.
    wire: Vec<u8>,
    offs: Vec<usize>,
    /// Next query to send.
    next: usize,
    /// Query index sent under each 16-bit id.
    sent: Vec<u32>,
}

impl DnsWorkload {
    /// Parses query file text; `path` names it in errors. `edns` adds an OPT record
    /// advertising that UDP payload size.
    pub fn parse(text: &str, path: &str, edns: Option<u16>) -> Result<Self, QueryFileError> {
        // id 0 (patched per send), RD clear (an authoritative query), class IN.
        let builder = QueryBuilder {
            edns: edns.map(|udp_size| Edns {
                udp_size,
                version: 0,
                dnssec_ok: false,
            }),
            ..QueryBuilder::default()
        };
        let mut wire = Vec::new();
        let mut offs = vec![0];
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
                continue;
            }
            let err = |msg: String| QueryFileError::Line {
                path: path.to_string(),
                line: i + 1,
                msg,
            };
            let mut it = tokens(line);
            let (Some(name), Some(ty), None) = (it.next(), it.next(), it.next()) else {
                return Err(err(format!("expected \"NAME TYPE\", got \"{line}\"")));
            };
            let t = type_from_name(ty).ok_or_else(|| {
                err(format!(
                    "unknown record type '{ty}' (use a mnemonic such as AAAA or TYPE65)"
                ))
            })?;
            builder
                .write(name, t, &mut wire)
                .map_err(|e| err(e.to_string()))?;
            offs.push(wire.len());
        }
        if offs.len() == 1 {
            return Err(QueryFileError::Empty {
                path: path.to_string(),
            });
        }
        Ok(DnsWorkload {
            wire,
            offs,
            next: 0,
            sent: vec![0; 1 << 16],
        })
    }

    /// Reads and parses a query file.
    pub fn load(path: &Path, edns: Option<u16>) -> Result<Self, QueryFileError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|err| QueryFileError::Io {
            path: p.clone(),
            err,
        })?;
        Self::parse(&text, &p, edns)
    }

    /// Number of queries in the file.
    pub fn len(&self) -> usize {
        self.offs.len() - 1
    }

    /// Always false: an empty file is refused.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts this instance `k` queries into the file, so threads do not all send the
    /// same sequence.
    pub fn starting_at(mut self, k: usize) -> Self {
        self.next = k % self.len();
        self
    }

    fn query(&self, i: usize) -> &[u8] {
        &self.wire[self.offs[i]..self.offs[i + 1]]
    }
}

impl Workload for DnsWorkload {
    fn id_bits(&self) -> u32 {
        16
    }

    fn write_request(&mut self, id: u64, _sent_ns: u64, buf: &mut [u8]) -> usize {
        let i = self.next;
        self.next = if i + 1 == self.len() { 0 } else { i + 1 };
        let wire_id = (id & 0xFFFF) as u16;
        self.sent[wire_id as usize] = i as u32;
        let q = &self.wire[self.offs[i]..self.offs[i + 1]];
        buf[..q.len()].copy_from_slice(q);
        buf[..2].copy_from_slice(&wire_id.to_be_bytes());
        q.len()
    }

    fn response_id(&mut self, resp: &[u8]) -> Option<(u64, u16)> {
        let h = Header::parse(resp).filter(|h| h.qr)?;
        Some((u64::from(h.id), u16::from(h.rcode)))
    }

    fn matches(&mut self, id: u64, resp: &[u8]) -> bool {
        let q = self.query(self.sent[(id & 0xFFFF) as usize] as usize);
        let Some(qe) = question_end(q) else {
            return false;
        };
        // One question in the response, equal to ours ignoring the case of the name.
        resp.len() >= qe
            && resp[4..6] == [0, 1]
            && resp[HEADER..qe].eq_ignore_ascii_case(&q[HEADER..qe])
    }

    fn code_name(&self, code: u16) -> String {
        rcode_name(code)
    }
}

/// The whitespace-separated tokens of a query line, up to a `;` comment; a backslash
/// escapes the next character (so `x\ y` is one token and `\;` is not a comment).
fn tokens(line: &str) -> impl Iterator<Item = &str> {
    let b = line.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] == b';' {
            return None;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b';' {
            i += if b[i] == b'\\' {
                // The escaped character, whole (it may be more than one byte).
                1 + line[i + 1..].chars().next().map_or(0, char::len_utf8)
            } else {
                1
            };
        }
        Some(&line[start..i])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "; comment\nwww.example.com A\n\nexample.com. MX\nfoo.example.com TYPE65\n";

    #[test]
    fn renders_each_line_and_patches_the_id() {
        let mut w = DnsWorkload::parse(FILE, "q.txt", None).unwrap();
        assert_eq!(w.len(), 3);
        let mut buf = [0u8; 512];
        let n = w.write_request(0xBEEF, 0, &mut buf);
        assert_eq!(
            &buf[..n],
            b"\xbe\xef\0\0\0\x01\0\0\0\0\0\0\x03www\x07example\x03com\0\0\x01\0\x01"
        );
        let n = w.write_request(7, 0, &mut buf);
        assert_eq!(&buf[..2], &[0, 7]);
        assert_eq!(&buf[n - 4..n], &[0, 15, 0, 1]);
        let n = w.write_request(8, 0, &mut buf);
        assert_eq!(&buf[n - 4..n - 2], &[0, 65]);
        // The file wraps around.
        w.write_request(9, 0, &mut buf);
        assert_eq!(buf[12], 3);
    }

    #[test]
    fn matches_the_question_sent_under_that_id_ignoring_case() {
        let mut w = DnsWorkload::parse(FILE, "q.txt", Some(1232)).unwrap();
        let mut buf = [0u8; 512];
        let n = w.write_request(5, 0, &mut buf);
        assert_eq!(buf[11], 1, "ARCOUNT for the OPT");
        let mut resp = buf[..n - 11].to_vec();
        resp[2] = 0x84;
        resp[3] = 3;
        resp[13] = b'W';
        assert_eq!(w.response_id(&resp), Some((5, 3)));
        assert!(w.matches(5, &resp));
        w.write_request(6, 0, &mut buf);
        assert!(!w.matches(6, &resp), "id 6 carried the MX question");
        assert_eq!(w.response_id(&buf[..n]), None, "a query is not a response");
        assert_eq!(w.code_name(3), "NXDOMAIN");
    }

    #[test]
    fn dnsperf_lines_with_escapes_inline_comments_and_more_types() {
        let text = "a\\032b.example.com A ; why\nx\\ y.example.com TXT\t;\n\
                    example.com NULL\nd.example.com DNAME\nexample.com AXFR\nexample.com IXFR\n";
        let mut w = DnsWorkload::parse(text, "q.txt", None).unwrap();
        assert_eq!(w.len(), 6);
        let mut buf = [0u8; 512];
        let n = w.write_request(1, 0, &mut buf);
        assert_eq!(
            &buf[12..n - 4],
            b"\x03a b\x07example\x03com\0",
            "\\032 is a space"
        );
        let n = w.write_request(2, 0, &mut buf);
        assert_eq!(
            &buf[12..n - 4],
            b"\x03x y\x07example\x03com\0",
            "an escaped space"
        );
        assert_eq!(tokens("a\\é b ;c").collect::<Vec<_>>(), ["a\\é", "b"]);
        assert_eq!(tokens("a\\").collect::<Vec<_>>(), ["a\\"]);
        for want in [10u16, 39, 252, 251] {
            let n = w.write_request(3, 0, &mut buf);
            assert_eq!(&buf[n - 4..n - 2], &want.to_be_bytes());
        }
    }

    #[test]
    fn bad_lines_are_named_by_number() {
        let e = DnsWorkload::parse("a.com A\nb.com BOGUS\n", "q.txt", None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "q.txt:2: unknown record type 'BOGUS' (use a mnemonic such as AAAA or TYPE65)"
        );
        let e = DnsWorkload::parse("a.com\n", "q.txt", None).unwrap_err();
        assert!(e.to_string().starts_with("q.txt:1: expected"), "{e}");
        let e = DnsWorkload::parse("a..com A\n", "q.txt", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("q.txt:1: 'a..com' has an empty label"),
            "{e}"
        );
        assert!(DnsWorkload::parse("; nothing\n", "q.txt", None).is_err());
    }
}
