//! Finding tracefs: the tracepoints' `format` and `id` files.
//!
//! Where tracefs is mounted (`/sys/kernel/tracing`, or `/sys/kernel/debug/tracing` on older
//! systems) it is read there. Where it is not, a root process makes a *detached* mount of
//! its own (fsopen/fsconfig/fsmount): a mount that is attached to no path, reachable only
//! through its fd, and gone when the fd closes. Nothing is mounted on the host, so nothing
//! is left behind by a crash or SIGKILL, and the process may be multi-threaded (unlike a
//! private mount namespace, which `unshare` refuses to a threaded process).

use crate::{cvt, SysError, SysResult};
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const MOUNTED: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const FSCONFIG_CMD_CREATE: u32 = 6;
const FSOPEN_CLOEXEC: u32 = 1;
const FSMOUNT_CLOEXEC: u32 = 1;

/// Where the tracefs in use came from, for the report's "how it was read" line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceFsSource {
    /// Mounted at this path.
    Mounted(&'static str),
    /// Not mounted: a detached mount held by this process.
    Detached,
}

impl std::fmt::Display for TraceFsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceFsSource::Mounted(p) => f.write_str(p),
            TraceFsSource::Detached => f.write_str("a private tracefs mount (none on the host)"),
        }
    }
}

/// An open tracefs root directory.
#[derive(Debug)]
pub struct TraceFs {
    dir: OwnedFd,
    source: TraceFsSource,
}

fn open_dir(path: &str) -> SysResult<OwnedFd> {
    let c = CString::new(path).expect("paths have no NUL");
    // SAFETY: c is a valid NUL-terminated path alive for the call.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    let fd = cvt(fd, || format!("open({path})"))?;
    // SAFETY: open returned a new fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl TraceFs {
    /// The mounted tracefs, or a detached mount of our own where none is mounted (which
    /// needs CAP_SYS_ADMIN: the error then says EPERM).
    /// A tracefs mounted but closed to this user is reported as such (EACCES on its
    /// `events`), not as a failed mount of our own.
    pub fn open() -> SysResult<Self> {
        let mut closed = None;
        for path in MOUNTED {
            let events = std::path::Path::new(path).join("events");
            match std::fs::metadata(&events) {
                Ok(m) if m.is_dir() => {
                    return Ok(TraceFs {
                        dir: open_dir(path)?,
                        source: TraceFsSource::Mounted(path),
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    closed.get_or_insert(SysError {
                        what: format!("stat({})", events.display()),
                        source: e,
                    });
                }
                _ => {}
            }
        }
        Self::detached().map_err(|e| closed.unwrap_or(e))
    }

    /// A detached tracefs mount (fsopen + fsmount), whatever is mounted on the host.
    pub fn detached() -> SysResult<Self> {
        let name = c"tracefs";
        // SAFETY: fsopen reads the NUL-terminated name; no other memory is involved.
        let fs = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) };
        let fs = cvt(fs, || "fsopen(tracefs): tracefs is not mounted".into())?;
        // SAFETY: fsopen returned a new fd owned by nobody else.
        let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
        // SAFETY: FSCONFIG_CMD_CREATE takes no key or value pointers (both NULL).
        let r = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_void>(),
                0,
            )
        };
        cvt(r, || "fsconfig(tracefs, FSCONFIG_CMD_CREATE)".into())?;
        // SAFETY: fsmount takes the fs context fd and flags only.
        let m = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) };
        let m = cvt(m, || "fsmount(tracefs)".into())?;
        Ok(TraceFs {
            // SAFETY: fsmount returned a new fd owned by nobody else.
            dir: unsafe { OwnedFd::from_raw_fd(m as RawFd) },
            source: TraceFsSource::Detached,
        })
    }

    /// Where this tracefs is.
    pub fn source(&self) -> &TraceFsSource {
        &self.source
    }

    /// The text of `rel` (e.g. `events/skb/kfree_skb/format`).
    pub fn read(&self, rel: &str) -> SysResult<String> {
        let c = CString::new(rel).map_err(|_| SysError {
            what: format!("tracefs {rel:?}"),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })?;
        // SAFETY: dir is a live directory fd and c a valid NUL-terminated relative path.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        let fd = cvt(fd, || format!("open(tracefs {rel})"))?;
        // SAFETY: openat returned a new fd owned by nobody else; File takes it over.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut text = String::new();
        f.read_to_string(&mut text).map_err(|source| SysError {
            what: format!("read(tracefs {rel})"),
            source,
        })?;
        Ok(text)
    }

    /// A tracepoint's `format` file, e.g. `("skb", "kfree_skb")`.
    pub fn format(&self, system: &str, event: &str) -> SysResult<String> {
        self.read(&format!("events/{system}/{event}/format"))
    }

    /// A tracepoint's id (the perf_event `config` of PERF_TYPE_TRACEPOINT).
    pub fn id(&self, system: &str, event: &str) -> SysResult<u64> {
        let text = self.read(&format!("events/{system}/{event}/id"))?;
        text.trim().parse().map_err(|_| SysError {
            what: format!("tracefs events/{system}/{event}/id: {:?}", text.trim()),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kfree_skb_format_as_root() {
        if !crate::cpu::is_root() {
            eprintln!("skipped: tracefs needs root");
            return;
        }
        let t = TraceFs::open().unwrap();
        let f = t.format("skb", "kfree_skb").unwrap();
        assert!(f.contains("name: kfree_skb"), "{f}");
        assert!(t.id("skb", "kfree_skb").unwrap() > 0);
        let d = TraceFs::detached().unwrap();
        assert_eq!(d.source(), &TraceFsSource::Detached);
        assert_eq!(d.format("skb", "kfree_skb").unwrap(), f);
        assert!(t.read("events/no/such/format").is_err());
        // The detached mount is on no path.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        if t.source() == &TraceFsSource::Detached {
            assert!(!mounts.contains("tracefs"), "{mounts}");
        }
    }
}
