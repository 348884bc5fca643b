//! Request handlers that plug into the engine's [`firehose_engine::Handler`] trait.

pub mod echo;

pub use echo::Echo;
