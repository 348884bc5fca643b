//! An authoritative DNS responder: zones from RFC 1035 master files, answers
//! pre-rendered at start, and an allocation-free hot path.
//!
//! Loading: [`zone`] parses files (with NLnet Labs' `domain`), [`build`] resolves every
//! answer into a [`db::Template`]. Serving: [`handler::DnsHandler`] parses a query
//! ([`wire`]), finds the template for (name, type) and copies it behind the question.

mod arena;
pub mod build;
pub mod counters;
pub mod db;
pub mod dname;
pub mod dnssec;
mod entries;
pub mod handler;
mod hash;
pub mod live;
pub mod nsec3;
pub mod options;
pub mod prefix;
pub mod reload;
pub mod rrl;
pub mod serve;
pub mod tcp;
mod template;
pub mod zone;
mod zonefile;

/// The wire format lives in its own leaf crate, shared with the load generator.
pub use firehose_dnswire as wire;

pub use build::BuildError;
pub use counters::DnsStats;
pub use db::ZoneSet;
pub use handler::{DnsHandler, Transport, DEFAULT_MAX_UDP};
pub use live::LiveZones;
pub use prefix::Prefix;
pub use reload::{Outcome, Reloader};
pub use rrl::RrlConfig;
pub use tcp::{TcpConfig, TcpServer};
pub use zone::{Limits, ZoneError, DEFAULT_NSEC3_MAX_ITERATIONS, DEFAULT_ZONE_MAX_SIZE};

use std::path::Path;
use std::sync::Arc;

/// Why zones could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error(transparent)]
    Zone(#[from] ZoneError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Loads zone files within the default [`Limits`] and renders every answer, ready to
/// share between workers.
pub fn load_zones<P: AsRef<Path>>(paths: &[P]) -> Result<Arc<ZoneSet>, DnsError> {
    load_zones_limited(paths, &Limits::default())
}

/// Like [`load_zones`], within `limits`.
pub fn load_zones_limited<P: AsRef<Path>>(
    paths: &[P],
    limits: &Limits,
) -> Result<Arc<ZoneSet>, DnsError> {
    let zones = paths
        .iter()
        .map(|p| zone::load_zone_file(p.as_ref(), limits).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(build::build(&zones)?))
}
