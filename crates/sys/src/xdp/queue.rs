//! One AF_XDP queue driven from user space: the driver that every AF_XDP user (the server's
//! workers, the generator, the sink's workers, the flood's threads) runs on, so that frame
//! ownership, ring service and the kick policy are written once.
//!
//! **Frames.** Every UMEM frame is in exactly one place: the driver's free list, the kernel
//! (fill ring, rx ring, tx ring, completion ring), or the caller, who holds a frame from
//! [`XdpQueue::receive`] (a received descriptor) or [`XdpQueue::alloc`] until it hands it
//! back with [`XdpQueue::recycle`] or [`XdpQueue::transmit`]. Nothing is copied: a server
//! writes its reply over the request in the received frame and transmits that frame.
//!
//! **Ring service.** Each receive first reaps the completion ring into the free list and tops
//! the fill ring up from it (a packet that finds the fill ring empty is dropped and counted
//! by the kernel as `rx_fill_ring_empty_descs`). The received descriptors are copied out and
//! their rx slots released at once, so the kernel can reuse the slots while the caller works.
//!
//! **Kicks.** The kernel is entered only when it has to be:
//! - transmit: after [`XdpQueue::flush`] publishes the tx ring, a zero-length `sendto` when
//!   the ring asks (`needs_wakeup`), always without `XDP_USE_NEED_WAKEUP`, and always when
//!   busy polling. In copy mode the kernel moves at most [`COPY_TX_BATCH`] frames per call
//!   (`TX_BATCH_SIZE` in net/xdp/xsk.c), or the tx ring's size where it took
//!   XDP_MAX_TX_SKB_BUDGET ([`Xsk::tx_budget`]), and answers EAGAIN while more remain, so the driver
//!   kicks again while the kernel's consumer index advances and the ring is not empty; a
//!   kick that moves nothing (device queue full, ENOBUFS) ends the round and what is left
//!   goes with the next flush or wait. In zero-copy mode one wakeup starts the driver.
//! - receive: a zero-length `recvfrom` before each receive when busy polling (it runs the
//!   driver's poll on this CPU); otherwise, when the rx ring is empty, `poll()` on the socket
//!   ([`Wait::Poll`]), which also wakes a driver that stopped for an empty fill ring, or a
//!   `recvfrom` when the fill ring asks and the caller does not wait.
//!
//! The kernel's counters for the socket (`XDP_STATISTICS`) are read with
//! [`XdpQueue::stats`]; the driver's own (system calls, kicks, a full tx ring) with
//! [`XdpQueue::counters`].

use super::ring::Desc;
use super::xsk::{Xsk, XskStats};
use crate::epoll::poll_readable;
use crate::SysResult;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};

pub use super::xsk::COPY_TX_BATCH;

/// How [`XdpQueue::receive`] waits when the rx ring is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Return at once (the caller waits elsewhere, or spins).
    Never,
    /// `poll()` the socket, and `also` (e.g. a fallback UDP socket) when given, for up to
    /// `ms` milliseconds. Busy polling never waits.
    Poll { ms: i32, also: Option<RawFd> },
}

/// What one [`XdpQueue::receive`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Descriptors now in [`XdpQueue::rx`].
    pub count: u32,
    /// The `also` descriptor of [`Wait::Poll`] became readable.
    pub also_ready: bool,
    /// The receive waited and nothing at all became readable.
    pub idle: bool,
}

/// What the driver did, cumulative since the queue was made.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueCounters {
    /// Descriptors taken from the rx ring.
    pub received: u64,
    /// Descriptors published on the tx ring.
    pub transmitted: u64,
    /// Frames back from the completion ring (the kernel is done sending them).
    pub completed: u64,
    /// Every system call the driver made: kicks and waits.
    pub syscalls: u64,
    /// Zero-length `sendto` calls.
    pub tx_kicks: u64,
    /// Zero-length `recvfrom` calls.
    pub rx_kicks: u64,
    /// `poll()` calls.
    pub waits: u64,
    /// Transmits refused because the tx ring had no free slot.
    pub tx_ring_full: u64,
    /// Kicks after which the kernel had taken nothing off the tx ring (device busy).
    pub tx_stalls: u64,
}

/// One AF_XDP socket (one queue of one interface) with its frames. See the module doc.
pub struct XdpQueue {
    xsk: Xsk,
    /// Frames owned by the driver and unused. Allocation and refill take from the back
    /// (the most recently used frame is the one most likely still in cache);
    /// [`XdpQueue::alloc_oldest`] takes from the front.
    free: VecDeque<u64>,
    /// The descriptors of the last receive.
    rx: Vec<Desc>,
    /// Descriptors written to the tx ring and not yet published.
    tx_written: u32,
    /// Published on the tx ring and not yet back on the completion ring.
    in_flight: u32,
    copy_mode: bool,
    busy_poll: bool,
    counters: QueueCounters,
}

impl XdpQueue {
    /// Takes over `xsk` with every UMEM frame free (nothing on the fill ring yet: call
    /// [`XdpQueue::refill`] before traffic can arrive). `busy_poll` when the socket was set
    /// up for preferred busy polling: then every receive and flush enters the kernel.
    pub fn new(xsk: Xsk, busy_poll: bool) -> XdpQueue {
        let frames = xsk.umem.frames();
        let free = (0..frames).map(|i| xsk.umem.frame_addr(i)).collect();
        XdpQueue {
            copy_mode: !xsk.zerocopy(),
            rx: Vec::with_capacity(xsk.rx.size() as usize),
            xsk,
            free,
            tx_written: 0,
            in_flight: 0,
            busy_poll,
            counters: QueueCounters::default(),
        }
    }

    /// The socket (its fd, what zero-copy the kernel granted, its ring sizes).
    pub fn xsk(&self) -> &Xsk {
        &self.xsk
    }

    /// True when the kernel copies frames (no zero-copy): transmits go at most
    /// [`Xsk::tx_budget`] per kick.
    pub fn copy_mode(&self) -> bool {
        self.copy_mode
    }

    /// The driver's counters.
    pub fn counters(&self) -> QueueCounters {
        self.counters
    }

    /// The kernel's counters for this socket (XDP_STATISTICS, one getsockopt).
    pub fn stats(&self) -> SysResult<XskStats> {
        self.xsk.stats()
    }

    /// Frames the driver holds unused.
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Frames published for transmission and not yet completed, plus those written and
    /// not yet published.
    pub fn in_flight(&self) -> u32 {
        self.in_flight + self.tx_written
    }

    /// Moves frames the kernel finished sending (completion ring) to the free list.
    pub fn reap(&mut self) -> u32 {
        let comp = &mut self.xsk.comp;
        let n = comp.available(comp.size());
        for i in 0..n {
            self.free.push_back(comp.read(i));
        }
        comp.release(n);
        self.in_flight = self.in_flight.saturating_sub(n);
        self.counters.completed += n as u64;
        n
    }

    /// Hands free frames to the kernel for receiving (fill ring), as many as fit.
    pub fn refill(&mut self) -> u32 {
        let n = self.xsk.fill.free(self.free.len() as u32);
        for i in 0..n {
            let addr = self.free.pop_back().expect("n <= free.len()");
            self.xsk.fill.write(i, addr);
        }
        self.xsk.fill.submit(n);
        n
    }

    /// Reaps, refills, and takes up to `max` received descriptors into [`XdpQueue::rx`];
    /// when none are there, waits as `wait` says and looks again. The frames are the
    /// caller's until recycled or transmitted.
    pub fn receive(&mut self, max: u32, wait: Wait) -> Received {
        self.reap();
        self.refill();
        if self.busy_poll {
            // Preferred busy polling: this call runs the driver's poll on this CPU.
            self.kick_rx();
        }
        let mut r = Received {
            count: self.take(max),
            ..Received::default()
        };
        if r.count > 0 || self.busy_poll {
            return r;
        }
        match wait {
            Wait::Poll { ms, also } => {
                let [xsk, other] = self.wait(ms, also);
                r.also_ready = other;
                r.idle = !xsk && !other;
                r.count = self.take(max);
            }
            Wait::Never => {
                if self.xsk.uses_need_wakeup() && self.xsk.fill.needs_wakeup() {
                    self.kick_rx();
                }
            }
        }
        r
    }

    fn take(&mut self, max: u32) -> u32 {
        self.rx.clear();
        let ring = &mut self.xsk.rx;
        let n = ring.available(max);
        for i in 0..n {
            self.rx.push(ring.read(i));
        }
        ring.release(n);
        self.counters.received += n as u64;
        n
    }

    /// Waits up to `ms` for the socket or `also`; first kicks out frames still on the tx
    /// ring (and then waits at most 1 ms, so they are retried soon). Returns which became
    /// readable; a failed poll reports `also` readable so that its owner looks.
    pub fn wait(&mut self, ms: i32, also: Option<RawFd>) -> [bool; 2] {
        let mut ms = ms;
        if self.xsk.tx.unconsumed() > 0 {
            self.kick_tx();
            ms = ms.min(1);
        }
        self.counters.waits += 1;
        self.counters.syscalls += 1;
        let fd = self.xsk.as_raw_fd();
        match also {
            Some(other) => poll_readable([fd, other], ms).unwrap_or([false, true]),
            None => {
                let [x] = poll_readable([fd], ms).unwrap_or([false]);
                [x, false]
            }
        }
    }

    /// The descriptors of the last receive.
    pub fn rx(&self) -> &[Desc] {
        &self.rx
    }

    /// Starts loading the first `bytes` of every frame of the last receive, and the `head`
    /// bytes in front of each (an XDP program's metadata) where the frame has them, into
    /// this CPU's caches ([`crate::cache::prefetch`]). A caller that reads every frame of a
    /// batch calls it first: in copy mode another CPU's softirq wrote the frames, and their
    /// cache misses then overlap instead of coming one frame at a time.
    pub fn prefetch_rx(&self, head: usize, bytes: usize) {
        let frame = u64::from(self.frame_size());
        for d in &self.rx {
            if head > 0 && d.addr % frame >= head as u64 {
                crate::cache::prefetch(self.data(d.addr - head as u64, head));
            }
            crate::cache::prefetch(self.data(d.addr, bytes.min(d.len as usize)));
        }
    }

    /// Hands every frame of the last receive back (a caller that only reads them); the
    /// descriptor list is empty afterwards, so a second call gives nothing twice.
    pub fn recycle_rx(&mut self) {
        for d in self.rx.drain(..) {
            self.free.push_back(d.addr);
        }
    }

    /// True when the rx ring holds descriptors (no system call).
    pub fn rx_ready(&mut self) -> bool {
        self.xsk.rx.available(1) > 0
    }

    /// `len` bytes of the frame at `addr`, clipped to the frame.
    pub fn data(&self, addr: u64, len: usize) -> &[u8] {
        self.xsk.umem.data(addr, len)
    }

    /// The frame at `addr`, from `addr` to its end, writable.
    pub fn frame_mut(&mut self, addr: u64) -> &mut [u8] {
        self.xsk.umem.frame_mut(addr)
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.xsk.umem.frame_size()
    }

    /// A free frame for the caller to fill and transmit (the most recently freed).
    pub fn alloc(&mut self) -> Option<u64> {
        self.free.pop_back()
    }

    /// The frame freed longest ago: taking frames in this order cycles through all of them
    /// (a sender whose frames are built once, one flow each, sends every flow in turn).
    pub fn alloc_oldest(&mut self) -> Option<u64> {
        self.free.pop_front()
    }

    /// Gives a frame the caller holds back to the driver.
    pub fn recycle(&mut self, addr: u64) {
        self.free.push_back(addr);
    }

    /// Free tx ring slots for this round, at most `want`.
    pub fn tx_room(&mut self, want: u32) -> u32 {
        let w = self.tx_written;
        self.xsk.tx.free(w + want).saturating_sub(w)
    }

    /// Writes `len` bytes of the frame at `addr` to the tx ring, to go out at the next
    /// [`XdpQueue::flush`]. False (counted in `tx_ring_full`) when the ring is full: the
    /// frame stays the caller's.
    pub fn transmit(&mut self, addr: u64, len: u32) -> bool {
        if self.tx_room(1) == 0 {
            self.counters.tx_ring_full += 1;
            return false;
        }
        let d = Desc {
            addr,
            len,
            options: 0,
        };
        self.xsk.tx.write(self.tx_written, d);
        self.tx_written += 1;
        true
    }

    /// Publishes what [`XdpQueue::transmit`] wrote and kicks the kernel as the policy
    /// says (module doc); returns how many descriptors were published.
    pub fn flush(&mut self) -> u32 {
        let n = self.tx_written;
        if n > 0 {
            self.xsk.tx.submit(n);
            self.tx_written = 0;
            self.in_flight += n;
            self.counters.transmitted += n as u64;
        }
        self.kick_tx();
        n
    }

    /// The transmit kick (module doc): nothing when the tx ring is empty or the kernel
    /// does not ask; in copy mode, again while each call moves frames and some remain.
    fn kick_tx(&mut self) {
        let mut left = self.xsk.tx.unconsumed();
        if left == 0 {
            return;
        }
        let asked = self.busy_poll || !self.xsk.uses_need_wakeup() || self.xsk.tx.needs_wakeup();
        if !asked {
            return;
        }
        let rounds = if self.copy_mode {
            left.div_ceil(self.xsk.tx_budget())
        } else {
            1
        };
        for _ in 0..rounds {
            self.counters.tx_kicks += 1;
            self.counters.syscalls += 1;
            // Busy, no buffer, try-again and link-down are "later", not errors; anything
            // else leaves the frames on the ring for the next kick as well.
            let _ = self.xsk.kick_tx();
            if !self.copy_mode {
                return;
            }
            let now = self.xsk.tx.unconsumed();
            if now == 0 {
                return;
            }
            if now >= left {
                self.counters.tx_stalls += 1;
                return;
            }
            left = now;
        }
    }

    /// A zero-length recvfrom: runs receive processing (busy polling) or wakes a driver
    /// that asked for it.
    fn kick_rx(&mut self) {
        self.counters.rx_kicks += 1;
        self.counters.syscalls += 1;
        // As for the transmit kick: a refusal leaves the next receive to try again.
        let _ = self.xsk.kick_rx();
    }
}

impl AsRawFd for XdpQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.xsk.as_raw_fd()
    }
}
