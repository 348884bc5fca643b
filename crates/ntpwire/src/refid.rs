//! Reference IDs (RFC 5905 §7.3): for stratum 0 (Kiss-o'-Death) and 1 a four-letter ASCII
//! code, above that the upstream server's IPv4 address or the first four bytes of the MD5
//! hash of its IPv6 address.

use md5::{Digest, Md5};
use std::net::IpAddr;

/// A reference ID as the 32-bit word on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RefId(pub u32);

/// Kiss-o'-Death codes (RFC 5905 §7.4), sent as the reference ID of a stratum-0 packet.
pub mod kod {
    use super::RefId;
    /// Rate exceeded: the client should reduce its polling rate.
    pub const RATE: RefId = RefId::code(*b"RATE");
    /// Access denied.
    pub const DENY: RefId = RefId::code(*b"DENY");
    /// Access restricted.
    pub const RSTR: RefId = RefId::code(*b"RSTR");
    /// NTS negative acknowledgment (RFC 8915).
    pub const NTSN: RefId = RefId::code(*b"NTSN");
}

/// chrony's reference ID for its `local` reference (127.127.1.1).
pub const LOCAL: RefId = RefId(0x7F7F_0101);

impl RefId {
    /// A four-letter code (a reference clock's, or a KoD).
    pub const fn code(c: [u8; 4]) -> RefId {
        RefId(u32::from_be_bytes(c))
    }

    /// The reference ID of an upstream server's address.
    pub fn of_addr(ip: IpAddr) -> RefId {
        match ip {
            IpAddr::V4(v4) => RefId(u32::from(v4)),
            IpAddr::V6(v6) => {
                let h = Md5::digest(v6.octets());
                RefId(u32::from_be_bytes([h[0], h[1], h[2], h[3]]))
            }
        }
    }

    /// Parses what a user writes: an IPv4 or IPv6 address, or one to four ASCII letters or
    /// digits (a code, padded with NULs as RFC 5905 pads "GPS").
    pub fn parse(s: &str) -> Result<RefId, String> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(RefId::of_addr(ip));
        }
        if s.is_empty()
            || s.len() > 4
            || !s
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        {
            return Err(format!(
                "'{s}' is not a reference ID: give an IPv4 or IPv6 address, or a code of 1 to 4 capital letters or digits (GPS, PPS, LOCL)"
            ));
        }
        let mut c = [0u8; 4];
        c[..s.len()].copy_from_slice(s.as_bytes());
        Ok(RefId::code(c))
    }

    /// The ID as the text a reader expects for a packet of `stratum`: a code for strata 0
    /// and 1 (when printable), a dotted quad otherwise (an IPv6 hash prints as one too).
    pub fn display(self, stratum: u8) -> String {
        let b = self.0.to_be_bytes();
        let printable = b.iter().all(|&c| c == 0 || c.is_ascii_graphic());
        if stratum <= 1 && printable && b[0] != 0 {
            b.iter()
                .take_while(|&&c| c != 0)
                .map(|&c| char::from(c))
                .collect()
        } else {
            std::net::Ipv4Addr::from(self.0).to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_addresses_and_hashes() {
        assert_eq!(kod::RATE.0, 0x5241_5445);
        assert_eq!(RefId::parse("GPS").unwrap().0, 0x4750_5300);
        assert_eq!(RefId::parse("GPS").unwrap().display(1), "GPS");
        assert_eq!(RefId::parse("192.0.2.1").unwrap().0, 0xC000_0201);
        assert_eq!(RefId::parse("192.0.2.1").unwrap().display(2), "192.0.2.1");
        assert_eq!(LOCAL.display(10), "127.127.1.1");
        // MD5 of ::1 (fifteen zero bytes and a one) begins 0xcf404dc8.
        assert_eq!(RefId::parse("::1").unwrap().0, 0xcf40_4dc8);
        for bad in ["", "gps", "TOOLONG", "A B"] {
            assert!(RefId::parse(bad).is_err(), "{bad}");
        }
    }
}
