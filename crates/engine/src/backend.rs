//! The backend seam: how a worker gets requests in and replies out.
//!
//! A worker runs one loop ([`crate::worker::run`]) over one [`Backend`] and one
//! [`Handler`](crate::Handler). The loop never sees a socket and the backend never sees a
//! protocol; between them is a batch:
//!
//! 1. **Batch in.** [`Backend::recv`] waits for (or polls for) requests and leaves
//!    `count` of them in slots `0..count`. It returns within a bounded time even when
//!    nothing arrives (a receive timeout, a poll), so the loop notices a stop request.
//! 2. **In place.** [`Backend::request`] lends slot `i` as a [`Request`]: a writable
//!    buffer whose first `len` bytes are the request, the peer, and the kernel's
//!    arrival time where the backend stamps arrivals (room for a protocol such as NTP
//!    that answers with it). The buffer's length is the reply capacity, which is
//!    whatever room the backend has: 64 KiB for the socket path, the rest of a UMEM frame
//!    after the headers (a few KiB) for AF_XDP. The handler writes its reply over the
//!    request in the same buffer. A `Request` is made only by [`Request::new`], which
//!    clamps the length to the buffer once for every backend: a datagram longer than the
//!    room lent is marked truncated and counted in `handler_errors`, never handed over.
//!    A sender no reply can be addressed to ([`Peer::unknown`]) is counted in
//!    `unknown_peer`, never handed over either.
//! 3. **Batch out.** [`Backend::reply`] queues slot `i`'s first `len` bytes to go back to
//!    that slot's peer, and [`Backend::flush`] sends everything queued, reporting what
//!    went out, what the kernel refused and how many system calls it took.
//!
//! Arrival and departure times: a backend whose socket stamps arrivals (SO_TIMESTAMPNS,
//! SO_TIMESTAMPING) hands the kernel's receive time over with the request
//! ([`Request::with_rx_time_ns`]): the socket path (recvmmsg's control messages) and the
//! io_uring path (control room in each provided buffer) do when asked. A protocol that
//! also wants to know when a reply really left (NTP's interleaved mode, which sends that
//! time in its next response to the same client) tags the reply
//! ([`Request::want_tx_stamp`]); the loop queues it with [`Backend::reply_stamped`], and
//! after the batch's last flush asks [`Backend::tx_stamps`] for the kernel's transmit
//! stamps that came back, handing each to [`Handler::transmitted`](crate::Handler::transmitted)
//! under its tag. The socket path and io_uring stamp (SO_TIMESTAMPING, per send:
//! [`crate::tx_stamps`]); AF_XDP sends a tagged reply as any other and no stamp comes back.
//!
//! The engine's counters are computed by the loop from what these calls return
//! ([`Received`], [`Flushed`]), so a new backend adds no counting code; a backend with
//! facts of its own (e.g. `xdp_answered`) publishes them through
//! [`Backend::counters`], and they are reported beside the engine's per-worker counters.
//!
//! Life cycle: an [`Io`] value is made once per server and shared by the workers; each
//! worker calls [`Io::open`] inside its own thread, after pinning, so per-queue state
//! (an AF_XDP socket per RX queue, an io_uring per thread) is created on the CPU that
//! will use it. [`Io::applied`] describes what the backend set up, for the start-up
//! printout and the stats JSON.
//!
//! The first implementation is [`crate::socket_io`] (recvfrom/sendto or
//! recvmmsg/sendmmsg, blocking with a timeout or busy-polling); [`crate::xdp_io`] and
//! [`crate::uring_io`] are the others.

use crate::handler::Peer;
pub use firehose_sys::mmsg::Flushed;
use firehose_sys::socket::UdpSock;
use firehose_sys::SetupError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What one [`Backend::recv`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Requests now in slots `0..count`; 0 when nothing arrived in time.
    pub count: usize,
    /// System calls made (0 for a ring that needed none).
    pub syscalls: u64,
    /// Receive calls the kernel refused with an error (the loop carries on).
    pub errors: u64,
    /// The kernel's cumulative drop count for this worker's queue, when the backend
    /// learns it in-band (SO_RXQ_OVFL); `None` leaves the last value standing.
    pub drops: Option<u64>,
}

/// One request lent to the handler: made only by [`Request::new`], which clamps the
/// length to the buffer, so no backend can hand a handler a length past its buffer.
pub struct Request<'a> {
    buf: &'a mut [u8],
    len: usize,
    peer: Peer<'a>,
    truncated: bool,
    rx_time_ns: Option<u64>,
    tx_tag: Option<u64>,
}

/// What one [`Backend::tx_stamps`] read: each stamped reply's tag and when the kernel sent
/// it (ns since the Unix epoch, CLOCK_REALTIME), and the system calls it took.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxStamped<'a> {
    pub stamps: &'a [(u64, u64)],
    pub syscalls: u64,
    /// Reads of the stamps the kernel refused with an error.
    pub errors: u64,
}

impl<'a> Request<'a> {
    /// A request of `len` bytes at the start of `buf`, from `peer`; `buf.len()` is the
    /// reply capacity. A `len` past the end of `buf` (a datagram longer than the room the
    /// backend can lend, e.g. a frame beyond the MTU) is marked truncated: it is counted,
    /// never handed to the handler.
    #[inline]
    pub fn new(buf: &'a mut [u8], len: usize, peer: Peer<'a>) -> Self {
        Request {
            truncated: len > buf.len(),
            len: len.min(buf.len()),
            buf,
            peer,
            rx_time_ns: None,
            tx_tag: None,
        }
    }

    /// Marks the request as cut: the kernel said the datagram was longer than what it
    /// stored (MSG_TRUNC). Not handled; counted in `handler_errors`.
    #[inline]
    pub fn cut(mut self, truncated: bool) -> Self {
        self.truncated |= truncated;
        self
    }

    /// Adds the kernel's receive time (ns since the Unix epoch, CLOCK_REALTIME, as
    /// SO_TIMESTAMPNS and SO_TIMESTAMPING's software stamp give it), for a protocol that
    /// answers with the arrival time (NTP).
    #[inline]
    pub fn with_rx_time_ns(mut self, t: Option<u64>) -> Self {
        self.rx_time_ns = t;
        self
    }

    /// Length of the request; never more than [`Self::capacity`].
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty datagram.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The reply capacity: the most bytes a reply may have.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The request's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The sender, to which a reply goes.
    #[inline]
    pub fn peer(&self) -> &Peer<'a> {
        &self.peer
    }

    /// The datagram arrived cut or was longer than the buffer: not handled.
    #[inline]
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// When the kernel received the datagram, if the backend's socket stamps arrivals.
    #[inline]
    pub fn rx_time_ns(&self) -> Option<u64> {
        self.rx_time_ns
    }

    /// Asks for the kernel's transmit stamp of this request's reply, handed back later
    /// under `tag` ([`crate::Handler::transmitted`]) where the backend stamps sends.
    #[inline]
    pub fn want_tx_stamp(&mut self, tag: u64) {
        self.tx_tag = Some(tag);
    }

    /// The tag of [`Self::want_tx_stamp`], if the handler asked.
    #[inline]
    pub fn tx_tag(&self) -> Option<u64> {
        self.tx_tag
    }

    /// The whole buffer (the request is its first [`Self::len`] bytes) to write the reply
    /// into, with the length and the sender.
    #[inline]
    pub fn parts(&mut self) -> (&mut [u8], usize, &Peer<'a>) {
        (&mut *self.buf, self.len, &self.peer)
    }
}

/// A worker's I/O path. See the module documentation for the contract.
pub trait Backend {
    /// Receives the next batch of requests into slots `0..count`.
    fn recv(&mut self) -> Received;
    /// Slot `i` (`i < count` of the last [`Self::recv`]) for the handler.
    fn request(&mut self, i: usize) -> Request<'_>;
    /// Queues the first `len` bytes of slot `i`'s buffer (`len <= buf.len()`) as the
    /// reply to slot `i`'s peer.
    fn reply(&mut self, i: usize, len: usize);
    /// As [`Self::reply`], asking for the reply's transmit stamp under `tag` (read by
    /// [`Self::tx_stamps`]). A backend that cannot stamp sends it as any reply, and no
    /// stamp comes back for it.
    fn reply_stamped(&mut self, i: usize, len: usize, tag: u64) {
        let _ = tag;
        self.reply(i, len);
    }
    /// The transmit stamps of stamped replies that came back since the last call (a
    /// stamp may come a batch late); empty, with no system call, when none is awaited.
    fn tx_stamps(&mut self) -> TxStamped<'_> {
        TxStamped::default()
    }
    /// Sends every queued reply: what the kernel accepted, what it refused (dropped,
    /// never retried: UDP may drop) and the system calls made.
    fn flush(&mut self) -> Flushed;
    /// True when [`Self::flush`] may run before the batch's last reply and later slots of
    /// the batch stay readable (the socket path; AF_XDP, whose flush hands back only the
    /// frames already lent). io_uring gives its provided buffers back at a flush, so the
    /// worker sends once per batch there.
    fn sends_mid_batch(&self) -> bool {
        false
    }
    /// The backend's own counters as (name, cumulative value), the same names in the same
    /// order on every call; empty for a backend without any. Read once per batch.
    fn counters(&self) -> &[(&'static str, u64)] {
        &[]
    }
}

/// Where a worker runs and what it reads: given to [`Io::open`].
#[derive(Debug, Clone)]
pub struct WorkerSeat {
    /// Worker index, `0..workers`.
    pub index: usize,
    /// CPU the worker is pinned to, if any.
    pub cpu: Option<usize>,
    /// The UDP socket this worker is assigned (bound to the listen address with every
    /// option applied). A backend that does not read it still keeps the port owned.
    pub socket: Arc<UdpSock>,
    /// The epoll busy-poll parameters the kernel granted at start-up (EPIOCSPARAMS), for
    /// the epoll a busy-polling worker sleeps in when its socket stays empty; `None` when
    /// the server does not busy-poll or the kernel refused them (a note says why).
    pub epoll: Option<firehose_sys::epoll::EpollParams>,
}

/// A backend as configured for a server: makes one [`Backend`] per worker.
pub trait Io: Send + Sync + 'static {
    /// The per-worker backend.
    type Backend: Backend;
    /// Opens worker `seat.index`'s backend, called inside that worker's thread after
    /// pinning. An error stops the server from starting, with this message.
    fn open(&self, seat: &WorkerSeat) -> Result<Self::Backend, SetupError>;
    /// What this backend set up beyond the sockets, for the start-up printout and the
    /// stats JSON; `None` for the plain socket path.
    fn applied(&self) -> Option<BackendApplied> {
        None
    }
    /// The rx queue worker `index` serves, for naming it when it fails; `None` when
    /// workers are not tied to queues.
    fn queue(&self, index: usize) -> Option<u32> {
        let _ = index;
        None
    }
}

/// A backend's own applied configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct BackendApplied {
    /// The backend's name, e.g. `af_xdp`.
    pub name: String,
    /// Settings as the kernel applied them (read back where possible), by name.
    pub settings: BTreeMap<String, String>,
    /// Choices made at run time (a mode the driver lacks, a fallback taken).
    pub notes: Vec<String>,
}

impl std::fmt::Display for BackendApplied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "backend {}:", self.name)?;
        for (k, v) in &self.settings {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_past_the_buffer_is_clamped_and_marked_truncated() {
        let mut buf = [1u8; 1472];
        let peer = Peer::from_addr("192.0.2.1:53".parse().unwrap());
        // What an AF_XDP frame of 1504 IP bytes on a 1500-byte MTU gives: 1476 > 1472.
        let r = Request::new(&mut buf, 1476, peer);
        assert_eq!((r.len(), r.capacity(), r.truncated()), (1472, 1472, true));
        assert_eq!(r.data().len(), 1472);
        let r = Request::new(&mut buf, 1472, peer);
        assert_eq!((r.len(), r.truncated()), (1472, false));
        let mut r = Request::new(&mut buf, 3, peer).cut(true);
        assert!(r.truncated());
        let (b, len, _) = r.parts();
        assert_eq!((b.len(), len), (1472, 3));
        assert_eq!(Request::new(&mut buf, 0, peer).rx_time_ns(), None);
    }
}
