//! The contract between the engine's I/O loop and a protocol.
//!
//! A handler sees bytes and a peer, never a socket: the same handler runs under
//! recvfrom, recvmmsg or any later backend unchanged.

use firehose_sys::mmsg::PeerView;
use std::net::SocketAddr;

/// What to do with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send the first `n` bytes of the buffer back to the peer.
    Reply(usize),
    /// Send nothing, deliberately (counted as `handler_drops`).
    Drop,
    /// Send nothing because the request could not be handled (counted as `handler_errors`).
    Error,
}

/// The sender of a request, converted to a `SocketAddr` only if the handler asks.
pub struct Peer<'a> {
    view: Option<PeerView<'a>>,
    fixed: Option<SocketAddr>,
}

impl<'a> Peer<'a> {
    pub(crate) fn new(view: PeerView<'a>) -> Self {
        Peer {
            view: Some(view),
            fixed: None,
        }
    }

    /// A peer with a known address, for driving a handler outside the engine (tests,
    /// fuzzing).
    pub fn from_addr(addr: SocketAddr) -> Peer<'static> {
        Peer {
            view: None,
            fixed: Some(addr),
        }
    }

    /// The sender's address.
    pub fn addr(&self) -> Option<SocketAddr> {
        match &self.view {
            Some(v) => v.addr(),
            None => self.fixed,
        }
    }
}

/// A request handler. One instance is created per worker, so it may keep mutable state
/// (scratch space, counters) without locks.
pub trait Handler: Send {
    /// `buf` is the whole receive buffer (at least 65536 bytes); the request is
    /// `buf[..len]`. Write the response into `buf` (in place) and return its length.
    /// Must not allocate on the common path.
    fn handle(&mut self, buf: &mut [u8], len: usize, peer: &Peer<'_>) -> Verdict;

    /// Protocol-specific counters to report beside the engine's, as (name, value).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
