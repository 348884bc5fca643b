//! A RADIUS server (RFC 2865 authentication, RFC 2866 accounting): clients and users
//! from FreeRADIUS's own files, answers decided on the hot path without allocating.
//!
//! Loading: `firehose-radiuswire` parses `clients.conf` and the users file; [`db`]
//! builds the tables a handler reads. Serving: [`handler::RadiusHandler`] verifies,
//! decides and writes the response in place; [`dedup`] answers retransmissions.
//! [`reload::Reloader`] re-reads both files (SIGHUP) and publishes them whole.

pub mod counters;
pub mod db;
pub mod dedup;
pub mod handler;
pub mod reload;

/// The clients and users being served, replaceable while serving.
pub type LiveDb = crate::live::Live<db::RadiusDb>;

pub use counters::RadiusStats;
pub use db::RadiusDb;
pub use handler::{RadiusHandler, RadiusOptions, DEFAULT_DUP_ENTRIES, DEFAULT_DUP_WINDOW};
pub use reload::{Loaded, Reloader};
