//! `struct tcp_info` (linux/tcp.h) parsed from the bytes getsockopt(TCP_INFO) returned.
//!
//! Parsed by offset rather than through a C struct so an older kernel's shorter answer
//! still parses: a field beyond the returned length reads `None`, never a made-up 0.

/// Counters and state of one TCP connection that a bulk-transfer report needs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    pub state: u8,
    /// Consecutive retransmissions of the current segment (tcpi_retransmits).
    pub retransmits: u8,
    pub rto_us: Option<u32>,
    pub snd_mss: Option<u32>,
    pub rcv_mss: Option<u32>,
    pub rtt_us: Option<u32>,
    pub rttvar_us: Option<u32>,
    pub snd_cwnd: Option<u32>,
    pub pmtu: Option<u32>,
    /// Segments retransmitted over the connection's life (tcpi_total_retrans).
    pub total_retrans: Option<u32>,
    pub pacing_rate: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub delivery_rate: Option<u64>,
    /// Microseconds the connection was limited by the receive window / send buffer.
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4)
        .map(|s| u32::from_ne_bytes(s.try_into().expect("4 bytes")))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    b.get(off..off + 8)
        .map(|s| u64::from_ne_bytes(s.try_into().expect("8 bytes")))
}

impl TcpInfo {
    /// Parses the kernel's answer; offsets are those of linux/tcp.h.
    pub fn parse(b: &[u8]) -> TcpInfo {
        TcpInfo {
            state: b.first().copied().unwrap_or(0),
            retransmits: b.get(2).copied().unwrap_or(0),
            rto_us: u32_at(b, 8),
            snd_mss: u32_at(b, 16),
            rcv_mss: u32_at(b, 20),
            pmtu: u32_at(b, 60),
            rtt_us: u32_at(b, 68),
            rttvar_us: u32_at(b, 72),
            snd_cwnd: u32_at(b, 80),
            total_retrans: u32_at(b, 100),
            pacing_rate: u64_at(b, 104),
            bytes_acked: u64_at(b, 120),
            bytes_received: u64_at(b, 128),
            segs_out: u32_at(b, 136),
            segs_in: u32_at(b, 140),
            delivery_rate: u64_at(b, 160),
            rwnd_limited_us: u64_at(b, 176),
            sndbuf_limited_us: u64_at(b, 184),
            bytes_sent: u64_at(b, 200),
            bytes_retrans: u64_at(b, 208),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_by_offset_and_leaves_missing_fields_none() {
        let mut b = vec![0u8; 216];
        b[0] = 1;
        b[2] = 3;
        b[100..104].copy_from_slice(&7u32.to_ne_bytes());
        b[200..208].copy_from_slice(&123456u64.to_ne_bytes());
        let i = TcpInfo::parse(&b);
        assert_eq!((i.state, i.retransmits), (1, 3));
        assert_eq!(i.total_retrans, Some(7));
        assert_eq!(i.bytes_sent, Some(123456));
        let short = TcpInfo::parse(&b[..100]);
        assert_eq!(short.total_retrans, None);
        assert_eq!(short.bytes_sent, None);
        assert_eq!(short.snd_cwnd, Some(0));
    }
}
