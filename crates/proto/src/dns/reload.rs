//! Re-reading zone files while serving.
//!
//! Every file is read and checked in full before anything changes; the new set is
//! built aside and published in one step ([`LiveZones::publish`]), so a query sees
//! either the old zones or the new ones. A file that fails keeps its last good
//! version and the failure is
//! reported. The records of each file's last good version are kept (the served zones
//! hold them anyway, for zone transfers), so the old zone is rebuilt exactly without
//! reading its text again.

use super::build;
use super::live::LiveZones;
use super::zone::{self, ZoneData};
use super::DnsError;
use std::path::PathBuf;
use std::sync::Arc;

/// What a reload did to one file.
#[derive(Debug)]
pub enum Outcome {
    /// Loaded anew (records in the file).
    Loaded(usize),
    /// Failed; the previous version stays served.
    Kept(String),
}

/// Zone files, their last good records, and where to publish.
pub struct Reloader {
    paths: Vec<PathBuf>,
    max_size: u64,
    good: Vec<Arc<ZoneData>>,
    transfers: bool,
    live: Arc<LiveZones>,
}

impl Reloader {
    /// Loads `paths` (each a regular file of at most `max_size` bytes) for the first
    /// time; any failure is an error. `transfers` keeps what AXFR needs.
    pub fn load(paths: &[PathBuf], max_size: u64, transfers: bool) -> Result<Self, DnsError> {
        let mut good = Vec::with_capacity(paths.len());
        for p in paths {
            let text = zone::read_zone_text(p, max_size)?;
            good.push(Arc::new(zone::parse_zone(&text, &p.display().to_string())?));
        }
        let set = build::build_for(&good, transfers)?;
        Ok(Reloader {
            paths: paths.to_vec(),
            max_size,
            good,
            transfers,
            live: LiveZones::new(Arc::new(set)),
        })
    }

    /// The zones being served, for handlers.
    pub fn live(&self) -> Arc<LiveZones> {
        self.live.clone()
    }

    /// Re-reads every file and publishes the result. A file that fails keeps its
    /// previous version; if the files together cannot be served (two now define the
    /// same zone), nothing changes and the error is returned.
    pub fn reload(&mut self) -> Result<Vec<(PathBuf, Outcome)>, DnsError> {
        let mut zones: Vec<Arc<ZoneData>> = Vec::with_capacity(self.paths.len());
        let mut outcomes = Vec::with_capacity(self.paths.len());
        for (p, old) in self.paths.iter().zip(&self.good) {
            let name = p.display().to_string();
            let fresh =
                zone::read_zone_text(p, self.max_size).and_then(|t| zone::parse_zone(&t, &name));
            match fresh {
                Ok(z) => {
                    outcomes.push((p.clone(), Outcome::Loaded(z.records.len())));
                    zones.push(Arc::new(z));
                }
                Err(e) => {
                    outcomes.push((p.clone(), Outcome::Kept(e.to_string())));
                    zones.push(old.clone());
                }
            }
        }
        let set = build::build_for(&zones, self.transfers)?;
        self.live.publish(Arc::new(set));
        self.good = zones;
        Ok(outcomes)
    }
}
