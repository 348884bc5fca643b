//! The four single-producer/single-consumer rings an AF_XDP socket shares with the kernel.
//!
//! Each ring is an mmap of the socket: a producer index, a consumer index, a flags word and
//! a power-of-two array of entries (`u64` frame addresses for fill/completion, [`Desc`] for
//! rx/tx). Indices run freely and wrap; an entry lives at `index & mask`. The side that
//! produces writes entries and then publishes its index with a release store; the other side
//! reads the index with an acquire load before reading entries, and hands slots back by a
//! release store of its own index. Both sides cache the other's index and reload it only when
//! the cached value says the ring looks full or empty (the kernel's af_xdp.rst describes the
//! protocol; libxdp's xsk.h is the reference user).

use crate::SysResult;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

/// One rx/tx descriptor: a frame address in the UMEM, a length and option bits.
pub type Desc = libc::xdp_desc;

/// An mmap of one ring, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the mapping after
        // the ring that owns it is dropped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// A ring of entries `T` shared with the kernel, with cached indices.
pub struct Ring<T: Copy> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut T,
    mask: u32,
    size: u32,
    /// Our copy of our own index (producer index for fill/tx, consumer for rx/completion).
    local: u32,
    /// Our last read of the kernel's index.
    remote: u32,
    _map: Mapping,
    _t: PhantomData<T>,
}

// SAFETY: a Ring is a handle to memory owned by its mapping; moving it to another thread
// moves the whole handle (single producer / single consumer on our side is kept by &mut).
unsafe impl<T: Copy> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries that the kernel laid out at `off` in `fd`'s
    /// page-offset space `pgoff`.
    pub(crate) fn map(
        fd: RawFd,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
        producer_side: bool,
        name: &str,
    ) -> SysResult<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // The kernel checks the offset and length against the ring it created.
        let base = crate::map_shared(fd, len, pgoff as libc::off_t, 0, || {
            format!("mmap(AF_XDP {name} ring)")
        })?;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this very ring and lie inside
        // the `len` bytes just mapped; the kernel aligns the index words to 4 bytes.
        let (producer, consumer, flags, entries) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        let mut ring = Ring {
            producer,
            consumer,
            flags,
            entries,
            mask: size - 1,
            size,
            local: 0,
            remote: 0,
            _map: Mapping { ptr: base, len },
            _t: PhantomData,
        };
        if producer_side {
            ring.local = ring.prod().load(Ordering::Relaxed);
            ring.remote = ring.cons().load(Ordering::Acquire);
        } else {
            ring.local = ring.cons().load(Ordering::Relaxed);
            ring.remote = ring.prod().load(Ordering::Acquire);
        }
        Ok(ring)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping, 4-byte aligned, only ever accessed atomically.
        unsafe { &*self.producer }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for prod().
        unsafe { &*self.consumer }
    }

    /// Number of entries in the ring.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// True when the kernel asks to be woken (a syscall) to make progress on this ring.
    pub fn needs_wakeup(&self) -> bool {
        // SAFETY: as for prod().
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer side: free slots, at most `want` (reloads the consumer index when short).
    pub fn free(&mut self, want: u32) -> u32 {
        let mut free = self.size - self.local.wrapping_sub(self.remote);
        if free < want {
            self.remote = self.cons().load(Ordering::Acquire);
            free = self.size - self.local.wrapping_sub(self.remote);
        }
        free.min(want)
    }

    /// Producer side: entries published and not yet taken by the kernel (reads the
    /// kernel's consumer index now).
    pub fn unconsumed(&self) -> u32 {
        self.local.wrapping_sub(self.cons().load(Ordering::Acquire))
    }

    /// Producer side: writes entry `i` past the local producer index (i < free()).
    pub fn write(&mut self, i: u32, v: T) {
        let slot = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot <= mask lies inside the entry array; the caller reserved it with
        // free(), so the kernel does not read it until we publish.
        unsafe { self.entries.add(slot).write(v) };
    }

    /// Producer side: publishes `n` written entries to the kernel.
    pub fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.prod().store(self.local, Ordering::Release);
    }

    /// Consumer side: entries ready to read, at most `max` (reloads the producer index when
    /// empty).
    pub fn available(&mut self, max: u32) -> u32 {
        let mut n = self.remote.wrapping_sub(self.local);
        if n == 0 {
            self.remote = self.prod().load(Ordering::Acquire);
            n = self.remote.wrapping_sub(self.local);
        }
        n.min(max)
    }

    /// Consumer side: entry `i` past the local consumer index (i < available()).
    pub fn read(&self, i: u32) -> T {
        let slot = (self.local.wrapping_add(i) & self.mask) as usize;
        // SAFETY: slot lies inside the array; the acquire load in available() ordered the
        // kernel's write of this entry before our read.
        unsafe { self.entries.add(slot).read() }
    }

    /// Consumer side: hands `n` read entries back to the kernel.
    pub fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.cons().store(self.local, Ordering::Release);
    }
}
