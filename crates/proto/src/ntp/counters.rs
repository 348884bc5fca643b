//! What an NTP handler counts: requests answered by kind, drops by reason, and where each
//! response's receive and transmit timestamps came from (chrony's `serverstats` counts the
//! same: daemon, kernel and hardware stamps).
//!
//! One fixed array of (name, value) pairs bumped in place and published as it is: the hot
//! path never allocates or touches an atomic.

/// Slots of [`NtpStats`], in the order of [`NAMES`].
pub mod slot {
    /// Client requests (mode 3, and NTPv1's mode 0) answered in server mode.
    pub const CLIENT: usize = 0;
    /// Symmetric active requests (mode 1) answered in symmetric passive mode.
    pub const SYMMETRIC: usize = 1;
    /// Responses sent while announcing an unsynchronised clock (leap 3).
    pub const UNSYNCHRONISED: usize = 2;
    /// Kiss-o'-Death RATE responses sent instead of a limited response.
    pub const KOD_RATE: usize = 3;
    /// Requests over the rate limit answered anyway (chrony's leak).
    pub const RATELIMIT_LEAKED: usize = 4;
    /// Requests over the rate limit not answered.
    pub const RATELIMIT_DROPPED: usize = 5;
    pub const DROPPED_MALFORMED: usize = 6;
    /// Mode 6: control messages (ntpq), never answered.
    pub const DROPPED_CONTROL: usize = 7;
    /// Mode 7: ntpd's private mode (ntpdc, monlist), never answered.
    pub const DROPPED_PRIVATE: usize = 8;
    /// Modes 0 (but NTPv1), 2, 4, 5: not requests.
    pub const DROPPED_MODE: usize = 9;
    /// A symmetric-key MAC, a crypto-NAK or MS-SNTP: firehose holds no keys.
    pub const DROPPED_AUTH: usize = 10;
    /// NTS extension fields: NTS is not implemented.
    pub const DROPPED_NTS: usize = 11;
    /// Receive timestamps from the kernel's arrival stamp.
    pub const RX_KERNEL: usize = 12;
    /// Receive timestamps read by the handler (the backend gave no arrival stamp).
    pub const RX_DAEMON: usize = 13;
    /// Transmit timestamps read by the handler.
    pub const TX_DAEMON: usize = 14;
    /// Sources the rate limit's full table forgot to make room (0 without a rate limit).
    pub const RATELIMIT_EVICTIONS: usize = 15;
    /// Responses sent in interleaved mode (the transmit timestamp of the client's
    /// previous response).
    pub const INTERLEAVED: usize = 16;
    /// Requests that asked for interleaved mode with an origin not remembered (a new
    /// client's second request, an entry forgotten or used already): answered in basic
    /// mode, as chronyd answers them.
    pub const INTERLEAVED_MISSED: usize = 17;
    /// Entries the interleaved table forgot to make room.
    pub const INTERLEAVED_EVICTIONS: usize = 18;
    /// Transmit timestamps from the kernel's transmit stamp (interleaved responses).
    pub const TX_KERNEL: usize = 19;
}

/// Number of counters.
pub const COUNTERS: usize = 20;

/// Each counter's name (stable: they are JSON keys and metric names).
pub const NAMES: [&str; COUNTERS] = [
    "ntp_client",
    "ntp_symmetric",
    "ntp_unsynchronised",
    "ntp_kod_rate",
    "ntp_ratelimit_leaked",
    "ntp_ratelimit_dropped",
    "ntp_dropped_malformed",
    "ntp_dropped_control",
    "ntp_dropped_private",
    "ntp_dropped_mode",
    "ntp_dropped_auth",
    "ntp_dropped_nts",
    "ntp_rx_kernel",
    "ntp_rx_daemon",
    "ntp_tx_daemon",
    "ntp_ratelimit_evictions",
    "ntp_interleaved",
    "ntp_interleaved_missed",
    "ntp_interleaved_evictions",
    "ntp_tx_kernel",
];

/// One handler's counters, cumulative.
pub type NtpStats = crate::counters::Counters<COUNTERS>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_slot_order() {
        let mut s = NtpStats::new(&NAMES);
        s.bump(slot::RATELIMIT_EVICTIONS);
        assert_eq!(s.named()[15], ("ntp_ratelimit_evictions", 1));
        assert_eq!(NAMES[slot::TX_KERNEL], "ntp_tx_kernel");
        assert_eq!(NAMES[slot::DROPPED_CONTROL], "ntp_dropped_control");
        assert_eq!(NAMES[slot::KOD_RATE], "ntp_kod_rate");
        for (i, n) in NAMES.iter().enumerate() {
            assert!(!NAMES[i + 1..].contains(n), "{n}");
        }
    }
}
