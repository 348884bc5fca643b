//! Socket-option calls on a raw descriptor, shared by the UDP and TCP sockets, so every
//! option is set and read back through one place that names it in errors.

use crate::{cvt, SysResult};
use std::mem;
use std::os::fd::RawFd;

/// Plain data the kernel reads or writes as an option's value: C integers and structs of
/// them, for which all-zero bytes, and any bytes the kernel writes, are valid values.
///
/// # Safety
/// Implement only for such types (no pointers the kernel would follow, no padding whose
/// contents matter, no invalid bit patterns).
pub unsafe trait OptValue: Copy {}

// SAFETY: each is an integer or a C struct of integers (the kernel's own definitions).
unsafe impl OptValue for i32 {}
// SAFETY: as above.
unsafe impl OptValue for [u32; crate::socket::SK_MEMINFO_VARS] {}
// SAFETY: as above.
unsafe impl OptValue for libc::timeval {}
// SAFETY: as above.
unsafe impl OptValue for libc::tpacket_req {}
// SAFETY: as above.
unsafe impl OptValue for libc::tpacket_req3 {}
// SAFETY: as above.
unsafe impl OptValue for libc::tpacket_stats_v3 {}

/// Sets option `name` at `level` to `value`; the error names `label()` (the option and
/// what was asked of it).
pub fn set<T: OptValue>(
    fd: RawFd,
    level: i32,
    name: i32,
    value: &T,
    label: impl FnOnce() -> String,
) -> SysResult<()> {
    // SAFETY: the kernel reads size_of::<T>() bytes from a live value of plain data.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value as *const T as *const libc::c_void,
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    cvt(ret, || format!("setsockopt({})", label())).map(|_| ())
}

/// Reads option `name` at `level`; the error names `label`.
pub fn get<T: OptValue>(fd: RawFd, level: i32, name: i32, label: &str) -> SysResult<T> {
    // SAFETY: T is plain data, for which all-zero is a valid value (OptValue).
    let mut value: T = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes of plain data into the live local.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    cvt(ret, || format!("getsockopt({label})"))?;
    Ok(value)
}

/// The integer getters and setters live with the UDP socket; re-exported under short names.
pub use crate::socket::{get_int_opt as get_int, set_int_opt as set_int};

/// Sets an option whose value is a byte string (e.g. TCP_CONGESTION).
pub fn set_bytes(fd: RawFd, level: i32, name: i32, value: &[u8], label: &str) -> SysResult<()> {
    // SAFETY: the kernel reads value.len() bytes from a live slice.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            value.as_ptr() as *const libc::c_void,
            value.len() as libc::socklen_t,
        )
    };
    cvt(ret, || {
        format!("setsockopt({label}={})", String::from_utf8_lossy(value))
    })
    .map(|_| ())
}

/// Reads an option into `buf`; returns how many bytes the kernel wrote.
pub fn get_bytes(
    fd: RawFd,
    level: i32,
    name: i32,
    buf: &mut [u8],
    label: &str,
) -> SysResult<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into the live buffer and updates len.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    cvt(ret, || format!("getsockopt({label})"))?;
    Ok(len as usize)
}

/// Waits until `fd` has one of `events` (POLLIN, POLLOUT, POLLERR...) or `timeout_ms`
/// passes (-1: forever). Returns the events that fired; 0 on timeout. EINTR reads as 0.
pub fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> SysResult<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: poll reads and writes one live pollfd.
    let ret = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    match cvt(ret, || "poll".into()) {
        Ok(0) => Ok(0),
        Ok(_) => Ok(p.revents),
        Err(e) if e.errno() == Some(libc::EINTR) => Ok(0),
        Err(e) => Err(e),
    }
}

/// poll(2) event bits, re-exported so callers need no libc.
pub mod events {
    pub const POLLIN: i16 = libc::POLLIN;
    pub const POLLOUT: i16 = libc::POLLOUT;
    pub const POLLERR: i16 = libc::POLLERR;
    pub const POLLHUP: i16 = libc::POLLHUP;
}
