//! io_uring for bulk TCP (`stream`): [`RecvRing`], one multishot IORING_OP_RECV feeding a
//! provided-buffer ring (falling back to single-shot RECV where the ring cannot be
//! registered); [`SendRing`], IORING_OP_SEND or IORING_OP_SEND_ZC from buffers it owns; and
//! the probe for zero-copy receive ([`probe_zcrx`], 6.15+), which needs a NIC with header
//! split and queue management: on loopback and veth it fails, and the errno says so.
//!
//! One send is in flight at a time per socket (two queued sends on one stream socket may be
//! reordered by the kernel's retry path); with SEND_ZC a buffer stays locked until its
//! notification CQE, so it cannot be rewritten early.

use super::mem::{cancel_sync, BufRing, Pages};
use super::{cqe_err, sq_full, uring_err};
use crate::{SysError, SysResult};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// `IORING_SEND_ZC_REPORT_USAGE`: the notification says whether the kernel copied.
const SEND_ZC_REPORT_USAGE: u16 = 1 << 3;
/// Bit set in a notification's `res` when the data was copied after all.
const NOTIF_USAGE_ZC_COPIED: u32 = 1 << 31;
const BGID: u16 = 7;
const RECV_UD: u64 = 1;

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
        for c in self.ring.completion() {
            let (k, res, flags) = (c.user_data() as usize, c.result(), c.flags());
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
                    let op = if self.zc {
                        "IORING_OP_SEND_ZC"
                    } else {
                        "IORING_OP_SEND"
                    };
                    return Err(cqe_err(op, r));
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

/// Counters of a [`RecvRing`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UringRecvStats {
    /// Completions carrying data.
    pub cqes: u64,
    /// Times the receive had to be armed again (multishot ended, e.g. buffers ran out).
    pub arms: u64,
}

/// A stream socket's receive path through io_uring with buffers owned here.
pub struct RecvRing {
    // Declared first: dropped before the memory the kernel may write into.
    ring: IoUring,
    fd: i32,
    /// The provided-buffer ring, or `None` where it could not be registered: then one
    /// buffer of `size` bytes and single-shot receives.
    bufs: Option<BufRing>,
    single: Option<Pages>,
    size: usize,
    armed: bool,
    to_recycle: Option<u16>,
    pub stats: UringRecvStats,
}

// SAFETY: the raw pointers are private mappings owned by this struct; no thread affinity.
unsafe impl Send for RecvRing {}

impl RecvRing {
    /// `count` (a power of two, <= 32768) buffers of `size` bytes for socket `fd`.
    pub fn new(fd: i32, count: u16, size: usize) -> SysResult<Self> {
        let ring = IoUring::new(64).map_err(|e| uring_err("io_uring_setup", e))?;
        let bufs = BufRing::register(&ring, BGID, count.max(1), size).ok();
        let single = match bufs {
            Some(_) => None,
            None => Some(Pages::new(size)?),
        };
        Ok(RecvRing {
            ring,
            fd,
            bufs,
            single,
            size,
            armed: false,
            to_recycle: None,
            stats: UringRecvStats::default(),
        })
    }

    /// True when a multishot receive with a provided-buffer ring is in use.
    pub fn multishot(&self) -> bool {
        self.bufs.is_some()
    }

    fn arm(&mut self) -> SysResult<()> {
        let entry = match (&self.bufs, &self.single) {
            (Some(b), _) => opcode::RecvMulti::new(types::Fd(self.fd), b.bgid()).build(),
            (None, Some(p)) => {
                opcode::Recv::new(types::Fd(self.fd), p.ptr, self.size as u32).build()
            }
            (None, None) => unreachable!("one of the two is made in new()"),
        }
        .user_data(RECV_UD);
        // SAFETY: the buffers (provided ring or the single buffer) live in self; Drop cancels
        // the request and waits before freeing them.
        unsafe { self.ring.submission().push(&entry) }.map_err(|_| sq_full())?;
        self.armed = true;
        self.stats.arms += 1;
        Ok(())
    }

    /// The next chunk of the stream; empty at end of stream. The slice is valid until the
    /// next call, which gives its buffer back to the kernel.
    pub fn recv(&mut self) -> SysResult<&[u8]> {
        if let (Some(bid), Some(b)) = (self.to_recycle.take(), self.bufs.as_mut()) {
            b.recycle(bid);
            b.publish();
        }
        loop {
            if !self.armed {
                self.arm()?;
            }
            let cqe = loop {
                if let Some(c) = self.ring.completion().next() {
                    break c;
                }
                match self.ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(uring_err("io_uring_enter", e)),
                }
            };
            let (res, flags) = (cqe.result(), cqe.flags());
            if !cqueue::more(flags) {
                self.armed = false;
            }
            if res == -libc::ENOBUFS || res == -libc::EINTR || res == -libc::EAGAIN {
                continue;
            }
            if res < 0 {
                return Err(cqe_err("IORING_OP_RECV", res));
            }
            if res == 0 {
                return Ok(&[]);
            }
            self.stats.cqes += 1;
            let ptr = match (&self.bufs, &self.single) {
                (Some(b), _) => {
                    let bid = cqueue::buffer_select(flags).ok_or_else(|| {
                        uring_err(
                            "IORING_OP_RECV: completion without a buffer id",
                            std::io::Error::from_raw_os_error(libc::EIO),
                        )
                    })?;
                    self.to_recycle = Some(bid);
                    b.ptr(bid)
                }
                (None, Some(p)) => p.ptr,
                (None, None) => unreachable!("one of the two is made in new()"),
            };
            // SAFETY: the kernel wrote `res` bytes into this buffer, which it will not touch
            // again until it is recycled at the next call (needs &mut self).
            return Ok(unsafe { std::slice::from_raw_parts(ptr, res as usize) });
        }
    }
}

impl Drop for RecvRing {
    fn drop(&mut self) {
        let idle = !self.armed || cancel_sync(&self.ring, RECV_UD);
        if let Some(b) = self.bufs.as_mut() {
            b.close(&self.ring, idle);
        }
        if !idle {
            if let Some(p) = self.single.as_mut() {
                p.keep_mapped();
            }
        }
    }
}

/// Tries to register a zero-copy receive queue (zcrx) for interface `ifindex`, queue
/// `rxq`. Ok only if the kernel accepted it; the error names the step and errno
/// (EOPNOTSUPP on loopback and veth, which have no DMA device or queue management).
pub fn probe_zcrx(ifindex: u32, rxq: u32) -> SysResult<()> {
    let ring: IoUring<squeue::Entry, cqueue::Entry32> = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .map_err(|e| uring_err("io_uring_setup(SINGLE_ISSUER|DEFER_TASKRUN|CQE32)", e))?;
    let area = Pages::new(64 * 4096)?;
    let rq_entries = 256u32;
    let region_len = 4096 + rq_entries as usize * std::mem::size_of::<types::io_uring_zcrx_rqe>();
    let region_mem = Pages::new(region_len.div_ceil(4096) * 4096)?;
    let mut region = types::io_uring_region_desc {
        user_addr: region_mem.ptr as u64,
        size: region_mem.len as u64,
        flags: types::IORING_MEM_REGION_TYPE_USER,
        ..Default::default()
    };
    let mut area_reg = types::io_uring_zcrx_area_reg {
        addr: area.ptr as u64,
        len: area.len as u64,
        ..Default::default()
    };
    let reg = types::io_uring_zcrx_ifq_reg {
        if_idx: ifindex,
        if_rxq: rxq,
        rq_entries,
        area_ptr: &mut area_reg as *mut _ as u64,
        region_ptr: &mut region as *mut _ as u64,
        ..Default::default()
    };
    let res = ring.submitter().register_ifq(&reg);
    drop(ring);
    res.map_err(|e| SysError {
        what: format!("io_uring_register(ZCRX_IFQ, ifindex {ifindex}, rxq {rxq})"),
        source: e,
    })
}
