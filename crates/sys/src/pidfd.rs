//! Another process as a descriptor (pidfd_open(2)): it becomes readable when the process
//! ends, so a parent can sleep until its child exits instead of looking every few
//! milliseconds; each look is a wake-up that takes a CPU from whatever runs there.

use crate::sockopt::{events, poll_one};
use crate::{SysError, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A descriptor of process `pid` (not reaped, not signalled through it).
pub struct PidFd(OwnedFd);

impl PidFd {
    /// Opens a descriptor of `pid` (ESRCH when there is no such process).
    pub fn open(pid: u32) -> SysResult<PidFd> {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            return Err(SysError {
                what: format!("pidfd_open({pid})"),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Waits up to `timeout` for the process to end: true once it has (a zombie counts),
    /// false on the timeout or when a signal cut the wait short.
    pub fn wait_exit(&self, timeout: Duration) -> SysResult<bool> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        Ok(poll_one(self.0.as_raw_fd(), events::POLLIN, ms)? & events::POLLIN != 0)
    }
}

impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// The wait returns at the child's exit, long before its timeout, and not before it.
    #[test]
    fn a_pidfd_is_readable_once_the_process_ends() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let fd = PidFd::open(child.id()).unwrap();
        assert!(!fd.wait_exit(Duration::ZERO).unwrap(), "still running");
        let t = Instant::now();
        let mut ended = false;
        while !ended && t.elapsed() < Duration::from_secs(60) {
            ended = fd.wait_exit(Duration::from_secs(60)).unwrap();
        }
        assert!(ended);
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        child.wait().unwrap();
        let e = PidFd::open(u32::MAX >> 1).err().expect("no such process");
        assert_eq!(e.errno(), Some(libc::ESRCH));
    }
}
