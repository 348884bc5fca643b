//! The socket backend: recvfrom/sendto for batches of one, recvmmsg/sendmmsg otherwise;
//! blocking with a receive timeout, or busy-polling a non-blocking socket.

use crate::backend::{Backend, Flushed, Io, Received, Request, WorkerSeat};
use crate::config::ServeConfig;
use crate::handler::Peer;
use firehose_sys::mmsg::{Batch, RecvMode, SendMode};
use firehose_sys::socket::{UdpSock, MSG_DONTWAIT};
use firehose_sys::SetupError;
use std::sync::Arc;

/// Largest UDP payload over IPv4, plus room: every slot can hold any datagram.
pub const SLOT_SIZE: usize = 65536;

/// The socket path as configured: the batch size, blocking or busy-polling, and
/// whether datagrams carry the SO_RXQ_OVFL drop count.
#[derive(Debug, Clone, Copy)]
pub struct SocketIo {
    batch: usize,
    busy: bool,
    rxq_ovfl: bool,
}

impl SocketIo {
    /// The socket path for `cfg`.
    pub fn new(cfg: &ServeConfig) -> Self {
        SocketIo {
            batch: cfg.batch,
            busy: cfg.busy_poll.is_some(),
            rxq_ovfl: cfg.rxq_ovfl,
        }
    }
}

impl Io for SocketIo {
    type Backend = SocketBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<SocketBackend, SetupError> {
        let (recv, send) = match self.batch {
            1 => (RecvMode::Single, SendMode::Single),
            _ => (RecvMode::Batch, SendMode::Batch),
        };
        Ok(SocketBackend {
            sock: seat.socket.clone(),
            slots: Batch::new(self.batch, SLOT_SIZE)
                .with_recv(recv)
                .with_send(send)
                .with_rxq_ovfl(self.rxq_ovfl),
            max: self.batch,
            busy: self.busy,
            idle: false,
        })
    }
}

/// One worker's socket and its batch of slots.
pub struct SocketBackend {
    sock: Arc<UdpSock>,
    slots: Batch,
    max: usize,
    busy: bool,
    /// The last busy poll found nothing: poll with recvfrom until something arrives.
    idle: bool,
}

impl Backend for SocketBackend {
    fn recv(&mut self) -> Received {
        let flags = if self.busy { MSG_DONTWAIT } else { 0 };
        let mut r = Received {
            syscalls: 1,
            ..Received::default()
        };
        // A busy poll of an empty socket with recvfrom costs less than with recvmmsg, and
        // so does reading the one datagram a quiet server wakes to; the poll after it
        // batches again, so a queue that builds up is read by recvmmsg.
        let max = if self.busy && self.idle { 1 } else { self.max };
        match self.slots.recv_some(&self.sock, max, flags) {
            // No pause between polls: the syscall spaces them, and a pause only delays
            // seeing the next datagram.
            Ok(0) if self.busy => self.idle = true,
            Ok(n) => {
                r.count = n;
                self.idle = false;
            }
            Err(_) => r.errors = 1,
        }
        if r.count > 0 {
            r.drops = self.slots.rxq_ovfl(r.count - 1).map(u64::from);
        }
        r
    }

    fn request(&mut self, i: usize) -> Request<'_> {
        let len = self.slots.len(i);
        let truncated = self.slots.truncated(i);
        // The handler gets the whole slot; it reads buf[..len] and writes in place.
        let (buf, view) = self.slots.slot_and_peer(i);
        Request::new(buf, len, Peer::from_view(view)).cut(truncated)
    }

    fn reply(&mut self, i: usize, len: usize) {
        self.slots.queue_reply(i, len);
    }

    fn flush(&mut self) -> Flushed {
        self.slots.flush(&self.sock, 0)
    }
}
