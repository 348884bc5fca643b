//! Addresses and networks: who may transfer zones (`--allow-transfer`), and the network a
//! client counts as, for response rate limiting and the TCP connection limits.

use std::net::IpAddr;

/// An address or prefix (`192.0.2.0/24`, `2001:db8::/32`, `127.0.0.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| {
            format!("'{s}' is not an address or prefix (e.g. 192.0.2.1, 10.0.0.0/8, ::1)")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("'{s}': the prefix length must be 0 to {max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Prefix {
    /// Whether `ip` lies in this prefix (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (a, b, bits) = match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
            _ => return false,
        };
        let len = self.len as u32;
        len == 0 || (a >> (bits - len)) == (b >> (bits - len))
    }
}

/// The network of a client address: an IPv4 or IPv6 prefix of a given length, with
/// IPv4-mapped IPv6 addresses (a dual-stack socket's IPv4 clients) counted as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Net {
    v6: bool,
    bits: u128,
}

impl Net {
    /// The network of `ip`: its first `v4` bits if IPv4, its first `v6` bits if IPv6.
    pub fn of(ip: IpAddr, v4: u8, v6: u8) -> Net {
        let keep = |bits: u128, len: u8, width: u32| match len as u32 {
            0 => 0,
            l if l >= width => bits,
            l => bits >> (width - l) << (width - l),
        };
        match ip {
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(m) => Net::of(IpAddr::V4(m), v4, v6),
                None => Net {
                    v6: true,
                    bits: keep(u128::from(a), v6, 128),
                },
            },
            IpAddr::V4(a) => Net {
                v6: false,
                bits: keep(u32::from(a) as u128, v4, 32),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_by_their_length() {
        let p: Prefix = "192.0.2.0/24".parse().unwrap();
        assert!(p.contains("192.0.2.77".parse().unwrap()));
        assert!(!p.contains("192.0.3.1".parse().unwrap()));
        assert!(p.contains("::ffff:192.0.2.1".parse().unwrap()));
        let one: Prefix = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("127.0.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("nope".parse::<Prefix>().is_err());
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
    }
}
