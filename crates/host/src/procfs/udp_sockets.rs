//! /proc/net/udp and /proc/net/udp6: one row per UDP socket, with its receive queue and its
//! drop counter (datagrams lost because this socket's buffer was full).
//!
//! Addresses are the kernel's raw network-order words printed as native-endian hex, so each
//! 32-bit group is turned back into bytes with the host's byte order; ports are plain hex.

use super::{dec, hex, ParseError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const FILE: &str = "/proc/net/udp";

/// One UDP socket.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpSocketRow {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub tx_queue: u64,
    /// Bytes waiting to be read (including overhead).
    pub rx_queue: u64,
    pub uid: u32,
    pub inode: u64,
    pub drops: u64,
}

/// Parses /proc/net/udp or /proc/net/udp6 (the address width tells which).
pub fn parse(text: &str) -> Result<Vec<UdpSocketRow>, ParseError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.is_empty() || cols[0] == "sl" {
            continue;
        }
        if cols.len() < 13 {
            return Err(ParseError::line(
                FILE,
                lineno,
                format!("{} columns, need at least 13", cols.len()),
            ));
        }
        let (tx, rx) = cols[4]
            .split_once(':')
            .ok_or_else(|| ParseError::line(FILE, lineno, "tx_queue:rx_queue without ':'"))?;
        rows.push(UdpSocketRow {
            local: addr(lineno, cols[1])?,
            remote: addr(lineno, cols[2])?,
            tx_queue: hex(FILE, lineno, "tx_queue", tx)?,
            rx_queue: hex(FILE, lineno, "rx_queue", rx)?,
            uid: u32::try_from(dec(FILE, lineno, "uid", cols[7])?)
                .map_err(|_| ParseError::line(FILE, lineno, "uid does not fit 32 bits"))?,
            inode: dec(FILE, lineno, "inode", cols[9])?,
            drops: dec(FILE, lineno, "drops", cols[12])?,
        });
    }
    Ok(rows)
}

fn addr(lineno: usize, s: &str) -> Result<SocketAddr, ParseError> {
    let (ip, port) = s
        .split_once(':')
        .ok_or_else(|| ParseError::line(FILE, lineno, format!("address {s:?} without ':'")))?;
    let port = hex(FILE, lineno, "port", port)? as u16;
    let words = ip
        .as_bytes()
        .chunks(8)
        .map(|w| {
            let w = std::str::from_utf8(w).unwrap_or("");
            u32::from_str_radix(w, 16).map(u32::to_ne_bytes)
        })
        .collect::<Result<Vec<[u8; 4]>, _>>()
        .map_err(|_| ParseError::line(FILE, lineno, format!("address {ip:?} is not hex")))?;
    let ip = match (ip.len(), words.as_slice()) {
        (8, [w]) => IpAddr::V4(Ipv4Addr::from(*w)),
        (32, [a, b, c, d]) => {
            let mut bytes = [0u8; 16];
            for (k, w) in [a, b, c, d].iter().enumerate() {
                bytes[k * 4..k * 4 + 4].copy_from_slice(*w);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => {
            return Err(ParseError::line(
                FILE,
                lineno,
                format!("address {ip:?} is neither 8 nor 32 hex digits"),
            ))
        }
    };
    Ok(SocketAddr::new(ip, port))
}
