//! io_uring, through the `io-uring` crate (tokio-rs: maintained, no C dependency, exposes
//! SEND_ZC, multishot receives, provided-buffer rings and the zcrx registration).
//!
//! One driver for datagrams, [`DgramRing`], which the server (`serve --io uring`), the
//! generator (`load --io uring`), the sink and the flood all drive through thin adapters;
//! and the bulk TCP rings of `stream` ([`RecvRing`], [`SendRing`]). Both kinds share the
//! same parts: [`UringSetup`] (the IORING_SETUP_* flags a user may ask for, refused with the
//! errno), [`UringSupport`] (the probe), one provided-buffer ring, one `io_uring_enter`
//! helper and one synchronous cancel.
//!
//! # The datagram ring's contract
//!
//! A [`DgramRing`] owns one io_uring, one provided-buffer ring (`buffers` buffers of
//! `buffer_size` bytes, registered as one buffer group) and, optionally, send slots of its
//! own. It serves any number of UDP sockets, each with one multishot IORING_OP_RECVMSG
//! feeding the shared buffer ring (one completion per datagram, no re-arming while buffers
//! last), and sends by IORING_OP_SEND, any number of them per `io_uring_enter`. A plain
//! ring ([`DgramConfig::plain`]: connected sockets, no names, no control) receives with a
//! multishot IORING_OP_RECV instead: no header, the payload at the buffer's start.
//!
//! 1. **In.** [`DgramRing::poll`] (re)arms every receive that ended, waits up to a timeout
//!    (zero: looks without sleeping) and returns how many datagrams are ready;
//!    [`DgramRing::take`] lends up to `max` of them as slots `0..n`. Each slot is a buffer
//!    the kernel filled ([`recvmsg`]): a 16-byte `io_uring_recvmsg_out`, the sender's
//!    address when the ring keeps names ([`DgramConfig::names`]), the control messages
//!    when it reserves room for them ([`DgramConfig::control`]: the kernel's arrival
//!    stamp on a socket with SO_TIMESTAMPNS), then the payload. [`DgramRing::datagram`]
//!    lends slot `i` (payload, the rest of its buffer as reply room, the full length the
//!    kernel reported with MSG_TRUNC, the sender, the socket it came from, the stamp).
//! 2. **Out.** [`DgramRing::reply`] queues a SEND of slot `i`'s buffer back to its sender,
//!    address and data read from that very buffer (no header for the kernel to copy);
//!    [`DgramRing::reply_stamped`] sends it by IORING_OP_SENDMSG instead, with a request
//!    for its transmit stamp under a key of the caller's (read from the socket's error
//!    queue by [`crate::timestamping::ErrQueue`]);
//!    [`DgramRing::queue_sends`] queues SENDs of the ring's own send slots
//!    ([`DgramRing::tx_slot`]) on a connected socket. [`DgramRing::flush`] submits them
//!    with one `io_uring_enter`, waits for every one's completion (a UDP send completes
//!    inline; more enters only if some complete late) and returns a [`Flushed`].
//! 3. **Buffers go back** to the kernel at the next `poll` or `take`, or at the end of
//!    `flush`, and never while a queued reply may still read them: the kernel never reads
//!    a buffer it may also be writing. Send slots are free again after `flush`.
//!
//! When the buffer ring runs dry the kernel ends a multishot receive with ENOBUFS; the
//! datagrams wait in the socket (or are dropped there and counted by the kernel's socket
//! drop counter). That ending is counted ([`DgramStats::buffer_ring_empty`]) and the
//! receive is armed again at the next `poll`. Any other receive error (ECONNREFUSED after a
//! port-unreachable on a connected socket) is counted with its errno and armed again too.
//!
//! A ring is created on the thread that uses it (IORING_SETUP_SINGLE_ISSUER binds it
//! there); a kernel without provided-buffer rings (before 5.19) or multishot RECVMSG
//! (before 6.0) refuses in [`DgramRing::new`], with the errno.

mod dgram;
mod mem;
mod readback;
pub mod recvmsg;
mod setup;
mod stream;
#[cfg(test)]
mod tests;

pub use crate::mmsg::Flushed;
pub use dgram::{Datagram, DgramConfig, DgramRing, DgramStats, NAME_ROOM, STAMP_ROOM};
pub use readback::{read_back, rings_of, RingFlags};
pub use setup::{UringSetup, UringSupport};
pub use stream::{probe_zcrx, RecvRing, SendRing, UringRecvStats, UringSendStats};

use crate::SysError;

/// An io_uring error naming the step.
pub(crate) fn uring_err(what: impl Into<String>, e: std::io::Error) -> SysError {
    SysError {
        what: what.into(),
        source: e,
    }
}

/// A push onto a full submission queue.
pub(crate) fn sq_full() -> SysError {
    uring_err(
        "io_uring: submission queue full",
        std::io::Error::from_raw_os_error(libc::EBUSY),
    )
}

/// A completion's negative result as an error naming the operation.
pub(crate) fn cqe_err(what: &str, res: i32) -> SysError {
    uring_err(what, std::io::Error::from_raw_os_error(-res))
}
