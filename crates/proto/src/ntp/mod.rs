//! An NTP server (RFC 5905 server mode): answers client requests (mode 3, and NTPv1's) and
//! symmetric active requests (mode 1, in passive mode) from the system clock, as chronyd
//! answers them; never answers control (6) or private (7) mode, so it amplifies nothing.
//!
//! [`state`] builds what the server announces about its clock (from flags and the
//! kernel's `adjtimex` state, refreshed every second by [`state::ClockWatch`]);
//! [`handler::NtpHandler`] answers on the hot path; [`ratelimit`] is chronyd's per-source
//! `ratelimit`, Kiss-o'-Death RATE included; [`interleave`] is what interleaved mode
//! remembers of each response. NTS (RFC 8915) is not implemented: an NTS
//! request is dropped and counted, as is one carrying a symmetric-key MAC (no keys are
//! configured).

pub mod counters;
pub mod handler;
pub mod interleave;
pub mod ratelimit;
pub mod state;

pub use counters::NtpStats;
pub use handler::{NtpHandler, NtpOptions, DEFAULT_RATELIMIT_SOURCES};
pub use interleave::{Interleave, DEFAULT_INTERLEAVED_ENTRIES};
pub use ratelimit::{Limit, RateLimitConfig, RateLimiter};
pub use state::{ClockConfig, ClockWatch, LiveState, ServerState, StateError, StateSource};
