//! File access rooted at a path prefix, so the doctor reads a fake tree in tests and `/` on a
//! live host. Paths are given as the host sees them (`/proc/stat`).

use std::path::{Path, PathBuf};

/// A failed read or write, keeping the path and errno for "n/a because ..." messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FsError {
    /// The host path, e.g. `/proc/irq/38/smp_affinity_list`.
    pub path: String,
    /// The OS errno when there was one.
    pub errno: Option<i32>,
    /// The OS message with the errno name, e.g. `No such file or directory (ENOENT)`.
    pub message: String,
}

impl FsError {
    fn new(path: &str, e: &std::io::Error) -> Self {
        let errno = e.raw_os_error();
        let name = errno.map(errno_name).unwrap_or("?");
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text);
        FsError {
            path: path.to_string(),
            errno,
            message: format!("{text} ({name})"),
        }
    }

    /// True when the file or directory does not exist (a kernel or VM without it).
    pub fn is_absent(&self) -> bool {
        self.errno == Some(libc_enoent())
    }
}

const fn libc_enoent() -> i32 {
    2
}

/// The symbolic errno name, adding the ones network devices return to the sys crate's list.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        19 => "ENODEV",
        6 => "ENXIO",
        30 => "EROFS",
        _ => firehose_sys::errno_name(errno),
    }
}

/// Reads and writes host files under `root`.
#[derive(Debug, Clone)]
pub struct HostFs {
    root: PathBuf,
}

impl HostFs {
    /// A tree rooted at `root` (a directory holding `proc/`, `sys/`, `etc/`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HostFs { root: root.into() }
    }

    /// The running host.
    pub fn live() -> Self {
        HostFs::new("/")
    }

    /// True for the running host's own tree (rooted at `/`), where what the kernel says
    /// outside files (adjtimex) belongs to the same host.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    fn full(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// The whole text of a file.
    pub fn read(&self, path: &str) -> Result<String, FsError> {
        std::fs::read_to_string(self.full(path)).map_err(|e| FsError::new(path, &e))
    }

    /// The trimmed text of a one-value file (sysctl, sysfs attribute).
    pub fn value(&self, path: &str) -> Result<String, FsError> {
        self.read(path).map(|s| s.trim().to_string())
    }

    /// A one-value file as a number.
    pub fn number(&self, path: &str) -> Result<u64, FsError> {
        let v = self.value(path)?;
        v.parse().map_err(|_| FsError {
            path: path.to_string(),
            errno: None,
            message: format!("not a number: {v:?}"),
        })
    }

    /// Names in a directory, sorted (numerically where the names end in numbers).
    pub fn list(&self, dir: &str) -> Result<Vec<String>, FsError> {
        let rd = std::fs::read_dir(self.full(dir)).map_err(|e| FsError::new(dir, &e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by_key(|n| natural_key(n));
        Ok(names)
    }

    /// True when the path exists.
    pub fn exists(&self, path: &str) -> bool {
        self.full(path).exists()
    }

    /// The target of a symbolic link, e.g. `/proc/self/ns/net` -> `net:[4026531840]`.
    pub fn link(&self, path: &str) -> Result<String, FsError> {
        std::fs::read_link(self.full(path))
            .map(|p| p.to_string_lossy().into_owned())
            .map_err(|e| FsError::new(path, &e))
    }

    /// The last component of a link's target, e.g. the driver name of `device/driver`.
    pub fn link_name(&self, path: &str) -> Result<String, FsError> {
        let target = self.link(path)?;
        Ok(Path::new(&target)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(target))
    }

    /// Writes a value in one write(2), as `echo -n value > path` does; the kernel parses it.
    pub fn write(&self, path: &str, value: &str) -> Result<(), FsError> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.full(path))
            .map_err(|e| FsError::new(path, &e))?;
        f.write_all(value.as_bytes())
            .map_err(|e| FsError::new(path, &e))
    }
}

impl HostFs {
    /// Writes a whole configuration file, creating it (mode 0644) if needed.
    pub fn write_file(&self, path: &str, text: &str) -> Result<(), FsError> {
        std::fs::write(self.full(path), text).map_err(|e| FsError::new(path, &e))
    }

    /// Removes a file.
    pub fn remove(&self, path: &str) -> Result<(), FsError> {
        std::fs::remove_file(self.full(path)).map_err(|e| FsError::new(path, &e))
    }
}

/// Sorts `rx-10` after `rx-9`: splits a trailing number off the name.
fn natural_key(name: &str) -> (String, u64) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = name.split_at(name.len() - digits);
    (head.to_string(), tail.parse().unwrap_or(0))
}
