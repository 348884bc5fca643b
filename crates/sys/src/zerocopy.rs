//! MSG_ZEROCOPY sends (Documentation/networking/msg_zerocopy.rst): the kernel pins the
//! sender's pages instead of copying them and later reports, on the socket's error queue,
//! which sends it is done with. A buffer may be rewritten only after its sends completed.
//!
//! [`ZcSender`] owns its buffers and hands out `&mut` to one only when every send from it
//! has completed, so early reuse cannot happen by construction. Each completion says
//! whether the kernel copied anyway (`SO_EE_CODE_ZEROCOPY_COPIED`, e.g. on loopback).

use crate::cmsg::{Iter, Space};
use crate::sockopt::poll_one;
use crate::tcp::{TcpSock, MSG_ZEROCOPY};
use crate::{cvt, SysResult};
use std::collections::VecDeque;
use std::mem;
use std::os::fd::{AsRawFd, RawFd};

/// `ee_origin` of a zero-copy completion.
pub const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `ee_code` flag: the kernel copied the data after all.
pub const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// One completion notification: sends numbered `lo..=hi` are released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub lo: u32,
    pub hi: u32,
    pub copied: bool,
}

/// Parses a `struct sock_extended_err` (16 bytes); `None` unless it is a zero-copy
/// completion (origin ZEROCOPY, errno 0).
pub fn parse_extended_err(data: &[u8]) -> Option<Completion> {
    let d = data.get(..16)?;
    let u32_at = |o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().expect("4 bytes"));
    let (errno, origin, code) = (u32_at(0), d[4], d[6]);
    if errno != 0 || origin != SO_EE_ORIGIN_ZEROCOPY {
        return None;
    }
    Some(Completion {
        lo: u32_at(8),
        hi: u32_at(12),
        copied: code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
    })
}

/// Reads every notification queued on the error queue without blocking.
pub fn read_completions(fd: RawFd, out: &mut Vec<Completion>) -> SysResult<usize> {
    let mut n = 0;
    loop {
        let mut space = Space::<128>::default();
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_control = space.as_mut_ptr();
        msg.msg_controllen = space.bytes().len() as _;
        // SAFETY: msg points at a live control buffer of msg_controllen bytes; no data iovecs.
        let ret = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        match cvt(ret, || "recvmsg(MSG_ERRQUEUE)".into()) {
            Ok(_) => {}
            Err(e) if matches!(e.errno(), Some(libc::EAGAIN) | Some(libc::EINTR)) => return Ok(n),
            Err(e) => return Err(e),
        }
        for c in Iter::new(&msg, space.bytes()) {
            let is_err = (c.level == libc::SOL_IP && c.ty == libc::IP_RECVERR)
                || (c.level == libc::SOL_IPV6 && c.ty == libc::IPV6_RECVERR);
            if let Some(done) = is_err.then(|| parse_extended_err(c.data)).flatten() {
                out.push(done);
                n += 1;
            }
        }
    }
}

/// Counters of a zero-copy sender.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZcStats {
    /// send() calls made with MSG_ZEROCOPY that took data (each gets a notification id).
    pub sends: u64,
    /// Notifications read from the error queue (one may cover a range of sends).
    pub notifications: u64,
    /// Sends released by those notifications.
    pub completed: u64,
    /// Of those, sends the kernel copied anyway.
    pub copied: u64,
    /// Times the kernel refused with ENOBUFS (optmem_max reached) and we waited.
    pub enobufs: u64,
}

/// A ring of buffers sent with MSG_ZEROCOPY, with per-buffer completion tracking.
pub struct ZcSender {
    bufs: Vec<Box<[u8]>>,
    inflight: Vec<u32>,
    /// (id, buffer, completed) in id order, starting at the oldest uncompleted send.
    ids: VecDeque<(u32, usize, bool)>,
    next_id: u32,
    scratch: Vec<Completion>,
    pub stats: ZcStats,
}

impl ZcSender {
    /// `count` buffers of `size` bytes, zero-filled.
    pub fn new(count: usize, size: usize) -> Self {
        ZcSender {
            bufs: (0..count)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect(),
            inflight: vec![0; count],
            ids: VecDeque::new(),
            next_id: 0,
            scratch: Vec::new(),
            stats: ZcStats::default(),
        }
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.bufs.len()
    }

    /// Buffer `k` for writing, only when no send from it is still in flight.
    pub fn buffer_mut(&mut self, k: usize) -> Option<&mut [u8]> {
        if self.inflight[k] == 0 {
            Some(&mut self.bufs[k])
        } else {
            None
        }
    }

    /// Sends still waiting for their notification.
    pub fn outstanding(&self) -> u32 {
        self.inflight.iter().sum()
    }

    /// Sends the first `len` bytes of buffer `k` with MSG_ZEROCOPY, all of them.
    pub fn send(&mut self, sock: &TcpSock, k: usize, len: usize) -> SysResult<()> {
        let mut off = 0;
        while off < len {
            match sock.send(&self.bufs[k][off..len], MSG_ZEROCOPY) {
                Ok(n) => {
                    off += n;
                    self.ids.push_back((self.next_id, k, false));
                    self.next_id = self.next_id.wrapping_add(1);
                    self.inflight[k] += 1;
                    self.stats.sends += 1;
                }
                Err(e) if e.errno() == Some(libc::ENOBUFS) => {
                    self.stats.enobufs += 1;
                    self.reap(sock, 100)?;
                }
                Err(e) if e.errno() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads notifications, waiting up to `timeout_ms` for the first one when none is queued.
    pub fn reap(&mut self, sock: &TcpSock, timeout_ms: i32) -> SysResult<()> {
        let fd = sock.as_raw_fd();
        self.scratch.clear();
        if read_completions(fd, &mut self.scratch)? == 0 && timeout_ms != 0 {
            poll_one(fd, 0, timeout_ms)?;
            read_completions(fd, &mut self.scratch)?;
        }
        let done = std::mem::take(&mut self.scratch);
        for c in &done {
            self.complete(*c);
        }
        self.scratch = done;
        Ok(())
    }

    fn complete(&mut self, c: Completion) {
        self.stats.notifications += 1;
        let Some(&(base, _, _)) = self.ids.front() else {
            return;
        };
        let mut id = c.lo;
        loop {
            let idx = id.wrapping_sub(base) as usize;
            if let Some(slot) = self.ids.get_mut(idx) {
                if !slot.2 {
                    slot.2 = true;
                    self.inflight[slot.1] -= 1;
                    self.stats.completed += 1;
                    if c.copied {
                        self.stats.copied += 1;
                    }
                }
            }
            if id == c.hi {
                break;
            }
            id = id.wrapping_add(1);
        }
        while matches!(self.ids.front(), Some((_, _, true))) {
            self.ids.pop_front();
        }
    }

    /// Waits until buffer `k` is free; fails with ETIMEDOUT after `timeout_ms` without progress.
    pub fn wait_free(&mut self, sock: &TcpSock, k: usize, timeout_ms: i32) -> SysResult<()> {
        let mut idle = 0;
        while self.inflight[k] > 0 {
            let before = self.stats.notifications;
            self.reap(sock, 50)?;
            if self.stats.notifications == before {
                idle += 50;
                if idle >= timeout_ms {
                    return Err(crate::SysError {
                        what: format!(
                            "MSG_ZEROCOPY: no completion for buffer {k} in {timeout_ms} ms"
                        ),
                        source: std::io::Error::from_raw_os_error(libc::ETIMEDOUT),
                    });
                }
            } else {
                idle = 0;
            }
        }
        Ok(())
    }

    /// Waits for every outstanding send (at the end of a run).
    pub fn drain(&mut self, sock: &TcpSock, timeout_ms: i32) -> SysResult<()> {
        for k in 0..self.bufs.len() {
            self.wait_free(sock, k, timeout_ms)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ee(errno: u32, origin: u8, code: u8, lo: u32, hi: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&errno.to_ne_bytes());
        b.extend_from_slice(&[origin, 0, code, 0]);
        b.extend_from_slice(&lo.to_ne_bytes());
        b.extend_from_slice(&hi.to_ne_bytes());
        b
    }

    #[test]
    fn parses_zerocopy_completions_only() {
        let c = parse_extended_err(&ee(0, 5, 1, 3, 9)).unwrap();
        assert_eq!(
            c,
            Completion {
                lo: 3,
                hi: 9,
                copied: true
            }
        );
        assert!(!parse_extended_err(&ee(0, 5, 0, 0, 0)).unwrap().copied);
        assert_eq!(parse_extended_err(&ee(0, 2, 0, 0, 0)), None, "ICMP origin");
        assert_eq!(parse_extended_err(&ee(111, 5, 0, 0, 0)), None);
        assert_eq!(parse_extended_err(&[0; 8]), None);
    }

    #[test]
    fn ranges_release_buffers_out_of_order() {
        let mut z = ZcSender::new(2, 8);
        for (id, k) in [(0, 0), (1, 1), (2, 0)] {
            z.ids.push_back((id, k, false));
            z.inflight[k] += 1;
        }
        z.next_id = 3;
        z.complete(Completion {
            lo: 1,
            hi: 1,
            copied: false,
        });
        assert!(z.buffer_mut(1).is_some());
        assert!(z.buffer_mut(0).is_none());
        z.complete(Completion {
            lo: 0,
            hi: 2,
            copied: true,
        });
        assert!(z.buffer_mut(0).is_some());
        assert_eq!(z.stats.completed, 3);
        assert_eq!(z.stats.copied, 2);
        assert!(z.ids.is_empty());
    }
}
