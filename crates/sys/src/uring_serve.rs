//! io_uring for a datagram server: one multishot IORING_OP_RECVMSG on the server's socket
//! feeding a provided-buffer ring, and the replies sent by IORING_OP_SEND with a destination
//! address (sendto; Linux 6.0+, as the multishot receive) from the very buffers the requests
//! arrived in, address included: no header for the kernel to copy per reply.
//!
//! Contract of [`ServeRing`], per batch:
//! 1. [`ServeRing::recv`] (re)arms the receive if it ended, waits (or, busy, looks) for
//!    completions and takes up to `max` datagrams into slots `0..count`. Each slot is a
//!    provided buffer the kernel filled: a 16-byte `io_uring_recvmsg_out` header, the
//!    sender's address (room for a `sockaddr_in6`), then the payload.
//! 2. [`ServeRing::datagram`] lends slot `i`: the payload and the rest of its buffer (the
//!    reply capacity), the length and the sender.
//! 3. [`ServeRing::queue_reply`] writes one SEND per reply whose address and data point
//!    into that slot's buffer; [`ServeRing::flush`] submits them with one io_uring_enter,
//!    waits for their completions (a UDP send completes inline) and only then gives every
//!    buffer of the batch back to the ring. So the kernel never reads a buffer it may
//!    also be writing.
//!
//! When the buffer ring runs dry the kernel ends the multishot receive with ENOBUFS; the
//! datagrams stay queued in the socket (or are dropped there when its buffer fills,
//! counted by the kernel's socket drop counter). That ending is counted in
//! [`ServeRingStats::buffer_ring_empty`] and the receive is armed again at the next
//! [`ServeRing::recv`], after the buffers of the batch went back.

use crate::mmsg::Flushed;
use crate::uring::cqe_err;
use crate::uring_dgram::UringSetup;
use crate::uring_pbuf::BufRing;
use crate::uring_recv::cancel_sync;
use crate::SysResult;
use io_uring::{cqueue, opcode, types, IoUring};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

const BGID: u16 = 13;
/// user_data of the receive; a send carries its queue position.
const RECV_UD: u64 = u64::MAX;
/// Size of `struct io_uring_recvmsg_out`.
const OUT_HDR: usize = 16;
/// Room for the sender's address: a `sockaddr_in6`.
const NAME_ROOM: usize = 28;
/// Where the payload starts in a provided buffer.
pub const PAYLOAD_OFFSET: usize = OUT_HDR + NAME_ROOM;

/// Counters of a [`ServeRing`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeRingStats {
    /// io_uring_enter calls made (receives and sends together).
    pub enters: u64,
    /// Times the multishot receive was armed (the first time included).
    pub arms: u64,
    /// Times the receive ended because the provided-buffer ring was empty (ENOBUFS).
    pub buffer_ring_empty: u64,
    /// Receive completions carrying an error other than ENOBUFS.
    pub recv_errors: u64,
}

/// What one [`ServeRing::recv`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Datagrams now in slots `0..count`.
    pub count: usize,
    /// io_uring_enter calls made.
    pub enters: u64,
    /// Receive completions with an error.
    pub errors: u64,
}

/// A received datagram lent to the caller.
pub struct Datagram<'a> {
    /// The payload is `buf[..len]`; a reply is written over it, up to `buf.len()`.
    pub buf: &'a mut [u8],
    /// Length of the datagram (capped at `buf.len()` when truncated).
    pub len: usize,
    /// The sender; `None` for an address family other than IPv4/IPv6.
    pub peer: Option<SocketAddr>,
    /// The datagram was longer than the buffer.
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    bid: u16,
    len: usize,
    name_len: u32,
    truncated: bool,
}

/// A server socket's receive and reply path through one io_uring.
pub struct ServeRing {
    // Declared first: dropped (after the cancel in Drop) before the memory it uses.
    ring: IoUring,
    fd: i32,
    /// The receive's template: a name of NAME_ROOM bytes, no control data.
    msghdr: Box<libc::msghdr>,
    bufs: BufRing,
    /// Size of each provided buffer.
    size: usize,
    armed: bool,
    sqpoll: bool,
    busy: bool,
    slots: Vec<Slot>,
    /// Receive completions seen while waiting for sends, taken first by the next recv.
    held: VecDeque<(i32, u32)>,
    /// Most datagrams per receive, and so most replies per flush.
    batch: usize,
    /// Replies queued since the last flush.
    queued: usize,
    /// Replies that found the submission queue full, refused at the next flush.
    unqueued: usize,
    /// A flush failed with sends whose completion was never seen.
    unfinished_sends: bool,
    pub stats: ServeRingStats,
}

// SAFETY: the raw pointers (mappings, the receive header) are owned by this struct and
// point only into it; the ring is used from one thread at a time (SINGLE_ISSUER callers
// create it there).
unsafe impl Send for ServeRing {}

impl ServeRing {
    /// A ring for socket `fd` taking up to `batch` datagrams per receive, with `count`
    /// (rounded up to a power of two, more than `batch`) provided buffers of `size` bytes;
    /// `busy` never sleeps in the kernel. Arms the receive at once, so a kernel without
    /// multishot RECVMSG (before 6.0) or without provided-buffer rings (before 5.19)
    /// refuses here, with the errno.
    pub fn new(
        fd: i32,
        batch: usize,
        count: u16,
        size: usize,
        setup: &UringSetup,
        busy: bool,
    ) -> SysResult<Self> {
        let batch = batch.clamp(1, 4096);
        let ring = setup.build(((batch + 1) as u32).next_power_of_two().max(64))?;
        let bufs = BufRing::register(&ring, BGID, Self::buffer_count(batch, count), size)?;
        // SAFETY: an all-zero msghdr is valid (no name, no data, no control).
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msghdr.msg_namelen = NAME_ROOM as libc::socklen_t;
        let mut me = ServeRing {
            ring,
            fd,
            msghdr,
            bufs,
            size,
            armed: false,
            sqpoll: setup.sqpoll_idle_ms.is_some(),
            busy,
            slots: Vec::with_capacity(batch),
            held: VecDeque::new(),
            batch,
            queued: 0,
            unqueued: 0,
            unfinished_sends: false,
            stats: ServeRingStats::default(),
        };
        me.arm()?;
        me.enter(0, None)?;
        // An old kernel fails the multishot request at once; anything else that arrived
        // already is kept for the first recv.
        let cqes: Vec<(u64, i32, u32)> = me
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()))
            .collect();
        for (_, res, flags) in cqes {
            if res < 0 && res != -libc::ENOBUFS {
                me.armed = false;
                return Err(cqe_err(
                    "IORING_OP_RECVMSG multishot (needs Linux 6.0+)",
                    res,
                ));
            }
            me.held.push_back((res, flags));
        }
        Ok(me)
    }

    /// The buffers a ring for `batch` datagrams per receive gets when `count` are asked:
    /// at least twice the batch, a power of two, at most 32768.
    pub fn buffer_count(batch: usize, count: u16) -> u16 {
        count
            .max((batch.clamp(1, 4096) * 2).min(32768) as u16)
            .clamp(2, 32768)
            .next_power_of_two()
    }

    /// Buffers in the provided ring.
    pub fn buffers(&self) -> u16 {
        self.bufs.count()
    }

    /// Size of each provided buffer.
    pub fn buffer_size(&self) -> usize {
        self.bufs.size()
    }

    fn arm(&mut self) -> SysResult<()> {
        // SAFETY: the msghdr and the buffers live in self; Drop cancels the request and
        // waits for it before they are freed.
        unsafe {
            crate::uring_pbuf::push_recvmsg_multi(
                &mut self.ring,
                self.fd,
                &self.msghdr,
                BGID,
                RECV_UD,
            )
        }?;
        self.armed = true;
        self.stats.arms += 1;
        Ok(())
    }

    /// Submits what is queued and waits for `want` completions (up to `timeout` if given);
    /// counts the system call when one is made (SQPOLL submits without one while its
    /// thread is awake).
    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> SysResult<()> {
        if want > 0 || !self.sqpoll || self.ring.submission().need_wakeup() {
            self.stats.enters += 1;
        }
        crate::uring_pbuf::enter(&self.ring, want, timeout)
    }

    /// Takes up to `max` datagrams into slots `0..count`, waiting up to `timeout` when none
    /// is ready (not at all when busy).
    pub fn recv(&mut self, max: usize, timeout: Duration) -> SysResult<Reaped> {
        debug_assert!(self.slots.is_empty(), "flush before the next recv");
        let before = self.stats.enters;
        let mut r = Reaped::default();
        if !self.armed {
            self.arm()?;
        }
        let nothing = self.held.is_empty() && self.ring.completion().is_empty();
        if nothing {
            // Busy: a wait of zero, which still runs deferred completions (DEFER_TASKRUN
            // posts them only for an enter that asks for completions).
            let wait = if self.busy { Duration::ZERO } else { timeout };
            self.enter(1, Some(wait))?;
        } else if !self.ring.submission().is_empty() {
            self.enter(0, None)?;
        }
        let max = max.min(self.batch);
        while self.slots.len() < max {
            let (res, flags) = match self.held.pop_front() {
                Some(h) => h,
                None => match self.ring.completion().next() {
                    Some(c) => (c.result(), c.flags()),
                    None => break,
                },
            };
            if !cqueue::more(flags) {
                self.armed = false;
            }
            if res == -libc::ENOBUFS {
                self.stats.buffer_ring_empty += 1;
                continue;
            }
            if res < 0 {
                if res != -libc::EINTR && res != -libc::EAGAIN {
                    self.stats.recv_errors += 1;
                    r.errors += 1;
                }
                continue;
            }
            let Some(bid) = cqueue::buffer_select(flags) else {
                continue;
            };
            self.slots.push(self.parse(bid));
        }
        r.count = self.slots.len();
        r.enters = self.stats.enters - before;
        Ok(r)
    }

    /// Reads a filled buffer's `io_uring_recvmsg_out` header.
    fn parse(&self, bid: u16) -> Slot {
        // SAFETY: buffer `bid` was just handed to us by a completion; the kernel does not
        // write it again until recycle() (in flush) gives it back.
        let b = unsafe { std::slice::from_raw_parts(self.buf_ptr(bid), OUT_HDR) };
        let word = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let (name_len, payload_len) = (word(0), word(8) as usize);
        let room = self.size - PAYLOAD_OFFSET;
        Slot {
            bid,
            len: payload_len.min(room),
            name_len: name_len.min(NAME_ROOM as u32),
            truncated: payload_len > room,
        }
    }

    fn buf_ptr(&self, bid: u16) -> *mut u8 {
        self.bufs.ptr(bid)
    }

    /// Slot `i` of the last recv.
    pub fn datagram(&mut self, i: usize) -> Datagram<'_> {
        let s = self.slots[i];
        // SAFETY: buffer `bid` was handed to us by a completion and is not given back to
        // the kernel (recycle) until flush, after every send reading it has completed; the
        // slice borrows `self` mutably, so no other view of it exists meanwhile.
        let b = unsafe { std::slice::from_raw_parts_mut(self.buf_ptr(s.bid), self.size) };
        let peer = crate::sockaddr::from_bytes(&b[OUT_HDR..OUT_HDR + s.name_len as usize]);
        Datagram {
            buf: &mut b[PAYLOAD_OFFSET..],
            len: s.len,
            peer,
            truncated: s.truncated,
        }
    }

    /// Queues the first `len` bytes of slot `i`'s payload area as the reply to its sender.
    /// A full submission queue (it holds a batch) counts the reply as refused at flush.
    pub fn queue_reply(&mut self, i: usize, len: usize) {
        let s = self.slots[i];
        let base = self.buf_ptr(s.bid);
        let len = len.min(self.size - PAYLOAD_OFFSET) as u32;
        // IORING_OP_SEND with a destination (sendto): no msghdr for the kernel to copy.
        let entry = opcode::Send::new(types::Fd(self.fd), base.wrapping_add(PAYLOAD_OFFSET), len)
            .dest_addr(base.wrapping_add(OUT_HDR) as *const libc::sockaddr)
            .dest_addr_len(s.name_len)
            .build()
            .user_data(self.queued as u64);
        // SAFETY: the address and the data live in a buffer of self that is not changed or
        // given back to the kernel's buffer ring until flush has seen this request complete.
        match unsafe { self.ring.submission().push(&entry) } {
            Ok(()) => self.queued += 1,
            Err(_) => self.unqueued += 1,
        }
    }

    /// Sends the queued replies (one io_uring_enter, more only if the kernel completes
    /// them late), then gives the batch's buffers back to the ring.
    pub fn flush(&mut self) -> SysResult<Flushed> {
        let mut out = Flushed::default();
        let before = self.stats.enters;
        let mut done = 0;
        let mut result = Ok(());
        while done < self.queued {
            if let Err(e) = self.enter(self.queued - done, None) {
                result = Err(e);
                break;
            }
            let cqes: Vec<(u64, i32, u32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags()))
                .collect();
            for (ud, res, flags) in cqes {
                if ud == RECV_UD {
                    self.held.push_back((res, flags));
                    continue;
                }
                done += 1;
                if res >= 0 {
                    out.sent += 1;
                } else {
                    out.failed += 1;
                    out.last_error = Some(-res);
                }
            }
        }
        out.syscalls = (self.stats.enters - before) as usize;
        if result.is_err() {
            // The ring is unusable: keep the buffers (the kernel may still read them), and
            // their memory after Drop too.
            self.unfinished_sends = true;
            self.queued = 0;
            self.slots.clear();
            result?;
        }
        out.failed += std::mem::take(&mut self.unqueued);
        self.queued = 0;
        for s in &self.slots {
            self.bufs.recycle(s.bid);
        }
        self.slots.clear();
        Ok(out)
    }
}

impl Drop for ServeRing {
    fn drop(&mut self) {
        let idle = !self.unfinished_sends && (!self.armed || cancel_sync(&self.ring, RECV_UD));
        self.bufs.close(&self.ring, idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::UdpSock;
    use std::os::fd::AsRawFd;

    fn supported() -> bool {
        match crate::uring::UringSupport::probe().require("recvmsg") {
            Ok(()) => true,
            Err(e) => {
                eprintln!("skipped: {e}");
                false
            }
        }
    }

    fn pair(addr: &str) -> Option<(UdpSock, std::net::UdpSocket)> {
        let client = std::net::UdpSocket::bind(addr).ok()?;
        let srv = UdpSock::new_for(&addr.parse().unwrap()).unwrap();
        srv.bind(&addr.parse().unwrap()).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        Some((srv, client))
    }

    /// Serves until `n` datagrams were answered, each reply being `f` of the request.
    fn serve(r: &mut ServeRing, n: usize, f: impl Fn(&mut [u8], usize) -> usize) -> usize {
        let mut answered = 0;
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while answered < n && std::time::Instant::now() < end {
            let got = r.recv(64, Duration::from_millis(50)).unwrap();
            for i in 0..got.count {
                let d = r.datagram(i);
                assert!(d.peer.is_some() && !d.truncated);
                let len = f(d.buf, d.len);
                r.queue_reply(i, len);
            }
            answered += r.flush().unwrap().sent;
        }
        answered
    }

    #[test]
    fn replies_leave_from_the_request_buffers_to_each_sender_v4_and_v6() {
        if !supported() {
            return;
        }
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Some((srv, client)) = pair(addr) else {
                eprintln!("skipped {addr}: no such loopback");
                continue;
            };
            let to = srv.local_addr().unwrap();
            let setup = UringSetup {
                single_issuer: true,
                defer_taskrun: true,
                ..UringSetup::default()
            };
            let mut r = ServeRing::new(srv.as_raw_fd(), 8, 16, 2048, &setup, false).unwrap();
            let sizes = [0usize, 1, 100, 1472, 2048 - PAYLOAD_OFFSET];
            for (k, &size) in sizes.iter().enumerate() {
                let msg: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
                client.send_to(&msg, to).unwrap();
            }
            // Reply with the request reversed plus its length byte: bytes written in place.
            let answered = serve(&mut r, sizes.len(), |buf, len| {
                buf[..len].reverse();
                if len < buf.len() {
                    buf[len] = len as u8;
                    len + 1
                } else {
                    len
                }
            });
            assert_eq!(answered, sizes.len(), "{addr}");
            let mut got = vec![0u8; 4096];
            for (k, &size) in sizes.iter().enumerate() {
                let (n, from) = crate::retry_interrupted(|| client.recv_from(&mut got)).unwrap();
                assert_eq!(from, to, "{addr}");
                let mut want: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
                want.reverse();
                if size < 2048 - PAYLOAD_OFFSET {
                    want.push(size as u8);
                }
                assert_eq!(&got[..n], &want[..], "{addr} size {size}");
            }
            assert_eq!(r.stats.buffer_ring_empty, 0);
        }
    }

    #[test]
    fn an_empty_buffer_ring_is_counted_and_the_queue_still_drains() {
        if !supported() {
            return;
        }
        let (srv, client) = pair("127.0.0.1:0").unwrap();
        let to = srv.local_addr().unwrap();
        // Two buffers: the third datagram finds the ring empty and ends the receive.
        let mut r =
            ServeRing::new(srv.as_raw_fd(), 1, 2, 256, &UringSetup::default(), false).unwrap();
        assert_eq!(r.buffers(), 2);
        for i in 0..20u8 {
            client.send_to(&[i; 10], to).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(serve(&mut r, 20, |_, len| len), 20);
        let mut buf = [0u8; 64];
        for i in 0..20u8 {
            let (n, _) = crate::retry_interrupted(|| client.recv_from(&mut buf)).unwrap();
            assert_eq!(&buf[..n], &[i; 10], "in order, none lost");
        }
        assert!(r.stats.buffer_ring_empty >= 1, "{:?}", r.stats);
        assert!(r.stats.arms >= 2, "armed again: {:?}", r.stats);
    }
}
