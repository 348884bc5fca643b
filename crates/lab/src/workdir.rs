//! Private work directories: where a run keeps its children's logs, result files, zones and
//! peer configs. The lab runs as root in a world-writable /tmp, so a predictable name would
//! let another user plant a symbolic link there in advance and have root write through it.
//! Every lab directory is made here instead: a random name (`fh-lab-<pid>-<what>-<random>`),
//! created by one `mkdir` with mode 0700 (which fails on anything already there, a link
//! included, and never follows one), and removed with everything in it when dropped. The
//! pid in the name lets `firehose lab down` tell a dead run's directory from a live one's.

use crate::{cmd, LabError, LabResult};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Start of every lab directory's name under the temporary directory.
const PREFIX: &str = "fh-lab-";

/// A private directory, removed (with its contents) when dropped unless kept.
#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
    keep: bool,
}

/// 16 hex digits from the kernel's random source.
fn random_hex() -> LabResult<String> {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| LabError::io("/dev/urandom", e))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl WorkDir {
    /// A new private directory under the system's temporary directory; `what` names the
    /// study in it (letters, digits and `-`).
    pub fn new(what: &str) -> LabResult<WorkDir> {
        WorkDir::new_in(&std::env::temp_dir(), what)
    }

    /// A new private directory under `parent`.
    pub fn new_in(parent: &Path, what: &str) -> LabResult<WorkDir> {
        let pid = std::process::id();
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        // A name taken (by chance or on purpose) is never reused: draw another.
        for _ in 0..16 {
            let path = parent.join(format!("{PREFIX}{pid}-{what}-{}", random_hex()?));
            match builder.create(&path) {
                Ok(()) => {
                    // The umask may only have removed bits; say exactly 0700.
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
                        .map_err(|e| LabError::io(path.display(), e))?;
                    return Ok(WorkDir { path, keep: false });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(LabError::io(path.display(), e)),
            }
        }
        Err(LabError::Run(format!(
            "no free name for a work directory in {}",
            parent.display()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory in place when dropped (a failed run's logs, for the error's
    /// reader; `firehose lab down` removes it once this process is gone).
    pub fn keep(&mut self) -> &Path {
        self.keep = true;
        &self.path
    }
}

impl std::ops::Deref for WorkDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for WorkDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            // remove_dir_all does not follow links inside the directory.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The pid in a lab directory's name (`fh-lab-123-zone-load-0a1b...`, or an older run's
/// `fh-lab-123`).
pub fn owner_of(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Removes the work directories of runs whose process is gone (all of them with `all`): a
/// SIGKILLed run cannot remove its own. Returns what it removed.
pub fn remove_stale(all: bool) -> Vec<String> {
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_of(&name) else { continue };
        // A link in /tmp with our name is someone else's: remove_dir_all would remove the
        // link only, but it is not ours to touch.
        let ours = e.file_type().is_ok_and(|t| t.is_dir());
        if ours && (all || !cmd::process_alive(pid)) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(format!("logs {}", e.path().display()));
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn private_random_and_removed() {
        let a = WorkDir::new("test").unwrap();
        let b = WorkDir::new("test").unwrap();
        assert_ne!(a.path(), b.path(), "random names");
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(owner_of(&name), Some(std::process::id()));
        assert!(name.starts_with(&format!("fh-lab-{}-test-", std::process::id())));
        let m = std::fs::symlink_metadata(a.path()).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700);
        std::fs::write(a.join("log"), "x").unwrap();
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists(), "removed with its contents");
        let mut c = WorkDir::new("kept").unwrap();
        let kept = c.keep().to_path_buf();
        drop(c);
        assert!(kept.is_dir());
        std::fs::remove_dir_all(&kept).unwrap();
    }

    #[test]
    fn a_planted_link_is_never_followed() {
        // Plant, under a parent of our own, a link for every name the next directory could
        // take if names were predictable, and a target that must stay empty.
        let parent = WorkDir::new("plant").unwrap();
        let target = parent.join("target");
        std::fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(
            &target,
            parent.join(format!("{PREFIX}{}", std::process::id())),
        )
        .unwrap();
        let d = WorkDir::new_in(&parent, "x").unwrap();
        std::fs::write(d.join("f"), "x").unwrap();
        assert!(std::fs::symlink_metadata(d.path()).unwrap().is_dir());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn owners_of_names() {
        assert_eq!(owner_of("fh-lab-42"), Some(42));
        assert_eq!(owner_of("fh-lab-42-sink-00ff"), Some(42));
        assert_eq!(owner_of("fh-srv-42"), None);
        assert_eq!(owner_of("fh-lab-x"), None);
    }
}
