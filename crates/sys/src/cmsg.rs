//! Control messages (cmsg(3)): one encoder for those we send (UDP_SEGMENT), one iterator for
//! those the kernel returns in a `msghdr` (SO_RXQ_OVFL, SO_TIMESTAMPNS) and one walk over
//! control bytes found in a buffer ([`walk`]: io_uring's multishot receive), so no caller
//! walks or writes `cmsghdr`s by hand.
//!
//! Buffers are [`Space`]: aligned for `cmsghdr` (the kernel and libc's `CMSG_*` macros
//! assume it). Values are plain integers ([`Plain`]), copied unaligned in and out.

use std::mem;

/// Control-message buffer of `N` bytes, aligned for `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct Space<const N: usize>([u8; N]);

impl<const N: usize> Default for Space<N> {
    fn default() -> Self {
        Space([0; N])
    }
}

impl<const N: usize> Space<N> {
    /// The buffer as bytes (for handing to [`Iter::new`]).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The buffer's start, for a `msghdr` the kernel fills.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.0.as_mut_ptr().cast()
    }
}

/// Bytes one control message with a `len`-byte value takes, padding included.
pub fn space_for(len: usize) -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE(len as u32) as usize }
}

mod sealed {
    pub trait Sealed {}
}

/// Integer types valid for every bit pattern: the only values put in or read out of a
/// control message.
pub trait Plain: Copy + sealed::Sealed {}
macro_rules! plain {
    ($($t:ty),*) => {$(impl sealed::Sealed for $t {} impl Plain for $t {})*};
}
plain!(u8, u16, u32, u64, i32, i64);

/// The buffer had no room for another control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

/// Writes control messages into a [`Space`] and points a `msghdr` at them.
pub struct Encoder<'a> {
    hdr: &'a mut libc::msghdr,
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Encoder<'a> {
    /// Starts an empty set of control messages for `hdr` in `space`.
    pub fn new<const N: usize>(hdr: &'a mut libc::msghdr, space: &'a mut Space<N>) -> Self {
        Encoder {
            hdr,
            buf: &mut space.0,
            len: 0,
        }
    }

    /// Appends one control message carrying `value`.
    pub fn push<T: Plain>(&mut self, level: i32, ty: i32, value: T) -> Result<(), NoRoom> {
        let size = mem::size_of::<T>();
        let need = space_for(size);
        if self.len + need > self.buf.len() {
            return Err(NoRoom);
        }
        // SAFETY: CMSG_LEN only computes a size.
        let cmsg_len = unsafe { libc::CMSG_LEN(size as u32) } as usize;
        let at = self.buf[self.len..].as_mut_ptr().cast::<libc::cmsghdr>();
        // SAFETY: `at` lies `len` bytes into an 8-aligned buffer, and `len` is a sum of
        // CMSG_SPACE values (multiples of the cmsghdr alignment), so `at` is aligned;
        // `need` bytes from it are inside the buffer (checked above), which covers the
        // header and the CMSG_DATA area of `size` bytes.
        unsafe {
            at.write(libc::cmsghdr {
                cmsg_len: cmsg_len as _,
                cmsg_level: level,
                cmsg_type: ty,
            });
            std::ptr::write_unaligned(libc::CMSG_DATA(at).cast::<T>(), value);
        }
        self.len += need;
        Ok(())
    }

    /// Points the header at the messages written (or at none).
    pub fn finish(self) {
        if self.len == 0 {
            self.hdr.msg_control = std::ptr::null_mut();
            self.hdr.msg_controllen = 0;
        } else {
            self.hdr.msg_control = self.buf.as_mut_ptr().cast();
            self.hdr.msg_controllen = self.len as _;
        }
    }
}

/// One received control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cmsg<'a> {
    /// Protocol level, e.g. `SOL_SOCKET`.
    pub level: i32,
    /// Message type, e.g. `SO_RXQ_OVFL`.
    pub ty: i32,
    /// The value's bytes.
    pub data: &'a [u8],
}

impl Cmsg<'_> {
    /// The value as `T`, if the message carries at least that many bytes.
    pub fn read<T: Plain>(&self) -> Option<T> {
        if self.data.len() < mem::size_of::<T>() {
            return None;
        }
        // SAFETY: data holds at least size_of::<T>() bytes, and T is valid for any bits.
        Some(unsafe { std::ptr::read_unaligned(self.data.as_ptr().cast::<T>()) })
    }

    /// The `T` that starts `offset` bytes into the value (a field of a struct value).
    pub fn read_at<T: Plain>(&self, offset: usize) -> Option<T> {
        let rest = self.data.get(offset..)?;
        Cmsg {
            data: rest,
            ..*self
        }
        .read()
    }
}

/// Walks the control messages of a received `msghdr`.
pub struct Iter<'a> {
    hdr: &'a libc::msghdr,
    cur: *const libc::cmsghdr,
    end: usize,
}

impl<'a> Iter<'a> {
    /// The messages in `buf` as described by `hdr` (its `msg_controllen`, as the kernel
    /// set it). Empty when `hdr` does not point at `buf` or claims more than `buf` holds,
    /// so a stale header can never make it read elsewhere.
    pub fn new(hdr: &'a libc::msghdr, buf: &'a [u8]) -> Self {
        // msg_controllen and cmsg_len are size_t with glibc but socklen_t with musl.
        #[allow(clippy::unnecessary_cast)]
        let len = hdr.msg_controllen as usize;
        let sound = len > 0 && hdr.msg_control as *const u8 == buf.as_ptr() && len <= buf.len();
        let cur = if sound {
            // SAFETY: hdr's control area is `buf[..len]`, borrowed for 'a.
            unsafe { libc::CMSG_FIRSTHDR(hdr) }
        } else {
            std::ptr::null()
        };
        Iter {
            hdr,
            cur,
            end: buf.as_ptr() as usize + len.min(buf.len()),
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Cmsg<'a>;

    fn next(&mut self) -> Option<Cmsg<'a>> {
        if self.cur.is_null() {
            return None;
        }
        let c = self.cur;
        // SAFETY: `c` came from CMSG_FIRSTHDR/CMSG_NXTHDR over the bounded control area,
        // which guarantee a whole cmsghdr inside it; the data slice is clamped to the
        // area's end, so it never reaches past the borrowed buffer.
        unsafe {
            let data = libc::CMSG_DATA(c);
            #[allow(clippy::unnecessary_cast)]
            let claimed = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            let len = claimed.min(self.end.saturating_sub(data as usize));
            self.cur = libc::CMSG_NXTHDR(self.hdr, c);
            Some(Cmsg {
                level: (*c).cmsg_level,
                ty: (*c).cmsg_type,
                data: std::slice::from_raw_parts(data, len),
            })
        }
    }
}

/// Walks control messages laid out in `bytes` as the kernel writes them (`cmsghdr`s each
/// padded to 8 bytes, offsets relative to the start of the area), without a `msghdr` and
/// at any alignment: the control area of an io_uring multishot receive sits inside a
/// provided buffer, after the sender's address. A header claiming less than itself or more
/// than is left ends the walk; a value is cut at the end of the area.
pub fn walk(bytes: &[u8]) -> Walk<'_> {
    Walk { rest: bytes }
}

/// The iterator of [`walk`].
pub struct Walk<'a> {
    rest: &'a [u8],
}

/// `struct cmsghdr` on 64-bit Linux: `cmsg_len` (size_t), then level and type (int each).
const HDR_LEN: usize = 16;

impl<'a> Iterator for Walk<'a> {
    type Item = Cmsg<'a>;

    fn next(&mut self) -> Option<Cmsg<'a>> {
        let h = self.rest.get(..HDR_LEN)?;
        let word = |i: usize| [h[i], h[i + 1], h[i + 2], h[i + 3]];
        let len = u64::from_ne_bytes(h[..8].try_into().expect("8 bytes"));
        let (level, ty) = (i32::from_ne_bytes(word(8)), i32::from_ne_bytes(word(12)));
        let Ok(len) = usize::try_from(len) else {
            self.rest = &[];
            return None;
        };
        if len < HDR_LEN {
            self.rest = &[];
            return None;
        }
        let end = len.min(self.rest.len());
        let data = &self.rest[HDR_LEN..end];
        // The next header starts at the length rounded up to the 8-byte alignment.
        let next = len.checked_add(7).map_or(usize::MAX, |l| l & !7);
        self.rest = self.rest.get(next..).unwrap_or(&[]);
        Some(Cmsg { level, ty, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_hdr() -> libc::msghdr {
        // SAFETY: msghdr is plain data; all-zero is an empty header.
        unsafe { mem::zeroed() }
    }

    #[test]
    fn what_is_encoded_iterates_back() {
        let mut space = Space::<96>::default();
        let mut h = empty_hdr();
        let mut e = Encoder::new(&mut h, &mut space);
        e.push(libc::SOL_UDP, libc::UDP_SEGMENT, 1200u16).unwrap();
        e.push(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 0xDEAD_BEEFu32)
            .unwrap();
        e.push(libc::SOL_SOCKET, libc::SO_MARK, -7i32).unwrap();
        e.finish();
        assert_eq!(h.msg_controllen, 3 * space_for(4));
        let got: Vec<Cmsg<'_>> = Iter::new(&h, space.bytes()).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].level, got[0].ty),
            (libc::SOL_UDP, libc::UDP_SEGMENT)
        );
        assert_eq!(got[0].read::<u16>(), Some(1200));
        assert_eq!(got[0].data.len(), 2);
        assert_eq!(got[1].read::<u32>(), Some(0xDEAD_BEEF));
        assert_eq!(got[1].read::<u64>(), None, "4 bytes are not a u64");
        assert_eq!((got[2].ty, got[2].read::<i32>()), (libc::SO_MARK, Some(-7)));
    }

    #[test]
    fn a_full_buffer_refuses_and_keeps_what_fits() {
        // One u16 message takes a 16-byte header plus 8 (2 padded): 40 bytes hold one.
        assert_eq!(space_for(2), 24);
        let mut space = Space::<40>::default();
        let mut h = empty_hdr();
        let mut e = Encoder::new(&mut h, &mut space);
        e.push(libc::SOL_UDP, libc::UDP_SEGMENT, 9u16).unwrap();
        assert_eq!(e.push(libc::SOL_UDP, libc::UDP_SEGMENT, 9u16), Err(NoRoom));
        e.finish();
        assert_eq!(Iter::new(&h, space.bytes()).count(), 1);
    }

    #[test]
    fn nothing_encoded_means_no_control_area() {
        let mut space = Space::<32>::default();
        let mut h = empty_hdr();
        Encoder::new(&mut h, &mut space).finish();
        assert!(h.msg_control.is_null());
        assert_eq!(h.msg_controllen, 0);
        assert_eq!(Iter::new(&h, space.bytes()).count(), 0);
    }

    #[test]
    fn walking_the_bytes_finds_what_the_iterator_finds_at_any_offset() {
        let mut space = Space::<96>::default();
        let mut h = empty_hdr();
        let mut e = Encoder::new(&mut h, &mut space);
        e.push(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 7u32).unwrap();
        e.push(libc::SOL_SOCKET, libc::SO_MARK, 0x1122_3344_5566_7788u64)
            .unwrap();
        e.finish();
        // msg_controllen is size_t with glibc but socklen_t with musl.
        #[allow(clippy::unnecessary_cast)]
        let len = h.msg_controllen as usize;
        let want: Vec<Cmsg<'_>> = Iter::new(&h, space.bytes()).collect();
        // At an odd offset, as a control area after a 28-byte name is.
        let mut moved = vec![0xAAu8; 3];
        moved.extend_from_slice(&space.bytes()[..len]);
        let got: Vec<Cmsg<'_>> = walk(&moved[3..]).collect();
        assert_eq!(got, want);
        assert_eq!(got[1].read::<u64>(), Some(0x1122_3344_5566_7788));
    }

    #[test]
    fn a_broken_header_ends_the_walk_and_a_cut_value_stays_inside() {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&200u64.to_ne_bytes()); // claims more than is there
        b[8..12].copy_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
        let c: Vec<Cmsg<'_>> = walk(&b).collect();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].data.len(), 24, "cut at the end of the area");
        b[..8].copy_from_slice(&3u64.to_ne_bytes()); // shorter than a header
        assert_eq!(walk(&b).count(), 0);
        assert_eq!(walk(&b[..15]).count(), 0, "no room for a header");
        b[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert_eq!(walk(&b).count(), 1);
    }

    #[test]
    fn a_header_that_does_not_point_at_the_buffer_yields_nothing() {
        let mut a = Space::<32>::default();
        let b = Space::<32>::default();
        let mut h = empty_hdr();
        let mut e = Encoder::new(&mut h, &mut a);
        e.push(libc::SOL_UDP, libc::UDP_SEGMENT, 1u16).unwrap();
        e.finish();
        assert_eq!(Iter::new(&h, b.bytes()).count(), 0);
        h.msg_controllen = 64; // more than the buffer holds
        assert_eq!(Iter::new(&h, a.bytes()).count(), 0);
    }
}
