//! The memory and the calls every ring shares: page-aligned anonymous memory ([`Pages`]),
//! a provided-buffer ring ([`BufRing`]: `count` buffers of `size` bytes handed to the kernel
//! and taken back by buffer id), one `io_uring_enter` helper that treats an expired wait or
//! a signal as an empty one ([`enter`]), and the synchronous cancel a ring's `Drop` needs
//! before it may free memory the kernel could still write ([`cancel_sync`]).

use super::uring_err;
use crate::SysResult;
use io_uring::types::{BufRingEntry, CancelBuilder};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

/// Anonymous page-aligned memory (a buffer ring must be page aligned).
pub(crate) struct Pages {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

impl Pages {
    pub(crate) fn new(len: usize) -> SysResult<Pages> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(uring_err(
                "mmap(anonymous)",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Pages {
            ptr: ptr as *mut u8,
            len,
        })
    }

    /// Leaves the mapping in place when dropped (the kernel may still use it).
    pub(crate) fn keep_mapped(&mut self) {
        self.len = 0;
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping made in new().
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        }
    }
}

/// `count` buffers of `size` bytes registered as buffer group `bgid`.
pub(crate) struct BufRing {
    ring_mem: Pages,
    data: Pages,
    count: u16,
    size: usize,
    /// Our copy of the ring's tail; the kernel sees it at the next [`Self::publish`].
    tail: u16,
    bgid: u16,
}

impl BufRing {
    /// Registers the ring with `ring` and hands every buffer to the kernel. `count` is
    /// rounded up to a power of two (at most 32768).
    pub(crate) fn register<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        ring: &IoUring<S, C>,
        bgid: u16,
        count: u16,
        size: usize,
    ) -> SysResult<Self> {
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
        me.publish();
        Ok(me)
    }

    /// Puts buffer `bid` back on the ring; the kernel takes it after [`Self::publish`].
    pub(crate) fn recycle(&mut self, bid: u16) {
        let base = self.ring_mem.ptr as *mut BufRingEntry;
        let idx = (self.tail & (self.count - 1)) as usize;
        // SAFETY: idx < count, inside the ring memory; the kernel reads an entry only
        // after publish() moves the tail past it.
        unsafe {
            let e = &mut *base.add(idx);
            e.set_addr(self.ptr(bid) as u64);
            e.set_len(self.size as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Hands every buffer recycled since the last call to the kernel: one store of the
    /// tail for a whole batch.
    pub(crate) fn publish(&self) {
        let base = self.ring_mem.ptr as *mut BufRingEntry;
        // SAFETY: the tail field of entry 0 is a u16 the kernel reads; AtomicU16 has its
        // layout, and the release store orders the entries written before it.
        let t = unsafe { &*(BufRingEntry::tail(base) as *const AtomicU16) };
        t.store(self.tail, Ordering::Release);
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

    pub(crate) fn bgid(&self) -> u16 {
        self.bgid
    }

    /// Called when the owner is dropped: unregisters the group from `ring` when every
    /// request that could write into the buffers is known to be over (`idle`); otherwise the
    /// kernel may still write into them, so the memory stays mapped for the life of the
    /// process rather than be freed under it.
    pub(crate) fn close<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &mut self,
        ring: &IoUring<S, C>,
        idle: bool,
    ) {
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
/// An expired wait or a signal is an empty wait, not an error.
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
    unsafe { ring.submission().push(&entry) }.map_err(|_| super::sq_full())
}

/// Queues a multishot IORING_OP_RECV on `fd` into buffer group `bgid`, tagged `ud`, with
/// MSG_TRUNC so a datagram longer than its buffer is reported at its full length.
///
/// # Safety
/// The group's buffers must stay valid until the request has ended (its last completion
/// seen, or a synchronous cancel confirmed).
pub(crate) unsafe fn push_recv_multi(
    ring: &mut IoUring,
    fd: i32,
    bgid: u16,
    ud: u64,
) -> SysResult<()> {
    let entry = opcode::RecvMulti::new(types::Fd(fd), bgid)
        .flags(libc::MSG_TRUNC)
        .build()
        .user_data(ud);
    // SAFETY: the caller keeps the buffers alive for the request's life.
    unsafe { ring.submission().push(&entry) }.map_err(|_| super::sq_full())
}

/// Cancels the request tagged `ud` and waits for it; false when the kernel would not confirm,
/// in which case the caller must leave the request's buffers mapped.
pub(crate) fn cancel_sync<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    ring: &IoUring<S, C>,
    ud: u64,
) -> bool {
    ring.submitter()
        .register_sync_cancel(
            Some(types::Timespec::new().sec(1)),
            CancelBuilder::user_data(ud),
        )
        .is_ok()
}
