//! The UMEM: one anonymous mapping split into equal frames that the kernel writes received
//! packets into and reads transmitted packets from.
//!
//! Ownership of a frame moves by ring: a frame address handed to the kernel on the fill ring
//! (or the tx ring) belongs to the kernel until it comes back on the rx ring (or the
//! completion ring). The accessors below give slices of frames the caller owns; they are safe
//! because the mapping outlives every borrow and an address is bounds-checked, not because the
//! kernel could not write there (it only writes frames it owns).

use crate::{cvt, SysResult};

/// Frame sizes the kernel accepts for an aligned UMEM (a power of two, 2048..=page size).
pub const FRAME_SIZES: [u32; 2] = [2048, 4096];

/// An anonymous, page-aligned mapping of `frames * frame_size` bytes.
pub struct Umem {
    ptr: *mut u8,
    len: usize,
    frame_size: u32,
    frames: u32,
}

// SAFETY: the mapping is plain memory owned by this value; access goes through &self/&mut self.
unsafe impl Send for Umem {}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: ptr/len are what mmap returned; all slices borrowed from self are gone.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

impl Umem {
    /// Maps `frames` frames of `frame_size` bytes (see [`FRAME_SIZES`]).
    pub fn new(frames: u32, frame_size: u32) -> SysResult<Self> {
        let len = frames as usize * frame_size as usize;
        // SAFETY: an anonymous private mapping takes no pointer from us; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            cvt(-1i32, || format!("mmap(UMEM {len} bytes)"))?;
        }
        Ok(Umem {
            ptr: ptr as *mut u8,
            len,
            frame_size,
            frames,
        })
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Number of frames.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The address of frame `i` (its first byte).
    pub fn frame_addr(&self, i: u32) -> u64 {
        i as u64 * self.frame_size as u64
    }

    pub(crate) fn base(&self) -> u64 {
        self.ptr as u64
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The room from `addr` (anywhere inside a frame) to the end of that frame.
    fn span(&self, addr: u64) -> (usize, usize) {
        let addr = (addr as usize).min(self.len);
        let end = (addr / self.frame_size as usize + 1) * self.frame_size as usize;
        (addr, end.min(self.len))
    }

    /// `len` bytes at `addr`, clipped to the frame.
    pub fn data(&self, addr: u64, len: usize) -> &[u8] {
        let (start, end) = self.span(addr);
        let end = end.min(start + len);
        // SAFETY: start..end lies inside the live mapping (span clips both to len).
        unsafe { std::slice::from_raw_parts(self.ptr.add(start), end - start) }
    }

    /// The frame from `addr` to its end, writable: a received packet and the room after it.
    pub fn frame_mut(&mut self, addr: u64) -> &mut [u8] {
        let (start, end) = self.span(addr);
        // SAFETY: start..end lies inside the live mapping; &mut self makes the slice unique
        // on our side.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_stay_inside_their_frame() {
        let mut u = Umem::new(4, 2048).unwrap();
        assert_eq!(u.frame_addr(3), 6144);
        assert_eq!(u.frame_mut(2048 + 256).len(), 2048 - 256);
        assert_eq!(u.data(4096 + 2000, 100).len(), 48);
        assert_eq!(u.data(1 << 40, 10).len(), 0);
        u.frame_mut(6144)[2047] = 7;
        assert_eq!(u.data(6144 + 2047, 1), &[7]);
    }
}
