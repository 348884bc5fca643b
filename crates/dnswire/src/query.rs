//! Building queries as a client sends them: a header, one question, and an OPT record
//! when EDNS is asked for.

use crate::message::{Edns, Header};
use crate::name::{name_from_text, NameError};
use crate::types::{rtype, CLASS_IN};

/// How to build a query; the default is id 0, RD clear (an authoritative query), class
/// IN, no EDNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryBuilder {
    pub id: u16,
    /// Recursion desired.
    pub rd: bool,
    pub qclass: u16,
    /// Adds an OPT record with this payload size, version and DO bit.
    pub edns: Option<Edns>,
}

impl Default for QueryBuilder {
    fn default() -> Self {
        QueryBuilder {
            id: 0,
            rd: false,
            qclass: CLASS_IN,
            edns: None,
        }
    }
}

impl QueryBuilder {
    /// Appends the query for `name` (presentation format) and `qtype` to `out`; on error
    /// `out` is unchanged.
    pub fn write(&self, name: &str, qtype: u16, out: &mut Vec<u8>) -> Result<(), NameError> {
        let start = out.len();
        let header = Header {
            id: self.id,
            rd: self.rd,
            qdcount: 1,
            arcount: u16::from(self.edns.is_some()),
            ..Header::default()
        };
        out.extend_from_slice(&header.to_bytes());
        if let Err(e) = name_from_text(name, out) {
            out.truncate(start);
            return Err(e);
        }
        out.extend_from_slice(&qtype.to_be_bytes());
        out.extend_from_slice(&self.qclass.to_be_bytes());
        if let Some(e) = self.edns {
            // Root owner, type OPT, class = payload size, TTL = ext-rcode, version, flags.
            out.push(0);
            out.extend_from_slice(&rtype::OPT.to_be_bytes());
            out.extend_from_slice(&e.udp_size.to_be_bytes());
            out.extend_from_slice(&[0, e.version, u8::from(e.dnssec_ok) << 7, 0, 0, 0]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{parse_query, NameBuf, Parsed};

    #[test]
    fn builds_what_the_parser_reads() {
        let mut m = Vec::new();
        let b = QueryBuilder {
            id: 0x1234,
            edns: Some(Edns {
                udp_size: 1232,
                version: 0,
                dnssec_ok: true,
            }),
            ..QueryBuilder::default()
        };
        b.write("WWW.example.com", rtype::AAAA, &mut m).unwrap();
        assert_eq!(&m[..12], &[0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
        let mut nb = NameBuf::default();
        let Parsed::Query(q) = parse_query(&m, &mut nb) else {
            panic!("not parsed")
        };
        assert_eq!(&nb.bytes[..q.name_len], b"\x03www\x07example\x03com\x00");
        assert_eq!((q.qtype, q.qclass), (rtype::AAAA, CLASS_IN));
        assert_eq!(q.edns, b.edns);
    }

    #[test]
    fn plain_query_bytes() {
        let mut m = Vec::new();
        QueryBuilder::default()
            .write("a.", rtype::A, &mut m)
            .unwrap();
        assert_eq!(m, b"\0\0\0\0\0\x01\0\0\0\0\0\0\x01a\0\0\x01\0\x01");
        let rd = QueryBuilder {
            rd: true,
            ..QueryBuilder::default()
        };
        let mut r = Vec::new();
        rd.write("a.", rtype::A, &mut r).unwrap();
        assert_eq!(r[2], 0x01);
        assert!(rd.write("a..", rtype::A, &mut r).is_err());
        assert_eq!(r.len(), m.len(), "nothing appended on error");
    }
}
