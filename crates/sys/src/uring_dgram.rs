//! io_uring for datagrams: a multishot IORING_OP_RECVMSG feeding a provided-buffer ring (one
//! completion per datagram, no re-arming while buffers last), and batched IORING_OP_SEND on a
//! connected UDP socket (a batch of SQEs, one io_uring_enter).
//!
//! [`UringSetup`] maps the ring options a user may ask for to IORING_SETUP_* flags; a ring the
//! kernel refuses (kernel.io_uring_disabled, SQPOLL without privilege, DEFER_TASKRUN without
//! SINGLE_ISSUER) comes back as an error naming the flags and the errno. With SINGLE_ISSUER the
//! ring belongs to the thread that created it: create it on the thread that uses it.

use crate::mmsg::Flushed;
use crate::uring::{cqe_err, sq_full, uring_err};
use crate::uring_pbuf::BufRing;
use crate::uring_recv::cancel_sync;
use crate::SysResult;
use io_uring::{cqueue, opcode, types, IoUring};
use std::time::Duration;

const BGID: u16 = 11;
const RECV_UD: u64 = 1;

/// IORING_SETUP_* options of a ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UringSetup {
    /// IORING_SETUP_SQPOLL with this idle time in milliseconds: a kernel thread polls the
    /// submission queue, so submitting needs no system call while it is awake.
    pub sqpoll_idle_ms: Option<u32>,
    /// IORING_SETUP_SINGLE_ISSUER: only the creating thread submits.
    pub single_issuer: bool,
    /// IORING_SETUP_DEFER_TASKRUN: completions are run only when the thread waits for them.
    pub defer_taskrun: bool,
}

impl UringSetup {
    /// The flags as the kernel names them, e.g. "SQPOLL|SINGLE_ISSUER", or "none".
    pub fn flags(&self) -> String {
        let mut f = Vec::new();
        if self.sqpoll_idle_ms.is_some() {
            f.push("SQPOLL");
        }
        if self.single_issuer {
            f.push("SINGLE_ISSUER");
        }
        if self.defer_taskrun {
            f.push("DEFER_TASKRUN");
        }
        if f.is_empty() {
            "none".into()
        } else {
            f.join("|")
        }
    }

    /// A ring of `entries` with these flags, or the refusal with its errno (and the sysctl
    /// kernel.io_uring_disabled when it is set).
    pub fn build(&self, entries: u32) -> SysResult<IoUring> {
        let mut b = IoUring::builder();
        if let Some(ms) = self.sqpoll_idle_ms {
            b.setup_sqpoll(ms);
        }
        if self.single_issuer {
            b.setup_single_issuer();
        }
        if self.defer_taskrun {
            b.setup_defer_taskrun();
        }
        b.build(entries).map_err(|e| {
            let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .filter(|&v| v != 0)
                .map(|v| format!(", kernel.io_uring_disabled={v}"))
                .unwrap_or_default();
            uring_err(format!("io_uring_setup(flags {}{sysctl})", self.flags()), e)
        })
    }
}

/// Counters of a [`RecvMsgRing`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecvMsgStats {
    /// io_uring_enter calls made.
    pub enters: u64,
    /// Times the multishot receive was armed (again after the buffers ran out).
    pub arms: u64,
}

/// A UDP socket's receive path: one multishot RECVMSG, `count` provided buffers.
pub struct RecvMsgRing {
    // Declared first: dropped (after the cancel in Drop) before the memory it writes into.
    ring: IoUring,
    fd: i32,
    /// Copied by the kernel when the request is prepared (never read afterwards): no name,
    /// no control data, so each buffer holds a 16-byte header and then the payload.
    msghdr: Box<libc::msghdr>,
    bufs: BufRing,
    armed: bool,
    pub stats: RecvMsgStats,
}

// SAFETY: the raw pointers are private mappings owned by this struct; the ring itself may be
// used from any one thread at a time (SINGLE_ISSUER callers create it on the using thread).
unsafe impl Send for RecvMsgRing {}

impl RecvMsgRing {
    /// `count` (rounded up to a power of two, <= 32768) buffers of `size` bytes each, the
    /// largest datagram kept whole being `size` minus a 16-byte header; longer ones are
    /// still counted at their full length (MSG_TRUNC).
    pub fn new(fd: i32, count: u16, size: usize, setup: &UringSetup) -> SysResult<Self> {
        let ring = setup.build(256)?;
        let bufs = BufRing::register(&ring, BGID, count, size)?;
        // SAFETY: an all-zero msghdr is valid (no name, no iovec, no control).
        let msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        Ok(RecvMsgRing {
            ring,
            fd,
            msghdr,
            bufs,
            armed: false,
            stats: RecvMsgStats::default(),
        })
    }

    fn arm(&mut self) -> SysResult<()> {
        // SAFETY: the msghdr and the buffers live in self; Drop cancels the request and
        // waits for it before they are freed.
        unsafe {
            crate::uring_pbuf::push_recvmsg_multi(
                &mut self.ring,
                self.fd,
                &self.msghdr,
                BGID,
                RECV_UD,
            )
        }?;
        self.armed = true;
        self.stats.arms += 1;
        Ok(())
    }

    /// Waits up to `timeout` for datagrams and calls `each` with every datagram's length;
    /// returns how many arrived (0 on timeout).
    pub fn poll(&mut self, timeout: Duration, mut each: impl FnMut(usize)) -> SysResult<usize> {
        if !self.armed {
            self.arm()?;
        }
        if self.ring.completion().is_empty() {
            self.stats.enters += 1;
            crate::uring_pbuf::enter(&self.ring, 1, Some(timeout))?;
        }
        let mut got = 0;
        loop {
            let Some(cqe) = self.ring.completion().next() else {
                break;
            };
            let (res, flags) = (cqe.result(), cqe.flags());
            if !cqueue::more(flags) {
                self.armed = false;
            }
            if res == -libc::ENOBUFS || res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(cqe_err("IORING_OP_RECVMSG (multishot)", res));
            }
            let Some(bid) = cqueue::buffer_select(flags) else {
                continue;
            };
            // SAFETY: the kernel wrote this completion into buffer `bid`, which it does not
            // touch again until recycle() hands it back below.
            let buf = unsafe { std::slice::from_raw_parts(self.bufs.ptr(bid), self.bufs.size()) };
            let len = types::RecvMsgOut::parse(buf, &self.msghdr)
                .map(|o| o.incoming_payload_len() as usize)
                .unwrap_or(0);
            self.bufs.recycle(bid);
            each(len);
            got += 1;
        }
        Ok(got)
    }
}

impl Drop for RecvMsgRing {
    fn drop(&mut self) {
        let idle = !self.armed || cancel_sync(&self.ring, RECV_UD);
        self.bufs.close(&self.ring, idle);
    }
}

/// Batched sends of one payload on connected UDP sockets: `n` IORING_OP_SEND per enter.
pub struct SendBatchRing {
    // Declared first: dropped before the payload the kernel reads.
    ring: IoUring,
    payload: Vec<u8>,
    depth: usize,
}

impl SendBatchRing {
    /// A ring for batches of up to `depth` sends of `payload`.
    pub fn new(depth: usize, payload: Vec<u8>, setup: &UringSetup) -> SysResult<Self> {
        let depth = depth.clamp(1, 4096);
        let ring = setup.build((depth as u32).next_power_of_two())?;
        Ok(SendBatchRing {
            ring,
            payload,
            depth,
        })
    }

    /// Sends the payload `n` (at most the depth) times on connected socket `fd` and waits for
    /// every result; refused sends are counted in `failed` with the last errno.
    pub fn send(&mut self, fd: i32, n: usize) -> SysResult<Flushed> {
        let n = n.min(self.depth);
        let mut out = Flushed::default();
        for i in 0..n {
            let e = opcode::Send::new(
                types::Fd(fd),
                self.payload.as_ptr(),
                self.payload.len() as u32,
            )
            .build()
            .user_data(i as u64);
            // SAFETY: the payload lives in self and is not changed while the sends run: this
            // call waits for all of them before returning.
            unsafe { self.ring.submission().push(&e) }.map_err(|_| sq_full())?;
        }
        let mut done = 0;
        while done < n {
            out.syscalls += 1;
            match self.ring.submit_and_wait(n - done) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(uring_err("io_uring_enter", e)),
            }
            for cqe in self.ring.completion() {
                done += 1;
                match cqe.result() {
                    r if r >= 0 => out.sent += 1,
                    r => {
                        out.failed += 1;
                        out.last_error = Some(-r);
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::UdpSock;
    use std::os::fd::AsRawFd;

    #[test]
    fn batched_sends_arrive_and_multishot_recvmsg_counts_each_datagram() {
        if let Err(e) = crate::uring::UringSupport::probe().require("recvmsg") {
            eprintln!("skipped: {e}");
            return;
        }
        let rx = UdpSock::new_for(&"127.0.0.1:0".parse().unwrap()).unwrap();
        rx.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
        let to = rx.local_addr().unwrap();
        let tx = UdpSock::new_for(&to).unwrap();
        tx.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
        tx.connect(&to).unwrap();
        let setup = UringSetup {
            single_issuer: true,
            defer_taskrun: true,
            ..UringSetup::default()
        };
        let mut r = RecvMsgRing::new(rx.as_raw_fd(), 8, 256, &setup).unwrap();
        let mut s = SendBatchRing::new(16, vec![9u8; 300], &setup).unwrap();
        let f = s.send(tx.as_raw_fd(), 16).unwrap();
        assert_eq!((f.sent, f.failed), (16, 0));
        let mut lens = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while lens.len() < 16 && std::time::Instant::now() < end {
            r.poll(Duration::from_millis(100), |n| lens.push(n))
                .unwrap();
        }
        // 16 datagrams through 8 buffers of 256: each truncated but counted at full length.
        assert_eq!(lens, vec![300; 16]);
    }

    #[test]
    fn setup_flags_are_named() {
        let s = UringSetup {
            sqpoll_idle_ms: Some(10),
            defer_taskrun: true,
            ..UringSetup::default()
        };
        assert_eq!(s.flags(), "SQPOLL|DEFER_TASKRUN");
        // DEFER_TASKRUN without SINGLE_ISSUER is refused by the kernel with EINVAL.
        if crate::uring::UringSupport::probe().require("send").is_ok() {
            let e = UringSetup {
                defer_taskrun: true,
                ..UringSetup::default()
            }
            .build(4)
            .err()
            .expect("DEFER_TASKRUN alone must be refused");
            assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
            assert!(e.to_string().contains("DEFER_TASKRUN"), "{e}");
        }
    }
}
