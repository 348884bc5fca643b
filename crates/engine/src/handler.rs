//! The contract between the engine's I/O loop and a protocol.
//!
//! A handler sees a [`Request`] (bytes, the peer, the arrival time when the backend
//! stamps it), never a socket: the same handler runs under recvfrom, recvmmsg or any
//! other backend (see [`crate::backend`]) unchanged.

use crate::backend::Request;
use firehose_sys::mmsg::PeerView;
use std::net::SocketAddr;

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send the first `n` bytes of the buffer back to the peer. `n` must not exceed the
    /// buffer's length; a larger `n` is counted as a handler error and nothing is sent.
    Reply(usize),
    /// Send nothing, deliberately (counted as `handler_drops`).
    Drop,
    /// Send nothing because the request could not be handled (counted as `handler_errors`).
    Error,
}

/// The sender of a request. A socket backend lends the kernel's address record and it
/// is converted to a `SocketAddr` only if the handler asks; a backend that reads
/// addresses from packet headers (AF_XDP) hands over a `SocketAddr` directly.
#[derive(Clone, Copy)]
pub struct Peer<'a>(PeerRepr<'a>);

#[derive(Clone, Copy)]
enum PeerRepr<'a> {
    Kernel(PeerView<'a>),
    Addr(SocketAddr),
    /// The backend could not read an address it can answer (another family, a name the
    /// kernel cut): the request is counted in `unknown_peer`, never handled.
    Unknown,
}

impl<'a> Peer<'a> {
    /// A peer read lazily from a received datagram's address record.
    pub fn from_view(view: PeerView<'a>) -> Self {
        Peer(PeerRepr::Kernel(view))
    }

    /// A peer with a known address (a backend that parsed headers, tests, fuzzing).
    pub fn from_addr(addr: SocketAddr) -> Peer<'static> {
        Peer(PeerRepr::Addr(addr))
    }

    /// A sender no reply can be addressed to.
    pub fn unknown() -> Peer<'static> {
        Peer(PeerRepr::Unknown)
    }

    /// True for [`Self::unknown`] (a cheap test: no address is converted).
    pub fn is_unknown(&self) -> bool {
        matches!(self.0, PeerRepr::Unknown)
    }

    /// The sender's address; `None` for a family other than IPv4/IPv6.
    pub fn addr(&self) -> Option<SocketAddr> {
        match &self.0 {
            PeerRepr::Kernel(v) => v.addr(),
            PeerRepr::Addr(a) => Some(*a),
            PeerRepr::Unknown => None,
        }
    }
}

/// A request handler. One instance is created per worker, so it may keep mutable state
/// (scratch space, counters) without locks.
pub trait Handler: Send {
    /// The request is `req.data()`. Write the response into the same buffer (in place,
    /// over the request: [`Request::parts`]) and return its length.
    /// [`Request::capacity`] is the reply capacity and depends on the backend: 65536
    /// bytes on the socket path, a few KiB inside an AF_XDP frame. A response that does
    /// not fit must be shortened by the protocol's own rules (DNS sets TC) or dropped; it
    /// is never written past the capacity. [`Request::rx_time_ns`] is the kernel's
    /// arrival time where the backend stamps arrivals. Must not allocate on the common
    /// path.
    fn handle(&mut self, req: &mut Request<'_>) -> Verdict;

    /// The reply tagged `tag` ([`Request::want_tx_stamp`]) left at `tx_time_ns` (the
    /// kernel's software transmit stamp, ns since the Unix epoch): called after the batch
    /// it was sent in, or a later one. Never called on a backend that does not stamp
    /// sends, nor for a reply the kernel refused. Nothing by default.
    fn transmitted(&mut self, tag: u64, tx_time_ns: u64) {
        let _ = (tag, tx_time_ns);
    }

    /// Protocol-specific counters to report beside the engine's, as (name, value),
    /// cumulative. The engine copies them into atomics once per batch for live reading
    /// (metrics, interval lines), so a scrape never touches the handler, and reads them a
    /// last time when the worker ends. Names must not change between calls. Empty by
    /// default.
    fn counters(&self) -> &[(&'static str, u64)] {
        &[]
    }
}
