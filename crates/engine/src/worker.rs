//! The worker loop: a batch in through the [`Backend`], each request through the
//! [`Handler`] in place, a batch out; the engine's counters from what the backend returns.

use crate::backend::{Backend, Flushed};
use crate::handler::{Handler, Verdict};
use crate::stats::WorkerCounters;
use std::sync::atomic::{AtomicBool, Ordering};

/// Runs until `stop` is set; every counter of `c` is written here and only here. Replies
/// go out in one send per received batch, or every `send_every` replies when that is
/// fewer (a reply carrying a clock reading is sent right after it is written).
pub fn run<B: Backend, H: Handler>(
    backend: &mut B,
    handler: &mut H,
    c: &WorkerCounters,
    stop: &AtomicBool,
    send_every: usize,
) {
    let send_every = if backend.sends_mid_batch() {
        send_every.max(1)
    } else {
        usize::MAX
    };
    while !stop.load(Ordering::Relaxed) {
        let r = backend.recv();
        c.add(&c.syscalls, r.syscalls);
        c.add(&c.recv_errors, r.errors);
        if let Some(d) = r.drops {
            c.rxq_ovfl.store(d, Ordering::Relaxed);
        }
        if r.count == 0 {
            continue;
        }
        // Count the requests before replying, so whoever sees a reply also sees it counted.
        c.add(&c.packets_in, r.count as u64);
        let mut bytes_in = 0;
        let mut errors = 0;
        let mut drops = 0;
        let mut unknown_peer = 0;
        let mut queued = 0;
        let mut sent = Flushed::default();
        for i in 0..r.count {
            let mut req = backend.request(i);
            bytes_in += req.len() as u64;
            if req.truncated() {
                errors += 1;
                continue;
            }
            if req.peer().is_unknown() {
                unknown_peer += 1;
                continue;
            }
            let cap = req.capacity();
            let verdict = handler.handle(&mut req);
            let tag = req.tx_tag();
            match verdict {
                Verdict::Reply(out) if out <= cap => {
                    match tag {
                        Some(t) => backend.reply_stamped(i, out, t),
                        None => backend.reply(i, out),
                    }
                    queued += 1;
                    if queued == send_every && i + 1 < r.count {
                        sent.add(backend.flush());
                        queued = 0;
                    }
                }
                Verdict::Reply(_) | Verdict::Error => errors += 1,
                Verdict::Drop => drops += 1,
            }
        }
        c.add(&c.bytes_in, bytes_in);
        sent.add(backend.flush());
        let t = backend.tx_stamps();
        c.add(&c.syscalls, t.syscalls);
        c.add(&c.recv_errors, t.errors);
        for &(tag, ns) in t.stamps {
            handler.transmitted(tag, ns);
        }
        c.add(&c.packets_out, sent.sent as u64);
        c.add(&c.send_errors, sent.failed as u64);
        c.add(&c.syscalls, sent.syscalls as u64);
        c.add(&c.batches, 1);
        c.add(&c.handler_errors, errors);
        c.add(&c.handler_drops, drops);
        c.add(&c.unknown_peer, unknown_peer);
        c.publish_backend(backend.counters());
        c.publish_handler(handler.counters());
        c.record_batch(r.count);
    }
}

#[cfg(test)]
mod tests {
    //! The seam as a contract: the loop driven by an in-memory backend, no sockets.
    use super::*;
    use crate::backend::{Flushed, Received, Request};
    use crate::handler::Peer;
    use std::collections::VecDeque;
    use std::net::SocketAddr;

    /// Batches of (payload, peer) in; replies collected as (payload, peer) out. Stops
    /// the loop once every batch is consumed. Slots are `cap` bytes, like a UMEM frame.
    struct Fake<'s> {
        pending: VecDeque<Vec<(Vec<u8>, SocketAddr)>>,
        slots: Vec<(Vec<u8>, usize, SocketAddr)>,
        queued: Vec<(usize, usize)>,
        out: Vec<(Vec<u8>, SocketAddr)>,
        refuse_every: Option<usize>,
        /// What the loop asked for, in order: `r0` for request 0, `f2` for a flush of 2.
        log: Vec<String>,
        /// Whether the fake says a flush may come before the batch's last reply.
        mid_batch: bool,
        stop: &'s AtomicBool,
        stats: [(&'static str, u64); 1],
        /// Stamps of the replies sent stamped, handed back by the next `tx_stamps`.
        stamped: Vec<(u64, u64)>,
        handed: Vec<(u64, u64)>,
    }

    impl<'s> Fake<'s> {
        fn new(batches: Vec<Vec<(Vec<u8>, SocketAddr)>>, cap: usize, stop: &'s AtomicBool) -> Self {
            Fake {
                pending: batches.into(),
                slots: (0..8).map(|_| (vec![0; cap], 0, peer(0))).collect(),
                queued: Vec::new(),
                out: Vec::new(),
                refuse_every: None,
                log: Vec::new(),
                mid_batch: true,
                stop,
                stats: [("fake_batches", 0)],
                stamped: Vec::new(),
                handed: Vec::new(),
            }
        }
    }

    impl Backend for Fake<'_> {
        fn recv(&mut self) -> Received {
            let Some(batch) = self.pending.pop_front() else {
                self.stop.store(true, Ordering::Relaxed);
                return Received {
                    syscalls: 1,
                    ..Received::default()
                };
            };
            for (i, (data, from)) in batch.iter().enumerate() {
                let cap = self.slots[i].0.len();
                let n = data.len().min(cap);
                self.slots[i].0[..n].copy_from_slice(&data[..n]);
                self.slots[i].1 = data.len();
                self.slots[i].2 = *from;
            }
            self.stats[0].1 += 1;
            Received {
                count: batch.len(),
                syscalls: 1,
                errors: 0,
                drops: Some(7),
            }
        }

        fn request(&mut self, i: usize) -> Request<'_> {
            self.log.push(format!("r{i}"));
            let (buf, len, from) = &mut self.slots[i];
            // Like AF_XDP: the length of what arrived, which may pass the slot's end.
            // Port 65535 stands for a sender the backend cannot address.
            let peer = match from.port() {
                65535 => Peer::unknown(),
                _ => Peer::from_addr(*from),
            };
            Request::new(buf, *len, peer)
        }

        fn reply(&mut self, i: usize, len: usize) {
            self.queued.push((i, len));
        }

        fn flush(&mut self) -> Flushed {
            self.log.push(format!("f{}", self.queued.len()));
            let mut s = Flushed {
                syscalls: 1,
                ..Flushed::default()
            };
            for (k, (i, len)) in self.queued.drain(..).enumerate() {
                if self.refuse_every.is_some_and(|e| k % e == e - 1) {
                    s.failed += 1;
                    continue;
                }
                let (buf, _, to) = &self.slots[i];
                self.out.push((buf[..len].to_vec(), *to));
                s.sent += 1;
            }
            s
        }

        fn counters(&self) -> &[(&'static str, u64)] {
            &self.stats
        }

        fn reply_stamped(&mut self, i: usize, len: usize, tag: u64) {
            self.log.push(format!("s{tag}"));
            self.stamped.push((tag, 1_000 + tag));
            self.reply(i, len);
        }

        fn tx_stamps(&mut self) -> crate::backend::TxStamped<'_> {
            self.handed = std::mem::take(&mut self.stamped);
            crate::backend::TxStamped {
                stamps: &self.handed,
                syscalls: u64::from(!self.handed.is_empty()),
                errors: 0,
            }
        }

        fn sends_mid_batch(&self) -> bool {
            self.mid_batch
        }
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    /// Upper-cases the request and appends the peer's port; drops "drop"; fails "bad".
    struct Shout;
    impl Handler for Shout {
        fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
            let (buf, len, p) = req.parts();
            match &buf[..len] {
                b"drop" => return Verdict::Drop,
                b"bad" => return Verdict::Error,
                b"huge" => return Verdict::Reply(buf.len() + 1),
                _ => {}
            }
            buf[..len].make_ascii_uppercase();
            let port = p.addr().unwrap().port().to_be_bytes();
            if len + 2 > buf.len() {
                return Verdict::Drop;
            }
            buf[len..len + 2].copy_from_slice(&port);
            Verdict::Reply(len + 2)
        }
    }

    /// Tags each reply with its request's first byte; keeps what `transmitted` says.
    #[derive(Default)]
    struct Tagger(Vec<(u64, u64)>);
    impl Handler for Tagger {
        fn handle(&mut self, req: &mut Request<'_>) -> Verdict {
            let first = req.data()[0];
            if first != b'-' {
                req.want_tx_stamp(u64::from(first));
            }
            Verdict::Reply(req.len())
        }
        fn transmitted(&mut self, tag: u64, tx_time_ns: u64) {
            self.0.push((tag, tx_time_ns));
        }
    }

    #[test]
    fn stamped_replies_are_sent_stamped_and_their_stamps_reach_the_handler() {
        let stop = AtomicBool::new(false);
        let batch = vec![
            (b"a".to_vec(), peer(1)),
            (b"-".to_vec(), peer(2)),
            (b"c".to_vec(), peer(3)),
        ];
        let mut fake = Fake::new(vec![batch], 64, &stop);
        let c = WorkerCounters::default();
        let mut h = Tagger::default();
        run(&mut fake, &mut h, &c, &stop, 1);
        // Tagged replies go by reply_stamped; every send comes before the stamps are read.
        assert_eq!(fake.log, ["r0", "s97", "f1", "r1", "f1", "r2", "s99", "f1"]);
        assert_eq!(h.0, [(97, 1_097), (99, 1_099)]);
        let s = c.snapshot(0, None);
        // recv 1 + 3 sends + one read of the stamps + the last empty recv.
        assert_eq!((s.packets_out, s.syscalls), (3, 1 + 3 + 1 + 1));
    }

    fn drive(fake: &mut Fake<'_>) -> crate::stats::WorkerStats {
        drive_sending_every(fake, usize::MAX)
    }

    fn drive_sending_every(fake: &mut Fake<'_>, send_every: usize) -> crate::stats::WorkerStats {
        let c = WorkerCounters::default();
        run(fake, &mut Shout, &c, fake.stop, send_every);
        c.snapshot(0, None)
    }

    #[test]
    fn replies_go_to_their_peers_and_every_counter_adds_up() {
        let stop = AtomicBool::new(false);
        let batches = vec![
            vec![(b"ab".to_vec(), peer(1)), (b"drop".to_vec(), peer(2))],
            vec![
                (b"bad".to_vec(), peer(3)),
                (b"xyz".to_vec(), peer(4)),
                (b"huge".to_vec(), peer(5)),
            ],
        ];
        let mut fake = Fake::new(batches, 64, &stop);
        let s = drive(&mut fake);
        assert_eq!(
            fake.out,
            vec![
                (b"AB\x00\x01".to_vec(), peer(1)),
                (b"XYZ\x00\x04".to_vec(), peer(4))
            ]
        );
        assert_eq!((s.packets_in, s.packets_out, s.bytes_in), (5, 2, 16));
        assert_eq!((s.batches, s.syscalls), (2, 2 + 2 + 1));
        assert_eq!(
            (s.handler_errors, s.handler_drops),
            (2, 1),
            "bad and huge; drop"
        );
        assert_eq!((s.recv_errors, s.send_errors, s.rxq_ovfl), (0, 0, 7));
        assert_eq!(s.backend.get("fake_batches"), Some(&2));
    }

    #[test]
    fn small_frames_bound_the_reply_and_truncated_requests_are_not_handled() {
        let stop = AtomicBool::new(false);
        // 8-byte slots: "abcdef" + 2 bytes fits exactly, "abcdefg" + 2 does not (the
        // handler drops it), and a 9-byte request arrived cut.
        let batches = vec![vec![
            (b"abcdef".to_vec(), peer(9)),
            (b"abcdefg".to_vec(), peer(9)),
            (b"123456789".to_vec(), peer(9)),
        ]];
        let mut fake = Fake::new(batches, 8, &stop);
        let s = drive(&mut fake);
        assert_eq!(fake.out, vec![(b"ABCDEF\x00\x09".to_vec(), peer(9))]);
        assert_eq!((s.packets_in, s.packets_out), (3, 1));
        assert_eq!((s.handler_errors, s.handler_drops), (1, 1));
    }

    #[test]
    fn a_sender_that_cannot_be_answered_is_counted_apart_from_handler_errors() {
        let stop = AtomicBool::new(false);
        let batch = vec![(b"ab".to_vec(), peer(65535)), (b"cd".to_vec(), peer(3))];
        let mut fake = Fake::new(vec![batch], 64, &stop);
        let s = drive(&mut fake);
        assert_eq!(fake.out, vec![(b"CD\x00\x03".to_vec(), peer(3))]);
        assert_eq!((s.packets_in, s.packets_out), (2, 1));
        assert_eq!((s.unknown_peer, s.handler_errors), (1, 0));
    }

    #[test]
    fn refused_replies_are_send_errors() {
        let stop = AtomicBool::new(false);
        let batch: Vec<_> = (0..6).map(|i| (vec![b'a' + i], peer(i as u16))).collect();
        let mut fake = Fake::new(vec![batch], 64, &stop);
        fake.refuse_every = Some(3);
        let s = drive(&mut fake);
        assert_eq!((s.packets_in, s.packets_out, s.send_errors), (6, 4, 2));
        assert_eq!(fake.out.len(), 4);
    }

    #[test]
    fn a_send_batch_sends_every_n_replies_right_after_the_nth_is_written() {
        let stop = AtomicBool::new(false);
        let batch = vec![
            (b"a".to_vec(), peer(1)),
            (b"b".to_vec(), peer(2)),
            (b"drop".to_vec(), peer(3)),
            (b"c".to_vec(), peer(4)),
            (b"d".to_vec(), peer(5)),
        ];
        let mut fake = Fake::new(vec![batch.clone()], 64, &stop);
        let s = drive_sending_every(&mut fake, 2);
        // Replies 0 and 1 leave before request 2 is read; the dropped request does not
        // count toward the next send; the last send follows the last reply (no empty one).
        assert_eq!(fake.log, ["r0", "r1", "f2", "r2", "r3", "r4", "f2"]);
        assert_eq!((s.packets_in, s.packets_out, s.syscalls), (5, 4, 1 + 2 + 1));
        assert_eq!(fake.out.len(), 4);

        // One send per reply: every reply's send follows it at once.
        let stop = AtomicBool::new(false);
        let mut fake = Fake::new(vec![batch], 64, &stop);
        let s = drive_sending_every(&mut fake, 1);
        assert_eq!(
            fake.log,
            ["r0", "f1", "r1", "f1", "r2", "r3", "f1", "r4", "f1"]
        );
        assert_eq!((s.packets_in, s.packets_out), (5, 4));

        // A backend whose flush gives the batch back (io_uring) sends once per
        // batch whatever is asked: a send mid-batch would leave later slots unreadable.
        let stop = AtomicBool::new(false);
        let batch: Vec<_> = (0..3).map(|i| (vec![b'a' + i], peer(i as u16))).collect();
        let mut fake = Fake::new(vec![batch], 64, &stop);
        fake.mid_batch = false;
        let s = drive_sending_every(&mut fake, 1);
        assert_eq!(fake.log, ["r0", "r1", "r2", "f3"]);
        assert_eq!(s.packets_out, 3);
    }
}
