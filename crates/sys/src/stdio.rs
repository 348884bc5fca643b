//! Standard streams: `--json` puts the document on stdout and everything else on stderr,
//! without every printing site having to know which stream is which.

use crate::{cvt, SysResult};
use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};

/// Points file descriptor 1 at what descriptor 2 is, and returns the original stdout as a
/// file: from then on every print to stdout lands on stderr, and the returned file is the
/// only way to the original stdout. Call it before anything is printed.
pub fn stdout_to_stderr() -> SysResult<File> {
    // SAFETY: dup has no memory arguments; it returns a new descriptor or -1.
    let saved = cvt(unsafe { libc::dup(1) }, || "dup(1)".into())?;
    // SAFETY: `saved` is a descriptor dup just returned and nothing else owns it.
    let saved = unsafe { OwnedFd::from_raw_fd(saved) };
    // SAFETY: dup2 has no memory arguments; it closes 1 and makes it a copy of 2.
    cvt(unsafe { libc::dup2(2, 1) }, || "dup2(2, 1)".into())?;
    Ok(File::from(saved))
}
