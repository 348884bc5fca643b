//! The socket backend: recvfrom/sendto for batches of one, recvmmsg/sendmmsg otherwise;
//! blocking with a receive timeout, or busy-polling a non-blocking socket. A busy-polling
//! worker whose socket has stayed empty for the busy-poll time sleeps in an epoll_wait
//! instead (with the epoll busy-poll parameters the kernel granted: it polls the NAPI
//! first, then sleeps until the socket is readable), so an idle server gives its CPU back
//! and the kernel's epoll-based busy polling (irq-suspend-timeout) has a waiter to serve.

use crate::backend::{Backend, Flushed, Io, Received, Request, TxStamped, WorkerSeat};
use crate::config::ServeConfig;
use crate::handler::Peer;
use crate::tx_stamps::TxStamps;
use firehose_sys::epoll::Epoll;
use firehose_sys::mmsg::{Batch, RecvMode, SendMode};
use firehose_sys::socket::{UdpSock, MSG_DONTWAIT};
use firehose_sys::SetupError;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an idle busy-polling worker sleeps in epoll_wait before looking at its stop
/// flag again (the blocking path's receive timeout).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// Largest UDP payload over IPv4, plus room: every slot can hold any datagram.
pub const SLOT_SIZE: usize = 65536;

/// The socket path as configured: the batch size, blocking or busy-polling, and
/// whether datagrams carry the SO_RXQ_OVFL drop count and the arrival stamp.
#[derive(Debug, Clone, Copy)]
pub struct SocketIo {
    batch: usize,
    busy: bool,
    /// How long a busy-polling worker spins on an empty socket before it sleeps.
    spin: Duration,
    rxq_ovfl: bool,
    rx_timestamps: bool,
    tx_timestamps: bool,
}

impl SocketIo {
    /// The socket path for `cfg`.
    pub fn new(cfg: &ServeConfig) -> Self {
        SocketIo {
            batch: cfg.batch,
            busy: cfg.busy_poll.is_some(),
            spin: Duration::from_micros(u64::from(cfg.busy_poll.unwrap_or(0))),
            rxq_ovfl: cfg.rxq_ovfl,
            rx_timestamps: cfg.rx_timestamps,
            tx_timestamps: cfg.tx_timestamps,
        }
    }
}

impl Io for SocketIo {
    type Backend = SocketBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<SocketBackend, SetupError> {
        let stamps = self.rx_timestamps || self.tx_timestamps;
        let (recv, send) = match self.batch {
            // recvfrom carries no control message: a stamped batch of one is a recvmmsg.
            1 if stamps => (RecvMode::Batch, SendMode::Single),
            1 => (RecvMode::Single, SendMode::Single),
            _ => (RecvMode::Batch, SendMode::Batch),
        };
        let waiter = if self.busy {
            let ep = Epoll::new(1)?;
            ep.add_readable(seat.socket.as_raw_fd(), 0)?;
            if let Some(p) = &seat.epoll {
                ep.set_busy_poll_params(p)?;
            }
            Some(ep)
        } else {
            None
        };
        Ok(SocketBackend {
            sock: seat.socket.clone(),
            slots: Batch::new(self.batch, SLOT_SIZE)
                .with_recv(recv)
                .with_send(send)
                .with_control(self.rxq_ovfl || stamps),
            max: self.batch,
            busy: self.busy,
            stamps,
            tx: self.tx_timestamps.then(|| TxStamps::new(self.batch)),
            idle: false,
            waiter,
            spin: self.spin,
            idle_since: Instant::now(),
        })
    }
}

/// One worker's socket and its batch of slots.
pub struct SocketBackend {
    sock: Arc<UdpSock>,
    slots: Batch,
    max: usize,
    busy: bool,
    /// The socket stamps arrivals (SO_TIMESTAMPNS or SO_TIMESTAMPING): each request
    /// carries its stamp.
    stamps: bool,
    /// Replies sent asking for their transmit stamp, awaited on the error queue.
    tx: Option<TxStamps>,
    /// The last busy poll found nothing: poll with recvfrom until something arrives.
    idle: bool,
    /// Where a busy-polling worker sleeps once idle for `spin` (see the module doc).
    waiter: Option<Epoll>,
    spin: Duration,
    /// When the socket was last found empty after holding something (or the last wait).
    idle_since: Instant,
}

impl Backend for SocketBackend {
    fn recv(&mut self) -> Received {
        let flags = if self.busy { MSG_DONTWAIT } else { 0 };
        let mut r = Received {
            syscalls: 1,
            ..Received::default()
        };
        if self.idle && self.idle_since.elapsed() >= self.spin {
            if let Some(w) = self.waiter.as_mut() {
                r.syscalls += 1;
                if w.wait(IDLE_WAIT).is_err() {
                    r.errors += 1;
                }
                self.idle_since = Instant::now();
            }
        }
        // A busy poll of an empty socket with recvfrom costs less than with recvmmsg, and
        // so does reading the one datagram a quiet server wakes to; the poll after it
        // batches again, so a queue that builds up is read by recvmmsg.
        let max = if self.busy && self.idle { 1 } else { self.max };
        match self.slots.recv_some(&self.sock, max, flags) {
            // No pause between polls: the syscall spaces them, and a pause only delays
            // seeing the next datagram.
            Ok(0) if self.busy => {
                if !self.idle {
                    self.idle_since = Instant::now();
                }
                self.idle = true;
            }
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

    fn reply_stamped(&mut self, i: usize, len: usize, tag: u64) {
        match self.tx.as_mut() {
            Some(tx) => {
                tx.queue(self.slots.queued(), tag);
                self.slots.queue_reply_stamped(i, len);
            }
            None => self.slots.queue_reply(i, len),
        }
    }

    fn flush(&mut self) -> Flushed {
        let f = self.slots.flush(&self.sock, 0);
        if let Some(tx) = self.tx.as_mut() {
            tx.sent_counted(self.slots.refused());
        }
        f
    }

    fn tx_stamps(&mut self) -> TxStamped<'_> {
        match self.tx.as_mut() {
            Some(tx) => tx.read(&self.sock),
            None => TxStamped::default(),
        }
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        match &self.tx {
            Some(tx) => tx.counters(),
            None => &[],
        }
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

    /// A backend of one worker on a fresh loopback socket (a 2 s receive timeout, `opts`
    /// set on it) configured as the naive profile edited by `edit`; and its address.
    fn on_loopback(
        edit: impl FnOnce(&mut ServeConfig),
        opts: impl FnOnce(&UdpSock),
    ) -> (SocketBackend, std::net::SocketAddr) {
        let addr = "127.0.0.1:0".parse().unwrap();
        let sock = UdpSock::new_for(&addr).unwrap();
        sock.bind(&addr).unwrap();
        sock.set_recv_timeout(Duration::from_secs(2)).unwrap();
        opts(&sock);
        let to = sock.local_addr().unwrap();
        let mut cfg = ServeConfig::profile(Profile::Naive, to, 1);
        edit(&mut cfg);
        let seat = WorkerSeat {
            index: 0,
            cpu: None,
            socket: Arc::new(sock),
            epoll: None,
        };
        (SocketIo::new(&cfg).open(&seat).unwrap(), to)
    }

    /// A backend on a loopback socket with `batch` and `rx_timestamps`, fed one datagram.
    fn stamped(batch: usize, rx_timestamps: bool) -> Option<u64> {
        let (mut b, to) = on_loopback(
            |cfg| (cfg.batch, cfg.rxq_ovfl, cfg.rx_timestamps) = (batch, false, rx_timestamps),
            |sock| {
                if rx_timestamps {
                    sock.set_timestamp_ns(true).unwrap();
                }
            },
        );
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

    /// A busy-polling worker spins while its socket is empty for the busy-poll time, then
    /// sleeps in epoll_wait (one more system call), with the parameters the kernel granted.
    #[test]
    fn an_idle_busy_poller_waits_in_epoll_after_its_spin() {
        let addr = "127.0.0.1:0".parse().unwrap();
        let sock = UdpSock::new_for(&addr).unwrap();
        sock.bind(&addr).unwrap();
        sock.set_nonblocking(true).unwrap();
        let to = sock.local_addr().unwrap();
        let cfg = ServeConfig::profile(Profile::Latency, to, 1);
        let mut notes = Vec::new();
        let granted = crate::sockets::epoll_params(50, cfg.batch, &mut notes);
        // Granted as asked, or refused with the errno named (a kernel before 6.9).
        match granted {
            Some(p) => {
                assert_eq!(
                    (p.busy_poll_usecs, p.busy_poll_budget, p.prefer_busy_poll),
                    (50, 8, 1)
                );
                assert!(notes.is_empty(), "{notes:?}");
            }
            None => assert!(notes[0].contains("ENOTTY"), "{notes:?}"),
        }
        let seat = WorkerSeat {
            index: 0,
            cpu: None,
            socket: Arc::new(sock),
            epoll: granted,
        };
        let mut b = SocketIo::new(&cfg).open(&seat).unwrap();
        let empty = b.recv();
        assert_eq!((empty.count, empty.syscalls), (0, 1));
        // Still within the spin: another poll, no wait.
        b.idle_since = Instant::now();
        assert_eq!(b.recv().syscalls, 1);
        // Past it, with a datagram waiting: the epoll_wait returns at once, then the read.
        b.idle_since = Instant::now() - Duration::from_millis(1);
        std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .send_to(b"tock", to)
            .unwrap();
        let r = b.recv();
        assert_eq!((r.count, r.syscalls, r.errors), (1, 2, 0));
        assert_eq!(b.request(0).data(), b"tock");
    }

    /// With transmit stamps on, a reply sent stamped comes back under its tag with the
    /// kernel's time, by the error queue; a plain reply costs nothing and yields nothing.
    #[test]
    fn a_stamped_reply_comes_back_under_its_tag() {
        let (mut b, to) = on_loopback(
            |cfg| (cfg.batch, cfg.rxq_ovfl, cfg.tx_timestamps) = (1, false, true),
            |sock| {
                sock.set_timestamping(firehose_sys::timestamping::TX_ON_REQUEST)
                    .unwrap()
            },
        );
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        for (tagged, tag) in [(false, 0), (true, 42), (false, 0), (true, 43)] {
            client.send_to(b"tick", to).unwrap();
            assert_eq!(b.recv().count, 1);
            let before = wall_ns();
            if tagged {
                b.reply_stamped(0, 4, tag);
            } else {
                b.reply(0, 4);
            }
            assert_eq!(b.flush().sent, 1);
            let after = wall_ns();
            let t = b.tx_stamps();
            if tagged {
                assert_eq!(t.stamps.len(), 1);
                assert_eq!(t.stamps[0].0, tag);
                assert!(t.stamps[0].1 >= before && t.stamps[0].1 <= after);
                assert_eq!(t.syscalls, 1);
            } else {
                assert_eq!((t.stamps.len(), t.syscalls), (0, 0), "nothing awaited");
            }
            let mut back = [0u8; 8];
            assert_eq!(client.recv(&mut back).unwrap(), 4);
        }
        assert_eq!(b.counters(), &[("tx_stamped", 2), ("tx_stamps_missing", 0)]);
    }

    #[test]
    fn requests_carry_the_kernel_arrival_stamp_when_asked() {
        for batch in [1, 64] {
            assert!(stamped(batch, true).is_some(), "batch {batch}");
            assert_eq!(stamped(batch, false), None, "batch {batch}");
        }
    }
}
