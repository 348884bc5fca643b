//! io_uring sends for bulk TCP: IORING_OP_SEND and IORING_OP_SEND_ZC, through the
//! `io-uring` crate (tokio-rs: maintained, no C dependency, exposes SEND_ZC, multishot
//! recv, provided-buffer rings and the zcrx registration).
//!
//! Probing first: the sysctl kernel.io_uring_disabled, io_uring_setup itself (refused
//! under seccomp or when disabled) and the opcode probe. A refusal carries its errno.
//!
//! [`SendRing`] owns its buffers. One send is in flight at a time per socket (two queued
//! sends on one stream socket may be reordered by the kernel's retry path); with SEND_ZC a
//! buffer stays locked until its notification CQE, so it cannot be rewritten early.

use crate::{SysError, SysResult};
use io_uring::{cqueue, opcode, types, IoUring, Probe};

/// `IORING_SEND_ZC_REPORT_USAGE`: the notification says whether the kernel copied.
const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// Bit set in a notification's `res` when the data was copied after all.
const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;

pub(crate) fn uring_err(what: impl Into<String>, e: std::io::Error) -> SysError {
    SysError {
        what: what.into(),
        source: e,
    }
}

/// A push onto a full submission queue.
pub(crate) fn sq_full() -> SysError {
    uring_err(
        "io_uring: submission queue full",
        std::io::Error::from_raw_os_error(libc::EBUSY),
    )
}

pub(crate) fn cqe_err(what: &str, res: i32) -> SysError {
    uring_err(what, std::io::Error::from_raw_os_error(-res))
}

/// What this kernel offers of io_uring, for the modes that need it.
#[derive(Debug)]
pub struct UringSupport {
    /// kernel.io_uring_disabled (0 allowed, 1 only for a group, 2 disabled), if readable.
    pub disabled_sysctl: Option<u32>,
    /// Why io_uring_setup failed, if it did.
    pub setup_error: Option<SysError>,
    pub send: bool,
    pub send_zc: bool,
    pub recv: bool,
    pub recvmsg: bool,
}

impl UringSupport {
    /// Probes the kernel once.
    pub fn probe() -> UringSupport {
        let disabled_sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let mut out = UringSupport {
            disabled_sysctl,
            setup_error: None,
            send: false,
            send_zc: false,
            recv: false,
            recvmsg: false,
        };
        let ring: IoUring = match IoUring::new(4) {
            Ok(r) => r,
            Err(e) => {
                out.setup_error = Some(uring_err("io_uring_setup", e));
                return out;
            }
        };
        let mut probe = Probe::new();
        if let Err(e) = ring.submitter().register_probe(&mut probe) {
            out.setup_error = Some(uring_err("io_uring_register(PROBE)", e));
            return out;
        }
        out.send = probe.is_supported(opcode::Send::CODE);
        out.send_zc = probe.is_supported(opcode::SendZc::CODE);
        out.recv = probe.is_supported(opcode::Recv::CODE);
        out.recvmsg = probe.is_supported(opcode::RecvMsg::CODE);
        out
    }

    /// Ok when `op` can be used, else the reason with an errno.
    pub fn require(&self, op: &str) -> SysResult<()> {
        if let Some(e) = &self.setup_error {
            let sysctl = match self.disabled_sysctl {
                Some(v) if v != 0 => format!(" (kernel.io_uring_disabled={v})"),
                _ => String::new(),
            };
            return Err(uring_err(
                format!("{}{sysctl}", e.what),
                std::io::Error::from_raw_os_error(e.errno().unwrap_or(libc::ENOSYS)),
            ));
        }
        let ok = match op {
            "send" => self.send,
            "send_zc" => self.send_zc,
            "recv" => self.recv,
            "recvmsg" => self.recvmsg,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(uring_err(
                format!("io_uring opcode probe: {op} not supported by this kernel"),
                std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            ))
        }
    }
}

/// Counters of a [`SendRing`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UringSendStats {
    /// Send requests completed (a short send is resubmitted as a new request).
    pub requests: u64,
    /// SEND_ZC notification CQEs received.
    pub notifications: u64,
    /// Of those, notifications saying the kernel copied the data.
    pub copied: u64,
}

/// An io_uring that sends from its own ring of buffers, copying (SEND) or zero-copy (SEND_ZC).
pub struct SendRing {
    // Declared first so it is dropped (and its requests torn down) before the buffers.
    ring: IoUring,
    bufs: Vec<Box<[u8]>>,
    pending_notif: Vec<u32>,
    zc: bool,
    pub stats: UringSendStats,
}

impl SendRing {
    /// `count` zero-filled buffers of `size` bytes; `zc` selects SEND_ZC.
    pub fn new(count: usize, size: usize, zc: bool) -> SysResult<Self> {
        let ring = IoUring::new(8).map_err(|e| uring_err("io_uring_setup", e))?;
        Ok(SendRing {
            ring,
            bufs: (0..count)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect(),
            pending_notif: vec![0; count],
            zc,
            stats: UringSendStats::default(),
        })
    }

    /// Buffer `k` for writing, only when the kernel holds no reference to it.
    pub fn buffer_mut(&mut self, k: usize) -> Option<&mut [u8]> {
        if self.pending_notif[k] == 0 {
            Some(&mut self.bufs[k])
        } else {
            None
        }
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.bufs.len()
    }

    fn wait_one(&mut self) -> SysResult<()> {
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if !self.ring.completion().is_empty() {
                        return Ok(());
                    }
                }
                Err(e) => return Err(uring_err("io_uring_enter", e)),
            }
        }
    }

    /// Handles queued CQEs; returns the result of the send request if one was among them.
    fn reap(&mut self) -> Option<i32> {
        let mut result = None;
        let cqes: Vec<(u64, i32, u32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()))
            .collect();
        for (k, res, flags) in cqes {
            let k = k as usize;
            if cqueue::notif(flags) {
                self.pending_notif[k] -= 1;
                self.stats.notifications += 1;
                if res as u32 & NOTIF_USAGE_ZC_COPIED != 0 {
                    self.stats.copied += 1;
                }
            } else {
                if cqueue::more(flags) {
                    self.pending_notif[k] += 1;
                }
                self.stats.requests += 1;
                result = Some(res);
            }
        }
        result
    }

    /// Sends the first `len` bytes of buffer `k` on `fd`, all of them.
    pub fn send(&mut self, fd: i32, k: usize, len: usize) -> SysResult<()> {
        let mut off = 0;
        while off < len {
            let ptr = self.bufs[k][off..].as_ptr();
            let n = (len - off) as u32;
            let entry = if self.zc {
                opcode::SendZc::new(types::Fd(fd), ptr, n)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                    .zc_flags(SEND_ZC_REPORT_USAGE)
                    .build()
            } else {
                opcode::Send::new(types::Fd(fd), ptr, n)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                    .build()
            }
            .user_data(k as u64);
            // SAFETY: the buffer is owned by self and is neither freed nor handed out as
            // `&mut` while the request runs: we wait for its result below, and with SEND_ZC
            // buffer_mut refuses it until the notification arrives.
            unsafe { self.ring.submission().push(&entry) }.map_err(|_| sq_full())?;
            let res = loop {
                self.wait_one()?;
                if let Some(r) = self.reap() {
                    break r;
                }
            };
            match res {
                r if r >= 0 => off += r as usize,
                r if -r == libc::EINTR || -r == libc::EAGAIN => {}
                r => {
                    return Err(cqe_err(
                        if self.zc {
                            "IORING_OP_SEND_ZC"
                        } else {
                            "IORING_OP_SEND"
                        },
                        r,
                    ))
                }
            }
        }
        Ok(())
    }

    /// Waits until buffer `k` has no notification outstanding.
    pub fn wait_free(&mut self, k: usize) -> SysResult<()> {
        while self.pending_notif[k] > 0 {
            self.wait_one()?;
            self.reap();
        }
        Ok(())
    }

    /// Waits for every outstanding notification.
    pub fn drain(&mut self) -> SysResult<()> {
        for k in 0..self.bufs.len() {
            self.wait_free(k)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{ConnectOptions, TcpListener, TcpSock};
    use std::os::fd::AsRawFd;

    #[test]
    fn send_and_send_zc_deliver_and_notify() {
        let support = UringSupport::probe();
        if let Err(e) = support.require("send_zc") {
            eprintln!("skipped: {e}");
            return;
        }
        let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
        let (s, _) = l.accept(5000).unwrap().unwrap();
        for zc in [false, true] {
            let mut r = SendRing::new(2, 100_000, zc).unwrap();
            r.buffer_mut(0).unwrap().fill(7);
            r.send(c.as_raw_fd(), 0, 100_000).unwrap();
            let mut got = vec![0u8; 100_000];
            assert!(s.recv_exact(&mut got).unwrap());
            assert!(got.iter().all(|&b| b == 7));
            r.drain().unwrap();
            assert!(r.buffer_mut(0).is_some());
            if zc {
                assert!(r.stats.notifications >= 1);
                assert_eq!(r.stats.notifications, r.stats.requests);
            } else {
                assert_eq!(r.stats.notifications, 0);
            }
        }
    }
}
