//! TCP receive zero-copy (getsockopt TCP_ZEROCOPY_RECEIVE), as the kernel selftest
//! tcp_mmap does it: the socket is mmap()ed read-only, and each call maps whole pages of
//! received payload into that window instead of copying them.
//!
//! Only page-sized, page-aligned payload fragments can be mapped; the kernel reports the
//! rest as `recv_skip_hint`, which the caller reads with an ordinary recv (the fallback).
//! On loopback and veth the payload usually sits in non-page fragments, so most bytes
//! fall back; that is what the counters show, not an error.

use crate::sockopt::get_bytes;
use crate::{cvt, SysError, SysResult};
use std::os::fd::RawFd;

/// TCP_ZEROCOPY_RECEIVE (linux/tcp.h).
pub const TCP_ZEROCOPY_RECEIVE: i32 = 35;

/// `struct tcp_zerocopy_receive` (linux/tcp.h, 64 bytes in 5.11+).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct ZcReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// What one TCP_ZEROCOPY_RECEIVE call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZcChunk {
    /// Bytes now mapped at the start of the window.
    pub mapped: usize,
    /// Bytes that follow and must be read with recv (not mappable).
    pub skip: usize,
    /// Bytes still queued on the socket after this call.
    pub inq: usize,
}

/// The read-only window a socket's payload is mapped into.
pub struct ZcWindow {
    addr: *mut u8,
    len: usize,
}

impl ZcWindow {
    /// mmap()s `len` bytes (rounded up to pages) of the socket `fd`.
    pub fn new(fd: RawFd, len: usize) -> SysResult<Self> {
        // SAFETY: sysconf takes a plain integer.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = len.div_ceil(page) * page;
        // SAFETY: a fresh shared read-only mapping of the socket; no existing memory is touched.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(SysError {
                what: "mmap(TCP socket)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(ZcWindow {
            addr: addr as *mut u8,
            len,
        })
    }

    /// The window's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// False always: a window has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One TCP_ZEROCOPY_RECEIVE: maps what it can of the queued payload (never blocks).
    pub fn receive(&mut self, fd: RawFd) -> SysResult<ZcChunk> {
        let mut zc = ZcReceive {
            address: self.addr as u64,
            length: self.len as u32,
            ..Default::default()
        };
        // SAFETY: ZcReceive is plain data (repr(C) of integers); viewing it as bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                &mut zc as *mut ZcReceive as *mut u8,
                std::mem::size_of::<ZcReceive>(),
            )
        };
        get_bytes(
            fd,
            libc::IPPROTO_TCP,
            TCP_ZEROCOPY_RECEIVE,
            bytes,
            "TCP_ZEROCOPY_RECEIVE",
        )?;
        let out = zc;
        if out.err != 0 {
            return Err(SysError {
                what: "TCP_ZEROCOPY_RECEIVE: socket error".into(),
                source: std::io::Error::from_raw_os_error(out.err.saturating_neg().clamp(1, 4095)),
            });
        }
        Ok(ZcChunk {
            mapped: out.length as usize,
            skip: out.recv_skip_hint as usize,
            inq: out.inq as usize,
        })
    }

    /// The first `n` mapped bytes (as returned by the last [`Self::receive`]).
    pub fn mapped(&self, n: usize) -> &[u8] {
        let n = n.min(self.len);
        // SAFETY: the last receive mapped at least n bytes of payload at addr, read-only; the
        // kernel changes the mapping only inside receive(), which needs &mut self.
        unsafe { std::slice::from_raw_parts(self.addr, n) }
    }
}

impl Drop for ZcWindow {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in new(); nothing borrows it (&mut self).
        let ret = unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
        let _ = cvt(ret, || "munmap".into());
    }
}

// SAFETY: the window is a plain memory mapping with no thread affinity.
unsafe impl Send for ZcWindow {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{ConnectOptions, TcpListener, TcpSock};
    use std::os::fd::AsRawFd;

    #[test]
    fn struct_layout_is_the_kernels() {
        assert_eq!(std::mem::size_of::<ZcReceive>(), 64);
    }

    #[test]
    fn small_message_falls_back_to_recv() {
        let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
        let (s, _) = l.accept(5000).unwrap().unwrap();
        c.send_all(b"tiny").unwrap();
        crate::sockopt::poll_one(s.as_raw_fd(), libc::POLLIN, 5000).unwrap();
        let mut w = ZcWindow::new(s.as_raw_fd(), 65536).unwrap();
        let chunk = w.receive(s.as_raw_fd()).unwrap();
        assert_eq!(chunk.mapped, 0, "4 bytes cannot fill a page");
        assert_eq!(chunk.skip, 4);
        let mut buf = [0u8; 4];
        assert!(s.recv_exact(&mut buf).unwrap());
        assert_eq!(&buf, b"tiny");
    }
}
