//! [`DgramRing`]: the one io_uring datagram driver (its contract is the module doc of
//! [`crate::uring`]).

use super::mem::{cancel_sync, enter, push_recv_multi, push_recvmsg_multi, BufRing};
use super::recvmsg::{self, RecvmsgOut, OUT_HDR};
use super::setup::UringSetup;
use super::{cqe_err, Flushed};
use crate::cmsg::Space;
use crate::timestamping::{request_tx_stamp, TX_REQUEST_LEN};
use crate::{SysError, SysResult};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// The buffer group of the ring's provided buffers.
const BGID: u16 = 1;
/// Set in a receive's user_data; the low bits are the socket's index. A send's is 0.
const RECV_TAG: u64 = 1 << 63;
const SEND_UD: u64 = 0;
/// Set in a stamped reply's user_data, its stamp key in the low 32 bits.
const STAMPED_TAG: u64 = 1 << 62;
/// The buffer id of an empty datagram on a plain ring: RECV completes it without a buffer.
const NO_BUFFER: u16 = u16::MAX;
/// Room for a sender's address (a `sockaddr_in6`) when the ring keeps names.
pub const NAME_ROOM: usize = 28;
/// Control room for a receive stamp: SCM_TIMESTAMPING (three timespecs, 64 bytes with its
/// header; SCM_TIMESTAMPNS takes 32) beside SO_RXQ_OVFL's count (24), rounded up.
pub const STAMP_ROOM: usize = 128;

/// What a [`DgramRing`] is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DgramConfig {
    /// Receive on every socket (a multishot RECVMSG each); off for a send-only ring.
    pub receive: bool,
    /// Provided buffers (rounded up to a power of two, at most 32768).
    pub buffers: u16,
    /// Bytes per provided buffer: the 16-byte header, the name room, the control room,
    /// then the payload.
    pub buffer_size: usize,
    /// Keep each datagram's sender (a server answering many peers); off for connected
    /// sockets, whose peer is known.
    pub names: bool,
    /// Receive with a multishot IORING_OP_RECV instead of RECVMSG: no header in the
    /// buffers, the payload at their start, the datagram's full length from the completion
    /// (MSG_TRUNC). For connected sockets that need neither names nor control messages (a
    /// generator's flows): RECVMSG copies a 16-byte header out for every datagram, about
    /// 2% more CPU per datagram on loopback.
    pub plain: bool,
    /// Bytes reserved in each buffer for the datagram's control messages (0: none); with
    /// [`STAMP_ROOM`] on a socket with SO_TIMESTAMPNS or SO_TIMESTAMPING, each datagram
    /// carries the kernel's arrival stamp ([`Datagram::rx_time_ns`]).
    pub control: usize,
    /// The most sends queued between two flushes (replies and slot sends together).
    pub sends: usize,
    /// Send slots of the ring's own, and their size.
    pub tx_slots: usize,
    pub tx_slot_size: usize,
}

impl Default for DgramConfig {
    fn default() -> Self {
        DgramConfig {
            receive: true,
            buffers: 256,
            buffer_size: 2048,
            names: false,
            plain: false,
            control: 0,
            sends: 0,
            tx_slots: 0,
            tx_slot_size: 0,
        }
    }
}

/// Counters of a [`DgramRing`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DgramStats {
    /// io_uring_enter calls made (receives and sends together).
    pub enters: u64,
    /// Times a socket's multishot receive was armed (the first time included).
    pub arms: u64,
    /// Times a receive ended because the provided-buffer ring was empty (ENOBUFS).
    pub buffer_ring_empty: u64,
    /// Receive completions with another error (ECONNREFUSED included); EINTR and EAGAIN
    /// are not errors.
    pub recv_errors: u64,
    /// The errno of the last of those.
    pub last_recv_error: Option<i32>,
}

/// A received datagram lent to the caller.
pub struct Datagram<'a> {
    /// The payload is `buf[..len]`; a reply is written over it, up to `buf.len()`.
    pub buf: &'a mut [u8],
    /// Bytes of the datagram in the buffer.
    pub len: usize,
    /// The datagram's length as the kernel reported it (MSG_TRUNC): more than `len` when
    /// it did not fit the buffer.
    pub full_len: usize,
    /// The sender, when the ring keeps names and the family is IPv4 or IPv6.
    pub peer: Option<SocketAddr>,
    /// Index of the socket it arrived on.
    pub sock: usize,
    /// When the kernel received it (ns since the Unix epoch, CLOCK_REALTIME), when the
    /// ring has control room and the socket stamps arrivals.
    pub rx_time_ns: Option<u64>,
}

impl Datagram<'_> {
    /// The datagram was longer than its buffer and arrived cut.
    pub fn truncated(&self) -> bool {
        self.full_len > self.len
    }
}

/// A received datagram waiting for [`DgramRing::take`]: the socket, the buffer, and (for
/// a plain receive, whose buffer holds no header) the length the completion reported.
#[derive(Debug, Clone, Copy)]
struct Ready {
    sock: u32,
    bid: u16,
    res: u32,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    sock: u32,
    bid: u16,
    name_len: u32,
    len: u32,
    full_len: u32,
    rx_time_ns: Option<u64>,
}

/// UDP sockets' receives and sends through one io_uring and one provided-buffer ring.
pub struct DgramRing {
    // Declared first: dropped (after the cancels in Drop) before the memory it uses.
    ring: IoUring,
    fds: Vec<i32>,
    armed: Vec<bool>,
    /// The receives' template: room for a name of `name_room` bytes and `control_room`
    /// bytes of control messages. The kernel copies it when a request is prepared.
    msghdr: Box<libc::msghdr>,
    bufs: Option<BufRing>,
    name_room: usize,
    control_room: usize,
    /// Where the payload starts in a provided buffer.
    payload_at: usize,
    /// A plain receive (IORING_OP_RECV): no header, the payload at the buffer's start.
    plain: bool,
    /// Receives collected, oldest first.
    ready: VecDeque<Ready>,
    /// What the last `take` lent.
    slots: Vec<Slot>,
    /// Buffers out of the kernel's ring since the last give-back.
    lent: Vec<u16>,
    tx: Vec<u8>,
    tx_slot_size: usize,
    tx_slots: usize,
    /// Send slots `0..tx_used` are queued or in flight.
    tx_used: usize,
    /// Sends queued or in flight whose completion was not seen yet.
    sending: usize,
    /// Of those, replies reading lent buffers: no buffer goes back while any is left.
    replies: usize,
    /// Sends that found no room in the submission queue, refused at the next flush.
    unqueued: usize,
    /// The most sends between two flushes: room for as many stamped replies.
    sends_max: usize,
    /// The headers of the stamped replies queued since the last flush (made at the first).
    stamped: Option<Box<Stamped>>,
    /// Keys of the stamped replies the last flush saw refused.
    refused_keys: Vec<u32>,
    /// Send results collected since the last flush.
    done: Flushed,
    sqpoll: bool,
    /// A flush failed with sends whose completion was never seen: the memory they may
    /// read stays mapped after Drop.
    broken: bool,
    pub stats: DgramStats,
}

// SAFETY: the raw pointers (mappings, the receive header) are owned by this struct and
// point only into it; the ring is used from one thread at a time (SINGLE_ISSUER callers
// create it on that thread).
unsafe impl Send for DgramRing {}

impl DgramRing {
    /// A ring over sockets `fds` (connected or not) as `cfg` says, with the flags of
    /// `setup`. Arms every socket's receive at once, so a kernel without multishot RECVMSG
    /// or RECV (before 6.0) or provided-buffer rings (before 5.19) refuses here, with the
    /// errno.
    pub fn new(fds: Vec<i32>, cfg: &DgramConfig, setup: &UringSetup) -> SysResult<Self> {
        if cfg.plain && (cfg.names || cfg.control > 0) {
            return Err(crate::SysError {
                what:
                    "io_uring plain receive (IORING_OP_RECV): no room for names or control messages"
                        .into(),
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let name_room = if cfg.names { NAME_ROOM } else { 0 };
        let payload_at = if cfg.plain {
            0
        } else {
            RecvmsgOut::payload_at(name_room, cfg.control)
        };
        if cfg.receive && payload_at >= cfg.buffer_size {
            return Err(crate::SysError {
                what: format!(
                    "io_uring provided buffers of {} bytes: no room for a payload after {payload_at} bytes of header, name and control",
                    cfg.buffer_size
                ),
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let receivers = if cfg.receive { fds.len() } else { 0 };
        let mut entries = ((cfg.sends + receivers).max(1) as u32).next_power_of_two();
        if cfg.receive {
            entries = entries.max(u32::from(cfg.buffers.next_power_of_two()) / 4);
        }
        let ring = setup.build(entries.min(32768))?;
        let bufs = if cfg.receive {
            Some(BufRing::register(
                &ring,
                BGID,
                cfg.buffers.max(2),
                cfg.buffer_size,
            )?)
        } else {
            None
        };
        // SAFETY: an all-zero msghdr is valid (no name, no iovec, no control).
        let mut msghdr: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msghdr.msg_namelen = name_room as libc::socklen_t;
        // A multishot receive reads only the lengths: the kernel puts the name and the
        // control messages in each provided buffer, after the header.
        msghdr.msg_controllen = cfg.control as _;
        let n = fds.len();
        let mut me = DgramRing {
            ring,
            armed: vec![false; n],
            fds,
            msghdr,
            bufs,
            name_room,
            control_room: cfg.control,
            payload_at,
            plain: cfg.plain,
            ready: VecDeque::new(),
            slots: Vec::new(),
            lent: Vec::new(),
            tx: vec![0; cfg.tx_slots * cfg.tx_slot_size],
            tx_slot_size: cfg.tx_slot_size,
            tx_slots: cfg.tx_slots,
            tx_used: 0,
            sending: 0,
            replies: 0,
            unqueued: 0,
            sends_max: cfg.sends.max(1),
            stamped: None,
            refused_keys: Vec::new(),
            done: Flushed::default(),
            sqpoll: setup.sqpoll(),
            broken: false,
            stats: DgramStats::default(),
        };
        if cfg.receive {
            me.arm_ended()?;
            me.enter(0, None)?;
            me.collect();
            // An old kernel fails a multishot request at once.
            if let Some(e) = me.stats.last_recv_error {
                return Err(cqe_err(
                    &format!("{} multishot (needs Linux 6.0+)", me.receive_op()),
                    -e,
                ));
            }
        }
        Ok(me)
    }

    /// Buffers in the provided ring (0 for a send-only ring).
    pub fn buffers(&self) -> u16 {
        self.bufs.as_ref().map_or(0, |b| b.count())
    }

    /// Size of each provided buffer.
    pub fn buffer_size(&self) -> usize {
        self.bufs.as_ref().map_or(0, |b| b.size())
    }

    /// The receive operation: IORING_OP_RECV for a plain ring, else IORING_OP_RECVMSG.
    pub fn receive_op(&self) -> &'static str {
        if self.plain {
            "IORING_OP_RECV"
        } else {
            "IORING_OP_RECVMSG"
        }
    }

    /// Arms the receive of every socket whose receive is not running.
    fn arm_ended(&mut self) -> SysResult<()> {
        let Some(bgid) = self.bufs.as_ref().map(|b| b.bgid()) else {
            return Ok(());
        };
        for f in 0..self.fds.len() {
            if self.armed[f] {
                continue;
            }
            let ud = RECV_TAG | f as u64;
            if self.plain {
                // SAFETY: the buffers live in self; Drop cancels every receive and waits
                // for it before they are freed.
                unsafe { push_recv_multi(&mut self.ring, self.fds[f], bgid, ud) }?;
            } else {
                // SAFETY: the msghdr and the buffers live in self; as above.
                unsafe { push_recvmsg_multi(&mut self.ring, self.fds[f], &self.msghdr, bgid, ud) }?;
            }
            self.armed[f] = true;
            self.stats.arms += 1;
        }
        Ok(())
    }

    /// Submits what is queued and waits for `want` completions (up to `timeout` if
    /// given); counts the system call when one is made (SQPOLL submits without one while
    /// its thread is awake).
    fn enter(&mut self, want: usize, timeout: Option<Duration>) -> SysResult<()> {
        if want > 0 || !self.sqpoll || self.ring.submission().need_wakeup() {
            self.stats.enters += 1;
        }
        enter(&self.ring, want, timeout)
    }

    /// Moves every completion out of the queue: receives to `ready` (or the counters),
    /// send results to `done`.
    fn collect(&mut self) {
        for cqe in self.ring.completion() {
            let (ud, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            if ud & RECV_TAG == 0 {
                self.sending = self.sending.saturating_sub(1);
                if res >= 0 {
                    self.done.sent += 1;
                } else {
                    self.done.failed += 1;
                    self.done.last_error = Some(-res);
                    if ud & STAMPED_TAG != 0 {
                        self.refused_keys.push(ud as u32);
                    }
                }
                continue;
            }
            let sock = (ud & !RECV_TAG) as usize;
            if !cqueue::more(flags) {
                self.armed[sock] = false;
            }
            match res {
                r if r == -libc::ENOBUFS => self.stats.buffer_ring_empty += 1,
                r if r == -libc::EINTR || r == -libc::EAGAIN => {}
                r if r < 0 => {
                    self.stats.recv_errors += 1;
                    self.stats.last_recv_error = Some(-r);
                }
                _ => {
                    // A plain receive completes an empty datagram without a buffer.
                    let bid = match cqueue::buffer_select(flags) {
                        Some(bid) => Some(bid),
                        None => (self.plain && res == 0).then_some(NO_BUFFER),
                    };
                    if let Some(bid) = bid {
                        self.ready.push_back(Ready {
                            sock: sock as u32,
                            bid,
                            res: res as u32,
                        });
                    }
                }
            }
        }
    }

    /// Gives the lent buffers back to the kernel, unless a reply may still read them.
    fn give_back(&mut self) {
        if self.replies > 0 || self.lent.is_empty() {
            return;
        }
        self.slots.clear();
        if let Some(bufs) = self.bufs.as_mut() {
            for bid in self.lent.drain(..) {
                bufs.recycle(bid);
            }
            bufs.publish();
        }
    }

    /// Gives the last batch back, arms the receives that ended and waits up to `wait`
    /// for datagrams (zero: looks without sleeping; a wait of zero still asks for
    /// completions, which DEFER_TASKRUN needs to run the receives). Returns how many are
    /// ready to [`Self::take`].
    pub fn poll(&mut self, wait: Duration) -> SysResult<usize> {
        self.give_back();
        self.arm_ended()?;
        if self.ready.is_empty() && self.ring.completion().is_empty() {
            self.enter(1, Some(wait))?;
        } else if !self.ring.submission().is_empty() {
            self.enter(0, None)?;
        }
        self.collect();
        Ok(self.ready.len())
    }

    /// Submits what is queued (sends included) and sleeps `wait` in the same
    /// io_uring_enter, however many completions come meanwhile: a paced generator's wake-up
    /// is then one system call, its sends leaving as its sleep begins. What arrived is
    /// collected for [`Self::take`] (with DEFER_TASKRUN the receives run as the wait ends;
    /// without it each arrival wakes the thread and the kernel puts it back to sleep).
    /// Follow with [`Self::flush`] to learn the sends' results and free their slots.
    pub fn sleep(&mut self, wait: Duration) -> SysResult<()> {
        self.give_back();
        self.arm_ended()?;
        // The kernel caps a wait at the completion queue's size; nothing fills it between
        // two wake-ups, so the wait ends at its timeout.
        let all = self.ring.params().cq_entries() as usize;
        self.stats.enters += 1;
        enter(&self.ring, all, Some(wait))?;
        self.collect();
        Ok(())
    }

    /// Lends up to `max` ready datagrams as slots `0..n`, giving the last batch back.
    pub fn take(&mut self, max: usize) -> usize {
        self.give_back();
        self.slots.clear();
        let n = max.min(self.ready.len());
        for _ in 0..n {
            let r = self.ready.pop_front().expect("counted");
            if r.bid != NO_BUFFER {
                self.lent.push(r.bid);
            }
            let slot = self.parse(r);
            self.slots.push(slot);
        }
        n
    }

    /// Reads a filled buffer: its `io_uring_recvmsg_out` header, and the arrival stamp when
    /// the ring reserved control room; a plain receive's buffer is all payload, its length
    /// the completion's.
    fn parse(&self, r: Ready) -> Slot {
        let Ready { sock, bid, res } = r;
        let bufs = self.bufs.as_ref().expect("a receiving ring");
        if self.plain {
            return Slot {
                sock,
                bid,
                name_len: 0,
                len: res.min(bufs.size() as u32),
                full_len: res,
                rx_time_ns: None,
            };
        }
        // SAFETY: buffer `bid` was just handed to us by a completion; the kernel does not
        // write it again until give_back() returns it.
        let b = unsafe { std::slice::from_raw_parts(bufs.ptr(bid), self.payload_at) };
        let out = recvmsg::parse(b, self.name_room, self.control_room);
        let room = bufs.size() - self.payload_at;
        Slot {
            sock,
            bid,
            name_len: out.name.len() as u32,
            len: out.full_len.min(room) as u32,
            full_len: out.full_len.min(u32::MAX as usize) as u32,
            rx_time_ns: if self.control_room > 0 {
                out.rx_stamp()
            } else {
                None
            },
        }
    }

    /// Slot `i` of the last [`Self::take`], for reading and for writing a reply in place.
    pub fn datagram(&mut self, i: usize) -> Datagram<'_> {
        let s = self.slots[i];
        if s.bid == NO_BUFFER {
            return Datagram {
                buf: &mut [],
                len: 0,
                full_len: 0,
                peer: None,
                sock: s.sock as usize,
                rx_time_ns: None,
            };
        }
        let bufs = self.bufs.as_ref().expect("a receiving ring");
        // SAFETY: buffer `bid` was handed to us by a completion and is not given back to
        // the kernel until give_back, which needs `&mut self` and waits for every reply
        // reading it; this borrow of `self` excludes any other view of it meanwhile.
        let b = unsafe { std::slice::from_raw_parts_mut(bufs.ptr(s.bid), bufs.size()) };
        let peer = match s.name_len {
            0 => None,
            n => crate::sockaddr::from_bytes(&b[OUT_HDR..OUT_HDR + n as usize]),
        };
        Datagram {
            buf: &mut b[self.payload_at..],
            len: s.len as usize,
            full_len: s.full_len as usize,
            peer,
            sock: s.sock as usize,
            rx_time_ns: s.rx_time_ns,
        }
    }

    /// The bytes of slot `i` of the last [`Self::take`] and the socket it arrived on.
    pub fn payload(&self, i: usize) -> (usize, &[u8]) {
        let s = self.slots[i];
        if s.bid == NO_BUFFER {
            return (s.sock as usize, &[]);
        }
        let bufs = self.bufs.as_ref().expect("a receiving ring");
        // SAFETY: as in datagram(); the shared borrow of `self` keeps give_back away.
        let data = unsafe {
            std::slice::from_raw_parts(bufs.ptr(s.bid).add(self.payload_at), s.len as usize)
        };
        (s.sock as usize, data)
    }

    /// When slot `i` of the last [`Self::take`] arrived (ns since the Unix epoch), when the
    /// ring has control room and the socket stamps arrivals.
    pub fn rx_time_ns(&self, i: usize) -> Option<u64> {
        self.slots[i].rx_time_ns
    }

    /// The length of slot `i` of the last [`Self::take`] as the kernel reported it.
    pub fn full_len(&self, i: usize) -> usize {
        self.slots[i].full_len as usize
    }

    /// Pushes one send; with the submission queue full it submits what is there first.
    fn push_send(&mut self, entry: &squeue::Entry) -> bool {
        for _ in 0..2 {
            // SAFETY: every send's data (and address, and a stamped reply's header, data
            // vector and control messages) lives in a buffer, slot or `Stamped` entry of
            // self that is not written or given back to the kernel before flush has seen
            // the send complete (give_back waits for replies, tx_slot hands out only free
            // slots, stamped entries are reused only after a flush), and Drop keeps the
            // memory when that was never seen.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                self.sending += 1;
                return true;
            }
            if self.enter(0, None).is_err() {
                break;
            }
        }
        self.unqueued += 1;
        false
    }

    /// Queues the first `len` bytes of slot `i`'s payload area as the reply to its sender
    /// (on a ring without names, to the peer its connected socket has).
    pub fn reply(&mut self, i: usize, len: usize) {
        let s = self.slots[i];
        let bufs = self.bufs.as_ref().expect("a receiving ring");
        // An empty datagram has no buffer: its reply can only be empty too.
        let (base, room) = match s.bid {
            NO_BUFFER => (std::ptr::NonNull::dangling().as_ptr(), 0),
            bid => (bufs.ptr(bid), bufs.size() - self.payload_at),
        };
        let len = len.min(room) as u32;
        let mut send = opcode::Send::new(
            types::Fd(self.fds[s.sock as usize]),
            base.wrapping_add(self.payload_at),
            len,
        );
        if s.name_len > 0 {
            // IORING_OP_SEND with a destination (sendto): no msghdr for the kernel to copy.
            send = send
                .dest_addr(base.wrapping_add(OUT_HDR) as *const libc::sockaddr)
                .dest_addr_len(s.name_len);
        }
        if self.push_send(&send.build().user_data(SEND_UD)) {
            self.replies += 1;
        }
    }

    /// As [`Self::reply`], asking the kernel for the reply's software transmit stamp under
    /// `key` (SO_TIMESTAMPING and [`crate::timestamping::SCM_TS_OPT_ID`] control messages on
    /// an IORING_OP_SENDMSG; the socket needs [`crate::timestamping::TX_ON_REQUEST`]). The
    /// stamp comes back on the socket's error queue, read by
    /// [`crate::timestamping::ErrQueue`]. False when the reply went unstamped: more stamped
    /// replies than the ring's `sends` since the last flush.
    pub fn reply_stamped(&mut self, i: usize, len: usize, key: u32) -> bool {
        let s = self.slots[i];
        let n = self.sends_max;
        let st = self.stamped.get_or_insert_with(|| Stamped::new(n));
        if st.used == 0 {
            // The first since a flush: that flush's refusals were read.
            self.refused_keys.clear();
        }
        if s.bid == NO_BUFFER || st.used == st.hdrs.len() {
            self.reply(i, len);
            return false;
        }
        let bufs = self.bufs.as_ref().expect("a receiving ring");
        let base = bufs.ptr(s.bid);
        let k = st.used;
        st.used += 1;
        st.iovs[k] = libc::iovec {
            iov_base: base.wrapping_add(self.payload_at).cast(),
            iov_len: len.min(bufs.size() - self.payload_at),
        };
        let h = &mut st.hdrs[k];
        h.msg_iov = &mut st.iovs[k];
        h.msg_iovlen = 1;
        h.msg_name = base.wrapping_add(OUT_HDR).cast();
        h.msg_namelen = s.name_len;
        request_tx_stamp(h, &mut st.ctrl[k], Some(key));
        let entry = opcode::SendMsg::new(types::Fd(self.fds[s.sock as usize]), &st.hdrs[k])
            .build()
            .user_data(STAMPED_TAG | u64::from(key));
        if self.push_send(&entry) {
            self.replies += 1;
        } else {
            // Never submitted: refused at the flush, as the key's.
            self.refused_keys.push(key);
        }
        true
    }

    /// Keys of the stamped replies ([`Self::reply_stamped`]) the last [`Self::flush`]
    /// found refused (until the next stamped reply): no stamp comes for them.
    pub fn refused_keys(&self) -> &[u32] {
        &self.refused_keys
    }

    /// Send slots free until the next [`Self::flush`].
    pub fn tx_free(&self) -> usize {
        self.tx_slots - self.tx_used
    }

    /// Free send slot `k` (`k < tx_free()`) for writing. Slots keep their bytes from one
    /// flush to the next, so a payload written once may be sent many times.
    pub fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        let s = self.tx_used + k;
        assert!(s < self.tx_slots, "send slot {k} is not free");
        &mut self.tx[s * self.tx_slot_size..(s + 1) * self.tx_slot_size]
    }

    /// Queues free send slots `0..lens.len()` (as many as are free) as sends on connected
    /// socket `sock`, slot `k` with `lens[k]` bytes; they leave at the next flush.
    pub fn queue_sends(&mut self, sock: usize, lens: &[usize]) {
        let n = lens.len().min(self.tx_free());
        for &len in &lens[..n] {
            let s = self.tx_used;
            self.tx_used += 1;
            let ptr = self.tx[s * self.tx_slot_size..].as_ptr();
            let entry = opcode::Send::new(
                types::Fd(self.fds[sock]),
                ptr,
                len.min(self.tx_slot_size) as u32,
            )
            .build()
            .user_data(SEND_UD);
            self.push_send(&entry);
        }
    }

    /// Submits every queued send with one io_uring_enter and waits for their results (more
    /// enters only when the kernel completes some late); datagrams that arrive meanwhile
    /// are kept for [`Self::poll`]. Then the send slots are free and the lent buffers go
    /// back to the kernel.
    pub fn flush(&mut self) -> SysResult<Flushed> {
        let before = self.stats.enters;
        let mut failure = None;
        while self.sending > 0 {
            if let Err(e) = self.enter(self.sending, None) {
                failure = Some(e);
                break;
            }
            self.collect();
        }
        let mut out = std::mem::take(&mut self.done);
        out.syscalls += (self.stats.enters - before) as usize;
        out.failed += std::mem::take(&mut self.unqueued);
        if let Some(e) = failure {
            // The ring is unusable: the kernel may still read the buffers and slots of the
            // sends never seen, so they stay out of use, and mapped after Drop.
            self.broken = true;
            self.sending = 0;
            self.replies = 0;
            self.lent.clear();
            self.slots.clear();
            return Err(e);
        }
        self.tx_used = 0;
        self.replies = 0;
        if let Some(st) = self.stamped.as_mut() {
            st.used = 0;
        }
        self.give_back();
        Ok(out)
    }

    /// The last receive error as an error naming the operation, if any came.
    pub fn last_recv_error(&self) -> Option<SysError> {
        self.stats
            .last_recv_error
            .map(|e| cqe_err(&format!("{} (multishot)", self.receive_op()), -e))
    }
}

impl Drop for DgramRing {
    fn drop(&mut self) {
        let mut idle = !self.broken && self.sending == 0;
        if self.bufs.is_some() {
            for f in 0..self.fds.len() {
                if self.armed[f] && !cancel_sync(&self.ring, RECV_TAG | f as u64) {
                    idle = false;
                }
            }
        }
        if let Some(b) = self.bufs.as_mut() {
            b.close(&self.ring, idle);
        }
        if !idle {
            // Sends may still read the slots and the stamped replies' headers: leak them as
            // the buffers are kept.
            let _ = std::mem::take(&mut self.tx).leak();
            if let Some(st) = self.stamped.take() {
                Box::leak(st);
            }
        }
    }
}

/// The headers, data vectors and control messages of the stamped replies of one flush,
/// allocated once: IORING_OP_SENDMSG reads them until the send completes.
struct Stamped {
    hdrs: Vec<libc::msghdr>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<Space<TX_REQUEST_LEN>>,
    /// Entries `0..used` are queued or in flight.
    used: usize,
}

impl Stamped {
    fn new(n: usize) -> Box<Stamped> {
        // SAFETY: msghdr and iovec are plain C structs; all-zero is empty.
        let (hdr, iov) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        Box::new(Stamped {
            hdrs: vec![hdr; n],
            iovs: vec![iov; n],
            ctrl: vec![Space::default(); n],
            used: 0,
        })
    }
}
