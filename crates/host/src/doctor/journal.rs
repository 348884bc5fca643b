//! The apply journal: one JSON line per change, written and synced BEFORE the change, holding
//! the exact old value, so `--revert` can restore the host byte for byte even after a crash
//! mid-apply. Each entry carries the boot id and network namespace it was made in: values
//! in /proc and /sys die with a reboot, so they are only replayed in the boot that set them,
//! while the `--persist` file under /etc/sysctl.d (and the sysctls it sets again at boot)
//! are replayed after a reboot too (see `apply::revert`).
//!
//! The journal is trusted only as far as it must be: it is a regular file (never followed
//! through a link) owned by the user running doctor (root, for --apply and --revert) that
//! nobody else may write, in a directory nobody else may replace it in; it is created 0600.
//! Every entry is validated before anything is replayed: files under /proc/sys, /sys and
//! /proc/irq, the persist file under /etc/sysctl.d, the services doctor stops, interfaces by
//! name. A torn last line (a crash while it was being written, so before its change was
//! made) is ignored, and cut off before the next entry is appended.

use super::plan::Target;
use crate::fs::HostFs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where the journal lives unless `--journal` says otherwise.
pub const DEFAULT_PATH: &str = "/var/lib/firehose/doctor.journal";

/// The services a doctor fix may stop (and revert may start again).
pub const KNOWN_UNITS: [&str; 1] = ["irqbalance"];

/// Where file targets may be: sysctls, sysfs attributes, IRQ affinities.
const FILE_ROOTS: [&str; 3] = ["/proc/sys/", "/sys/", "/proc/irq/"];

/// Where the `--persist` file may be.
const CONFIG_DIR: &str = "/etc/sysctl.d/";

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

impl Entry {
    /// Whether doctor could have written this entry: a known check, and a target where
    /// doctor makes changes. Revert replays nothing that fails this.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.check == "persist" || super::is_check(&self.check)) {
            return Err(format!("unknown check {:?}", self.check));
        }
        match &self.target {
            Target::File { path, .. } => {
                if !FILE_ROOTS.iter().any(|r| path.starts_with(r)) || !plain_path(path) {
                    return Err(format!(
                        "file {path:?} is not a plain path under /proc/sys, /sys or /proc/irq"
                    ));
                }
            }
            Target::Config { path } => {
                let name = path.strip_prefix(CONFIG_DIR).unwrap_or_default();
                let ok = name.ends_with(".conf")
                    && !name.starts_with('.')
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if !ok {
                    return Err(format!(
                        "configuration file {path:?} is not a NAME.conf directly in {CONFIG_DIR}"
                    ));
                }
            }
            Target::Service { name } => {
                if !KNOWN_UNITS.contains(&name.as_str()) {
                    return Err(format!(
                        "service {name:?} is not one doctor manages ({})",
                        KNOWN_UNITS.join(", ")
                    ));
                }
                for v in [&self.old, &self.new] {
                    let word = v.trim();
                    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
                    {
                        return Err(format!("service state {v:?} is not a systemctl state"));
                    }
                }
            }
            Target::Feature { iface, .. } | Target::Rss { iface } => {
                if !iface_name(iface) {
                    return Err(format!("{iface:?} is not an interface name"));
                }
            }
            Target::Napi { iface, napi, .. } => {
                if !iface_name(iface) {
                    return Err(format!("{iface:?} is not an interface name"));
                }
                if *napi == 0 {
                    return Err("NAPI id 0 names no instance".into());
                }
                for v in [&self.old, &self.new] {
                    if v.trim().parse::<u64>().is_err() {
                        return Err(format!("NAPI setting {v:?} is not a number"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// An absolute path of ordinary components: no `.`, `..` or empty ones, no control bytes.
fn plain_path(p: &str) -> bool {
    match p.strip_prefix('/') {
        Some(rest) => rest.split('/').all(|c| {
            !c.is_empty() && c != "." && c != ".." && !c.bytes().any(|b| b < 0x20 || b == 0x7f)
        }),
        None => false,
    }
}

/// A name the kernel accepts for an interface (dev_valid_name): 1 to 15 bytes, not `.`
/// or `..`, no `/`, `:` or whitespace.
fn iface_name(n: &str) -> bool {
    (1..16).contains(&n.len())
        && n != "."
        && n != ".."
        && !n
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b < 0x20)
}

/// A journal's text, read: its entries in order, and the line number of a torn last line
/// that was ignored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contents {
    pub entries: Vec<Entry>,
    pub torn: Option<usize>,
}

/// Why a line of a journal cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub what: String,
}

/// Reads a journal's text: one JSON entry per line, each validated; blank lines are
/// skipped. A last line without its newline that does not read as an entry is torn (the
/// crash came while it was written, so before its change was made): it is ignored and
/// reported in [`Contents::torn`]. Any other bad line fails the whole journal.
pub fn parse(text: &str) -> Result<Contents, LineError> {
    let mut out = Contents::default();
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let entry = serde_json::from_str::<Entry>(l)
            .map_err(|e| e.to_string())
            .and_then(|e| e.validate().map(|()| e));
        match entry {
            Ok(e) => out.entries.push(e),
            Err(_) if i + 1 == lines.len() && !complete => out.torn = Some(i + 1),
            Err(what) => return Err(LineError { line: i + 1, what }),
        }
    }
    Ok(out)
}

/// A journal that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("journal {path} line {line}: {what}; nothing was replayed (fix or remove that line)")]
    Corrupt {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("journal {path} holds changes made in boot {theirs} (this is boot {ours}): run `firehose doctor --revert` first (it restores the --persist file and leaves what the reboot reset), then apply again")]
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
    #[error("journal {path} is not trusted: {why}")]
    Untrusted { path: PathBuf, why: String },
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

    fn untrusted(&self, why: String) -> JournalError {
        JournalError::Untrusted {
            path: self.path.clone(),
            why,
        }
    }

    /// Opens the journal (creating it 0600 with `create`) and checks that it can be trusted:
    /// a regular file, not reached through a link, owned by us and writable by nobody else,
    /// in a directory where nobody else can replace it. `None` when it does not exist.
    fn open(&self, create: bool) -> Result<Option<std::fs::File>, JournalError> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(self.untrusted("it is a symbolic link".into()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Ok(_) | Err(_) => {}
        }
        let me = std::fs::metadata("/proc/self")
            .map_err(|e| self.io(e))?
            .uid();
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        if create {
            std::fs::create_dir_all(&dir).map_err(|e| self.io(e))?;
        }
        let d = std::fs::metadata(&dir).map_err(|e| self.io(e))?;
        let sticky = d.mode() & 0o1000 != 0;
        if d.mode() & 0o022 != 0 && !sticky {
            return Err(self.untrusted(format!(
                "its directory {} is writable by others (mode {:o}), who could replace it",
                dir.display(),
                d.mode() & 0o7777
            )));
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(create)
            .create(create)
            .mode(0o600)
            .open(&self.path);
        let f = match f {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(e)),
        };
        let m = f.metadata().map_err(|e| self.io(e))?;
        let linked = std::fs::symlink_metadata(&self.path).map_err(|e| self.io(e))?;
        if (linked.dev(), linked.ino()) != (m.dev(), m.ino()) {
            return Err(self.untrusted("it was replaced while being opened".into()));
        }
        if !m.is_file() {
            return Err(self.untrusted("it is not a regular file".into()));
        }
        if m.uid() != me {
            return Err(self.untrusted(format!(
                "it is owned by uid {}, not by uid {me} who runs doctor; check it, then `chown {me}` it",
                m.uid()
            )));
        }
        if m.mode() & 0o022 != 0 {
            return Err(self.untrusted(format!(
                "others may write it (mode {:o}); check it, then `chmod 600` it",
                m.mode() & 0o7777
            )));
        }
        if create && m.mode() & 0o077 != 0 {
            // A journal from before journals were made 0600: tighten it.
            f.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| self.io(e))?;
        }
        Ok(Some(f))
    }

    /// The journal's entries and torn line (empty when there is no journal).
    pub fn read(&self) -> Result<Contents, JournalError> {
        let Some(mut f) = self.open(false)? else {
            return Ok(Contents::default());
        };
        let mut text = String::new();
        f.read_to_string(&mut text).map_err(|e| self.io(e))?;
        parse(&text).map_err(|e| JournalError::Corrupt {
            path: self.path.clone(),
            line: e.line,
            what: e.what,
        })
    }

    /// The entries in the order they were written; empty when there is no journal.
    pub fn entries(&self) -> Result<Vec<Entry>, JournalError> {
        self.read().map(|c| c.entries)
    }

    /// Fails unless every entry belongs to this boot and namespace (what apply needs before
    /// it adds to a journal).
    pub fn check_identity(&self, entries: &[Entry], ours: &Identity) -> Result<(), JournalError> {
        for e in entries {
            if e.id.boot_id != ours.boot_id {
                return Err(JournalError::OtherBoot {
                    path: self.path.clone(),
                    theirs: e.id.boot_id.clone(),
                    ours: ours.boot_id.clone(),
                });
            }
            self.check_netns(e, ours)?;
        }
        Ok(())
    }

    /// Fails if `e` was written in another network namespace.
    pub fn check_netns(&self, e: &Entry, ours: &Identity) -> Result<(), JournalError> {
        if e.id.netns != ours.netns {
            return Err(JournalError::OtherNetns {
                path: self.path.clone(),
                theirs: e.id.netns.clone(),
                ours: ours.netns.clone(),
            });
        }
        Ok(())
    }

    /// Appends one entry and syncs it to disk before returning. A torn last line is cut
    /// off first (a complete last entry missing only its newline gets it).
    pub fn append(&self, entry: &Entry) -> Result<(), JournalError> {
        entry.validate().map_err(|what| JournalError::Corrupt {
            path: self.path.clone(),
            line: 0,
            what: format!("refusing to journal an entry doctor could not replay: {what}"),
        })?;
        let mut line = serde_json::to_string(entry).map_err(|e| self.io(e.into()))?;
        line.push('\n');
        let Some(mut f) = self.open(true)? else {
            return Err(self.io(std::io::ErrorKind::NotFound.into()));
        };
        let mut text = Vec::new();
        f.read_to_end(&mut text).map_err(|e| self.io(e))?;
        if text.last().is_some_and(|&b| b != b'\n') {
            let cut = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let whole = std::str::from_utf8(&text[cut..])
                .ok()
                .and_then(|l| serde_json::from_str::<Entry>(l).ok())
                .is_some();
            if whole {
                f.write_all(b"\n").map_err(|e| self.io(e))?;
            } else {
                f.set_len(cut as u64).map_err(|e| self.io(e))?;
            }
        }
        f.seek(SeekFrom::End(0)).map_err(|e| self.io(e))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::plan::{self, Kind};

    fn entry(target: Target) -> Entry {
        Entry {
            seq: 1,
            check: "rmem".into(),
            target,
            old: "1".into(),
            new: "2".into(),
            id: Identity {
                boot_id: "b".into(),
                netns: "n".into(),
            },
            time: 0,
        }
    }

    #[test]
    fn only_targets_doctor_changes_are_valid() {
        let file = |p: &str| entry(Target::file(p, Kind::Text)).validate();
        assert!(file("/proc/sys/net/core/rmem_max").is_ok());
        assert!(file("/sys/class/net/eth0/queues/rx-0/rps_cpus").is_ok());
        assert!(file("/proc/irq/42/smp_affinity_list").is_ok());
        for bad in [
            "/etc/passwd",
            "/proc/sys/../../etc/shadow",
            "/sys//x",
            "/sys/./x",
            "proc/sys/x",
            "/proc/sysrq-trigger",
            "/sys/x/",
        ] {
            assert!(file(bad).is_err(), "{bad}");
        }
        let conf = |p: &str| entry(Target::Config { path: p.into() }).validate();
        assert!(conf("/etc/sysctl.d/90-firehose.conf").is_ok());
        for bad in [
            "/etc/sysctl.d/../cron.d/x.conf",
            "/etc/sysctl.d/a/b.conf",
            "/etc/sysctl.d/x",
            "/etc/sysctl.d/.conf",
            "/etc/profile",
        ] {
            assert!(conf(bad).is_err(), "{bad}");
        }
        let svc = |n: &str, old: &str| {
            let mut e = entry(Target::Service { name: n.into() });
            (e.old, e.new) = (old.into(), "inactive".into());
            e.validate()
        };
        assert!(svc("irqbalance", "active\n").is_ok());
        assert!(svc("sshd", "active").is_err());
        assert!(svc("irqbalance --now", "active").is_err());
        assert!(svc("irqbalance", "active; rm -rf /").is_err());
        let rss = |i: &str| entry(Target::Rss { iface: i.into() }).validate();
        assert!(rss("eth0").is_ok());
        assert!(rss("../x").is_err() && rss("").is_err() && rss("a very long name").is_err());
        let napi = |i: &str, id: u32, old: &str| {
            let mut e = entry(Target::Napi {
                iface: i.into(),
                napi: id,
                param: plan::NapiParam::DeferHardIrqs,
            });
            e.check = "busy-poll".into();
            e.old = old.into();
            e.validate()
        };
        assert!(napi("veth0", 8193, "0").is_ok());
        assert!(napi("../x", 8193, "0").is_err());
        assert!(napi("veth0", 0, "0").is_err());
        assert!(napi("veth0", 8193, "0; reboot").is_err());
        let mut e = entry(Target::file("/proc/sys/x", Kind::Text));
        e.check = "\x1b[2Jevil".into();
        assert!(e.validate().is_err());
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_others_fail() {
        let good = serde_json::to_string(&entry(Target::file("/proc/sys/a", Kind::Text))).unwrap();
        let text = format!("{good}\n{}", &good[..good.len() / 2]);
        let c = parse(&text).unwrap();
        assert_eq!((c.entries.len(), c.torn), (1, Some(2)));
        // The same cut line, finished with its newline, is corruption.
        let e = parse(&format!("{text}\n")).unwrap_err();
        assert_eq!(e.line, 2);
        // A complete entry missing only its newline is read.
        assert_eq!(parse(&good).unwrap().entries.len(), 1);
        assert_eq!(parse("\n\n").unwrap(), Contents::default());
        let evil = good.replace("/proc/sys/a", "/etc/passwd");
        let e = parse(&format!("{evil}\n{good}\n")).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.what.contains("/etc/passwd"), "{}", e.what);
    }
}
