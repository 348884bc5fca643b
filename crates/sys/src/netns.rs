//! Moving the calling thread into a named network namespace (the `ip netns` ones), so a
//! test or a generator thread can open sockets there while the rest of the process stays.

use crate::{cvt, SysResult};
use std::os::fd::AsRawFd;

/// Enters `/run/netns/<name>` for the calling thread only (setns(CLONE_NEWNET)).
pub fn enter(name: &str) -> SysResult<()> {
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).map_err(|e| crate::SysError {
        what: format!("open({path})"),
        source: e,
    })?;
    // SAFETY: setns takes an fd we hold open for the duration of the call.
    let ret = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    cvt(ret, || format!("setns({path})")).map(|_| ())
}
