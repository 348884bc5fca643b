//! Packets and attributes (RFC 2865 §3, §5): the header, a checked walk over the
//! attributes, and the few attributes a server must find in one pass.
//!
//! Nothing here allocates: a request is summarised as offsets into the caller's buffer.

/// Bytes of the header: code, identifier, length, authenticator.
pub const HEADER: usize = 20;
/// The largest packet RFC 2865 allows.
pub const MAX_PACKET: usize = 4096;
/// Bytes of an authenticator (and of a Message-Authenticator's value).
pub const AUTH_LEN: usize = 16;

/// Packet codes.
pub mod code {
    pub const ACCESS_REQUEST: u8 = 1;
    pub const ACCESS_ACCEPT: u8 = 2;
    pub const ACCESS_REJECT: u8 = 3;
    pub const ACCOUNTING_REQUEST: u8 = 4;
    pub const ACCOUNTING_RESPONSE: u8 = 5;
    pub const ACCESS_CHALLENGE: u8 = 11;
    pub const STATUS_SERVER: u8 = 12;
    pub const STATUS_CLIENT: u8 = 13;
}

/// The name of a packet code, as FreeRADIUS prints it.
pub fn code_name(c: u8) -> &'static str {
    match c {
        code::ACCESS_REQUEST => "Access-Request",
        code::ACCESS_ACCEPT => "Access-Accept",
        code::ACCESS_REJECT => "Access-Reject",
        code::ACCOUNTING_REQUEST => "Accounting-Request",
        code::ACCOUNTING_RESPONSE => "Accounting-Response",
        code::ACCESS_CHALLENGE => "Access-Challenge",
        code::STATUS_SERVER => "Status-Server",
        code::STATUS_CLIENT => "Status-Client",
        _ => "unknown",
    }
}

/// Attribute numbers the server and the generator use by name.
pub mod attr {
    pub const USER_NAME: u8 = 1;
    pub const USER_PASSWORD: u8 = 2;
    pub const CHAP_PASSWORD: u8 = 3;
    pub const NAS_IP_ADDRESS: u8 = 4;
    pub const SERVICE_TYPE: u8 = 6;
    pub const REPLY_MESSAGE: u8 = 18;
    pub const CLASS: u8 = 25;
    pub const VENDOR_SPECIFIC: u8 = 26;
    pub const PROXY_STATE: u8 = 33;
    pub const ACCT_STATUS_TYPE: u8 = 40;
    pub const ACCT_SESSION_ID: u8 = 44;
    pub const CHAP_CHALLENGE: u8 = 60;
    pub const EAP_MESSAGE: u8 = 79;
    pub const MESSAGE_AUTHENTICATOR: u8 = 80;
}

/// Why a datagram is not a well-formed RADIUS packet (RFC 2865 says to discard it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("shorter than the 20-byte header")]
    Short,
    #[error("length field {0} is outside 20..=4096")]
    BadLength(u16),
    #[error("length field {field} exceeds the {got} bytes received")]
    Truncated { field: u16, got: usize },
    #[error("attribute at offset {0} has a length below 2 or runs past the packet")]
    Attribute(usize),
    #[error("attribute {typ} at offset {at} has a length its type does not allow")]
    AttributeLength { typ: u8, at: usize },
}

/// The fixed header of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub code: u8,
    pub id: u8,
    /// The length field: the packet is `buf[..length]`; octets past it are padding.
    pub length: u16,
    pub authenticator: [u8; AUTH_LEN],
}

impl Header {
    /// Reads and checks the header of `buf` (length within bounds and within `buf`).
    pub fn parse(buf: &[u8]) -> Result<Header, Malformed> {
        if buf.len() < HEADER {
            return Err(Malformed::Short);
        }
        let length = u16::from_be_bytes([buf[2], buf[3]]);
        if !(HEADER as u16..=MAX_PACKET as u16).contains(&length) {
            return Err(Malformed::BadLength(length));
        }
        if length as usize > buf.len() {
            return Err(Malformed::Truncated {
                field: length,
                got: buf.len(),
            });
        }
        let mut authenticator = [0u8; AUTH_LEN];
        authenticator.copy_from_slice(&buf[4..HEADER]);
        Ok(Header {
            code: buf[0],
            id: buf[1],
            length,
            authenticator,
        })
    }
}

/// One attribute: its type, its value, and where its type octet sits in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    pub typ: u8,
    pub value: &'a [u8],
    pub offset: usize,
}

/// The attributes of a packet in order; a malformed one ends the walk with an error.
pub struct Attrs<'a> {
    packet: &'a [u8],
    pos: usize,
}

/// Walks the attributes of `packet` (the whole packet, header included, cut at its
/// length field).
pub fn attrs(packet: &[u8]) -> Attrs<'_> {
    Attrs {
        packet,
        pos: HEADER.min(packet.len()),
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<Attr<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        let p = self.packet;
        let at = self.pos;
        if at >= p.len() {
            return None;
        }
        if at + 2 > p.len() || p[at + 1] < 2 || at + p[at + 1] as usize > p.len() {
            self.pos = p.len();
            return Some(Err(Malformed::Attribute(at)));
        }
        let len = p[at + 1] as usize;
        self.pos = at + len;
        Some(Ok(Attr {
            typ: p[at],
            value: &p[at + 2..at + len],
            offset: at,
        }))
    }
}

/// Where a value lies in the packet: offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub at: u16,
    pub len: u16,
}

impl Span {
    /// The bytes of this span in `packet`.
    #[inline]
    pub fn of<'a>(&self, packet: &'a [u8]) -> &'a [u8] {
        &packet[self.at as usize..self.at as usize + self.len as usize]
    }
}

/// A request as the server needs it, from one walk: the header and where the
/// attributes it acts on are. The first instance of each counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub header: Header,
    pub user_name: Option<Span>,
    pub user_password: Option<Span>,
    pub chap_password: Option<Span>,
    pub chap_challenge: Option<Span>,
    /// Offset of the Message-Authenticator's 16-byte value.
    pub message_authenticator: Option<usize>,
    /// Proxy-State attributes (copied into the response in order, RFC 2865 §5.33).
    pub proxy_states: u16,
    pub eap: bool,
}

/// Parses a request in `buf` (which may hold padding past the length field): the
/// header, then every attribute, checking the lengths RFC 2865 and RFC 3579 fix
/// (User-Password 16..=128 in steps of 16, CHAP-Password 17, Message-Authenticator 16).
pub fn parse_request(buf: &[u8]) -> Result<Request, Malformed> {
    let header = Header::parse(buf)?;
    let packet = &buf[..header.length as usize];
    let mut r = Request {
        header,
        user_name: None,
        user_password: None,
        chap_password: None,
        chap_challenge: None,
        message_authenticator: None,
        proxy_states: 0,
        eap: false,
    };
    for a in attrs(packet) {
        let a = a?;
        let span = Span {
            at: (a.offset + 2) as u16,
            len: a.value.len() as u16,
        };
        let bad = || Malformed::AttributeLength {
            typ: a.typ,
            at: a.offset,
        };
        match a.typ {
            attr::USER_NAME if r.user_name.is_none() => r.user_name = Some(span),
            attr::USER_PASSWORD => {
                let n = a.value.len();
                if !(16..=128).contains(&n) || !n.is_multiple_of(16) {
                    return Err(bad());
                }
                r.user_password.get_or_insert(span);
            }
            attr::CHAP_PASSWORD => {
                if a.value.len() != 17 {
                    return Err(bad());
                }
                r.chap_password.get_or_insert(span);
            }
            attr::CHAP_CHALLENGE if r.chap_challenge.is_none() => r.chap_challenge = Some(span),
            attr::MESSAGE_AUTHENTICATOR => {
                if a.value.len() != AUTH_LEN {
                    return Err(bad());
                }
                r.message_authenticator.get_or_insert(a.offset + 2);
            }
            attr::PROXY_STATE => r.proxy_states += 1,
            attr::EAP_MESSAGE => r.eap = true,
            _ => {}
        }
    }
    Ok(r)
}

/// Appends attribute `typ` with `value` at `at` in `buf`; returns the new end, or
/// `None` if the value is over 253 bytes or the attribute does not fit.
#[inline]
pub fn put_attr(buf: &mut [u8], at: usize, typ: u8, value: &[u8]) -> Option<usize> {
    let end = at + 2 + value.len();
    if value.len() > 253 || end > buf.len() {
        return None;
    }
    buf[at] = typ;
    buf[at + 1] = (2 + value.len()) as u8;
    buf[at + 2..end].copy_from_slice(value);
    Some(end)
}

/// Writes the header fields code, id and length (the authenticator is written apart).
#[inline]
pub fn put_header(buf: &mut [u8], code: u8, id: u8, length: usize) {
    buf[0] = code;
    buf[1] = id;
    buf[2..4].copy_from_slice(&(length as u16).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bounds_and_padding() {
        assert_eq!(Header::parse(&[1; 19]), Err(Malformed::Short));
        let mut p = [0u8; 24];
        p[0] = 1;
        p[3] = 19;
        assert_eq!(Header::parse(&p), Err(Malformed::BadLength(19)));
        p[3] = 25;
        assert_eq!(
            Header::parse(&p),
            Err(Malformed::Truncated { field: 25, got: 24 })
        );
        p[3] = 20;
        let h = Header::parse(&p).unwrap();
        assert_eq!((h.code, h.length), (1, 20));
        // The 4 octets past the length field are padding: no attributes.
        assert_eq!(attrs(&p[..20]).count(), 0);
    }

    #[test]
    fn attribute_walk_stops_at_a_bad_length() {
        let mut p = vec![1, 0, 0, 0];
        p.extend([0; 16]);
        p.extend([1, 5, b'a', b'b', b'c']);
        p.extend([33, 1]);
        let n = p.len() as u16;
        p[2..4].copy_from_slice(&n.to_be_bytes());
        let got: Vec<_> = attrs(&p).collect();
        assert_eq!(got[0].unwrap().value, b"abc");
        assert_eq!(got[1], Err(Malformed::Attribute(25)));
        assert_eq!(parse_request(&p), Err(Malformed::Attribute(25)));
    }

    #[test]
    fn request_fields_and_fixed_lengths() {
        let mut p = vec![1, 7, 0, 0];
        p.extend([9; 16]);
        p.extend([1, 7, b'a', b'l', b'i', b'c', b'e']);
        p.extend([33, 3, 1, 33, 3, 2]);
        p.extend([80, 18]);
        p.extend([0; 16]);
        let n = p.len() as u16;
        p[2..4].copy_from_slice(&n.to_be_bytes());
        let r = parse_request(&p).unwrap();
        assert_eq!(r.user_name.unwrap().of(&p), b"alice");
        assert_eq!(r.proxy_states, 2);
        assert_eq!(r.message_authenticator, Some(p.len() - 16));
        // A Message-Authenticator of 15 bytes is malformed.
        let mut q = p.clone();
        q.truncate(q.len() - 1);
        let at = q.len() - 17;
        q[at + 1] = 17;
        let n = q.len() as u16;
        q[2..4].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            parse_request(&q),
            Err(Malformed::AttributeLength { typ: 80, .. })
        ));
    }

    #[test]
    fn put_attr_refuses_what_does_not_fit() {
        let mut b = [0u8; 10];
        assert_eq!(put_attr(&mut b, 0, 18, b"hi"), Some(4));
        assert_eq!(&b[..4], &[18, 4, b'h', b'i']);
        assert_eq!(put_attr(&mut b, 4, 18, b"toolong"), None);
        assert_eq!(put_attr(&mut [0u8; 300], 0, 18, &[0; 254]), None);
    }
}
