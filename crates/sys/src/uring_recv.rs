//! io_uring receives for bulk TCP: one multishot IORING_OP_RECV feeding a provided-buffer
//! ring (5.19+/6.0+), falling back to single-shot RECV where the ring cannot be
//! registered; and the probe for zero-copy receive (zcrx, 6.15+), which needs a NIC with
//! header split and queue management: on loopback and veth it fails, and the errno says so.

use crate::uring::{cqe_err, sq_full, uring_err};
use crate::{SysError, SysResult};
use io_uring::types::{BufRingEntry, CancelBuilder};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::sync::atomic::{AtomicU16, Ordering};

const BGID: u16 = 7;
const RECV_UD: u64 = 1;

/// Counters of a [`RecvRing`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UringRecvStats {
    /// Completions carrying data.
    pub cqes: u64,
    /// Times the receive had to be armed again (multishot ended, e.g. buffers ran out).
    pub arms: u64,
}

/// Anonymous page-aligned memory (the buffer ring must be page aligned).
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
}

impl Pages {
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

/// A socket's receive path through io_uring with buffers owned here.
pub struct RecvRing {
    // Declared first: dropped before the memory the kernel may write into.
    ring: IoUring,
    fd: i32,
    ring_mem: Option<Pages>,
    data: Pages,
    count: u16,
    size: usize,
    tail: u16,
    armed: bool,
    to_recycle: Option<u16>,
    cancelled: bool,
    pub stats: UringRecvStats,
}

// SAFETY: the raw pointers are private mappings owned by this struct; no thread affinity.
unsafe impl Send for RecvRing {}

impl RecvRing {
    /// `count` (a power of two, <= 32768) buffers of `size` bytes for socket `fd`.
    pub fn new(fd: i32, count: u16, size: usize) -> SysResult<Self> {
        let ring = IoUring::new(64).map_err(|e| uring_err("io_uring_setup", e))?;
        let count = count.max(1).next_power_of_two();
        let data = Pages::new(count as usize * size)?;
        let mut me = RecvRing {
            ring,
            fd,
            ring_mem: None,
            data,
            count,
            size,
            tail: 0,
            armed: false,
            to_recycle: None,
            cancelled: true,
            stats: UringRecvStats::default(),
        };
        let mem = Pages::new((count as usize * 16).max(4096))?;
        // SAFETY: mem is page aligned, holds `count` entries and lives in self until after the
        // ring is unregistered (Drop).
        let reg = unsafe {
            me.ring
                .submitter()
                .register_buf_ring_with_flags(mem.ptr as u64, count, BGID, 0)
        };
        if reg.is_ok() {
            me.ring_mem = Some(mem);
            for bid in 0..count {
                me.push_buffer(bid);
            }
        }
        Ok(me)
    }

    /// True when a multishot receive with a provided-buffer ring is in use.
    pub fn multishot(&self) -> bool {
        self.ring_mem.is_some()
    }

    fn push_buffer(&mut self, bid: u16) {
        let Some(mem) = &self.ring_mem else { return };
        let addr = self.data.ptr.wrapping_add(bid as usize * self.size);
        publish_buffer(mem, self.count, &mut self.tail, addr, self.size as u32, bid);
    }

    fn arm(&mut self) -> SysResult<()> {
        let entry = if self.multishot() {
            opcode::RecvMulti::new(types::Fd(self.fd), BGID).build()
        } else {
            opcode::Recv::new(types::Fd(self.fd), self.data.ptr, self.size as u32).build()
        }
        .user_data(RECV_UD);
        // SAFETY: the buffers (provided ring or the single buffer) live in self; Drop cancels
        // the request and waits before freeing them.
        unsafe { self.ring.submission().push(&entry) }.map_err(|_| sq_full())?;
        self.armed = true;
        self.cancelled = false;
        self.stats.arms += 1;
        Ok(())
    }

    /// The next chunk of the stream; empty at end of stream. The slice is valid until the
    /// next call, which gives its buffer back to the kernel.
    pub fn recv(&mut self) -> SysResult<&[u8]> {
        if let Some(bid) = self.to_recycle.take() {
            self.push_buffer(bid);
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
                self.cancelled = true;
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
            let bid = if self.multishot() {
                let bid = cqueue::buffer_select(flags).ok_or_else(|| {
                    uring_err(
                        "IORING_OP_RECV: completion without a buffer id",
                        std::io::Error::from_raw_os_error(libc::EIO),
                    )
                })?;
                self.to_recycle = Some(bid);
                bid
            } else {
                0
            };
            let off = bid as usize * self.size;
            // SAFETY: the kernel wrote `res` bytes into buffer `bid`, which it will not touch
            // again until push_buffer() returns it at the next call (needs &mut self).
            return Ok(unsafe { std::slice::from_raw_parts(self.data.ptr.add(off), res as usize) });
        }
    }
}

/// Hands buffer `bid` (at `addr`, `len` bytes) to the kernel through the provided-buffer ring
/// in `mem` of `count` entries, advancing `tail`.
pub(crate) fn publish_buffer(
    mem: &Pages,
    count: u16,
    tail: &mut u16,
    addr: *mut u8,
    len: u32,
    bid: u16,
) {
    let base = mem.ptr as *mut BufRingEntry;
    let idx = (*tail & (count - 1)) as usize;
    // SAFETY: idx < count, inside the ring memory; the kernel reads an entry only after
    // the tail store below publishes it.
    unsafe {
        let e = &mut *base.add(idx);
        e.set_addr(addr as u64);
        e.set_len(len);
        e.set_bid(bid);
    }
    *tail = tail.wrapping_add(1);
    // SAFETY: the tail field of entry 0 is a u16 the kernel reads; AtomicU16 has its layout.
    let t = unsafe { &*(BufRingEntry::tail(base) as *const AtomicU16) };
    t.store(*tail, Ordering::Release);
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

impl Drop for RecvRing {
    fn drop(&mut self) {
        if !self.cancelled && !cancel_sync(&self.ring, RECV_UD) {
            // The kernel may still write into the buffers: keep them mapped for the
            // life of the process rather than free them under it.
            self.data.keep_mapped();
            if let Some(m) = &mut self.ring_mem {
                m.keep_mapped();
            }
            return;
        }
        if self.ring_mem.is_some() {
            let _ = self.ring.submitter().unregister_buf_ring(BGID);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{ConnectOptions, TcpListener, TcpSock};
    use std::os::fd::AsRawFd;

    #[test]
    fn multishot_recv_returns_the_stream_in_order() {
        if crate::uring::UringSupport::probe().require("recv").is_err() {
            eprintln!("skipped: io_uring recv unavailable");
            return;
        }
        let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
        let (s, _) = l.accept(5000).unwrap().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let sender = std::thread::spawn(move || {
            c.send_all(&data).unwrap();
            c.shutdown_write().unwrap();
            data
        });
        let mut r = RecvRing::new(s.as_raw_fd(), 4, 4096).unwrap();
        assert!(r.multishot());
        let mut got = Vec::new();
        loop {
            let chunk = r.recv().unwrap();
            if chunk.is_empty() {
                break;
            }
            got.extend_from_slice(chunk);
        }
        assert_eq!(got, sender.join().unwrap());
        assert!(r.stats.cqes >= 300_000 / 4096);
    }

    #[test]
    fn zcrx_on_loopback_is_refused_with_an_errno() {
        if !crate::cpu::is_root() {
            eprintln!("skipped: zcrx registration needs CAP_NET_ADMIN (run as root)");
            return;
        }
        let e = probe_zcrx(1, 0).unwrap_err();
        assert!(e.errno().is_some(), "{e}");
        assert!(
            e.to_string().contains("ZCRX_IFQ") || e.to_string().contains("io_uring_setup"),
            "{e}"
        );
    }
}
