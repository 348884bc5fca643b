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
use super::zone::{self, Limits, ZoneData};
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
    limits: Limits,
    good: Vec<Arc<ZoneData>>,
    transfers: bool,
    live: Arc<LiveZones>,
}

impl Reloader {
    /// Loads `paths` (each a regular file within `limits`) for the first time; any
    /// failure is an error. `transfers` keeps what AXFR needs.
    pub fn load(paths: &[PathBuf], limits: Limits, transfers: bool) -> Result<Self, DnsError> {
        let mut good = Vec::with_capacity(paths.len());
        for p in paths {
            good.push(Arc::new(zone::load_zone_file(p, &limits)?));
        }
        let set = build::build_for(&good, transfers)?;
        Ok(Reloader {
            paths: paths.to_vec(),
            limits,
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
            match zone::load_zone_file(p, &self.limits) {
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
