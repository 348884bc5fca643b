//! The apply journal: one JSON line per change, written and synced BEFORE the change, holding
//! the exact old value, so `--revert` can restore the host byte for byte even after a crash
//! mid-apply. Each entry carries the boot id and network namespace it was made in: values
//! in /proc and /sys die with a reboot, so a journal from another boot is never replayed.

use super::plan::Target;
use crate::fs::HostFs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the journal lives unless `--journal` says otherwise.
pub const DEFAULT_PATH: &str = "/var/lib/firehose/doctor.journal";

/// The boot and network namespace a change belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// /proc/sys/kernel/random/boot_id.
    pub boot_id: String,
    /// The /proc/self/ns/net link, e.g. `net:[4026531840]`.
    pub netns: String,
}

impl Identity {
    /// Reads the current boot id and network namespace.
    pub fn read(fs: &HostFs) -> Self {
        Identity {
            boot_id: fs
                .value("/proc/sys/kernel/random/boot_id")
                .unwrap_or_else(|_| "unknown".into()),
            netns: fs
                .link("/proc/self/ns/net")
                .unwrap_or_else(|_| "unknown".into()),
        }
    }
}

/// One change: target, the value before (exact text), the value set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub check: String,
    pub target: Target,
    pub old: String,
    pub new: String,
    #[serde(flatten)]
    pub id: Identity,
    /// Seconds since the Unix epoch.
    pub time: u64,
}

/// A journal that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("journal {path} line {line}: {what}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("journal {path} was written in boot {theirs}, this is boot {ours}: the values it holds were reset by the reboot, so it is not replayed; remove it")]
    OtherBoot {
        path: PathBuf,
        theirs: String,
        ours: String,
    },
    #[error("journal {path} was written in network namespace {theirs}, this is {ours}: run the revert there")]
    OtherNetns {
        path: PathBuf,
        theirs: String,
        ours: String,
    },
    #[error("no journal at {path}: nothing to revert")]
    Missing { path: PathBuf },
}

/// A journal file.
#[derive(Debug, Clone)]
pub struct Journal {
    path: PathBuf,
}

impl Journal {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Journal { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The entries in the order they were written; empty when there is no journal.
    pub fn entries(&self) -> Result<Vec<Entry>, JournalError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(e)),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| JournalError::Corrupt {
                    path: self.path.clone(),
                    line: i + 1,
                    what: e.to_string(),
                })
            })
            .collect()
    }

    /// Fails unless every entry belongs to this boot and namespace.
    pub fn check_identity(&self, entries: &[Entry], ours: &Identity) -> Result<(), JournalError> {
        for e in entries {
            if e.id.boot_id != ours.boot_id {
                return Err(JournalError::OtherBoot {
                    path: self.path.clone(),
                    theirs: e.id.boot_id.clone(),
                    ours: ours.boot_id.clone(),
                });
            }
            if e.id.netns != ours.netns {
                return Err(JournalError::OtherNetns {
                    path: self.path.clone(),
                    theirs: e.id.netns.clone(),
                    ours: ours.netns.clone(),
                });
            }
        }
        Ok(())
    }

    /// Appends one entry and syncs it to disk before returning.
    pub fn append(&self, entry: &Entry) -> Result<(), JournalError> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let mut line = serde_json::to_string(entry).map_err(|e| self.io(e.into()))?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        f.write_all(line.as_bytes()).map_err(|e| self.io(e))?;
        f.sync_data().map_err(|e| self.io(e))
    }

    /// Moves a reverted journal aside to `<path>.reverted`, so it is not reverted twice.
    pub fn retire(&self) -> Result<PathBuf, JournalError> {
        let mut to = self.path.clone().into_os_string();
        to.push(".reverted");
        let to = PathBuf::from(to);
        std::fs::rename(&self.path, &to).map_err(|e| self.io(e))?;
        Ok(to)
    }
}
