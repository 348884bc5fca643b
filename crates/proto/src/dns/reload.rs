//! Re-reading zone files while serving.
//!
//! Every file is read and checked in full before anything changes; the new set is
//! built aside and published in one step ([`LiveZones::publish`]), so a query sees
//! either the old zones or the new ones. A file that fails keeps its last good
//! version (its text is kept, so the old zone is rebuilt exactly) and the failure is
//! reported.

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

/// Zone files, their last good text, and where to publish.
pub struct Reloader {
    paths: Vec<PathBuf>,
    max_size: u64,
    good: Vec<Vec<u8>>,
    transfers: bool,
    live: Arc<LiveZones>,
}

impl Reloader {
    /// Loads `paths` (each a regular file of at most `max_size` bytes) for the first
    /// time; any failure is an error. `transfers` keeps what AXFR needs.
    pub fn load(paths: &[PathBuf], max_size: u64, transfers: bool) -> Result<Self, DnsError> {
        let mut good = Vec::with_capacity(paths.len());
        let mut zones = Vec::with_capacity(paths.len());
        for p in paths {
            let text = zone::read_zone_text(p, max_size)?;
            zones.push(zone::parse_zone(&text, &p.display().to_string())?);
            good.push(text);
        }
        let set = build::build_for(&zones, transfers)?;
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
        let mut zones: Vec<ZoneData> = Vec::with_capacity(self.paths.len());
        let mut outcomes = Vec::with_capacity(self.paths.len());
        let mut texts = Vec::with_capacity(self.paths.len());
        for (p, old) in self.paths.iter().zip(&self.good) {
            let name = p.display().to_string();
            let fresh = zone::read_zone_text(p, self.max_size)
                .and_then(|t| zone::parse_zone(&t, &name).map(|z| (t, z)));
            match fresh {
                Ok((t, z)) => {
                    outcomes.push((p.clone(), Outcome::Loaded(z.records.len())));
                    zones.push(z);
                    texts.push(Some(t));
                }
                Err(e) => {
                    outcomes.push((p.clone(), Outcome::Kept(e.to_string())));
                    zones.push(zone::parse_zone(old, &name)?);
                    texts.push(None);
                }
            }
        }
        let set = build::build_for(&zones, self.transfers)?;
        self.live.publish(Arc::new(set));
        for (g, t) in self.good.iter_mut().zip(texts) {
            if let Some(t) = t {
                *g = t;
            }
        }
        Ok(outcomes)
    }
}
