//! A minimal epoll wrapper: the load generator watches many flow sockets from one thread
//! and needs sub-millisecond waits for an open-loop schedule; the DNS TCP side runs an
//! event loop over a listener and its connections (level-triggered, read and write
//! interest switched per connection).

use crate::{cvt, SysResult};
use serde::{Deserialize, Serialize};
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
        self.ctl(
            libc::EPOLL_CTL_ADD,
            fd,
            libc::EPOLLIN as u32,
            token,
            "epoll_ctl(ADD)",
        )
    }

    /// Watches `fd` (level-triggered) for `interest`, reporting `token`.
    pub fn add(&self, fd: RawFd, interest: Interest, token: u64) -> SysResult<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest.0, token, "epoll_ctl(ADD)")
    }

    /// Watches a listening socket shared by several epoll instances for readability,
    /// waking one of their waiters per connection rather than all (EPOLLEXCLUSIVE).
    pub fn add_exclusive(&self, fd: RawFd, token: u64) -> SysResult<()> {
        let ev = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.ctl(
            libc::EPOLL_CTL_ADD,
            fd,
            ev,
            token,
            "epoll_ctl(ADD, EPOLLEXCLUSIVE)",
        )
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, interest: Interest, token: u64) -> SysResult<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest.0, token, "epoll_ctl(MOD)")
    }

    /// Stops watching `fd` (closing it does so too).
    pub fn delete(&self, fd: RawFd) -> SysResult<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0, "epoll_ctl(DEL)")
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, token: u64, what: &str) -> SysResult<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a live local the kernel reads (and ignores for DEL).
        let ret = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        cvt(ret, || what.into()).map(|_| ())
    }

    /// Waits up to `timeout` (zero: poll) and returns the tokens of ready fds.
    /// Uses epoll_pwait2 for nanosecond timeouts, epoll_wait (ms) where it is missing.
    pub fn wait(&mut self, timeout: Duration) -> SysResult<impl Iterator<Item = u64> + '_> {
        let n = self.wait_raw(Some(timeout))?;
        Ok(self.events[..n].iter().map(|e| e.u64))
    }

    /// Waits up to `timeout` (`None`: until something is ready) and returns what is ready.
    pub fn wait_events(
        &mut self,
        timeout: Option<Duration>,
    ) -> SysResult<impl Iterator<Item = Event> + '_> {
        let n = self.wait_raw(timeout)?;
        Ok(self.events[..n]
            .iter()
            .map(|e| Event::from_raw(e.u64, e.events)))
    }

    /// The number of events written to `self.events`; an interrupted wait counts as none.
    fn wait_raw(&mut self, timeout: Option<Duration>) -> SysResult<usize> {
        let max = self.events.len() as i32;
        let n = if !NO_PWAIT2.load(Ordering::Relaxed) {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let tsp = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: events has `max` writable entries; tsp is null or a live local; no
            // sigmask.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    max,
                    tsp,
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
            // Rounded up, so a short wait does not become a busy poll.
            let ms = timeout.map_or(-1, |t| {
                (t.as_nanos().div_ceil(1_000_000)).min(i32::MAX as u128) as i32
            });
            // SAFETY: events has `max` writable entries.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), max, ms) }
        } else {
            n
        };
        match cvt(n, || "epoll_wait".into()) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.errno() == Some(libc::EINTR) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// `struct epoll_params` (linux/eventpoll.h, kernel 6.9+): how an epoll_wait busy-polls the
/// NAPI of the sockets it watches before it sleeps.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpollParams {
    /// How long each wait polls the NAPI before sleeping (µs; 0: no busy poll).
    pub busy_poll_usecs: u32,
    /// Packets per NAPI poll (above 64 needs CAP_NET_ADMIN: EPERM).
    pub busy_poll_budget: u16,
    /// 1: the kernel leaves the NAPI to the poller (with defer-hard-irqs and
    /// gro-flush-timeout), and irq-suspend-timeout applies.
    pub prefer_busy_poll: u8,
    #[serde(skip)]
    pad: u8,
}

impl EpollParams {
    pub fn new(busy_poll_usecs: u32, busy_poll_budget: u16, prefer_busy_poll: bool) -> Self {
        EpollParams {
            busy_poll_usecs,
            busy_poll_budget,
            prefer_busy_poll: u8::from(prefer_busy_poll),
            pad: 0,
        }
    }
}

/// `_IOW(0x8A, 0x01, struct epoll_params)` and `_IOR(0x8A, 0x02, struct epoll_params)`.
const EPIOCSPARAMS: libc::c_ulong = 0x4008_8A01;
const EPIOCGPARAMS: libc::c_ulong = 0x8008_8A02;

impl Epoll {
    /// Sets the instance's busy-poll parameters (EPIOCSPARAMS). ENOTTY on a kernel before
    /// 6.9 or without CONFIG_NET_RX_BUSY_POLL; EPERM for a budget above 64 without
    /// CAP_NET_ADMIN; EINVAL for a value out of range.
    pub fn set_busy_poll_params(&self, p: &EpollParams) -> SysResult<()> {
        let mut p = *p;
        // SAFETY: p is a live struct epoll_params the kernel only reads.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), EPIOCSPARAMS as _, &mut p) };
        cvt(r, || "ioctl(EPIOCSPARAMS)".into()).map(|_| ())
    }

    /// The instance's busy-poll parameters as the kernel holds them (EPIOCGPARAMS).
    pub fn busy_poll_params(&self) -> SysResult<EpollParams> {
        let mut p = EpollParams::default();
        // SAFETY: p is a live struct epoll_params the kernel fills.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), EPIOCGPARAMS as _, &mut p) };
        cvt(r, || "ioctl(EPIOCGPARAMS)".into()).map(|_| p)
    }
}

/// What an fd is watched for: readable, writable, both or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest(u32);

impl Interest {
    /// Neither (errors and hang-ups are still reported).
    pub const NONE: Interest = Interest(0);
    pub const READ: Interest = Interest(libc::EPOLLIN as u32);
    pub const WRITE: Interest = Interest(libc::EPOLLOUT as u32);
    pub const BOTH: Interest = Interest((libc::EPOLLIN | libc::EPOLLOUT) as u32);

    /// Read and/or write interest as flags say.
    pub fn of(read: bool, write: bool) -> Interest {
        Interest(if read { Self::READ.0 } else { 0 } | if write { Self::WRITE.0 } else { 0 })
    }
}

/// One ready fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub token: u64,
    /// Data, end of stream, an error or a hang-up: a read will not block.
    pub readable: bool,
    /// Room to write, an error or a hang-up: a write will not block.
    pub writable: bool,
}

impl Event {
    fn from_raw(token: u64, ev: u32) -> Event {
        let bad = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        Event {
            token,
            readable: ev & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | bad) != 0,
            writable: ev & (libc::EPOLLOUT as u32 | bad) != 0,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn busy_poll_params_read_back_or_the_refusal_names_its_errno() {
        assert_eq!(mem::size_of::<EpollParams>(), 8);
        let ep = Epoll::new(1).unwrap();
        let want = EpollParams::new(50, 8, true);
        match ep.set_busy_poll_params(&want) {
            Ok(()) => assert_eq!(ep.busy_poll_params().unwrap(), want),
            // A kernel before 6.9 or without CONFIG_NET_RX_BUSY_POLL.
            Err(e) => assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}"),
        }
        if ep.busy_poll_params().is_ok() {
            let e = ep
                .set_busy_poll_params(&EpollParams::new(u32::MAX, 8, true))
                .unwrap_err();
            assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
            assert!(e.to_string().contains("EPIOCSPARAMS"), "{e}");
        }
    }

    #[test]
    fn interest_follows_add_and_modify() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut ep = Epoll::new(4).unwrap();
        ep.add(b.as_raw_fd(), Interest::READ, 7).unwrap();
        let ready: Vec<Event> = ep.wait_events(Some(Duration::ZERO)).unwrap().collect();
        assert!(ready.is_empty(), "nothing to read yet: {ready:?}");
        a.write_all(b"x").unwrap();
        let ready: Vec<Event> = ep.wait_events(None).unwrap().collect();
        assert_eq!(
            ready,
            [Event {
                token: 7,
                readable: true,
                writable: false
            }]
        );
        ep.modify(b.as_raw_fd(), Interest::WRITE, 8).unwrap();
        let ready: Vec<Event> = ep.wait_events(None).unwrap().collect();
        assert_eq!(
            (ready[0].token, ready[0].readable, ready[0].writable),
            (8, false, true)
        );
        ep.delete(b.as_raw_fd()).unwrap();
        assert_eq!(ep.wait_events(Some(Duration::ZERO)).unwrap().count(), 0);
        assert_eq!(Interest::of(true, true), Interest::BOTH);
        assert_eq!(Interest::of(false, false), Interest::NONE);
    }
}
