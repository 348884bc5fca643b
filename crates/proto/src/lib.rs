//! Request handlers that plug into the engine's [`firehose_engine::Handler`] trait.

pub mod counters;
pub mod dns;
pub mod echo;
pub mod live;
pub mod ntp;
pub mod radius;

pub use dns::DnsHandler;
pub use echo::Echo;
pub use ntp::NtpHandler;
pub use radius::RadiusHandler;
