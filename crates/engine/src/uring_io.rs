//! The io_uring backend: per worker one [`DgramRing`] on the worker's own socket (its
//! SO_REUSEPORT socket, as on the socket path), keeping each sender's address; the
//! handler's reply is written over the request in its provided buffer and sent from there
//! by SEND with that address, all replies of a batch in one io_uring_enter (the buffer life
//! cycle is the driver's contract, [`firehose_sys::uring`]).
//!
//! With `rx_timestamps` (NTP's receive timestamp; the socket has SO_TIMESTAMPNS, set with
//! the other socket options) the ring reserves control room in each buffer and each request
//! carries the kernel's arrival stamp, as on the socket path.
//!
//! With `tx_timestamps` (NTP's interleaved mode; the socket has SO_TIMESTAMPING's
//! TX_ON_REQUEST, set with the other socket options) a reply the handler wants stamped
//! leaves by IORING_OP_SENDMSG with its stamp request and a key of its own
//! (`DgramRing::reply_stamped`: SCM_TS_OPT_ID, Linux 6.13+), and after each batch's flush
//! the socket's error queue is read as on the socket path ([`crate::tx_stamps`]). A
//! kernel that refuses a key in the send (EINVAL) leaves the path without transmit stamps,
//! said in the backend's notes with the errno: every answer is then basic.
//!
//! The ring is created in [`Io::open`], inside the worker's thread after pinning, so
//! IORING_SETUP_SINGLE_ISSUER holds and the ring's memory is first touched on its CPU. A
//! kernel that refuses io_uring (kernel.io_uring_disabled, seccomp, a kernel before 6.0
//! without multishot RECVMSG) stops the start with that errno.

use crate::backend::{
    Backend, BackendApplied, Flushed, Io, Received, Request, TxStamped, WorkerSeat,
};
use crate::config::ServeConfig;
use crate::handler::Peer;
use crate::tx_stamps::TxStamps;
use firehose_sys::uring::{DgramConfig, DgramRing, UringSetup, STAMP_ROOM};
use firehose_sys::SetupError;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

/// Provided buffers per worker (at least twice the batch): room for the datagrams that
/// arrive while a batch is handled.
pub const BUFFERS: u16 = 256;
/// Each provided buffer holds the header, the sender's address, the control room of a
/// stamped ring and any UDP datagram (IPv6 loopback carries up to 65527 bytes), so every
/// reply up to 64 KiB fits in place. Only the pages a datagram touches become resident.
pub const BUFFER_SIZE: usize = 65536 + 64 + STAMP_ROOM;
/// Longest wait in the kernel before the loop looks at its stop flag, as the socket
/// path's receive timeout.
const WAIT: Duration = Duration::from_millis(100);

// Indices into the backend's counters.
const RING_EMPTY: usize = 0;
const ARMS: usize = 1;
const RECV_ERRORS: usize = 2;

/// The io_uring path as configured.
#[derive(Debug, Clone)]
pub struct UringIo {
    setup: UringSetup,
    batch: usize,
    busy: bool,
    /// Requests carry the kernel's arrival stamp (control room in every buffer).
    stamps: bool,
    /// Stamped replies carry their stamp request and key (the kernel takes keys in sends).
    tx_stamps: bool,
    /// Why transmit stamps were asked for and are off: the kernel's refusal.
    tx_refused: Option<String>,
}

impl UringIo {
    /// The io_uring path for `cfg`, with the ring flags of `setup`; busy polling
    /// (`--busy-poll`) makes workers look at the completion queue without sleeping.
    pub fn new(cfg: &ServeConfig, setup: UringSetup) -> Self {
        let refused = if cfg.tx_timestamps {
            firehose_sys::timestamping::key_per_send().err()
        } else {
            None
        };
        UringIo {
            setup,
            batch: cfg.batch.clamp(1, 4096),
            busy: cfg.busy_poll.is_some(),
            stamps: cfg.rx_timestamps || cfg.tx_timestamps,
            tx_stamps: cfg.tx_timestamps && refused.is_none(),
            tx_refused: refused.map(|e| {
                format!("transmit stamps off, every answer basic: the kernel refused a stamp's key in the send: {e}")
            }),
        }
    }

    /// Whether stamped replies come back with the kernel's transmit stamp.
    pub fn tx_stamps(&self) -> bool {
        self.tx_stamps
    }

    /// The ring of one worker: at least twice the batch in buffers, names kept, a batch of
    /// replies per flush.
    fn ring(&self) -> DgramConfig {
        DgramConfig {
            buffers: BUFFERS.max((self.batch * 2).min(32768) as u16),
            buffer_size: BUFFER_SIZE,
            names: true,
            control: if self.stamps { STAMP_ROOM } else { 0 },
            sends: self.batch,
            ..DgramConfig::default()
        }
    }
}

impl Io for UringIo {
    type Backend = UringBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<UringBackend, SetupError> {
        let ring = DgramRing::new(vec![seat.socket.as_raw_fd()], &self.ring(), &self.setup)?;
        Ok(UringBackend {
            ring,
            sock: seat.socket.clone(),
            batch: self.batch,
            wait: if self.busy { Duration::ZERO } else { WAIT },
            queued: 0,
            tx: self.tx_stamps.then(|| TxStamps::new(self.batch)),
            counters: [
                ("uring_buffer_ring_empty", 0),
                ("uring_recv_arms", 0),
                ("uring_recv_errors", 0),
                ("tx_stamped", 0),
                ("tx_stamps_missing", 0),
            ],
        })
    }

    fn applied(&self) -> Option<BackendApplied> {
        let mut settings = BTreeMap::new();
        settings.insert("setup_flags".into(), self.setup.flags());
        let buffers = self.ring().buffers.clamp(2, 32768).next_power_of_two();
        settings.insert("buffers".into(), buffers.to_string());
        settings.insert("buffer_size".into(), BUFFER_SIZE.to_string());
        settings.insert("batch".into(), self.batch.to_string());
        let wait = if self.busy {
            "busy poll"
        } else {
            "io_uring_enter"
        };
        settings.insert("wait".into(), wait.into());
        let stamps = match (self.stamps, self.tx_stamps) {
            (true, false) => "kernel (SO_TIMESTAMPNS, control room in each buffer)",
            (true, true) => "kernel (SO_TIMESTAMPING, control room in each buffer)",
            (false, _) => "off",
        };
        settings.insert("rx_timestamps".into(), stamps.into());
        let tx = if self.tx_stamps {
            "kernel (SO_TIMESTAMPING asked per reply by IORING_OP_SENDMSG, keyed by SCM_TS_OPT_ID; read from the error queue)"
        } else {
            "off"
        };
        settings.insert("tx_timestamps".into(), tx.into());
        Some(BackendApplied {
            name: "io_uring".into(),
            settings,
            notes: self.tx_refused.iter().cloned().collect(),
        })
    }
}

/// One worker's ring.
pub struct UringBackend {
    ring: DgramRing,
    /// Keeps the socket the ring reads open for as long as the ring lives; its error
    /// queue holds the transmit stamps.
    sock: Arc<firehose_sys::socket::UdpSock>,
    batch: usize,
    /// How long a receive may sleep in the kernel (zero when busy polling).
    wait: Duration,
    queued: usize,
    /// Stamped replies awaited (with `tx_timestamps`).
    tx: Option<TxStamps>,
    /// The ring's counters, then `tx_stamped` and `tx_stamps_missing` when stamping.
    counters: [(&'static str, u64); 5],
}

impl Backend for UringBackend {
    fn recv(&mut self) -> Received {
        let before = self.ring.stats;
        let count = match self.ring.poll(self.wait) {
            Ok(_) => self.ring.take(self.batch),
            Err(_) => {
                return Received {
                    syscalls: 1,
                    errors: 1,
                    ..Received::default()
                }
            }
        };
        let s = self.ring.stats;
        self.counters[RING_EMPTY].1 = s.buffer_ring_empty;
        self.counters[ARMS].1 = s.arms;
        self.counters[RECV_ERRORS].1 = s.recv_errors;
        Received {
            count,
            syscalls: s.enters - before.enters,
            errors: s.recv_errors - before.recv_errors,
            drops: None,
        }
    }

    fn request(&mut self, i: usize) -> Request<'_> {
        let d = self.ring.datagram(i);
        let truncated = d.truncated();
        let peer = d.peer.map_or(Peer::unknown(), Peer::from_addr);
        let stamp = d.rx_time_ns;
        Request::new(d.buf, d.len, peer)
            .cut(truncated)
            .with_rx_time_ns(stamp)
    }

    fn reply(&mut self, i: usize, len: usize) {
        self.ring.reply(i, len);
        self.queued += 1;
    }

    fn reply_stamped(&mut self, i: usize, len: usize, tag: u64) {
        let Some(tx) = self.tx.as_mut() else {
            return self.reply(i, len);
        };
        let key = tx.next_key();
        if self.ring.reply_stamped(i, len, key) {
            tx.queue(i, tag);
        }
        self.queued += 1;
    }

    fn flush(&mut self) -> Flushed {
        let queued = std::mem::take(&mut self.queued);
        let f = self.ring.flush();
        if let Some(tx) = self.tx.as_mut() {
            match f {
                Ok(_) => tx.sent_given(self.ring.refused_keys()),
                Err(_) => tx.forget_queued(),
            }
        }
        f.unwrap_or(Flushed {
            failed: queued,
            syscalls: 1,
            ..Flushed::default()
        })
    }

    fn tx_stamps(&mut self) -> TxStamped<'_> {
        match self.tx.as_mut() {
            Some(tx) => {
                let (syscalls, errors) = tx.collect(&self.sock);
                self.counters[3..].copy_from_slice(tx.counters());
                tx.stamped(syscalls, errors)
            }
            None => TxStamped::default(),
        }
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        let n = if self.tx.is_some() { 5 } else { 3 };
        &self.counters[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;
    use crate::{Server, Verdict};
    use std::net::UdpSocket;

    /// Echoes with the first byte incremented, so a reply is never the request unchanged.
    struct Bump;
    impl crate::Handler for Bump {
        fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
            let (buf, len, _) = req.parts();
            if len > 0 {
                buf[0] = buf[0].wrapping_add(1);
            }
            Verdict::Reply(len)
        }
    }

    #[test]
    fn two_workers_answer_in_place_and_count_through_the_engine() {
        if let Err(e) = firehose_sys::uring::UringSupport::probe().require("recvmsg") {
            eprintln!("skipped: {e}");
            return;
        }
        for listen in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(client) = UdpSocket::bind(listen) else {
                eprintln!("skipped {listen}: no such loopback");
                continue;
            };
            let mut cfg = ServeConfig::profile(Profile::Reuseport, listen.parse().unwrap(), 2);
            cfg.batch = 16;
            let setup = UringSetup {
                single_issuer: true,
                ..UringSetup::default()
            };
            let srv = Server::start_with(&cfg, UringIo::new(&cfg, setup), |_| Bump).unwrap();
            let b = srv.applied().backend.clone().unwrap();
            assert_eq!(b.name, "io_uring");
            assert_eq!(b.settings["setup_flags"], "SINGLE_ISSUER");
            client
                .set_read_timeout(Some(Duration::from_secs(3)))
                .unwrap();
            let mut buf = [0u8; 2000];
            for i in 0..50u8 {
                let msg = vec![i; 1 + i as usize * 30];
                client.send_to(&msg, srv.local_addr()).unwrap();
                let (n, from) =
                    firehose_sys::retry_interrupted(|| client.recv_from(&mut buf)).unwrap();
                assert_eq!(from, srv.local_addr());
                assert_eq!(n, msg.len());
                assert_eq!(buf[0], i + 1);
                assert_eq!(&buf[1..n], &msg[1..], "{listen} request {i}");
            }
            // The loop counts a batch's replies after sending them: wait for the count.
            let end = std::time::Instant::now() + Duration::from_secs(3);
            let mut t = crate::WorkerStats::total(&srv.worker_stats());
            while t.packets_out < 50 && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
                t = crate::WorkerStats::total(&srv.worker_stats());
            }
            srv.shutdown().expect("no worker failed");
            assert_eq!((t.packets_in, t.packets_out, t.send_errors), (50, 50, 0));
            assert!(
                t.syscalls >= 50,
                "an enter per wake-up at least: {}",
                t.syscalls
            );
            // One client port: one worker of the reuseport group did all the work.
            assert!(t.backend["uring_recv_arms"] >= 1, "{:?}", t.backend);
            assert_eq!(t.backend["uring_buffer_ring_empty"], 0);
        }
    }
}
