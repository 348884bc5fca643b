//! The system-call layer of firehose: the only crate that uses `unsafe` and libc.
//!
//! Every syscall goes through [`cvt`], which turns a `-1` into an [`std::io::Error`]
//! that names the call, so an error always says which kernel interface refused. Every
//! `unsafe` block carries a `// SAFETY:` line saying why the kernel or libc call is
//! sound there.
//!
//! What it offers, and the contract each part keeps:
//! - [`socket::UdpSock`]: a UDP socket whose every option has a setter and a getter,
//!   so callers report what the kernel applied. It also remembers whether UDP GSO works
//!   on it (probed once, turned off for good when a send is refused).
//! - [`mmsg::Batch`]: batched datagram I/O over caller-owned slots allocated once. A
//!   receive fills slots `0..n` (length, sender, control messages); replies are queued by
//!   slot and length and sent by one flush. How it receives and sends is data chosen once
//!   ([`mmsg::RecvMode`], [`mmsg::SendMode`]: recvfrom or recvmmsg; sendto, sendmmsg or
//!   UDP GSO with sendmmsg as the fallback it takes by itself). No allocation per packet.
//! - [`cmsg`]: the one encoder and iterator for control messages.
//! - [`bpf`], [`cpu`], [`epoll`], [`ethtool`], [`sockaddr`]: reuseport steering
//!   programs, CPU affinity and times, readiness, NIC queries, address conversion.
//!
//! Later I/O paths (AF_XDP, io_uring, AF_PACKET) add their kernel calls here, one file
//! each; the engine's backend seam (`firehose_engine::backend`) is where they meet the
//! worker loop.

pub mod af_packet;
pub mod bpf;
pub mod bpf_map;
pub mod cmsg;
pub mod cpu;
pub mod epoll;
pub mod ethtool;
pub mod file;
pub mod ifaddr;
pub mod mmsg;
pub mod netns;
pub mod route;
pub mod sockaddr;
pub mod socket;
pub mod sockopt;
pub mod splice;
pub mod stdio;
pub mod supervise;
pub mod tcp;
pub mod tcp_info;
pub mod tcp_mmap;
pub mod timestamping;
pub mod trace;
pub mod uring;
pub mod uring_dgram;
pub mod uring_flows;
mod uring_pbuf;
pub mod uring_recv;
pub mod uring_serve;
pub mod xdp;
pub mod xsk_diag;
pub mod zerocopy;

use std::io;

/// An error from a named system call, carrying the OS errno.
#[derive(Debug)]
pub struct SysError {
    /// The call or option that failed, e.g. `setsockopt(SO_REUSEPORT)`.
    pub what: String,
    /// The underlying OS error.
    pub source: io::Error,
}

impl std::fmt::Display for SysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let errno = self.source.raw_os_error().map(errno_name).unwrap_or("?");
        write!(f, "{}: {} ({})", self.what, self.source, errno)
    }
}

impl std::error::Error for SysError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl SysError {
    /// The errno of the failed call, if the OS gave one.
    pub fn errno(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// Result of a named system call.
pub type SysResult<T> = Result<T, SysError>;

/// A fresh read-write shared mapping of `len` bytes of `fd` at `offset` (the rings a socket
/// exposes: AF_PACKET, AF_XDP), with MAP_POPULATE and any `extra_flags`. The caller owns the
/// mapping and unmaps it.
pub(crate) fn map_shared(
    fd: std::os::fd::RawFd,
    len: usize,
    offset: libc::off_t,
    extra_flags: i32,
    what: impl FnOnce() -> String,
) -> SysResult<*mut u8> {
    // SAFETY: a new mapping at an address the kernel chooses touches no existing memory;
    // the kernel checks `offset` and `len` against what `fd` can map.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE | extra_flags,
            fd,
            offset,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(SysError {
            what: what(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(ptr as *mut u8)
}

/// Turns a libc return value into a result, naming the call on failure.
pub fn cvt<T: IsMinusOne>(ret: T, what: impl FnOnce() -> String) -> SysResult<T> {
    if ret.is_minus_one() {
        Err(SysError {
            what: what(),
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(ret)
    }
}

/// Return types of libc calls that signal failure with -1.
pub trait IsMinusOne {
    /// True when the value is the error sentinel.
    fn is_minus_one(&self) -> bool;
}

macro_rules! impl_minus_one {
    ($($t:ty),*) => {$(impl IsMinusOne for $t { fn is_minus_one(&self) -> bool { *self == -1 } })*};
}
impl_minus_one!(i32, i64, isize);

/// The symbolic name of an errno, for messages users can search for.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOBUFS => "ENOBUFS",
        libc::E2BIG => "E2BIG",
        libc::ERANGE => "ERANGE",
        libc::ECONNRESET => "ECONNRESET",
        libc::EPIPE => "EPIPE",
        libc::ENODEV => "ENODEV",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENOTCONN => "ENOTCONN",
        _ => "errno",
    }
}
