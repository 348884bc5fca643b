//! The parts the datagram rings share: a provided-buffer ring registered with an io_uring
//! ([`BufRing`]: `count` buffers of `size` bytes, handed to the kernel and taken back by
//! buffer id), and one `io_uring_enter` helper that submits, optionally waits with a
//! timeout, and treats an expired wait or a signal as an empty one.

use crate::uring::uring_err;
use crate::uring_recv::{publish_buffer, Pages};
use crate::SysResult;
use io_uring::{opcode, types, IoUring};
use std::time::Duration;

/// `count` buffers of `size` bytes registered as buffer group `bgid`.
pub(crate) struct BufRing {
    ring_mem: Pages,
    data: Pages,
    count: u16,
    size: usize,
    tail: u16,
    bgid: u16,
}

impl BufRing {
    /// Registers the ring with `ring` and hands every buffer to the kernel. `count` is
    /// rounded up to a power of two (at most 32768).
    pub(crate) fn register(ring: &IoUring, bgid: u16, count: u16, size: usize) -> SysResult<Self> {
        let count = count.clamp(1, 32768).next_power_of_two();
        let ring_mem = Pages::new((count as usize * 16).max(4096))?;
        // SAFETY: ring_mem is page aligned, holds `count` entries and is owned by the
        // returned value, which its users drop only after the ring (or keep mapped).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(ring_mem.ptr as u64, count, bgid, 0)
        }
        .map_err(|e| uring_err("io_uring_register(PBUF_RING) (needs Linux 5.19+)", e))?;
        let mut me = BufRing {
            ring_mem,
            data: Pages::new(count as usize * size)?,
            count,
            size,
            tail: 0,
            bgid,
        };
        for bid in 0..count {
            me.recycle(bid);
        }
        Ok(me)
    }

    /// Hands buffer `bid` (back) to the kernel.
    pub(crate) fn recycle(&mut self, bid: u16) {
        let addr = self.ptr(bid);
        publish_buffer(
            &self.ring_mem,
            self.count,
            &mut self.tail,
            addr,
            self.size as u32,
            bid,
        );
    }

    /// Start of buffer `bid`.
    pub(crate) fn ptr(&self, bid: u16) -> *mut u8 {
        self.data.ptr.wrapping_add(bid as usize * self.size)
    }

    pub(crate) fn count(&self) -> u16 {
        self.count
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Called when the owner is dropped: unregisters the group from `ring` when every
    /// request that could write into the buffers is known to be over (`idle`); otherwise the
    /// kernel may still write into them, so the memory stays mapped for the life of the
    /// process rather than be freed under it.
    pub(crate) fn close(&mut self, ring: &IoUring, idle: bool) {
        if idle {
            let _ = ring.submitter().unregister_buf_ring(self.bgid);
        } else {
            self.data.keep_mapped();
            self.ring_mem.keep_mapped();
        }
    }
}

/// Submits what `ring` has queued and waits for `want` completions, up to `timeout` when
/// given (a zero timeout still asks for completions, which DEFER_TASKRUN needs to run them).
pub(crate) fn enter(ring: &IoUring, want: usize, timeout: Option<Duration>) -> SysResult<()> {
    let res = match timeout {
        Some(t) => {
            let ts = types::Timespec::from(t);
            let args = types::SubmitArgs::new().timespec(&ts);
            ring.submitter().submit_with_args(want, &args)
        }
        None => ring.submitter().submit_and_wait(want),
    };
    match res {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
        Err(e) => Err(uring_err("io_uring_enter", e)),
    }
}

/// Queues a multishot IORING_OP_RECVMSG on `fd` into buffer group `bgid`, tagged `ud`, with
/// MSG_TRUNC so a datagram longer than its buffer is reported at its full length.
///
/// # Safety
/// `msghdr` and the group's buffers must stay valid until the request has ended (its last
/// completion seen, or a synchronous cancel confirmed).
pub(crate) unsafe fn push_recvmsg_multi(
    ring: &mut IoUring,
    fd: i32,
    msghdr: &libc::msghdr,
    bgid: u16,
    ud: u64,
) -> SysResult<()> {
    let entry = opcode::RecvMsgMulti::new(types::Fd(fd), msghdr, bgid)
        .flags(libc::MSG_TRUNC as u32)
        .build()
        .user_data(ud);
    // SAFETY: the caller keeps the msghdr and the buffers alive for the request's life.
    unsafe { ring.submission().push(&entry) }.map_err(|_| crate::uring::sq_full())
}
