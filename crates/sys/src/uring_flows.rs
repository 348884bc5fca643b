//! io_uring for a request generator: many connected UDP sockets (flows) on one ring. Out:
//! one IORING_OP_SEND per request from slots owned here, any number of flows' sends
//! submitted by one io_uring_enter. In: one multishot IORING_OP_RECV per flow, all feeding
//! one provided-buffer ring, so a single wait collects responses of every flow.
//!
//! Contract of [`FlowRing`]: requests are written into free slots ([`FlowRing::tx_slot`]),
//! queued per flow ([`FlowRing::queue_send`]) and sent by [`FlowRing::submit_sends`],
//! which waits for their completions before the slots are reused. [`FlowRing::poll`] waits
//! for responses and [`FlowRing::take`] hands out up to `max` of them; their buffers go
//! back to the ring at the next `poll` or `take`. A flow's receive that ends (buffer ring
//! empty, ICMP port unreachable) is armed again at the next `poll`.

use crate::mmsg::Flushed;
use crate::uring::sq_full;
use crate::uring_dgram::UringSetup;
use crate::uring_pbuf::BufRing;
use crate::uring_recv::cancel_sync;
use crate::SysResult;
use io_uring::{cqueue, opcode, types, IoUring};
use std::collections::VecDeque;
use std::time::Duration;

const BGID: u16 = 17;
/// Set in a receive's user_data (the low bits are the flow).
const RECV_TAG: u64 = 1 << 63;

/// Counters of a [`FlowRing`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowRingStats {
    /// io_uring_enter calls made.
    pub enters: u64,
    /// Times a flow's receive was armed (the first time included).
    pub arms: u64,
    /// Times a receive ended because the provided-buffer ring was empty (ENOBUFS).
    pub buffer_ring_empty: u64,
    /// Receive completions with another error (ECONNREFUSED included).
    pub recv_errors: u64,
}

/// Many connected UDP sockets' sends and receives through one io_uring.
pub struct FlowRing {
    // Declared first: dropped (after the cancels in Drop) before the memory it uses.
    ring: IoUring,
    fds: Vec<i32>,
    armed: Vec<bool>,
    tx: Vec<u8>,
    slot_size: usize,
    slots: usize,
    /// Slots `0..used` hold requests queued or in flight.
    used: usize,
    /// Sends queued or in flight whose completion was not seen yet.
    sending: usize,
    bufs: BufRing,
    /// Responses collected as (flow, buffer id, length), oldest first.
    ready: VecDeque<(u32, u16, u32)>,
    /// Buffers handed out by the last `take`, given back at the next one.
    lent: Vec<u16>,
    /// What the last `take` handed out.
    taken: Vec<(u32, u16, u32)>,
    last_recv_error: Option<i32>,
    pub stats: FlowRingStats,
}

// SAFETY: the raw pointers are mappings owned by this struct; the ring is used from one
// thread at a time (SINGLE_ISSUER callers create it on that thread).
unsafe impl Send for FlowRing {}

impl FlowRing {
    /// A ring for connected sockets `fds` with `slots` send slots of `slot_size` bytes and
    /// `count` (a power of two, at most 32768) receive buffers of `size` bytes. Arms every
    /// flow's receive; a kernel without multishot RECV (before 6.0) refuses here.
    pub fn new(
        fds: Vec<i32>,
        slots: usize,
        slot_size: usize,
        count: u16,
        size: usize,
        setup: &UringSetup,
    ) -> SysResult<Self> {
        let slots = slots.clamp(1, 16384);
        let entries = ((slots + fds.len() + 1) as u32)
            .next_power_of_two()
            .clamp(64, 32768);
        let ring = setup.build(entries)?;
        let bufs = BufRing::register(&ring, BGID, count.max(2), size)?;
        let mut me = FlowRing {
            ring,
            armed: vec![false; fds.len()],
            fds,
            tx: vec![0; slots * slot_size],
            slot_size,
            slots,
            used: 0,
            sending: 0,
            bufs,
            ready: VecDeque::new(),
            lent: Vec::new(),
            taken: Vec::new(),
            last_recv_error: None,
            stats: FlowRingStats::default(),
        };
        me.arm_ended()?;
        me.enter(0, None)?;
        let sends = me.collect();
        debug_assert!(sends.is_empty());
        // An old kernel fails a multishot request at once.
        if let Some(res) = me.last_recv_error.filter(|&r| r == -libc::EINVAL) {
            return Err(crate::uring::cqe_err(
                "IORING_OP_RECV multishot (needs Linux 6.0+)",
                res,
            ));
        }
        Ok(me)
    }

    /// Arms the receive of every flow whose receive is not running.
    fn arm_ended(&mut self) -> SysResult<()> {
        for f in 0..self.fds.len() {
            if self.armed[f] {
                continue;
            }
            let entry = opcode::RecvMulti::new(types::Fd(self.fds[f]), BGID)
                .build()
                .user_data(RECV_TAG | f as u64);
            // SAFETY: the buffers live in self; Drop cancels every receive and waits for
            // them before the memory is freed.
            unsafe { self.ring.submission().push(&entry) }.map_err(|_| sq_full())?;
            self.armed[f] = true;
            self.stats.arms += 1;
        }
        Ok(())
    }

    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> SysResult<()> {
        self.stats.enters += 1;
        crate::uring_pbuf::enter(&self.ring, want, timeout)
    }

    /// Moves completions from the queue: responses to `ready`; returns the sends' results.
    fn collect(&mut self) -> Vec<i32> {
        let cqes: Vec<(u64, i32, u32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()))
            .collect();
        let mut sends = Vec::new();
        for (ud, res, flags) in cqes {
            if ud & RECV_TAG == 0 {
                sends.push(res);
                continue;
            }
            let flow = (ud & !RECV_TAG) as u32;
            if !cqueue::more(flags) {
                self.armed[flow as usize] = false;
            }
            if res == -libc::ENOBUFS {
                self.stats.buffer_ring_empty += 1;
            } else if res < 0 {
                self.stats.recv_errors += 1;
                self.last_recv_error = Some(res);
            } else if let Some(bid) = cqueue::buffer_select(flags) {
                self.ready.push_back((flow, bid, res as u32));
            }
        }
        sends
    }

    /// Send slots free until the next [`Self::submit_sends`].
    pub fn tx_free(&self) -> usize {
        self.slots - self.used
    }

    /// Free slot `k` (`k < tx_free()`) for writing a request.
    pub fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        let s = self.used + k;
        &mut self.tx[s * self.slot_size..(s + 1) * self.slot_size]
    }

    /// Queues free slots `0..lens.len()` as sends on `flow`, slot `k` with `lens[k]` bytes;
    /// they leave at the next [`Self::submit_sends`].
    pub fn queue_sends(&mut self, flow: usize, lens: &[usize]) -> SysResult<()> {
        let n = lens.len().min(self.tx_free());
        for (k, &len) in lens[..n].iter().enumerate() {
            let s = self.used + k;
            let ptr = self.tx[s * self.slot_size..].as_ptr();
            let entry = opcode::Send::new(
                types::Fd(self.fds[flow]),
                ptr,
                len.min(self.slot_size) as u32,
            )
            .build()
            .user_data(s as u64);
            // SAFETY: the slot lives in self and is not written again (tx_slot hands out only
            // slots from `used` on) until submit_sends has seen this send complete.
            unsafe { self.ring.submission().push(&entry) }.map_err(|_| sq_full())?;
        }
        self.used += n;
        self.sending += n;
        Ok(())
    }

    /// Submits every queued send with one io_uring_enter and waits for their results
    /// (more enters only when the kernel completes some late); responses that arrive
    /// meanwhile are kept for [`Self::poll`].
    pub fn submit_sends(&mut self) -> SysResult<Flushed> {
        let mut out = Flushed::default();
        let before = self.stats.enters;
        while self.sending > 0 {
            let r = self.enter(self.sending, None);
            let results = self.collect();
            r?;
            for res in results {
                self.sending -= 1;
                if res >= 0 {
                    out.sent += 1;
                } else {
                    out.failed += 1;
                    out.last_error = Some(-res);
                }
            }
        }
        self.used = 0;
        out.syscalls = (self.stats.enters - before) as usize;
        Ok(out)
    }

    /// Gives back the buffers of the last [`Self::take`].
    fn give_back(&mut self) {
        while let Some(bid) = self.lent.pop() {
            self.bufs.recycle(bid);
        }
    }

    /// Arms ended receives and waits up to `wait` for responses (zero: looks without
    /// waiting, entering the kernel only to arm); returns how many are ready.
    pub fn poll(&mut self, wait: Duration) -> SysResult<usize> {
        self.give_back();
        self.arm_ended()?;
        if self.ready.is_empty() && self.ring.completion().is_empty() {
            // A wait, even of zero, asks for completions: with DEFER_TASKRUN only that
            // runs the deferred receives.
            self.enter(1, Some(wait))?;
        } else if !self.ring.submission().is_empty() {
            self.enter(0, None)?;
        }
        let sends = self.collect();
        debug_assert!(sends.is_empty(), "sends are reaped by submit_sends");
        Ok(self.ready.len())
    }

    /// Hands out up to `max` ready responses; [`Self::response`] reads them.
    pub fn take(&mut self, max: usize) -> usize {
        self.give_back();
        let n = max.min(self.ready.len());
        self.taken.clear();
        for _ in 0..n {
            let (flow, bid, len) = self.ready.pop_front().expect("counted");
            self.lent.push(bid);
            self.taken.push((flow, bid, len));
        }
        n
    }

    /// Response `i` of the last [`Self::take`]: its flow and its bytes.
    pub fn response(&self, i: usize) -> (u32, &[u8]) {
        let (flow, bid, len) = self.taken[i];
        let len = (len as usize).min(self.bufs.size());
        // SAFETY: buffer `bid` came from a completion and stays out of the kernel's ring
        // until give_back, which needs `&mut self`, so no write can race this borrow.
        let data = unsafe { std::slice::from_raw_parts(self.bufs.ptr(bid), len) };
        (flow, data)
    }
}

impl Drop for FlowRing {
    fn drop(&mut self) {
        let mut idle = self.sending == 0;
        for f in 0..self.fds.len() {
            if self.armed[f] && !cancel_sync(&self.ring, RECV_TAG | f as u64) {
                idle = false;
            }
        }
        self.bufs.close(&self.ring, idle);
        if !idle {
            // Sends may still read the slots: leak them as the buffers are kept.
            let _ = std::mem::take(&mut self.tx).leak();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::UdpSock;
    use std::os::fd::AsRawFd;

    #[test]
    fn two_flows_send_in_one_round_and_responses_come_back_per_flow() {
        if let Err(e) = crate::uring::UringSupport::probe().require("recv") {
            eprintln!("skipped: {e}");
            return;
        }
        // An echo server on a plain socket, answering 20 datagrams.
        let srv = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        srv.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let to = srv.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let mut b = [0u8; 256];
            for _ in 0..20 {
                let (n, from) = srv.recv_from(&mut b).unwrap();
                srv.send_to(&b[..n], from).unwrap();
            }
        });
        let socks: Vec<UdpSock> = (0..2)
            .map(|_| {
                let s = UdpSock::new_for(&to).unwrap();
                s.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
                s.connect(&to).unwrap();
                s
            })
            .collect();
        let fds = socks.iter().map(|s| s.as_raw_fd()).collect();
        let mut r = FlowRing::new(fds, 8, 64, 8, 256, &UringSetup::default()).unwrap();
        assert_eq!(r.stats.arms, 2);
        let mut sent = 0;
        for round in 0..5u8 {
            for flow in 0..2usize {
                for k in 0..2 {
                    r.tx_slot(k)[..3].copy_from_slice(&[flow as u8, round, k as u8]);
                }
                r.queue_sends(flow, &[3, 3]).unwrap();
            }
            assert_eq!(r.tx_free(), 4);
            let f = r.submit_sends().unwrap();
            assert_eq!((f.sent, f.failed), (4, 0));
            sent += f.sent;
        }
        assert_eq!(sent, 20);
        let mut got = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < 20 && std::time::Instant::now() < end {
            if r.poll(Duration::from_millis(50)).unwrap() > 0 {
                for i in 0..r.take(3) {
                    let (flow, data) = r.response(i);
                    assert_eq!(data[0] as u32, flow, "a response arrives on its flow");
                    got.push(data.to_vec());
                }
            }
        }
        echo.join().unwrap();
        got.sort();
        let mut want: Vec<Vec<u8>> = (0..5u8)
            .flat_map(|round| (0..2u8).flat_map(move |f| (0..2u8).map(move |k| vec![f, round, k])))
            .collect();
        want.sort();
        assert_eq!(got, want);
    }
}
