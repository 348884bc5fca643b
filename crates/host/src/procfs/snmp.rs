//! /proc/net/snmp and /proc/net/snmp6: the UDP counters. `RcvbufErrors` are datagrams dropped
//! because a socket's receive buffer was full; `InErrors` includes them.

use super::{dec, ParseError};

/// Host-wide UDP counters. Counters an older kernel does not print read as 0.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct UdpCounters {
    pub in_datagrams: u64,
    pub no_ports: u64,
    pub in_errors: u64,
    pub out_datagrams: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
    pub in_csum_errors: u64,
    pub ignored_multi: u64,
    pub mem_errors: u64,
}

impl UdpCounters {
    /// The counts since `before`, a reading of the same file.
    pub fn since(&self, before: &UdpCounters) -> UdpCounters {
        let d = |new: u64, old: u64| new.saturating_sub(old);
        UdpCounters {
            in_datagrams: d(self.in_datagrams, before.in_datagrams),
            no_ports: d(self.no_ports, before.no_ports),
            in_errors: d(self.in_errors, before.in_errors),
            out_datagrams: d(self.out_datagrams, before.out_datagrams),
            rcvbuf_errors: d(self.rcvbuf_errors, before.rcvbuf_errors),
            sndbuf_errors: d(self.sndbuf_errors, before.sndbuf_errors),
            in_csum_errors: d(self.in_csum_errors, before.in_csum_errors),
            ignored_multi: d(self.ignored_multi, before.ignored_multi),
            mem_errors: d(self.mem_errors, before.mem_errors),
        }
    }

    /// Sets the counter the kernel calls `name` (without the `Udp`/`Udp6` prefix); unknown
    /// names are ignored so a newer kernel's extra counters do not break parsing.
    fn set(&mut self, name: &str, value: u64) {
        let slot = match name {
            "InDatagrams" => &mut self.in_datagrams,
            "NoPorts" => &mut self.no_ports,
            "InErrors" => &mut self.in_errors,
            "OutDatagrams" => &mut self.out_datagrams,
            "RcvbufErrors" => &mut self.rcvbuf_errors,
            "SndbufErrors" => &mut self.sndbuf_errors,
            "InCsumErrors" => &mut self.in_csum_errors,
            "IgnoredMulti" => &mut self.ignored_multi,
            "MemErrors" => &mut self.mem_errors,
            _ => return,
        };
        *slot = value;
    }
}

/// Parses the `Udp:` header/value pair of lines in /proc/net/snmp (not `UdpLite:`).
pub fn parse_udp(text: &str) -> Result<UdpCounters, ParseError> {
    const FILE: &str = "/proc/net/snmp";
    let mut udp = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("Udp:"));
    let (_, header) = udp
        .next()
        .ok_or_else(|| ParseError::missing(FILE, "no \"Udp:\" lines"))?;
    let (i, values) = udp
        .next()
        .ok_or_else(|| ParseError::missing(FILE, "\"Udp:\" header without a value line"))?;
    let names: Vec<&str> = header.split_whitespace().skip(1).collect();
    let values: Vec<&str> = values.split_whitespace().skip(1).collect();
    if names.len() != values.len() {
        return Err(ParseError::line(
            FILE,
            i + 1,
            format!("{} values for {} names", values.len(), names.len()),
        ));
    }
    let mut c = UdpCounters::default();
    for (name, v) in names.iter().zip(values) {
        c.set(name, dec(FILE, i + 1, name, v)?);
    }
    Ok(c)
}

/// Parses the `Udp6InDatagrams  12` style lines of /proc/net/snmp6.
pub fn parse_udp6(text: &str) -> Result<UdpCounters, ParseError> {
    const FILE: &str = "/proc/net/snmp6";
    let mut c = UdpCounters::default();
    let mut seen = false;
    for (i, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let (Some(key), Some(v)) = (f.next(), f.next()) else {
            continue;
        };
        if let Some(name) = key.strip_prefix("Udp6") {
            c.set(name, dec(FILE, i + 1, key, v)?);
            seen = true;
        }
    }
    if !seen {
        return Err(ParseError::missing(FILE, "no Udp6 counters"));
    }
    Ok(c)
}
