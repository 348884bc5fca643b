//! A minimal epoll wrapper for the load generator, which watches many flow sockets
//! from one thread and needs sub-millisecond waits for an open-loop schedule.

use crate::{cvt, SysResult};
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// An epoll instance.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

impl Epoll {
    /// Creates an epoll instance that reports up to `max_events` per wait.
    pub fn new(max_events: usize) -> SysResult<Self> {
        // SAFETY: epoll_create1 takes a flag only.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, || {
            "epoll_create1".into()
        })?;
        // SAFETY: fd is new and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)],
        })
    }

    /// Watches `fd` for readability, reporting `token` when it is readable.
    pub fn add_readable(&self, fd: RawFd, token: u64) -> SysResult<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: ev is a live local the kernel reads.
        let ret = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        cvt(ret, || "epoll_ctl(ADD)".into()).map(|_| ())
    }

    /// Waits up to `timeout` (zero: poll) and returns the tokens of ready fds.
    /// Uses epoll_pwait2 for nanosecond timeouts, epoll_wait (ms) where it is missing.
    pub fn wait(&mut self, timeout: Duration) -> SysResult<impl Iterator<Item = u64> + '_> {
        let max = self.events.len() as i32;
        let n = if !NO_PWAIT2.load(Ordering::Relaxed) {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            // SAFETY: events has `max` writable entries; ts is a live local; no sigmask.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    max,
                    &ts as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            };
            if r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
                0
            } else {
                r as i32
            }
        } else {
            0
        };
        let n = if NO_PWAIT2.load(Ordering::Relaxed) {
            let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: events has `max` writable entries.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), max, ms) }
        } else {
            n
        };
        let n = match cvt(n, || "epoll_wait".into()) {
            Ok(n) => n as usize,
            Err(e) if e.errno() == Some(libc::EINTR) => 0,
            Err(e) => return Err(e),
        };
        Ok(self.events[..n].iter().map(|e| e.u64))
    }
}

/// Size of an epoll event, for callers sizing buffers.
pub const EVENT_SIZE: usize = mem::size_of::<libc::epoll_event>();

/// Waits up to `timeout_ms` for any of `fds` to become readable (poll(2)); returns which
/// are. An interrupted wait counts as none ready.
pub fn poll_readable<const N: usize>(fds: [RawFd; N], timeout_ms: i32) -> SysResult<[bool; N]> {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: p is a live array of p.len() pollfds.
    let ret = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    match cvt(ret, || "poll".into()) {
        Err(e) if e.errno() == Some(libc::EINTR) => Ok([false; N]),
        r => r.map(|_| p.map(|p| p.revents & (libc::POLLIN | libc::POLLERR) != 0)),
    }
}
