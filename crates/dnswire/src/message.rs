//! Messages: the header, the question, and the request parser of the hot path.
//!
//! The parser reads a query in place and writes its name, lower-cased, into a fixed
//! scratch buffer owned by the handler, so parsing never allocates.

use crate::types::rtype;

/// Largest wire length of a name (RFC 1035 §2.3.4).
pub const MAX_NAME: usize = 255;
/// Most labels a name of [`MAX_NAME`] bytes can have, counting the root.
pub const MAX_LABELS: usize = 128;
/// Size of the fixed DNS header.
pub const HEADER: usize = 12;

/// Reads a big-endian u16 at `at` (caller checked the bounds).
#[inline]
pub fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Writes a big-endian u16 at `at`.
#[inline]
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// The fixed header, decoded; for clients and probes (the responder patches bytes in place).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Header {
    pub id: u16,
    /// Set in a response.
    pub qr: bool,
    pub opcode: u8,
    /// Authoritative answer.
    pub aa: bool,
    /// Truncated.
    pub tc: bool,
    /// Recursion desired.
    pub rd: bool,
    /// Recursion available.
    pub ra: bool,
    /// The low 4 bits of the response code.
    pub rcode: u8,
    pub qdcount: u16,
    pub ancount: u16,
    pub nscount: u16,
    pub arcount: u16,
}

impl Header {
    /// Decodes the header at the start of `msg`; `None` if it is shorter than a header.
    pub fn parse(msg: &[u8]) -> Option<Header> {
        let h = msg.get(..HEADER)?;
        Some(Header {
            id: get16(h, 0),
            qr: h[2] & 0x80 != 0,
            opcode: (h[2] >> 3) & 0x0F,
            aa: h[2] & 0x04 != 0,
            tc: h[2] & 0x02 != 0,
            rd: h[2] & 0x01 != 0,
            ra: h[3] & 0x80 != 0,
            rcode: h[3] & 0x0F,
            qdcount: get16(h, 4),
            ancount: get16(h, 6),
            nscount: get16(h, 8),
            arcount: get16(h, 10),
        })
    }

    /// The header in wire form.
    pub fn to_bytes(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        put16(&mut h, 0, self.id);
        h[2] = u8::from(self.qr) << 7
            | (self.opcode & 0x0F) << 3
            | u8::from(self.aa) << 2
            | u8::from(self.tc) << 1
            | u8::from(self.rd);
        h[3] = u8::from(self.ra) << 7 | (self.rcode & 0x0F);
        put16(&mut h, 4, self.qdcount);
        put16(&mut h, 6, self.ancount);
        put16(&mut h, 8, self.nscount);
        put16(&mut h, 10, self.arcount);
        h
    }
}

/// The end of the first question of `msg` (name, type, class), if its name is well
/// formed and uncompressed.
pub fn question_end(msg: &[u8]) -> Option<usize> {
    let mut at = HEADER;
    loop {
        let len = *msg.get(at)? as usize;
        if len & 0xC0 != 0 {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            break;
        }
    }
    (at + 4 <= msg.len()).then_some(at + 4)
}

/// Why a datagram is dropped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Shorter than a header: there is not even an id to answer.
    Short,
    /// The QR bit is set: answering a response could start a loop between servers.
    Response,
}

/// Why a query is answered FORMERR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormErr {
    QdCount,
    AnNsCount,
    Truncated,
    Pointer,
    BadLabel,
    LongName,
    Additional,
    Trailing,
}

/// The EDNS(0) OPT record of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edns {
    pub udp_size: u16,
    pub version: u8,
    pub dnssec_ok: bool,
}

/// A parsed query; its name sits lower-cased in the parser's scratch buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query {
    /// Wire length of the question name.
    pub name_len: usize,
    /// Number of labels, not counting the root.
    pub labels: usize,
    pub qtype: u16,
    pub qclass: u16,
    /// Offset just past the question section.
    pub question_end: usize,
    pub edns: Option<Edns>,
    /// For an IXFR query: the serial of the client's SOA in the authority section
    /// (RFC 1995 §3); `None` when it is missing, not an SOA, or not at the question
    /// name.
    pub ixfr_serial: Option<u32>,
}

/// The outcome of parsing one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    Query(Query),
    Drop(DropReason),
    FormErr(FormErr),
    /// An opcode other than QUERY; the offset past the question, if it is readable.
    NotImp(Option<usize>),
}

/// Scratch space for one parsed name: lower-cased wire bytes and label offsets.
#[derive(Clone)]
pub struct NameBuf {
    pub bytes: [u8; MAX_NAME],
    /// `offs[i]` is where label `i` starts; `offs[labels]` is the root's zero byte.
    pub offs: [u8; MAX_LABELS + 1],
}

impl Default for NameBuf {
    fn default() -> Self {
        NameBuf {
            bytes: [0; MAX_NAME],
            offs: [0; MAX_LABELS + 1],
        }
    }
}

impl NameBuf {
    /// The suffix of the parsed name starting at label `i` (`i == labels` is the root).
    #[inline]
    pub fn suffix(&self, i: usize, name_len: usize) -> &[u8] {
        &self.bytes[self.offs[i] as usize..name_len]
    }
}

/// Reads an uncompressed name at `at` into `out` (lower-cased). Returns the offset past
/// the name and its label count.
pub fn read_name(msg: &[u8], mut at: usize, out: &mut NameBuf) -> Result<(usize, usize), FormErr> {
    let mut w = 0usize;
    let mut labels = 0usize;
    loop {
        let len = *msg.get(at).ok_or(FormErr::Truncated)? as usize;
        if len & 0xC0 == 0xC0 {
            return Err(FormErr::Pointer);
        }
        if len & 0xC0 != 0 {
            return Err(FormErr::BadLabel);
        }
        if w + 1 + len > MAX_NAME {
            return Err(FormErr::LongName);
        }
        out.offs[labels] = w as u8;
        out.bytes[w] = len as u8;
        if len == 0 {
            return Ok((at + 1, labels));
        }
        let label = msg.get(at + 1..at + 1 + len).ok_or(FormErr::Truncated)?;
        for (d, s) in out.bytes[w + 1..w + 1 + len].iter_mut().zip(label) {
            *d = s.to_ascii_lowercase();
        }
        w += 1 + len;
        at += 1 + len;
        labels += 1;
    }
}

/// Parses a query datagram `msg`, leaving the lower-cased name in `name`.
pub fn parse_query(msg: &[u8], name: &mut NameBuf) -> Parsed {
    if msg.len() < HEADER {
        return Parsed::Drop(DropReason::Short);
    }
    if msg[2] & 0x80 != 0 {
        return Parsed::Drop(DropReason::Response);
    }
    let opcode = (msg[2] >> 3) & 0x0F;
    if opcode != 0 {
        // Other opcodes give their sections other meanings (NOTIFY, UPDATE): NOTIMP,
        // echoing the question when there is a readable one.
        let qe = match (get16(msg, 4), read_name(msg, HEADER, name)) {
            (1, Ok((end, _))) if msg.len() >= end + 4 => Some(end + 4),
            _ => None,
        };
        return Parsed::NotImp(qe);
    }
    if get16(msg, 4) != 1 {
        return Parsed::FormErr(FormErr::QdCount);
    }
    let nscount = get16(msg, 8);
    if get16(msg, 6) != 0 || nscount > 1 {
        return Parsed::FormErr(FormErr::AnNsCount);
    }
    let (end, labels) = match read_name(msg, HEADER, name) {
        Ok(v) => v,
        Err(e) => return Parsed::FormErr(e),
    };
    if msg.len() < end + 4 {
        return Parsed::FormErr(FormErr::Truncated);
    }
    let qtype = get16(msg, end);
    let qclass = get16(msg, end + 2);
    let question_end = end + 4;
    let mut q = Query {
        name_len: end - HEADER,
        labels,
        qtype,
        qclass,
        question_end,
        edns: None,
        ixfr_serial: None,
    };
    let mut at = question_end;
    // Only an IXFR carries a record in the authority section: the client's SOA.
    if nscount == 1 {
        if qtype != rtype::IXFR {
            return Parsed::FormErr(FormErr::AnNsCount);
        }
        match client_soa(msg, at, &name.bytes[..end - HEADER]) {
            Ok((serial, next)) => (q.ixfr_serial, at) = (serial, next),
            Err(e) => return Parsed::FormErr(e),
        }
    }
    let arcount = get16(msg, 10);
    match arcount {
        0 => {}
        1 => match parse_opt(msg, at) {
            Ok((edns, next)) => {
                q.edns = Some(edns);
                at = next;
            }
            Err(e) => return Parsed::FormErr(e),
        },
        _ => return Parsed::FormErr(FormErr::Additional),
    }
    if at != msg.len() {
        return Parsed::FormErr(FormErr::Trailing);
    }
    Parsed::Query(q)
}

/// Reads the record at `at` in the authority section of an IXFR query: the serial of
/// its SOA when it is one, owned by the question name `qname` (lower-case wire; the
/// owner may be a pointer to the question), and the offset past the record.
fn client_soa(msg: &[u8], at: usize, qname: &[u8]) -> Result<(Option<u32>, usize), FormErr> {
    let (owner_ok, at) = match *msg.get(at).ok_or(FormErr::Truncated)? {
        0xC0 if msg.get(at + 1) == Some(&(HEADER as u8)) => (true, at + 2),
        b if b & 0xC0 == 0xC0 => (false, at + 2),
        _ => {
            let mut owner = NameBuf::default();
            let (end, _) = read_name(msg, at, &mut owner)?;
            (owner.bytes[..end - at] == *qname, end)
        }
    };
    let rr = msg.get(at..at + 10).ok_or(FormErr::Truncated)?;
    let rdlen = get16(rr, 8) as usize;
    let next = at + 10 + rdlen;
    let rdata = msg.get(at + 10..next).ok_or(FormErr::Truncated)?;
    // Two names of at least a byte each, then serial, refresh, retry, expire, minimum.
    let soa = get16(rr, 0) == rtype::SOA && rdata.len() >= 22;
    let serial = (owner_ok && soa).then(|| {
        let s = &rdata[rdata.len() - 20..];
        u32::from_be_bytes([s[0], s[1], s[2], s[3]])
    });
    Ok((serial, next))
}

/// Parses the single additional record, which must be an OPT at the root.
fn parse_opt(msg: &[u8], at: usize) -> Result<(Edns, usize), FormErr> {
    let rr = msg.get(at..at + 11).ok_or(FormErr::Truncated)?;
    if rr[0] != 0 || get16(rr, 1) != rtype::OPT {
        return Err(FormErr::Additional);
    }
    let udp_size = get16(rr, 3);
    let version = rr[6];
    let dnssec_ok = rr[7] & 0x80 != 0;
    let rdlen = get16(rr, 9) as usize;
    let rdata = msg
        .get(at + 11..at + 11 + rdlen)
        .ok_or(FormErr::Truncated)?;
    // Options are skipped, but their framing must be sound.
    let mut o = 0;
    while o < rdata.len() {
        if o + 4 > rdata.len() {
            return Err(FormErr::Additional);
        }
        o += 4 + get16(rdata, o + 2) as usize;
    }
    if o != rdata.len() {
        return Err(FormErr::Additional);
    }
    Ok((
        Edns {
            udp_size,
            version,
            dnssec_ok,
        },
        at + 11 + rdlen,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::name_from_text;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        name_from_text(name, &mut m).unwrap();
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m
    }

    #[test]
    fn parses_and_lowercases_a_question() {
        let m = query("WwW.Example.COM.", rtype::AAAA);
        let mut nb = NameBuf::default();
        let Parsed::Query(q) = parse_query(&m, &mut nb) else {
            panic!("not parsed")
        };
        assert_eq!(q.qtype, rtype::AAAA);
        assert_eq!(q.labels, 3);
        assert_eq!(&nb.bytes[..q.name_len], b"\x03www\x07example\x03com\x00");
        assert_eq!(nb.suffix(1, q.name_len), b"\x07example\x03com\x00");
        assert_eq!(nb.suffix(3, q.name_len), b"\x00");
        assert_eq!(q.question_end, m.len());
        assert_eq!(q.edns, None);
    }

    #[test]
    fn reads_edns_and_rejects_garbage() {
        let mut m = query("a.", 1);
        m[11] = 1;
        m.extend_from_slice(&[0, 0, 41, 0x10, 0x00, 0, 0, 0x80, 0, 0, 0]);
        let mut nb = NameBuf::default();
        let Parsed::Query(q) = parse_query(&m, &mut nb) else {
            panic!("not parsed")
        };
        assert_eq!(
            q.edns,
            Some(Edns {
                udp_size: 4096,
                version: 0,
                dnssec_ok: true
            })
        );
        m.push(0);
        assert_eq!(parse_query(&m, &mut nb), Parsed::FormErr(FormErr::Trailing));
        assert_eq!(
            parse_query(&m[..11], &mut nb),
            Parsed::Drop(DropReason::Short)
        );
    }

    #[test]
    fn rejects_pointers_and_long_names() {
        let mut m = query("a.", 1);
        m[12] = 0xC0;
        m[13] = 12;
        let mut nb = NameBuf::default();
        assert_eq!(parse_query(&m, &mut nb), Parsed::FormErr(FormErr::Pointer));
        let mut long = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'x'; 63]);
        }
        long.extend_from_slice(&[0, 0, 1, 0, 1]);
        assert_eq!(
            parse_query(&long, &mut nb),
            Parsed::FormErr(FormErr::LongName)
        );
    }

    #[test]
    fn header_round_trips_every_field() {
        let h = Header {
            id: 0xBEEF,
            qr: true,
            opcode: 5,
            aa: true,
            tc: false,
            rd: true,
            ra: true,
            rcode: 3,
            qdcount: 1,
            ancount: 2,
            nscount: 3,
            arcount: 4,
        };
        let b = h.to_bytes();
        assert_eq!(b, [0xBE, 0xEF, 0xAD, 0x83, 0, 1, 0, 2, 0, 3, 0, 4]);
        assert_eq!(Header::parse(&b), Some(h));
        assert_eq!(Header::parse(&b[..11]), None);
    }

    #[test]
    fn finds_the_end_of_an_uncompressed_question() {
        let m = query("a.b.", 1);
        assert_eq!(question_end(&m), Some(m.len()));
        assert_eq!(question_end(&m[..m.len() - 1]), None, "class cut short");
        let mut c = m.clone();
        c[12] = 0xC0;
        assert_eq!(question_end(&c), None, "a pointer");
    }
}
