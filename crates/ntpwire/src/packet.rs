//! The NTP packet: a 48-byte header (RFC 5905 §7.3), then, in NTPv4, extension fields
//! (RFC 7822) and an optional MAC; in NTPv1-3 anything after the header is a MAC.
//!
//! [`parse`] checks what chrony's `parse_packet` checks, in the same order: a length of at
//! least the header and a multiple of 4, a version from 1 to 4, then the trailer. It only
//! reads the slice; nothing is allocated.

use crate::time::{Short, Timestamp};

/// Bytes of the header.
pub const HEADER_LEN: usize = 48;
/// The longest packet parsed: the header, 1024 bytes of extension fields and the longest
/// MAC (chrony's `NTP_Packet`). Longer datagrams are refused.
pub const MAX_LEN: usize = HEADER_LEN + 1024 + MAX_MAC_LEN;
/// The shortest extension field (RFC 7822 §3: 16 bytes, header and padding included).
pub const MIN_EF_LEN: usize = 16;
/// The shortest MAC: a key ID and a 16-byte (MD5) digest.
pub const MIN_MAC_LEN: usize = 4 + 16;
/// The longest MAC an NTPv4 packet may end with and still parse deterministically (RFC
/// 7822 §7.5: key ID and a 20-byte SHA-1 digest).
pub const MAX_V4_MAC_LEN: usize = 4 + 20;
/// The longest MAC of any version (key ID and a 64-byte digest).
pub const MAX_MAC_LEN: usize = 4 + 64;

/// The association modes (RFC 5905 Figure 10).
pub mod mode {
    pub const RESERVED: u8 = 0;
    pub const SYMMETRIC_ACTIVE: u8 = 1;
    pub const SYMMETRIC_PASSIVE: u8 = 2;
    pub const CLIENT: u8 = 3;
    pub const SERVER: u8 = 4;
    pub const BROADCAST: u8 = 5;
    /// NTP control messages (ntpq, RFC 9327): never answered by firehose.
    pub const CONTROL: u8 = 6;
    /// ntpd's private mode (ntpdc, monlist): never answered by firehose.
    pub const PRIVATE: u8 = 7;
}

/// Extension field types that make a request an NTS request (RFC 8915 §5.7).
pub mod ef {
    pub const NTS_UNIQUE_IDENTIFIER: u16 = 0x0104;
    pub const NTS_COOKIE: u16 = 0x0204;
    pub const NTS_COOKIE_PLACEHOLDER: u16 = 0x0304;
    pub const NTS_AUTHENTICATOR: u16 = 0x0404;
}

/// The leap indicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Leap {
    /// No leap second pending.
    None = 0,
    /// The last minute of the day has 61 seconds.
    Insert = 1,
    /// The last minute of the day has 59 seconds.
    Delete = 2,
    /// The clock is not synchronised (also set in Kiss-o'-Death packets).
    Unsynchronised = 3,
}

impl Leap {
    /// The leap indicator of the two bits `v & 3`.
    pub fn from_bits(v: u8) -> Leap {
        match v & 3 {
            0 => Leap::None,
            1 => Leap::Insert,
            2 => Leap::Delete,
            _ => Leap::Unsynchronised,
        }
    }

    /// A short name for reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Leap::None => "none",
            Leap::Insert => "insert",
            Leap::Delete => "delete",
            Leap::Unsynchronised => "unsynchronised",
        }
    }
}

/// The 48-byte header, field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub leap: Leap,
    pub version: u8,
    pub mode: u8,
    pub stratum: u8,
    /// log2 of the poll interval in seconds.
    pub poll: i8,
    /// log2 of the clock's precision in seconds.
    pub precision: i8,
    pub root_delay: Short,
    pub root_dispersion: Short,
    pub refid: u32,
    pub reference: Timestamp,
    pub origin: Timestamp,
    pub receive: Timestamp,
    pub transmit: Timestamp,
}

impl Header {
    /// Reads the header at the start of `b` (at least [`HEADER_LEN`] bytes).
    #[inline]
    pub fn read(b: &[u8]) -> Header {
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Header {
            leap: Leap::from_bits(b[0] >> 6),
            version: (b[0] >> 3) & 7,
            mode: b[0] & 7,
            stratum: b[1],
            poll: b[2] as i8,
            precision: b[3] as i8,
            root_delay: Short(u32_at(4)),
            root_dispersion: Short(u32_at(8)),
            refid: u32_at(12),
            reference: Timestamp::read(&b[16..]),
            origin: Timestamp::read(&b[24..]),
            receive: Timestamp::read(&b[32..]),
            transmit: Timestamp::read(&b[40..]),
        }
    }

    /// Writes the header into `b[0..48]`.
    #[inline]
    pub fn write(&self, b: &mut [u8]) {
        b[0] = (self.leap as u8) << 6 | (self.version & 7) << 3 | (self.mode & 7);
        b[1] = self.stratum;
        b[2] = self.poll as u8;
        b[3] = self.precision as u8;
        b[4..8].copy_from_slice(&self.root_delay.0.to_be_bytes());
        b[8..12].copy_from_slice(&self.root_dispersion.0.to_be_bytes());
        b[12..16].copy_from_slice(&self.refid.to_be_bytes());
        self.reference.write(&mut b[16..]);
        self.origin.write(&mut b[24..]);
        self.receive.write(&mut b[32..]);
        self.transmit.write(&mut b[40..]);
    }
}

/// Where the transmit timestamp sits in a packet (a sender that stamps late writes it there).
pub const TRANSMIT_AT: usize = 40;

/// What follows the header, as far as authentication goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Nothing, or only extension fields that do not authenticate.
    None,
    /// A symmetric-key MAC (RFC 5905 §7.3; in NTPv1-3 anything after the header).
    Symmetric { key_id: u32, mac_len: usize },
    /// A crypto-NAK: a MAC of four zero bytes.
    CryptoNak,
    /// NTS extension fields (RFC 8915).
    Nts,
    /// Microsoft's MS-SNTP authenticator (NTPv3, a key ID and a zero digest).
    MsSntp,
}

/// A parsed packet: its header and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    pub header: Header,
    /// Bytes of the whole packet.
    pub len: usize,
    /// NTPv4 extension fields seen (of any type).
    pub ext_fields: u16,
    pub auth: Auth,
}

/// Why a datagram is not an NTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{0} bytes: shorter than the 48-byte header")]
    Short(usize),
    #[error("{0} bytes: longer than the longest NTP packet ({MAX_LEN})")]
    Long(usize),
    #[error("{0} bytes: not a multiple of 4")]
    Unaligned(usize),
    #[error("version {0}: not 1 to 4")]
    Version(u8),
    #[error("a malformed extension field or MAC at byte {0}")]
    Trailer(usize),
}

/// Parses `b` as an NTP packet (see the module documentation for the checks).
pub fn parse(b: &[u8]) -> Result<Packet, ParseError> {
    let len = b.len();
    if len < HEADER_LEN {
        return Err(ParseError::Short(len));
    }
    if len > MAX_LEN {
        return Err(ParseError::Long(len));
    }
    if !len.is_multiple_of(4) {
        return Err(ParseError::Unaligned(len));
    }
    let header = Header::read(b);
    if !(1..=4).contains(&header.version) {
        return Err(ParseError::Version(header.version));
    }
    let mut p = Packet {
        header,
        len,
        ext_fields: 0,
        auth: Auth::None,
    };
    let rest = len - HEADER_LEN;
    if rest == 0 {
        return Ok(p);
    }
    let key_at = |at: usize| u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    if header.version <= 3 {
        // No extension fields before NTPv4: all of it is a MAC.
        let key_id = key_at(HEADER_LEN);
        let zero_digest = |from: usize| b[from..].iter().all(|&x| x == 0);
        p.auth = if header.version == 3 && key_id != 0 && rest == 20 && zero_digest(52) {
            Auth::MsSntp
        } else {
            Auth::Symmetric {
                key_id,
                mac_len: rest,
            }
        };
        return Ok(p);
    }
    if rest == 4 && key_at(HEADER_LEN) == 0 {
        p.auth = Auth::CryptoNak;
        return Ok(p);
    }
    let mut at = HEADER_LEN;
    while len - at > 0 {
        let left = len - at;
        if (MIN_MAC_LEN..=MAX_V4_MAC_LEN).contains(&left) {
            break;
        }
        // An extension field: type, length (of the whole field), body.
        if left <= MAX_V4_MAC_LEN || left < 4 {
            return Err(ParseError::Trailer(at));
        }
        let ty = u16::from_be_bytes([b[at], b[at + 1]]);
        let ef_len = usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        if ef_len < MIN_EF_LEN || !ef_len.is_multiple_of(4) || ef_len > left {
            return Err(ParseError::Trailer(at));
        }
        if matches!(
            ty,
            ef::NTS_UNIQUE_IDENTIFIER
                | ef::NTS_COOKIE
                | ef::NTS_COOKIE_PLACEHOLDER
                | ef::NTS_AUTHENTICATOR
        ) {
            p.auth = Auth::Nts;
        }
        p.ext_fields = p.ext_fields.saturating_add(1);
        at += ef_len;
    }
    let left = len - at;
    if left == 0 {
        return Ok(p);
    }
    if left >= MIN_MAC_LEN {
        // chrony lets a MAC after NTS fields decide the mode, as it is parsed last.
        p.auth = Auth::Symmetric {
            key_id: key_at(at),
            mac_len: left,
        };
        return Ok(p);
    }
    Err(ParseError::Trailer(at))
}

/// Writes a client request (mode 3) into `b[0..48]`: version `version`, poll `poll`, every
/// field zero but the transmit timestamp, which the caller chooses (a random value, as
/// chrony's client sends, reveals nothing of its clock and is matched in the response's
/// origin). Returns the length, 48.
pub fn client_request(b: &mut [u8], version: u8, poll: i8, transmit: Timestamp) -> usize {
    b[..HEADER_LEN].fill(0);
    b[0] = (version & 7) << 3 | mode::CLIENT;
    b[2] = poll as u8;
    transmit.write(&mut b[TRANSMIT_AT..]);
    HEADER_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        client_request(&mut b, 4, 6, Timestamp(0x5cbf_7605_45a3_9fb4));
        b
    }

    fn with(extra: &[u8]) -> Vec<u8> {
        let mut v = header().to_vec();
        v.extend_from_slice(extra);
        v
    }

    fn ef(ty: u16, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[..2].copy_from_slice(&ty.to_be_bytes());
        v[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        v
    }

    #[test]
    fn a_request_round_trips_field_by_field() {
        let b = header();
        let h = Header::read(&b);
        assert_eq!((h.leap, h.version, h.mode, h.poll), (Leap::None, 4, 3, 6));
        assert_eq!(h.transmit, Timestamp(0x5cbf_7605_45a3_9fb4));
        let mut out = [0u8; HEADER_LEN];
        h.write(&mut out);
        assert_eq!(out, b);
        assert_eq!(parse(&b).unwrap().auth, Auth::None);
    }

    #[test]
    fn lengths_and_versions_are_checked_first() {
        assert_eq!(parse(&[0u8; 47]), Err(ParseError::Short(47)));
        assert_eq!(parse(&with(&[0; 2])), Err(ParseError::Unaligned(50)));
        assert_eq!(
            parse(&vec![0x23; MAX_LEN + 4]),
            Err(ParseError::Long(MAX_LEN + 4))
        );
        let mut b = header();
        b[0] = 5 << 3 | 3;
        assert_eq!(parse(&b), Err(ParseError::Version(5)));
        b[0] = 3;
        assert_eq!(parse(&b), Err(ParseError::Version(0)));
    }

    #[test]
    fn trailers_are_classified_as_chrony_classifies_them() {
        assert_eq!(parse(&with(&[0; 4])).unwrap().auth, Auth::CryptoNak);
        let mut mac = vec![0u8; 20];
        mac[3] = 7;
        assert_eq!(
            parse(&with(&mac)).unwrap().auth,
            Auth::Symmetric {
                key_id: 7,
                mac_len: 20
            }
        );
        // A 4-byte trailer that is not a crypto-NAK, and 8 bytes: neither EF nor MAC.
        assert!(parse(&with(&[0, 0, 0, 1])).is_err());
        assert!(parse(&with(&[0; 8])).is_err());
        // An unknown extension field is skipped; NTS fields mark the request.
        let p = parse(&with(&ef(0x2005, 28))).unwrap();
        assert_eq!((p.ext_fields, p.auth), (1, Auth::None));
        let mut two = ef(ef::NTS_UNIQUE_IDENTIFIER, 36);
        two.extend(ef(ef::NTS_COOKIE, 104));
        let p = parse(&with(&two)).unwrap();
        assert_eq!((p.ext_fields, p.auth), (2, Auth::Nts));
        // A field claiming more than is left, or less than 16 bytes.
        let mut bad = ef(0x2005, 28);
        bad[3] = 64;
        assert_eq!(parse(&with(&bad)), Err(ParseError::Trailer(48)));
        let mut small = ef(0x2005, 28);
        small[3] = 12;
        assert!(parse(&with(&small)).is_err());
    }

    #[test]
    fn before_ntpv4_everything_after_the_header_is_a_mac() {
        let mut b = with(&[0, 0, 0, 9, 1, 2, 3, 4]);
        b[0] = 3 << 3 | 3;
        assert_eq!(
            parse(&b).unwrap().auth,
            Auth::Symmetric {
                key_id: 9,
                mac_len: 8
            }
        );
        let mut ms = with(&[0u8; 20]);
        ms[0] = 3 << 3 | 3;
        ms[51] = 1;
        assert_eq!(parse(&ms).unwrap().auth, Auth::MsSntp);
    }
}
