//! One sink worker: receive, count, publish, until told to stop.

use super::{Counters, SinkIo, Source};
use firehose_sys::af_packet::RxRing;
use firehose_sys::mmsg::{Batch, RecvMode};
use firehose_sys::socket::{is_would_block, UdpSock, MSG_TRUNC};
use firehose_sys::uring::{DgramConfig, DgramRing, UringSetup};
use firehose_sys::xdp::queue::{Wait, XdpQueue};
use firehose_sys::SysError;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Receive buffer per datagram. With MSG_TRUNC the kernel reports a longer datagram's
/// full length, so bytes are counted exactly whatever the size.
const SLOT: usize = 2048;

/// Provided buffers per io_uring worker: a burst this long is taken without re-arming.
const URING_BUFFERS: u16 = 1024;

pub(crate) struct Worker {
    pub index: usize,
    pub cpu: Option<usize>,
    pub io: SinkIo,
    pub batch: usize,
    pub counters: Arc<Vec<Counters>>,
    pub stop: Arc<AtomicBool>,
}

/// The counts a worker keeps locally and publishes with plain stores.
#[derive(Default)]
struct Local {
    packets: u64,
    bytes: u64,
    syscalls: u64,
}

impl Worker {
    pub fn run(self, source: Source) -> Result<(), SysError> {
        if let Some(c) = self.cpu {
            firehose_sys::cpu::pin_current_thread(c)?;
        }
        match source {
            Source::Socket(s) => self.run_socket(&s),
            Source::Uring(s, setup) => self.run_uring(&s, &setup),
            Source::Ring(r) => self.run_ring(*r),
            Source::Xsk(q) => self.run_xsk(*q),
        }
    }

    fn c(&self) -> &Counters {
        &self.counters[self.index]
    }

    /// Publishes the local counts, attributing `new` packets to the CPU running now.
    fn publish(&self, l: &Local, new: u64) {
        let c = self.c();
        c.packets.store(l.packets, Ordering::Relaxed);
        c.bytes.store(l.bytes, Ordering::Relaxed);
        c.syscalls.store(l.syscalls, Ordering::Relaxed);
        if new > 0 {
            let cpu = match self.cpu {
                Some(c) => c,
                None => firehose_sys::cpu::current_cpu().unwrap_or(0),
            };
            if let Some(slot) = c.per_cpu.get(cpu) {
                slot.store(slot.load(Ordering::Relaxed) + new, Ordering::Relaxed);
            }
        }
    }

    /// Blocking receives with no timeout, udp_sink's loop, through the socket batch driver
    /// with the mode's call: [`super::Sink::stop`] wakes a blocked worker by shutting its
    /// socket down for reading.
    fn run_socket(&self, sock: &UdpSock) -> Result<(), SysError> {
        let mut l = Local::default();
        let (mode, max) = match self.io {
            SinkIo::Recv => (RecvMode::Recv, 1),
            SinkIo::Recvfrom => (RecvMode::Single, 1),
            SinkIo::Recvmsg => (RecvMode::Msg, 1),
            _ => (RecvMode::Batch, self.batch),
        };
        let mut b = Batch::new(max, SLOT).with_recv(mode);
        while !self.stop.load(Ordering::Relaxed) {
            l.syscalls += 1;
            let got = b.recv(sock, max, MSG_TRUNC).map(|n| {
                let bytes = (0..n).map(|i| b.len(i) as u64).sum();
                (n as u64, bytes)
            });
            match got {
                // Stop shut the socket down (a receive returns 0); a datagram of length
                // 0 arriving in that same instant is the one not counted.
                Ok((_, 0)) if self.stop.load(Ordering::Relaxed) => break,
                Ok((0, _)) => {}
                Ok((n, bytes)) => {
                    l.packets += n;
                    l.bytes += bytes;
                    self.publish(&l, n);
                }
                Err(e) if is_would_block(&e) => self.publish(&l, 0),
                Err(e) => return Err(e),
            }
        }
        self.publish(&l, 0);
        Ok(())
    }

    /// One multishot RECVMSG on the socket into a ring of provided buffers; each datagram
    /// counted at its full length (MSG_TRUNC), its buffer given back at the next poll. A
    /// receive error stops the worker with its errno.
    fn run_uring(&self, sock: &UdpSock, setup: &UringSetup) -> Result<(), SysError> {
        let cfg = DgramConfig {
            buffers: URING_BUFFERS,
            buffer_size: SLOT,
            ..DgramConfig::default()
        };
        let mut ring = DgramRing::new(vec![sock.as_raw_fd()], &cfg, setup)?;
        let mut l = Local::default();
        while !self.stop.load(Ordering::Relaxed) {
            ring.poll(Duration::from_millis(100))?;
            if let Some(e) = ring.last_recv_error() {
                return Err(e);
            }
            let got = ring.take(usize::MAX);
            let bytes: u64 = (0..got).map(|i| ring.full_len(i) as u64).sum();
            let n = got as u64;
            l.packets += n;
            l.bytes += bytes;
            l.syscalls = ring.stats.enters;
            self.publish(&l, n);
        }
        self.publish(&l, 0);
        Ok(())
    }

    fn run_ring(&self, mut ring: RxRing) -> Result<(), SysError> {
        let mut l = Local::default();
        let mut stats_at = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            l.syscalls += 1;
            if ring.wait(Duration::from_millis(100))? {
                let mut new = 0;
                while let Some(block) = ring.next_block() {
                    for f in block.frames() {
                        new += 1;
                        l.bytes += firehose_frame::parse(f.data).map_or(0, |u| u.len) as u64;
                    }
                }
                l.packets += new;
                self.publish(&l, new);
            }
            if stats_at.elapsed() >= Duration::from_millis(200) {
                self.take_ring_stats(&ring)?;
                stats_at = Instant::now();
            }
        }
        self.take_ring_stats(&ring)?;
        self.publish(&l, 0);
        Ok(())
    }

    /// Xdp mode: the queue's driver takes what the rx ring holds, waits in poll() when it
    /// is empty (or, busy polling, drives the queue itself), and gets every frame back.
    /// Bytes are UDP payload bytes, as in the other modes.
    fn run_xsk(&self, mut q: XdpQueue) -> Result<(), SysError> {
        let mut l = Local::default();
        let batch = (self.batch as u32).clamp(1, q.xsk().rx.size());
        let wait = Wait::Poll {
            ms: 100,
            also: None,
        };
        let mut stats_at = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let n = q.receive(batch, wait).count;
            for d in q.rx() {
                let data = q.data(d.addr, d.len as usize);
                l.bytes += firehose_frame::parse(data).map_or(0, |u| u.len) as u64;
            }
            q.recycle_rx();
            l.packets += n as u64;
            l.syscalls = q.counters().syscalls;
            self.publish(&l, n as u64);
            if stats_at.elapsed() >= Duration::from_millis(200) {
                self.take_xsk_stats(&q)?;
                stats_at = Instant::now();
            }
        }
        self.take_xsk_stats(&q)?;
        self.publish(&l, 0);
        Ok(())
    }

    /// Stores the socket's XDP_STATISTICS (cumulative since the socket was opened).
    fn take_xsk_stats(&self, q: &XdpQueue) -> Result<(), SysError> {
        let st = q.stats()?;
        let c = self.c();
        c.xsk_rx_dropped.store(st.rx_dropped, Ordering::Relaxed);
        c.xsk_rx_ring_full.store(st.rx_ring_full, Ordering::Relaxed);
        c.xsk_fill_ring_empty
            .store(st.rx_fill_ring_empty_descs, Ordering::Relaxed);
        Ok(())
    }

    /// Adds the ring's drop counters (read-and-reset by the kernel) to the worker's.
    fn take_ring_stats(&self, ring: &RxRing) -> Result<(), SysError> {
        let st = ring.sock().take_stats()?;
        let c = self.c();
        c.ring_drops.fetch_add(st.drops, Ordering::Relaxed);
        c.ring_freezes.fetch_add(st.freeze_q, Ordering::Relaxed);
        Ok(())
    }
}
