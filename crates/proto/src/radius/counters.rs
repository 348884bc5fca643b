//! What a RADIUS handler counts: requests by kind, accepts, rejects and drops by reason.
//!
//! One fixed array of (name, value) pairs bumped in place, published as it is (see
//! `Handler::counters`): the hot path never allocates or touches an atomic.

/// Slots of [`RadiusStats`], in the order of [`NAMES`].
pub mod slot {
    pub const ACCESS_REQUESTS: usize = 0;
    pub const ACCOUNTING_REQUESTS: usize = 1;
    pub const STATUS_SERVER: usize = 2;
    pub const ACCEPTS: usize = 3;
    pub const REJECTS_UNKNOWN_USER: usize = 4;
    pub const REJECTS_BAD_PASSWORD: usize = 5;
    pub const REJECTS_NO_CREDENTIALS: usize = 6;
    pub const REJECTS_AUTH_TYPE: usize = 7;
    pub const ACCOUNTING_RESPONSES: usize = 8;
    pub const PAP: usize = 9;
    pub const CHAP: usize = 10;
    pub const DUPLICATES: usize = 11;
    pub const DUP_CACHE_EVICTIONS: usize = 12;
    pub const DROPPED_MALFORMED: usize = 13;
    pub const DROPPED_UNKNOWN_CLIENT: usize = 14;
    pub const DROPPED_CODE: usize = 15;
    pub const DROPPED_MISSING_MESSAGE_AUTHENTICATOR: usize = 16;
    pub const DROPPED_BAD_MESSAGE_AUTHENTICATOR: usize = 17;
    pub const DROPPED_BAD_AUTHENTICATOR: usize = 18;
    pub const DROPPED_TOO_BIG: usize = 19;
}

/// Number of counters.
pub const COUNTERS: usize = 20;

/// Each counter's name (stable: they are JSON keys and metric names).
pub const NAMES: [&str; COUNTERS] = [
    "radius_access_requests",
    "radius_accounting_requests",
    "radius_status_server",
    "radius_accepts",
    "radius_rejects_unknown_user",
    "radius_rejects_bad_password",
    "radius_rejects_no_credentials",
    "radius_rejects_auth_type",
    "radius_accounting_responses",
    "radius_pap",
    "radius_chap",
    "radius_duplicates",
    "radius_dup_cache_evictions",
    "radius_dropped_malformed",
    "radius_dropped_unknown_client",
    "radius_dropped_code",
    "radius_dropped_missing_message_authenticator",
    "radius_dropped_bad_message_authenticator",
    "radius_dropped_bad_authenticator",
    "radius_dropped_too_big",
];

/// One handler's counters, cumulative.
pub type RadiusStats = crate::counters::Counters<COUNTERS>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_slot_order() {
        let mut s = RadiusStats::new(&NAMES);
        s.bump(slot::DROPPED_TOO_BIG);
        assert_eq!(s.named()[COUNTERS - 1], ("radius_dropped_too_big", 1));
        assert_eq!(NAMES[slot::DUPLICATES], "radius_duplicates");
        assert_eq!(NAMES[slot::REJECTS_AUTH_TYPE], "radius_rejects_auth_type");
        for (i, n) in NAMES.iter().enumerate() {
            assert!(!NAMES[i + 1..].contains(n), "{n}");
        }
    }
}
