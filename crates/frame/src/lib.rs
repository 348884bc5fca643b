//! UDP over IPv4/IPv6 over Ethernet (with at most one 802.1Q tag), as bytes in a frame.
//!
//! Three jobs, shared by the server's and the generator's AF_XDP paths: [`parse`] a frame to
//! its UDP payload and addresses; [`reply_in_place`] turn a request frame whose payload the
//! handler has overwritten into the reply (MACs, addresses and ports swapped, TTL or hop limit
//! set, lengths and checksums recomputed); [`write_request`] build a frame from scratch.
//! Checksums are always computed in full: the receiving kernel verifies them (the UDP checksum
//! is mandatory over IPv6), and a request's own UDP checksum may be a partial one left by a
//! sender that offloads checksumming (veth does), so it is never trusted or reused.

pub mod csum;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Ethernet header length without a VLAN tag.
pub const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;
const UDP_HLEN: usize = 8;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const IPPROTO_UDP: u8 = 17;

/// Why a frame is not a UDP datagram this code handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("frame shorter than its headers")]
    Short,
    #[error("not IPv4 or IPv6")]
    NotIp,
    #[error("not UDP (or behind an IPv6 extension header)")]
    NotUdp,
    #[error("IP fragment")]
    Fragment,
    #[error("length fields disagree with the frame")]
    BadLength,
}

/// Where things are in a parsed UDP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp {
    /// Offset of the IP header (14, or 18 behind a VLAN tag).
    pub l3: usize,
    /// Offset of the UDP header.
    pub l4: usize,
    /// Length of the UDP payload, which starts at `l4 + 8`.
    pub len: usize,
    /// Sender's address and port.
    pub src: SocketAddr,
    /// Receiver's address and port.
    pub dst: SocketAddr,
}

impl Udp {
    /// Offset of the payload.
    pub fn payload(&self) -> usize {
        self.l4 + UDP_HLEN
    }

    /// True for IPv6.
    pub fn is_v6(&self) -> bool {
        self.src.is_ipv6()
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Finds the UDP payload of `frame` (the frame's length is what was received; Ethernet
/// padding after the IP packet is ignored).
pub fn parse(frame: &[u8]) -> Result<Udp, ParseError> {
    if frame.len() < ETH_HLEN {
        return Err(ParseError::Short);
    }
    let (mut ethertype, mut l3) = (be16(frame, 12), ETH_HLEN);
    if ethertype == ETH_P_8021Q {
        if frame.len() < ETH_HLEN + VLAN_HLEN {
            return Err(ParseError::Short);
        }
        ethertype = be16(frame, 16);
        l3 += VLAN_HLEN;
    }
    let ip = &frame[l3..];
    let (l4_rel, ip_end, src, dst) = match ethertype {
        ETH_P_IP => {
            if ip.len() < IPV4_HLEN || ip[0] >> 4 != 4 {
                return Err(ParseError::Short);
            }
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = be16(ip, 2) as usize;
            if ihl < IPV4_HLEN || total < ihl + UDP_HLEN || total > ip.len() {
                return Err(ParseError::BadLength);
            }
            if ip[9] != IPPROTO_UDP {
                return Err(ParseError::NotUdp);
            }
            if be16(ip, 6) & 0x3fff != 0 {
                return Err(ParseError::Fragment);
            }
            let s = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let d = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            (ihl, total, IpAddr::V4(s), IpAddr::V4(d))
        }
        ETH_P_IPV6 => {
            if ip.len() < IPV6_HLEN + UDP_HLEN {
                return Err(ParseError::Short);
            }
            if ip[6] != IPPROTO_UDP {
                return Err(if ip[6] == 44 {
                    ParseError::Fragment
                } else {
                    ParseError::NotUdp
                });
            }
            let total = IPV6_HLEN + be16(ip, 4) as usize;
            if total < IPV6_HLEN + UDP_HLEN || total > ip.len() {
                return Err(ParseError::BadLength);
            }
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&ip[8..24]);
            d.copy_from_slice(&ip[24..40]);
            (
                IPV6_HLEN,
                total,
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
            )
        }
        _ => return Err(ParseError::NotIp),
    };
    let udp = &ip[l4_rel..ip_end];
    let udp_len = be16(udp, 4) as usize;
    if udp_len < UDP_HLEN || udp_len > udp.len() {
        return Err(ParseError::BadLength);
    }
    Ok(Udp {
        l3,
        l4: l3 + l4_rel,
        len: udp_len - UDP_HLEN,
        src: SocketAddr::new(src, be16(udp, 0)),
        dst: SocketAddr::new(dst, be16(udp, 2)),
    })
}

/// The UDP checksum over the pseudo-header, UDP header (its checksum field zeroed) and
/// payload of the IP packet at `frame[l3..]`; 0 is sent as 0xffff.
fn udp_checksum(frame: &[u8], l3: usize, l4: usize, v6: bool) -> u16 {
    let udp_len = be16(frame, l4 + 4) as usize;
    let addrs = if v6 {
        &frame[l3 + 8..l3 + 40]
    } else {
        &frame[l3 + 12..l3 + 20]
    };
    let mut sum = csum::add(0, addrs);
    sum += IPPROTO_UDP as u64 + udp_len as u64;
    sum = csum::add(sum, &frame[l4..l4 + 6]);
    sum = csum::add(sum, &frame[l4 + UDP_HLEN..l4 + udp_len]);
    match csum::finish(sum) {
        0 => 0xffff,
        c => c,
    }
}

/// True when the IPv4 header checksum (IPv6 has none) and the UDP checksum of a parsed
/// frame are right; a UDP checksum of 0 over IPv4 means "none" and passes. A sender that
/// offloads checksumming and whose frames reach us before the offload is done (a kernel
/// socket behind a veth) leaves a partial UDP checksum that fails here.
pub fn checksums_ok(frame: &[u8], u: &Udp) -> bool {
    (u.is_v6() || csum::of(&frame[u.l3..u.l4]) == 0) && udp_checksum_ok(frame, u)
}

/// True when the UDP checksum of a parsed frame is right (or absent over IPv4).
pub fn udp_checksum_ok(frame: &[u8], u: &Udp) -> bool {
    let stored = be16(frame, u.l4 + 6);
    if stored == 0 && !u.is_v6() {
        return true;
    }
    udp_checksum(frame, u.l3, u.l4, u.is_v6()) == stored
}

/// Turns the request frame described by `u` into its reply, whose payload (`reply_len`
/// bytes) the caller already wrote at `u.payload()`: Ethernet and IP addresses and UDP ports
/// swapped, TTL/hop limit set, lengths and checksums recomputed. Returns the reply frame's
/// length. `frame` must hold `u.payload() + reply_len` bytes; the IPv4 header's options, ID
/// and flags are kept.
pub fn reply_in_place(frame: &mut [u8], u: &Udp, reply_len: usize, ttl: u8) -> usize {
    let end = u.payload() + reply_len;
    let udp_len = (UDP_HLEN + reply_len) as u16;
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&frame[6..12]);
    macs[6..].copy_from_slice(&frame[..6]);
    frame[..12].copy_from_slice(&macs);
    let (l3, l4) = (u.l3, u.l4);
    if u.is_v6() {
        let mut a = [0u8; 32];
        a[..16].copy_from_slice(&frame[l3 + 24..l3 + 40]);
        a[16..].copy_from_slice(&frame[l3 + 8..l3 + 24]);
        frame[l3 + 8..l3 + 40].copy_from_slice(&a);
        put16(frame, l3 + 4, udp_len); // payload length: UDP follows directly
        frame[l3 + 7] = ttl;
    } else {
        let mut a = [0u8; 8];
        a[..4].copy_from_slice(&frame[l3 + 16..l3 + 20]);
        a[4..].copy_from_slice(&frame[l3 + 12..l3 + 16]);
        frame[l3 + 12..l3 + 20].copy_from_slice(&a);
        let ihl = l4 - l3;
        put16(frame, l3 + 2, (ihl + UDP_HLEN + reply_len) as u16);
        frame[l3 + 8] = ttl;
        put16(frame, l3 + 10, 0);
        let c = csum::of(&frame[l3..l4]);
        put16(frame, l3 + 10, c);
    }
    let (sport, dport) = (be16(frame, l4), be16(frame, l4 + 2));
    put16(frame, l4, dport);
    put16(frame, l4 + 2, sport);
    put16(frame, l4 + 4, udp_len);
    put16(frame, l4 + 6, 0);
    let c = udp_checksum(frame, l3, l4, u.is_v6());
    put16(frame, l4 + 6, c);
    end
}

/// Link and network addresses of a frame to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// An 802.1Q tag (VLAN id and priority bits) to insert, if any.
    pub vlan: Option<u16>,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub ttl: u8,
}

/// Bytes of headers before the payload for a frame with `e`'s shape.
pub fn header_len(e: &Endpoints) -> usize {
    let ip = if e.dst.is_ipv6() {
        IPV6_HLEN
    } else {
        IPV4_HLEN
    };
    ETH_HLEN + e.vlan.map_or(0, |_| VLAN_HLEN) + ip + UDP_HLEN
}

/// Writes a complete frame carrying `payload` from `e.src` to `e.dst` into `buf`; returns
/// its length, or None when `buf` is too small or the families of the addresses differ.
pub fn write_request(buf: &mut [u8], e: &Endpoints, payload: &[u8]) -> Option<usize> {
    let hl = header_len(e);
    buf.get_mut(hl..hl + payload.len())?
        .copy_from_slice(payload);
    write_headers(buf, e, payload.len())
}

/// Writes the headers of a frame from `e.src` to `e.dst` in front of a payload of
/// `payload_len` bytes already at `buf[header_len(e)..]` (a generator writes its request
/// there directly); returns the frame's length, or None as for [`write_request`].
pub fn write_headers(buf: &mut [u8], e: &Endpoints, payload_len: usize) -> Option<usize> {
    let hl = header_len(e);
    let total = hl + payload_len;
    if buf.len() < total || e.src.is_ipv6() != e.dst.is_ipv6() || payload_len > 0xffff - 48 {
        return None;
    }
    buf[..6].copy_from_slice(&e.dst_mac);
    buf[6..12].copy_from_slice(&e.src_mac);
    let mut l3 = ETH_HLEN;
    if let Some(tag) = e.vlan {
        put16(buf, 12, ETH_P_8021Q);
        put16(buf, 14, tag);
        l3 += VLAN_HLEN;
    }
    let udp_len = (UDP_HLEN + payload_len) as u16;
    let l4 = match (e.src.ip(), e.dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put16(buf, l3 - 2, ETH_P_IP);
            let h = &mut buf[l3..l3 + IPV4_HLEN];
            h.fill(0);
            h[0] = 0x45; // version 4, 20-byte header
            h[6] = 0x40; // don't fragment
            h[8] = e.ttl;
            h[9] = IPPROTO_UDP;
            put16(h, 2, IPV4_HLEN as u16 + udp_len);
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let c = csum::of(h);
            put16(h, 10, c);
            l3 + IPV4_HLEN
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            put16(buf, l3 - 2, ETH_P_IPV6);
            let h = &mut buf[l3..l3 + IPV6_HLEN];
            h[..4].copy_from_slice(&[0x60, 0, 0, 0]);
            put16(h, 4, udp_len);
            h[6] = IPPROTO_UDP;
            h[7] = e.ttl;
            h[8..24].copy_from_slice(&s.octets());
            h[24..40].copy_from_slice(&d.octets());
            l3 + IPV6_HLEN
        }
        _ => return None,
    };
    put16(buf, l4, e.src.port());
    put16(buf, l4 + 2, e.dst.port());
    put16(buf, l4 + 4, udp_len);
    put16(buf, l4 + 6, 0);
    let c = udp_checksum(buf, l3, l4, e.dst.is_ipv6());
    put16(buf, l4 + 6, c);
    Some(total)
}

/// A MAC address as the kernel prints it (`02:00:00:00:00:aa`, e.g. in
/// /sys/class/net/IFACE/address); surrounding whitespace is ignored.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut m {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// A MAC address in the kernel's form, the inverse of [`parse_mac`].
pub fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests;
