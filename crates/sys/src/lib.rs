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
pub mod cache;
pub mod clock;
pub mod cmsg;
pub mod cpu;
pub mod epoll;
mod error;
pub mod ethtool;
pub mod file;
pub mod ifaddr;
mod interrupt;
pub mod limits;
pub mod mmsg;
pub mod netdev;
pub mod netns;
pub mod pidfd;
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
pub mod xdp;
pub mod xsk_diag;
pub mod zerocopy;

pub use error::{errno_name, Setting, SetupError, SysError, SysResult, Usage};
pub use interrupt::retry_interrupted;

use std::io;

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
