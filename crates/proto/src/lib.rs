//! Request handlers that plug into the engine's [`firehose_engine::Handler`] trait.

pub mod dns;
pub mod echo;
pub mod live;
pub mod radius;

pub use dns::DnsHandler;
pub use echo::Echo;
pub use radius::RadiusHandler;
