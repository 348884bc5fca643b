//! One worker's AF_XDP path: its queue's driver ([`XdpQueue`]) and the kernel UDP socket for
//! what the XDP program passes (fragments, IP options, datagrams the program does not
//! match). A batch holds XSK requests first, then socket requests.
//!
//! Per batch: the driver reaps, refills and takes up to `batch` descriptors (waiting in
//! `poll()` on both sockets when there are none, unless busy polling); each frame is parsed
//! to its UDP payload, and the payload (with the rest of the frame, bounded by the MTU) is
//! lent to the handler, with the arrival time the XDP program wrote in the frame's metadata
//! when the server asked for stamps (converted from CLOCK_TAI; the fallback socket's
//! requests carry SO_TIMESTAMPNS's). A reply is turned into a frame in place
//! ([`firehose_frame::reply_in_place`]) and transmitted from the frame it arrived in;
//! frames not answered go back to the driver. The kick policy is the driver's. The fallback
//! socket is read when the poll says it is readable, and every [`SOCKET_EVERY`] batches
//! under load.

use crate::backend::{Backend, Flushed, Received, Request};
use crate::handler::Peer;
use firehose_frame::{checksums_ok, parse, reply_in_place, Udp};
use firehose_sys::mmsg::{Batch, RecvMode, SendMode};
use firehose_sys::socket::{UdpSock, MSG_DONTWAIT};
use firehose_sys::xdp::prog::{read_stamp, STAMP_META_LEN};
use firehose_sys::xdp::queue::{Wait, XdpQueue};
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
/// How long an idle worker waits in poll() before looking at its stop flag.
const IDLE_WAIT_MS: i32 = 10;
/// Bytes of each received frame loaded ahead of parsing: the headers and a small request's
/// payload (echo's 100 bytes, a DNS query, NTP's 48), which the handler and the reply's
/// checksum read next.
const PREFETCH_BYTES: usize = 256;
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
const BAD_FRAMES: usize = 8;
const BAD_CHECKSUM: usize = 9;
const RX_STAMPED: usize = 10;
const TX_KICKS: usize = 11;

struct Slot {
    addr: u64,
    udp: Udp,
    /// The arrival time from the frame's metadata (CLOCK_REALTIME ns).
    rx_time_ns: Option<u64>,
    /// Length of the reply frame once queued.
    reply: Option<u32>,
}

/// A worker's AF_XDP queue plus its fallback kernel socket.
pub struct XdpBackend {
    queue: XdpQueue,
    slots: Vec<Slot>,
    n_xdp: usize,
    /// XSK slots `0..lent` have been lent to the handler ([`Backend::request`]).
    lent: usize,
    /// XSK slots `0..flushed` went back to the driver (transmitted or recycled) at a flush.
    flushed: usize,
    sock: Arc<UdpSock>,
    sock_batch: Batch,
    n_sock: usize,
    batch: u32,
    mtu: usize,
    batches: u64,
    /// The driver's system calls already reported.
    syscalls_seen: u64,
    /// Drop requests whose IPv4 header or UDP checksum is wrong.
    verify_checksum: bool,
    /// Read the XDP program's arrival stamps (and the fallback socket's).
    stamps: bool,
    counters: [(&'static str, u64); 12],
}

impl XdpBackend {
    /// A worker over `queue` (fill ring already stocked) and the fallback socket `sock`.
    pub(crate) fn new(
        queue: XdpQueue,
        sock: Arc<UdpSock>,
        batch: usize,
        mtu: usize,
        verify_checksum: bool,
        stamps: bool,
    ) -> Self {
        let batch = (batch as u32).clamp(1, queue.xsk().rx.size());
        XdpBackend {
            queue,
            slots: Vec::with_capacity(batch as usize),
            n_xdp: 0,
            lent: 0,
            flushed: 0,
            sock,
            sock_batch: Batch::new(SOCKET_BATCH, SOCKET_SLOT)
                .with_recv(RecvMode::Batch)
                .with_send(SendMode::Batch)
                .with_control(stamps),
            n_sock: 0,
            batch,
            mtu,
            batches: 0,
            syscalls_seen: 0,
            verify_checksum,
            stamps,
            counters: [
                ("xdp_requests", 0),
                ("xdp_replies", 0),
                ("socket_requests", 0),
                ("socket_replies", 0),
                ("xdp_tx_ring_full", 0),
                ("xsk_rx_dropped", 0),
                ("xsk_rx_ring_full", 0),
                ("xsk_fill_ring_empty", 0),
                ("xdp_bad_frames", 0),
                ("xdp_bad_checksum", 0),
                ("xdp_rx_stamped", 0),
                ("xdp_tx_kicks", 0),
            ],
        }
    }

    /// Parses the received frames into slots; a frame that is not a UDP datagram this path
    /// answers (`xdp_bad_frames`), or whose checksums are wrong when verified
    /// (`xdp_bad_checksum`), goes back to the driver. Returns how many were refused. Not
    /// inlined (one call per batch), so a profile names its samples (mk/profile-xdp).
    #[inline(never)]
    fn parse_rx(&mut self) -> u64 {
        // Frames of the last batch that no flush handed back (none when the worker lent
        // every slot before its last flush) go back to the driver, never lost.
        for s in self.slots.drain(self.flushed.min(self.n_xdp)..) {
            self.queue.recycle(s.addr);
        }
        self.slots.clear();
        (self.lent, self.flushed) = (0, 0);
        let mut bad = 0;
        // CLOCK_TAI to CLOCK_REALTIME, read once per batch (a daemon may set it any time).
        let tai_offset = if self.stamps && !self.queue.rx().is_empty() {
            firehose_sys::clock::tai_offset_ns()
        } else {
            0
        };
        // Every frame's first lines are needed below (headers, payload, stamp): ask for all
        // of them at once, so their misses overlap.
        let head = if self.stamps { STAMP_META_LEN } else { 0 };
        self.queue.prefetch_rx(head, PREFETCH_BYTES);
        for i in 0..self.queue.rx().len() {
            let d = self.queue.rx()[i];
            let rx_time_ns = if self.stamps {
                self.take_stamp(d.addr, tai_offset)
            } else {
                None
            };
            let frame = self.queue.data(d.addr, d.len as usize);
            let refused = match parse(frame) {
                Ok(udp) if !self.verify_checksum || checksums_ok(frame, &udp) => {
                    self.slots.push(Slot {
                        addr: d.addr,
                        udp,
                        rx_time_ns,
                        reply: None,
                    });
                    continue;
                }
                Ok(_) => BAD_CHECKSUM,
                Err(_) => BAD_FRAMES,
            };
            self.counters[refused].1 += 1;
            self.queue.recycle(d.addr);
            bad += 1;
        }
        self.n_xdp = self.slots.len();
        bad
    }

    /// The arrival stamp the XDP program left before the frame at `addr`, as system time;
    /// the metadata is wiped once read, so a frame reused without a stamp never shows an
    /// old one.
    fn take_stamp(&mut self, addr: u64, tai_offset: i64) -> Option<u64> {
        // The metadata lies in the frame's headroom (256 bytes in front of the packet).
        if addr % u64::from(self.queue.frame_size()) < STAMP_META_LEN as u64 {
            return None;
        }
        let at = addr - STAMP_META_LEN as u64;
        let meta = self.queue.frame_mut(at);
        let tai = read_stamp(meta)?;
        meta[..STAMP_META_LEN].fill(0);
        self.counters[RX_STAMPED].1 += 1;
        u64::try_from(i128::from(tai) - i128::from(tai_offset)).ok()
    }

    /// The driver's system calls since the last call.
    fn new_syscalls(&mut self) -> u64 {
        let now = self.queue.counters().syscalls;
        let d = now - self.syscalls_seen;
        self.syscalls_seen = now;
        d
    }

    fn refresh_stats(&mut self) {
        if let Ok(s) = self.queue.stats() {
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
        let wait = Wait::Poll {
            ms: IDLE_WAIT_MS,
            also: Some(self.sock.as_raw_fd()),
        };
        let got = self.queue.receive(self.batch, wait);
        r.errors = self.parse_rx();
        let read_socket = got.also_ready || self.batches.is_multiple_of(SOCKET_EVERY);
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
        if got.idle || self.batches.is_multiple_of(STATS_EVERY) {
            self.refresh_stats();
        }
        r.syscalls += self.new_syscalls();
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
            let stamp = if self.stamps {
                self.sock_batch.rx_timestamp_ns(j)
            } else {
                None
            };
            let (buf, view) = self.sock_batch.slot_and_peer(j);
            return Request::new(buf, len, Peer::from_view(view))
                .cut(truncated)
                .with_rx_time_ns(stamp);
        }
        self.lent = self.lent.max(i + 1);
        let s = &self.slots[i];
        let frame = self.queue.frame_mut(s.addr);
        let start = s.udp.payload();
        // The reply must fit the frame and leave the interface unfragmented.
        let mtu_room = (self.mtu + s.udp.l3).saturating_sub(start);
        let end = frame.len().min(start + mtu_room);
        let stamp = s.rx_time_ns;
        Request::new(
            &mut frame[start..end],
            s.udp.len,
            Peer::from_addr(s.udp.src),
        )
        .with_rx_time_ns(stamp)
    }

    fn reply(&mut self, i: usize, len: usize) {
        if i >= self.n_xdp {
            self.sock_batch.queue_reply(i - self.n_xdp, len);
            return;
        }
        let s = &mut self.slots[i];
        let frame = self.queue.frame_mut(s.addr);
        s.reply = Some(reply_in_place(frame, &s.udp, len, TTL) as u32);
    }

    /// Sends the replies of the slots lent since the last flush; later slots of the batch
    /// stay readable (their frames are still the backend's), so the worker may flush
    /// mid-batch (`--send-batch`: NTP's transmit timestamp goes out right after it is read).
    fn flush(&mut self) -> Flushed {
        let mut out = Flushed::default();
        let upto = self.lent.min(self.n_xdp);
        for i in self.flushed..upto {
            let s = &self.slots[i];
            match s.reply {
                Some(len) if self.queue.transmit(s.addr, len) => {}
                Some(_) => {
                    // The tx ring is full: the reply is dropped, its frame reused.
                    self.queue.recycle(s.addr);
                    out.failed += 1;
                    self.counters[TX_RING_FULL].1 += 1;
                }
                None => self.queue.recycle(s.addr),
            }
        }
        self.flushed = self.flushed.max(upto);
        let k = self.queue.flush();
        out.sent += k as usize;
        self.counters[XDP_REPLIES].1 += k as u64;
        self.counters[TX_KICKS].1 = self.queue.counters().tx_kicks;
        if self.n_sock > 0 {
            // Sends what is queued; the socket slots stay readable until the next receive.
            let f = self.sock_batch.flush(&self.sock, 0);
            out.sent += f.sent;
            out.failed += f.failed;
            out.syscalls += f.syscalls;
            self.counters[SOCKET_REPLIES].1 += f.sent as u64;
        }
        out.syscalls += self.new_syscalls() as usize;
        out
    }

    fn sends_mid_batch(&self) -> bool {
        // A flush hands back only the frames of slots already lent (see flush).
        true
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        &self.counters
    }
}
