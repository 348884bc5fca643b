//! sendfile(2), vmsplice(2)+splice(2) and memfd: sends that hand the kernel page
//! references instead of copying through a user buffer.
//!
//! vmsplice without SPLICE_F_GIFT puts references to the caller's pages in the pipe and
//! then in the socket's queue (on loopback even in the receiver's queue), with no
//! completion to say when they are let go: rewriting that memory, or freeing it to an
//! allocator that reuses it, changes what is sent. So vmsplice takes only a
//! [`SpliceSource`]: memory of its own mapping, written once before any splice, and
//! unmapped (never reused by us) when dropped; the kernel's references keep the pages.

use crate::{cvt, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A memfd holding `data`: the "file" that sendfile sends from, without touching a disk.
pub fn memfd_with(name: &str, data: &[u8]) -> SysResult<OwnedFd> {
    let cname = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: memfd_create reads a NUL-terminated name that lives for the call.
    let fd = cvt(
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) },
        || "memfd_create".into(),
    )?;
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut off = 0;
    while off < data.len() {
        // SAFETY: data[off..] is readable for its length during the call.
        let n = unsafe {
            libc::write(
                fd.as_raw_fd(),
                data[off..].as_ptr() as *const libc::c_void,
                data.len() - off,
            )
        };
        off += cvt(n, || "write(memfd)".into())? as usize;
    }
    Ok(fd)
}

/// sendfile(out, in, &offset, count): returns the bytes sent and advances `offset`.
pub fn sendfile(out: RawFd, input: RawFd, offset: &mut i64, count: usize) -> SysResult<usize> {
    // SAFETY: offset is a live i64 the kernel reads and updates.
    let n = unsafe { libc::sendfile(out, input, offset as *mut i64, count) };
    cvt(n, || "sendfile".into()).map(|n| n as usize)
}

/// Page-aligned memory for vmsplice: filled once by `init`, then read-only to us.
pub struct SpliceSource {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a private mapping owned by this value, only read after construction.
unsafe impl Send for SpliceSource {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for SpliceSource {}

impl SpliceSource {
    /// Maps `len` bytes and lets `init` write them once.
    pub fn new(len: usize, init: impl FnOnce(&mut [u8])) -> SysResult<Self> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(crate::SysError {
                what: format!("mmap({len} bytes for vmsplice)"),
                source: std::io::Error::last_os_error(),
            });
        }
        let ptr = ptr as *mut u8;
        // SAFETY: the mapping is len bytes, writable, and nothing else refers to it yet.
        init(unsafe { std::slice::from_raw_parts_mut(ptr, len) });
        Ok(SpliceSource { ptr, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: len bytes mapped in new(), alive until drop, never written after new().
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SpliceSource {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly our mapping. Pages still referenced by a pipe or socket stay
        // alive in the kernel with their content; our address space never reuses them.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len.max(1)) };
    }
}

/// A pipe used as the splice conduit between user pages and a socket.
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
    size: usize,
}

impl Pipe {
    /// Opens a pipe and asks for `size` bytes of capacity (F_SETPIPE_SZ, capped by
    /// /proc/sys/fs/pipe-max-size); [`Self::size`] is what was granted.
    pub fn new(size: usize) -> SysResult<Self> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the local array.
        let ret = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
        cvt(ret, || "pipe2".into())?;
        // SAFETY: both fds were just created and are owned by nobody else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl with integer arguments.
        let ret = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) };
        let granted = cvt(ret, || format!("fcntl(F_SETPIPE_SZ={size})"))?;
        Ok(Pipe {
            r,
            w,
            size: granted as usize,
        })
    }

    /// The pipe's capacity in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// vmsplice(2): puts references to `src[range]`'s pages into the pipe; returns bytes taken.
    pub fn vmsplice(&self, src: &SpliceSource, range: std::ops::Range<usize>) -> SysResult<usize> {
        let buf = &src.as_slice()[range];
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: the kernel reads one live iovec and takes page references; the memory is a
        // SpliceSource, never written after construction and never handed back to an allocator.
        let n = unsafe { libc::vmsplice(self.w.as_raw_fd(), &iov, 1, 0) };
        cvt(n, || "vmsplice".into()).map(|n| n as usize)
    }

    /// splice(2) from the pipe into `out` (a socket); returns bytes moved.
    pub fn splice_to(&self, out: RawFd, len: usize, more: bool) -> SysResult<usize> {
        let flags = libc::SPLICE_F_MOVE | if more { libc::SPLICE_F_MORE } else { 0 };
        // SAFETY: null offsets: both ends are a pipe and a socket, which have no offset.
        let n = unsafe {
            libc::splice(
                self.r.as_raw_fd(),
                std::ptr::null_mut(),
                out,
                std::ptr::null_mut(),
                len,
                flags,
            )
        };
        cvt(n, || "splice(pipe -> socket)".into()).map(|n| n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{ConnectOptions, TcpListener, TcpSock};

    #[test]
    fn sendfile_and_splice_deliver_the_bytes() {
        let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
        let (s, _) = l.accept(5000).unwrap().unwrap();
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
        let f = memfd_with("t", &data).unwrap();
        let mut off = 100i64;
        let mut sent = 0;
        while sent < 5000 {
            sent += sendfile(c.as_raw_fd(), f.as_raw_fd(), &mut off, 5000 - sent).unwrap();
        }
        assert_eq!(off, 5100);
        let p = Pipe::new(65536).unwrap();
        assert!(p.size() >= 65536);
        let src = SpliceSource::new(3000, |b| b.copy_from_slice(&data[..3000])).unwrap();
        let n = p.vmsplice(&src, 0..3000).unwrap();
        assert_eq!(n, 3000);
        let mut moved = 0;
        while moved < n {
            moved += p.splice_to(c.as_raw_fd(), n - moved, false).unwrap();
        }
        let mut got = vec![0u8; 8000];
        assert!(s.recv_exact(&mut got).unwrap());
        assert_eq!(&got[..5000], &data[100..5100]);
        assert_eq!(&got[5000..], &data[..3000]);
    }
}
