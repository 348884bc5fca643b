//! What a DNS handler counts: responses by rcode, queries by type class, and the rest.
//!
//! The counts live in one fixed array of (name, value) pairs that the handler bumps in
//! place, so the engine can publish them as they are (one store per counter per batch,
//! see `Handler::counters`) and the hot path never allocates or touches an atomic.

/// Slots of [`DnsStats`], in the order of [`NAMES`].
pub mod slot {
    pub const NOERROR: usize = 0;
    pub const FORMERR: usize = 1;
    pub const SERVFAIL: usize = 2;
    pub const NXDOMAIN: usize = 3;
    pub const NOTIMP: usize = 4;
    pub const REFUSED: usize = 5;
    pub const BADVERS: usize = 6;
    pub const RCODE_OTHER: usize = 7;
    pub const TRUNCATED: usize = 8;
    pub const ADDITIONAL_TRIMMED: usize = 9;
    pub const DROPPED_SHORT: usize = 10;
    pub const DROPPED_RESPONSE: usize = 11;
    /// The first of the query type classes (see [`super::qtype_slot`]).
    pub const QTYPE_A: usize = 12;
    pub const QTYPE_OTHER: usize = 24;
    /// Response rate limiting (UDP only; the last two, left out over TCP).
    pub const RRL_DROPPED: usize = 25;
    pub const RRL_SLIPPED: usize = 26;
}

/// Number of counters.
pub const COUNTERS: usize = 27;

/// Each counter's name over UDP and over TCP.
const NAMES: [(&str, &str); COUNTERS] = [
    ("dns_noerror", "dns_tcp_noerror"),
    ("dns_formerr", "dns_tcp_formerr"),
    ("dns_servfail", "dns_tcp_servfail"),
    ("dns_nxdomain", "dns_tcp_nxdomain"),
    ("dns_notimp", "dns_tcp_notimp"),
    ("dns_refused", "dns_tcp_refused"),
    ("dns_badvers", "dns_tcp_badvers"),
    ("dns_rcode_other", "dns_tcp_rcode_other"),
    ("dns_truncated", "dns_tcp_truncated"),
    ("dns_additional_trimmed", "dns_tcp_additional_trimmed"),
    ("dns_dropped_short", "dns_tcp_dropped_short"),
    ("dns_dropped_response", "dns_tcp_dropped_response"),
    ("dns_qtype_a", "dns_tcp_qtype_a"),
    ("dns_qtype_aaaa", "dns_tcp_qtype_aaaa"),
    ("dns_qtype_nameserver", "dns_tcp_qtype_nameserver"),
    ("dns_qtype_cname", "dns_tcp_qtype_cname"),
    ("dns_qtype_soa", "dns_tcp_qtype_soa"),
    ("dns_qtype_ptr", "dns_tcp_qtype_ptr"),
    ("dns_qtype_mx", "dns_tcp_qtype_mx"),
    ("dns_qtype_txt", "dns_tcp_qtype_txt"),
    ("dns_qtype_srv", "dns_tcp_qtype_srv"),
    ("dns_qtype_ds", "dns_tcp_qtype_ds"),
    ("dns_qtype_dnskey", "dns_tcp_qtype_dnskey"),
    ("dns_qtype_any", "dns_tcp_qtype_any"),
    ("dns_qtype_other", "dns_tcp_qtype_other"),
    ("dns_rrl_dropped", "dns_tcp_rrl_dropped"),
    ("dns_rrl_slipped", "dns_tcp_rrl_slipped"),
];

/// The query types counted on their own, in slot order from [`slot::QTYPE_A`]: A AAAA NS
/// (named `nameserver`: promtool reads `_ns` as nanoseconds) CNAME SOA PTR MX TXT SRV DS
/// DNSKEY ANY; every other type is `qtype_other`.
const QTYPES: [u16; 12] = [1, 28, 2, 5, 6, 12, 15, 16, 33, 43, 48, 255];

/// Slot per query type below 256 (one load on the hot path instead of a chain of tests).
const QTYPE_SLOT: [u8; 256] = {
    let mut t = [slot::QTYPE_OTHER as u8; 256];
    let mut k = 0;
    while k < QTYPES.len() {
        t[QTYPES[k] as usize] = (slot::QTYPE_A + k) as u8;
        k += 1;
    }
    t
};

/// Slot per response code 0..=16 (16 is BADVERS, the extended rcode).
const RCODE_SLOT: [u8; 17] = {
    let mut t = [slot::RCODE_OTHER as u8; 17];
    let codes = [
        (0, slot::NOERROR),
        (1, slot::FORMERR),
        (2, slot::SERVFAIL),
        (3, slot::NXDOMAIN),
        (4, slot::NOTIMP),
        (5, slot::REFUSED),
        (16, slot::BADVERS),
    ];
    let mut k = 0;
    while k < codes.len() {
        t[codes[k].0] = codes[k].1 as u8;
        k += 1;
    }
    t
};

/// The slot of a query type.
#[inline]
pub fn qtype_slot(qtype: u16) -> usize {
    match QTYPE_SLOT.get(qtype as usize) {
        Some(&s) => s as usize,
        None => slot::QTYPE_OTHER,
    }
}

/// The slot of a response code.
#[inline]
fn rcode_slot(rc: u16) -> usize {
    match RCODE_SLOT.get(rc as usize) {
        Some(&s) => s as usize,
        None => slot::RCODE_OTHER,
    }
}

/// One handler's counters, cumulative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsStats {
    counts: [(&'static str, u64); COUNTERS],
    /// Over TCP: named `dns_tcp_*`, and without the rate-limiting counters.
    tcp: bool,
}

impl Default for DnsStats {
    fn default() -> Self {
        Self::udp()
    }
}

impl DnsStats {
    /// Zeroed counters named for UDP (`dns_*`).
    pub fn udp() -> Self {
        DnsStats {
            counts: std::array::from_fn(|i| (NAMES[i].0, 0)),
            tcp: false,
        }
    }

    /// Zeroed counters named for TCP (`dns_tcp_*`).
    pub fn tcp() -> Self {
        DnsStats {
            counts: std::array::from_fn(|i| (NAMES[i].1, 0)),
            tcp: true,
        }
    }

    /// Adds one to counter `slot`.
    #[inline]
    pub fn bump(&mut self, slot: usize) {
        self.counts[slot].1 += 1;
    }

    /// Sets counter `slot` (for counts kept elsewhere, e.g. by the rate limiter).
    #[inline]
    pub fn set(&mut self, slot: usize, v: u64) {
        self.counts[slot].1 = v;
    }

    /// Counts one response with code `rc`.
    #[inline]
    pub fn response(&mut self, rc: impl Into<u16>) {
        self.bump(rcode_slot(rc.into()));
    }

    /// Counts one query of type `qtype`.
    #[inline]
    pub fn query(&mut self, qtype: u16) {
        self.bump(qtype_slot(qtype));
    }

    /// Counter `slot`.
    pub fn get(&self, slot: usize) -> u64 {
        self.counts[slot].1
    }

    /// Responses sent with code `rc`, for the codes counted on their own.
    pub fn rcode(&self, rc: impl Into<u16>) -> u64 {
        self.get(rcode_slot(rc.into()))
    }

    /// The counters as (name, value), fixed names in a fixed order.
    pub fn named(&self) -> &[(&'static str, u64)] {
        if self.tcp {
            &self.counts[..slot::RRL_DROPPED]
        } else {
            &self.counts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_rcode_and_type_class_under_fixed_names() {
        let mut s = DnsStats::udp();
        s.response(0u8);
        s.response(3u8);
        s.response(16u16);
        s.response(9u8);
        s.query(1);
        s.query(28);
        s.query(99);
        let get = |n: &str| s.named().iter().find(|(k, _)| *k == n).unwrap().1;
        assert_eq!(get("dns_noerror"), 1);
        assert_eq!(get("dns_nxdomain"), 1);
        assert_eq!(get("dns_badvers"), 1);
        assert_eq!(get("dns_rcode_other"), 1);
        assert_eq!(get("dns_qtype_a"), 1);
        assert_eq!(get("dns_qtype_aaaa"), 1);
        assert_eq!(get("dns_qtype_other"), 1);
        assert_eq!(s.named().len(), COUNTERS);
        let t = DnsStats::tcp();
        assert_eq!(t.named().len(), COUNTERS - 2);
        assert!(t.named().iter().all(|(n, _)| n.starts_with("dns_tcp_")));
        assert_eq!(NAMES[qtype_slot(255)].0, "dns_qtype_any");
        assert_eq!(NAMES[slot::QTYPE_OTHER].0, "dns_qtype_other");
        assert_eq!(NAMES[slot::RRL_SLIPPED].0, "dns_rrl_slipped");
        assert_eq!(NAMES[qtype_slot(2)].0, "dns_qtype_nameserver");
        assert_eq!(NAMES[qtype_slot(1000)].0, "dns_qtype_other");
        assert_eq!(NAMES[rcode_slot(2)].0, "dns_servfail");
        assert_eq!(NAMES[rcode_slot(4000)].0, "dns_rcode_other");
    }
}
