//! sendfile(2), vmsplice(2)+splice(2) and memfd: sends that hand the kernel page
//! references instead of copying through a user buffer.
//!
//! vmsplice without SPLICE_F_GIFT puts references to the caller's pages in the pipe and
//! then in the socket's queue: rewriting that memory before the data left changes what is
//! sent. Callers splice only memory they never rewrite (firehose's static pattern).

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
        cvt(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) },
            || "pipe2".into(),
        )?;
        // SAFETY: both fds were just created and are owned by nobody else.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl with integer arguments.
        let granted = cvt(
            unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, size as libc::c_int) },
            || format!("fcntl(F_SETPIPE_SZ={size})"),
        )?;
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

    /// vmsplice(2): puts references to `buf`'s pages into the pipe; returns bytes taken.
    pub fn vmsplice(&self, buf: &[u8]) -> SysResult<usize> {
        let iov = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: the kernel reads one live iovec; it takes page references, so the pages
        // stay valid for it even if we free them (see the module note on rewriting).
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
        let n = p.vmsplice(&data[..3000]).unwrap();
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
