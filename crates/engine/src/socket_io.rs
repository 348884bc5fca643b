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
/// whether datagrams carry the SO_RXQ_OVFL drop count and the arrival stamp.
#[derive(Debug, Clone, Copy)]
pub struct SocketIo {
    batch: usize,
    busy: bool,
    rxq_ovfl: bool,
    rx_timestamps: bool,
}

impl SocketIo {
    /// The socket path for `cfg`.
    pub fn new(cfg: &ServeConfig) -> Self {
        SocketIo {
            batch: cfg.batch,
            busy: cfg.busy_poll.is_some(),
            rxq_ovfl: cfg.rxq_ovfl,
            rx_timestamps: cfg.rx_timestamps,
        }
    }
}

impl Io for SocketIo {
    type Backend = SocketBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<SocketBackend, SetupError> {
        let (recv, send) = match self.batch {
            // recvfrom carries no control message: a stamped batch of one is a recvmmsg.
            1 if self.rx_timestamps => (RecvMode::Batch, SendMode::Single),
            1 => (RecvMode::Single, SendMode::Single),
            _ => (RecvMode::Batch, SendMode::Batch),
        };
        Ok(SocketBackend {
            sock: seat.socket.clone(),
            slots: Batch::new(self.batch, SLOT_SIZE)
                .with_recv(recv)
                .with_send(send)
                .with_control(self.rxq_ovfl || self.rx_timestamps),
            max: self.batch,
            busy: self.busy,
            stamps: self.rx_timestamps,
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
    /// The socket stamps arrivals (SO_TIMESTAMPNS): each request carries its stamp.
    stamps: bool,
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
        let stamp = if self.stamps {
            self.slots.rx_timestamp_ns(i)
        } else {
            None
        };
        let (buf, view) = self.slots.slot_and_peer(i);
        Request::new(buf, len, Peer::from_view(view))
            .cut(truncated)
            .with_rx_time_ns(stamp)
    }

    fn reply(&mut self, i: usize, len: usize) {
        self.slots.queue_reply(i, len);
    }

    fn flush(&mut self) -> Flushed {
        self.slots.flush(&self.sock, 0)
    }

    fn sends_mid_batch(&self) -> bool {
        // The received datagrams stay in their slots; a flush only empties the send queue.
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn wall_ns() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    }

    /// A backend on a loopback socket with `batch` and `rx_timestamps`, fed one datagram.
    fn stamped(batch: usize, rx_timestamps: bool) -> Option<u64> {
        let addr = "127.0.0.1:0".parse().unwrap();
        let sock = UdpSock::new_for(&addr).unwrap();
        sock.bind(&addr).unwrap();
        sock.set_recv_timeout(Duration::from_secs(2)).unwrap();
        if rx_timestamps {
            sock.set_timestamp_ns(true).unwrap();
        }
        let to = sock.local_addr().unwrap();
        let mut cfg = ServeConfig::profile(Profile::Naive, to, 1);
        (cfg.batch, cfg.rxq_ovfl, cfg.rx_timestamps) = (batch, false, rx_timestamps);
        let seat = WorkerSeat {
            index: 0,
            cpu: None,
            socket: Arc::new(sock),
        };
        let mut b = SocketIo::new(&cfg).open(&seat).unwrap();
        let before = wall_ns();
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(b"tick", to)
            .unwrap();
        assert_eq!(b.recv().count, 1);
        let r = b.request(0);
        assert_eq!(r.data(), b"tick");
        let t = r.rx_time_ns();
        if let Some(t) = t {
            assert!(t >= before && t <= wall_ns(), "{before} <= {t}");
        }
        t
    }

    #[test]
    fn requests_carry_the_kernel_arrival_stamp_when_asked() {
        for batch in [1, 64] {
            assert!(stamped(batch, true).is_some(), "batch {batch}");
            assert_eq!(stamped(batch, false), None, "batch {batch}");
        }
    }
}
