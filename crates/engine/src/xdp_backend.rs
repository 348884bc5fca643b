//! One worker's AF_XDP path: its queue's socket, a free list of UMEM frames, and the
//! kernel UDP socket for what the XDP program passes (fragments, IP options, datagrams the
//! program does not match). A batch holds XSK requests first, then socket requests.
//!
//! Per batch: reap the completion ring into the free list, top up the fill ring, take up to
//! `batch` descriptors from the rx ring, parse each frame to its UDP payload and lend the
//! payload (and the rest of the frame, bounded by the MTU) to the handler. A reply is turned
//! into a frame in place ([`firehose_frame::reply_in_place`]) and its descriptor goes on the
//! tx ring; frames not answered go back to the free list. The kernel is entered only when a
//! ring asks for a wakeup, when idle (poll on both sockets), or always under busy polling.
//! The fallback socket is read when the poll says it is readable, and every
//! [`SOCKET_EVERY`] batches under load.

use crate::backend::{Backend, Flushed, Received, Request};
use crate::handler::Peer;
use crate::xdp_io::XdpConfig;
use firehose_frame::{parse, reply_in_place, Udp};
use firehose_sys::epoll::poll_readable;
use firehose_sys::mmsg::{Batch, RecvMode, SendMode};
use firehose_sys::socket::{UdpSock, MSG_DONTWAIT};
use firehose_sys::xdp::ring::Desc;
use firehose_sys::xdp::xsk::Xsk;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Under load, the fallback socket is read once per this many batches.
pub const SOCKET_EVERY: u64 = 16;
/// Slot size for the fallback socket: any datagram fits.
const SOCKET_SLOT: usize = 65536;
/// Slots for the fallback socket per batch.
const SOCKET_BATCH: usize = 8;
/// Kernel socket statistics are read once per this many batches (a getsockopt).
const STATS_EVERY: u64 = 1024;
/// TTL / hop limit of replies.
const TTL: u8 = 64;

// Indices into the counters array.
const XDP_REQUESTS: usize = 0;
const XDP_REPLIES: usize = 1;
const SOCKET_REQUESTS: usize = 2;
const SOCKET_REPLIES: usize = 3;
const TX_RING_FULL: usize = 4;
const XSK_RX_DROPPED: usize = 5;
const XSK_RX_RING_FULL: usize = 6;
const XSK_FILL_EMPTY: usize = 7;

struct Slot {
    addr: u64,
    udp: Udp,
    /// Length of the reply frame once queued.
    reply: Option<u32>,
}

/// A worker's AF_XDP socket plus its fallback kernel socket.
pub struct XdpBackend {
    xsk: Xsk,
    free: Vec<u64>,
    slots: Vec<Slot>,
    n_xdp: usize,
    sock: Arc<UdpSock>,
    sock_batch: Batch,
    n_sock: usize,
    batch: usize,
    busy: bool,
    mtu: usize,
    batches: u64,
    /// Frames submitted for transmission and not yet completed.
    tx_inflight: usize,
    /// Kicks per transmit batch: copy mode sends at most 32 frames per sendto.
    kicks_per_32: bool,
    counters: [(&'static str, u64); 8],
}

impl XdpBackend {
    /// `free` holds the frames not already on the fill ring.
    pub(crate) fn new(
        xsk: Xsk,
        free: Vec<u64>,
        sock: Arc<UdpSock>,
        cfg: &XdpConfig,
        mtu: usize,
    ) -> Self {
        let xsk_zc = xsk.zerocopy();
        let batch = cfg.batch.clamp(1, xsk.rx.size() as usize);
        let mut b = XdpBackend {
            xsk,
            free,
            slots: Vec::with_capacity(batch),
            n_xdp: 0,
            sock,
            sock_batch: Batch::new(SOCKET_BATCH, SOCKET_SLOT)
                .with_recv(RecvMode::Batch)
                .with_send(SendMode::Batch),
            n_sock: 0,
            batch,
            busy: cfg.busy_poll.is_some(),
            mtu,
            batches: 0,
            tx_inflight: 0,
            kicks_per_32: !xsk_zc,
            counters: [
                ("xdp_requests", 0),
                ("xdp_replies", 0),
                ("socket_requests", 0),
                ("socket_replies", 0),
                ("xdp_tx_ring_full", 0),
                ("xsk_rx_dropped", 0),
                ("xsk_rx_ring_full", 0),
                ("xsk_fill_ring_empty", 0),
            ],
        };
        b.refill();
        b
    }

    /// Completed transmissions back to the free list.
    fn reap(&mut self) {
        let n = self.xsk.reap(&mut self.free);
        self.tx_inflight -= n as usize;
    }

    /// Free frames onto the fill ring, as many as it takes.
    fn refill(&mut self) {
        self.xsk.refill(&mut self.free);
    }

    /// Waits up to 10 ms for the XSK or the fallback socket (1 ms while transmissions are
    /// outstanding, which copy mode sends only when kicked). The poll is also the rx
    /// wakeup the fill ring may ask for. Returns syscalls made and which of (XSK, socket)
    /// became readable.
    fn wait(&mut self) -> (u64, [bool; 2]) {
        let mut calls = 1;
        let outstanding = self.tx_outstanding();
        if outstanding > 0 {
            let _ = self.xsk.kick_tx();
            calls += 1;
        }
        let timeout = if outstanding > 0 { 1 } else { 10 };
        let ready = poll_readable([self.xsk.as_raw_fd(), self.sock.as_raw_fd()], timeout)
            .unwrap_or([false, true]);
        (calls, ready)
    }

    /// Frames on the tx or completion ring, not yet back on the free list or fill ring.
    fn tx_outstanding(&self) -> usize {
        self.tx_inflight
    }

    fn take_rx(&mut self) -> u64 {
        let n = self.xsk.rx.available(self.batch as u32);
        let mut bad = 0;
        self.slots.clear();
        for i in 0..n {
            let d = self.xsk.rx.read(i);
            match parse(self.xsk.umem.data(d.addr, d.len as usize)) {
                Ok(udp) => self.slots.push(Slot {
                    addr: d.addr,
                    udp,
                    reply: None,
                }),
                Err(_) => {
                    self.free.push(d.addr);
                    bad += 1;
                }
            }
        }
        self.xsk.rx.release(n);
        self.n_xdp = self.slots.len();
        bad
    }

    fn refresh_stats(&mut self) {
        if let Ok(s) = self.xsk.stats() {
            self.counters[XSK_RX_DROPPED].1 = s.rx_dropped;
            self.counters[XSK_RX_RING_FULL].1 = s.rx_ring_full;
            self.counters[XSK_FILL_EMPTY].1 = s.rx_fill_ring_empty_descs;
        }
    }
}

impl Backend for XdpBackend {
    fn recv(&mut self) -> Received {
        let mut r = Received::default();
        self.batches += 1;
        self.reap();
        self.refill();
        if self.busy {
            // Preferred busy polling: the syscall runs the driver's poll on this CPU.
            let _ = self.xsk.kick_rx();
            r.syscalls += 1;
        }
        r.errors = self.take_rx();
        let mut read_socket = self.batches.is_multiple_of(SOCKET_EVERY);
        let mut quiet = false;
        if self.n_xdp == 0 && !self.busy {
            let (calls, [xsk, sock]) = self.wait();
            r.syscalls += calls;
            read_socket |= sock;
            quiet = !xsk && !sock;
            r.errors += self.take_rx();
        }
        self.n_sock = 0;
        if read_socket {
            r.syscalls += 1;
            match self
                .sock_batch
                .recv_some(&self.sock, SOCKET_BATCH, MSG_DONTWAIT)
            {
                Ok(n) => self.n_sock = n,
                Err(_) => r.errors += 1,
            }
        }
        if quiet || self.batches.is_multiple_of(STATS_EVERY) {
            self.refresh_stats();
        }
        self.counters[XDP_REQUESTS].1 += self.n_xdp as u64;
        self.counters[SOCKET_REQUESTS].1 += self.n_sock as u64;
        r.count = self.n_xdp + self.n_sock;
        r
    }

    fn request(&mut self, i: usize) -> Request<'_> {
        if i >= self.n_xdp {
            let j = i - self.n_xdp;
            let len = self.sock_batch.len(j);
            let truncated = self.sock_batch.truncated(j);
            let (buf, view) = self.sock_batch.slot_and_peer(j);
            return Request::new(buf, len, Peer::from_view(view)).cut(truncated);
        }
        let s = &self.slots[i];
        let frame = self.xsk.umem.frame_mut(s.addr);
        let start = s.udp.payload();
        // The reply must fit the frame and leave the interface unfragmented.
        let mtu_room = (self.mtu + s.udp.l3).saturating_sub(start);
        let end = frame.len().min(start + mtu_room);
        Request::new(
            &mut frame[start..end],
            s.udp.len,
            Peer::from_addr(s.udp.src),
        )
    }

    fn reply(&mut self, i: usize, len: usize) {
        if i >= self.n_xdp {
            self.sock_batch.queue_reply(i - self.n_xdp, len);
            return;
        }
        let s = &mut self.slots[i];
        let frame = self.xsk.umem.frame_mut(s.addr);
        s.reply = Some(reply_in_place(frame, &s.udp, len, TTL) as u32);
    }

    fn flush(&mut self) -> Flushed {
        let mut out = Flushed::default();
        let want = self.slots.iter().filter(|s| s.reply.is_some()).count() as u32;
        let room = self.xsk.tx.free(want);
        let mut k = 0;
        for s in self.slots.drain(..) {
            match s.reply {
                Some(len) if k < room => {
                    self.xsk.tx.write(
                        k,
                        Desc {
                            addr: s.addr,
                            len,
                            options: 0,
                        },
                    );
                    k += 1;
                }
                Some(_) => {
                    self.free.push(s.addr);
                    out.failed += 1;
                    self.counters[TX_RING_FULL].1 += 1;
                }
                None => self.free.push(s.addr),
            }
        }
        self.n_xdp = 0;
        if k > 0 {
            self.xsk.tx.submit(k);
            out.sent += k as usize;
            self.counters[XDP_REPLIES].1 += k as u64;
            self.tx_inflight += k as usize;
            if self.busy || self.xsk.tx.needs_wakeup() || !self.xsk.uses_need_wakeup() {
                let kicks = if self.kicks_per_32 { k.div_ceil(32) } else { 1 };
                for _ in 0..kicks {
                    // A refused kick leaves the frames on the ring for the next one.
                    let _ = self.xsk.kick_tx();
                }
                out.syscalls += kicks as usize;
            }
        }
        if self.n_sock > 0 {
            let f = self.sock_batch.flush(&self.sock, 0);
            out.sent += f.sent;
            out.failed += f.failed;
            out.syscalls += f.syscalls;
            self.counters[SOCKET_REPLIES].1 += f.sent as u64;
            self.n_sock = 0;
        }
        out
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        &self.counters
    }
}
