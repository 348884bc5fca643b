//! The socket batch driver: recv/recvfrom/recvmsg/recvmmsg in, sendto/sendmmsg/UDP GSO
//! out, for every role that reads or writes kernel UDP sockets (serve's socket path and its
//! AF_XDP fallback socket, the generator's socket flows, sink's and flood's socket modes).
//!
//! A [`Batch`] owns `slots` buffers of `slot_size` bytes plus the kernel structures that
//! point into them, allocated once. Receiving fills slots `0..n`; a handler rewrites a slot
//! in place; [`Batch::queue_reply`] marks it to go back to its sender (or
//! [`Batch::queue_send`] on a connected socket), and [`Batch::flush`] sends everything
//! queued. How it receives and sends is data chosen once ([`RecvMode`], [`SendMode`]);
//! with [`SendMode::Gso`] the batch probes the socket, groups equal-sized datagrams into
//! UDP_SEGMENT super-datagrams, and falls back to sendmmsg by itself (and for good, on
//! that socket) when the kernel refuses. Nothing is allocated per packet.

mod gso;

use crate::cmsg::{self, Space};
use crate::sockaddr::{storage_to_std, RawAddr};
use crate::socket::UdpSock;
use crate::{cvt, SysError, SysResult};
use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

pub use gso::GSO_MAX_SEGMENTS;

/// Room for the control messages a receive may carry (SO_RXQ_OVFL's u32 and
/// SO_TIMESTAMPNS's timespec or SO_TIMESTAMPING's three: 24 + 64 bytes).
const CTRL_LEN: usize = 96;

/// How a batch receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// recv: one datagram per call into slot 0, no sender address (udp_sink's default).
    Recv,
    /// recvfrom: one datagram per call, into slot 0 (the unbatched baseline).
    Single,
    /// recvmsg: one datagram per call into slot 0 through a msghdr with one iovec, no
    /// address and no control data (udp_sink's `--recvmsg`).
    Msg,
    /// recvmmsg: up to a batch per call.
    Batch,
}

/// How a batch sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// sendto: one datagram per call (the unbatched baseline).
    Single,
    /// sendmmsg: the whole queue in as few calls as the kernel takes.
    Batch,
    /// UDP GSO where it pays (connected socket, datagrams queued with
    /// [`Batch::queue_send`], sizes repeating), sendmmsg otherwise or once the socket
    /// has refused GSO.
    Gso,
}

/// What a flush did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Datagrams the kernel accepted.
    pub sent: usize,
    /// Datagrams dropped because the kernel refused them (the errno is in `last_error`).
    pub failed: usize,
    /// Send calls made.
    pub syscalls: usize,
    /// The errno of the last refusal, if any.
    pub last_error: Option<i32>,
    /// sendmsg calls that carried a UDP GSO super-datagram.
    pub gso_sends: usize,
    /// GSO was asked for but the socket cannot do it (see
    /// [`UdpSock::gso_unavailable`] for the reason); the datagrams went by sendmmsg.
    pub gso_unavailable: bool,
}

impl Flushed {
    /// Adds the figures of a later send of the same batch (its refusal, if any, is the last).
    pub fn add(&mut self, later: Flushed) {
        self.sent += later.sent;
        self.failed += later.failed;
        self.syscalls += later.syscalls;
        self.last_error = later.last_error.or(self.last_error);
        self.gso_sends += later.gso_sends;
        self.gso_unavailable |= later.gso_unavailable;
    }
}

/// The sender of a received datagram, converted to a `SocketAddr` only on demand.
#[derive(Clone, Copy)]
pub struct PeerView<'a> {
    storage: &'a libc::sockaddr_storage,
}

impl PeerView<'_> {
    /// The sender's address; `None` for a family other than IPv4/IPv6.
    pub fn addr(&self) -> Option<SocketAddr> {
        storage_to_std(self.storage)
    }
}

/// A set of datagram buffers and the kernel headers that describe them.
pub struct Batch {
    slot_size: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    addrs: Vec<libc::sockaddr_storage>,
    ctrl: Vec<Space<CTRL_LEN>>,
    out_iovs: Vec<libc::iovec>,
    out_hdrs: Vec<libc::mmsghdr>,
    /// Per queued datagram, room for the SO_TIMESTAMPING control message that asks the
    /// kernel for its transmit stamp ([`Self::queue_reply_stamped`]); empty until used.
    out_ctrl: Vec<Space<{ crate::timestamping::TX_REQUEST_LEN }>>,
    queued: usize,
    /// Receive headers `0..dirty` may hold what the last receive wrote and must be set
    /// up again; the rest are ready. Resetting only those keeps an empty poll of a
    /// spinning caller from rewriting every header.
    dirty: usize,
    /// Some queued datagram carries an address (GSO needs a connected socket).
    queued_addressed: bool,
    with_ctrl: bool,
    /// Receives ask the kernel for each sender's address (off: a connected socket's
    /// reader, which knows it).
    with_names: bool,
    recv_mode: RecvMode,
    send_mode: SendMode,
    /// Queued indices the last flush's sendto/sendmmsg calls refused, in order.
    refused: Vec<usize>,
    /// How the transmit stamps of the sends are keyed; `None`: not tracked.
    keys: Option<StampKeys>,
    /// With keys: per queued datagram of the last flush, the key of the send that
    /// carried it ([`Self::carried_by`]).
    carried: Vec<u32>,
    /// The GSO transmits of the queue, planned once per flush (room for one per slot).
    plan: Vec<gso::Transmit>,
}

/// Where the key of each send's transmit stamp comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StampKeys {
    /// Every send carries its key (SCM_TS_OPT_ID): the flush's first key is this, and a
    /// send takes it plus the queue index of its first datagram
    /// ([`Batch::with_stamp_keys`]).
    Given(u32),
    /// The socket counts the datagrams it accepts (a kernel before SCM_TS_OPT_ID): the
    /// next accepted datagram takes this ([`Batch::count_stamp_keys_from`]).
    Counted(u32),
}

/// [`Batch::carried_by`] of a datagram the kernel refused.
pub const NOT_SENT: u32 = u32::MAX;

// SAFETY: the raw pointers inside the headers point only into this Batch's own heap
// buffers, which move with it; a Batch is used by one thread at a time.
unsafe impl Send for Batch {}

impl Batch {
    /// Allocates `slots` buffers of `slot_size` bytes, receiving with recvmmsg and
    /// sending with sendmmsg, without control messages.
    pub fn new(slots: usize, slot_size: usize) -> Self {
        let slots = slots.max(1);
        // SAFETY: iovec, mmsghdr and sockaddr_storage are plain C structs for which
        // all-zero is a valid value.
        let (iov, hdr, addr) = unsafe { (mem::zeroed(), mem::zeroed(), mem::zeroed()) };
        let mut b = Batch {
            slot_size,
            bufs: vec![0u8; slots * slot_size],
            iovs: vec![iov; slots],
            hdrs: vec![hdr; slots],
            addrs: vec![addr; slots],
            ctrl: Vec::new(),
            out_iovs: vec![iov; slots],
            out_hdrs: vec![hdr; slots],
            out_ctrl: Vec::new(),
            queued: 0,
            dirty: slots,
            queued_addressed: false,
            with_ctrl: false,
            with_names: true,
            recv_mode: RecvMode::Batch,
            send_mode: SendMode::Batch,
            refused: Vec::new(),
            keys: None,
            carried: Vec::new(),
            plan: Vec::with_capacity(slots),
        };
        let base = b.bufs.as_mut_ptr();
        for i in 0..slots {
            // SAFETY: i * slot_size is within bufs (slots * slot_size bytes).
            b.iovs[i].iov_base = unsafe { base.add(i * slot_size) } as *mut libc::c_void;
            b.iovs[i].iov_len = slot_size;
        }
        b
    }

    /// Receives with `mode`.
    pub fn with_recv(mut self, mode: RecvMode) -> Self {
        self.recv_mode = mode;
        self
    }

    /// Sends with `mode`.
    pub fn with_send(mut self, mode: SendMode) -> Self {
        self.send_mode = mode;
        self
    }

    /// Every send carries the key of its transmit stamp in the send (SCM_TS_OPT_ID,
    /// Linux 6.13+: [`crate::timestamping::key_per_send`] says whether the kernel takes
    /// it), on a socket with SO_TIMESTAMPING's TX flags and OPT_ID: datagram `k` of a
    /// flush goes in a send keyed the flush's first key + the queue index of the send's
    /// first datagram, so every key is the sender's own, the same whatever the kernel
    /// refused, and UDP GSO may carry stamped datagrams (its segments share one send and
    /// one stamp; runs of equal sizes are grouped in queue order, not sorted).
    /// [`Self::carried_by`] says which key each datagram went under.
    pub fn with_stamp_keys(mut self, first: u32) -> Self {
        self.keys = Some(StampKeys::Given(first));
        if self.out_ctrl.is_empty() {
            self.out_ctrl = vec![Space::default(); self.capacity()];
        }
        self
    }

    /// Keys transmit stamps by the socket's own count of the datagrams it accepted (a
    /// kernel without SCM_TS_OPT_ID, a socket with SO_TIMESTAMPING's OPT_ID): the next
    /// flush's first accepted datagram takes `next`, the following ones the next keys in
    /// order, and a refused one none. The count is the socket's: a caller that sends on
    /// several sockets sets it before each flush. Sends of such a batch never go by UDP
    /// GSO. [`Self::carried_by`] says which key each datagram took.
    pub fn count_stamp_keys_from(&mut self, next: u32) {
        self.keys = Some(StampKeys::Counted(next));
    }

    /// With `on`, batched receives also collect control messages (the SO_RXQ_OVFL drop
    /// counter, when the socket has it set). recvfrom carries none.
    pub fn with_rxq_ovfl(self, on: bool) -> Self {
        self.with_control(on)
    }

    /// With `on`, every receive (recvmmsg, even of one) collects the control messages the
    /// socket's options ask for: [`Self::rxq_ovfl`], [`Self::rx_timestamp_ns`].
    pub fn with_control(mut self, on: bool) -> Self {
        self.with_ctrl = on;
        self.ctrl = vec![Space::default(); if on { self.capacity() } else { 0 }];
        self.dirty = self.capacity();
        self
    }

    /// With `on` (the default), receives ask for each sender's address ([`Self::peer`]).
    /// Off, for a connected socket, whose datagrams all come from its peer: the kernel
    /// then copies no address out per datagram, and [`Self::peer`] is `None`.
    pub fn with_names(mut self, on: bool) -> Self {
        self.with_names = on;
        self.dirty = self.capacity();
        self
    }

    /// The send mode chosen.
    pub fn send_mode(&self) -> SendMode {
        self.send_mode
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Size of each slot in bytes.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Sets up receive headers `0..n` that a previous receive may have written.
    fn prepare_recv(&mut self, n: usize) {
        for i in 0..n.min(self.dirty) {
            let h = &mut self.hdrs[i].msg_hdr;
            self.iovs[i].iov_len = self.slot_size;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            if self.with_names {
                h.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
                h.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            } else {
                h.msg_name = std::ptr::null_mut();
                h.msg_namelen = 0;
            }
            if self.with_ctrl {
                h.msg_control = self.ctrl[i].as_mut_ptr();
                h.msg_controllen = CTRL_LEN;
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        if n >= self.dirty {
            self.dirty = 0;
        }
    }

    /// Receives up to `max` datagrams into slots `0..n` (recvmmsg, or one with
    /// recvfrom in [`RecvMode::Single`] or when `max` is 1 and no control messages are
    /// wanted: recvmmsg of one costs a msghdr and iovec import that recvfrom skips).
    /// `flags` may hold MSG_DONTWAIT; with a blocking socket recvmmsg waits for the
    /// first datagram only (MSG_WAITFORONE).
    pub fn recv(&mut self, sock: &UdpSock, max: usize, flags: i32) -> SysResult<usize> {
        let (got, call) = self.recv_call(sock, max, flags);
        cvt(got, || call.into()).map(|g| g as usize)
    }

    /// As [`Self::recv`], with "nothing to read now" (EAGAIN, EINTR) as `Ok(0)`, found
    /// from the errno before any error value is built: a busy poll's empty read costs
    /// the syscall and nothing else.
    pub fn recv_some(&mut self, sock: &UdpSock, max: usize, flags: i32) -> SysResult<usize> {
        let (got, call) = self.recv_call(sock, max, flags);
        if got < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                return Ok(0);
            }
            return Err(SysError {
                what: call.into(),
                source: e,
            });
        }
        Ok(got as usize)
    }

    /// One receive call: the kernel's return (-1 with errno set on failure) and its name.
    fn recv_call(&mut self, sock: &UdpSock, max: usize, flags: i32) -> (isize, &'static str) {
        let n = max.min(self.capacity()).max(1);
        match self.recv_mode {
            RecvMode::Recv => return (self.recv_plain(sock, flags), "recv"),
            RecvMode::Msg => return (self.recv_msg(sock, flags), "recvmsg"),
            RecvMode::Single => return (self.recv_one(sock, flags), "recvfrom"),
            RecvMode::Batch if n == 1 && !self.with_ctrl => {
                return (self.recv_one(sock, flags), "recvfrom")
            }
            RecvMode::Batch => {}
        }
        self.prepare_recv(n);
        // SAFETY: hdrs[0..n] point at live iovecs, address and control buffers owned by
        // self, each with the lengths set in prepare_recv; the kernel writes within them.
        let got = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as u32,
                flags | libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        // The kernel wrote the headers of what it returned; on an error, assume the first.
        self.dirty = self.dirty.max(if got > 0 { got as usize } else { 1 });
        (got as isize, "recvmmsg")
    }

    /// Receives one datagram into slot 0 with recvfrom; returns 1, or -1 with errno set.
    fn recv_one(&mut self, sock: &UdpSock, flags: i32) -> isize {
        if !self.with_names {
            return self.recv_plain(sock, flags);
        }
        self.dirty = self.dirty.max(1);
        let mut namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: slot 0 (slot_size bytes) and addrs[0] (namelen bytes) are live and
        // writable; the kernel writes within them and updates namelen.
        let len = unsafe {
            libc::recvfrom(
                sock.as_raw_fd(),
                self.bufs.as_mut_ptr() as *mut libc::c_void,
                self.slot_size,
                flags,
                &mut self.addrs[0] as *mut _ as *mut libc::sockaddr,
                &mut namelen,
            )
        };
        self.took_one(len, namelen, 0)
    }

    /// Receives one datagram into slot 0 with recv; returns 1, or -1 with errno set.
    fn recv_plain(&mut self, sock: &UdpSock, flags: i32) -> isize {
        self.dirty = self.dirty.max(1);
        // SAFETY: slot 0 (slot_size bytes) is live and writable; the kernel writes within it.
        let len = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                self.bufs.as_mut_ptr() as *mut libc::c_void,
                self.slot_size,
                flags,
            )
        };
        self.took_one(len, 0, 0)
    }

    /// Receives one datagram into slot 0 with recvmsg (one iovec, no name, no control);
    /// returns 1, or -1 with errno set.
    fn recv_msg(&mut self, sock: &UdpSock, flags: i32) -> isize {
        self.dirty = self.dirty.max(1);
        let mut iov = libc::iovec {
            iov_base: self.bufs.as_mut_ptr() as *mut libc::c_void,
            iov_len: self.slot_size,
        };
        // SAFETY: msghdr is plain data; all-zero (no name, no control) is valid.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // SAFETY: msg points at a live iovec over slot 0, with its length.
        let len = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, flags) };
        self.took_one(len, 0, msg.msg_flags)
    }

    /// Records a single receive's result (`len` from the call, -1 on error) in slot 0's
    /// header; returns 1, or -1 with errno untouched.
    fn took_one(&mut self, len: isize, namelen: libc::socklen_t, msg_flags: i32) -> isize {
        if len < 0 {
            return -1;
        }
        let h = &mut self.hdrs[0].msg_hdr;
        h.msg_namelen = namelen;
        h.msg_control = std::ptr::null_mut();
        h.msg_controllen = 0;
        h.msg_flags = msg_flags;
        self.hdrs[0].msg_len = len as u32;
        1
    }

    /// Length of the datagram received in slot `i`.
    pub fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    /// True when the batch has no slots (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.hdrs.is_empty()
    }

    /// True when the datagram in slot `i` was longer than the slot (MSG_TRUNC).
    pub fn truncated(&self, i: usize) -> bool {
        self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0
    }

    /// The whole slot `i`, for reading a request and writing a response in place.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        let s = self.slot_size;
        &mut self.bufs[i * s..(i + 1) * s]
    }

    /// Slot `i` for writing and its sender for reading, borrowed together (the address
    /// lives in a separate array, so the borrows are disjoint).
    pub fn slot_and_peer(&mut self, i: usize) -> (&mut [u8], PeerView<'_>) {
        let s = self.slot_size;
        (
            &mut self.bufs[i * s..(i + 1) * s],
            PeerView {
                storage: &self.addrs[i],
            },
        )
    }

    /// The received bytes of slot `i`.
    pub fn data(&self, i: usize) -> &[u8] {
        let s = self.slot_size;
        &self.bufs[i * s..i * s + self.len(i).min(s)]
    }

    /// The sender of slot `i`.
    pub fn peer(&self, i: usize) -> Option<SocketAddr> {
        if !self.with_names {
            return None;
        }
        storage_to_std(&self.addrs[i])
    }

    /// The sender of slot `i` in kernel layout.
    pub fn peer_raw(&self, i: usize) -> RawAddr {
        RawAddr {
            storage: self.addrs[i],
            len: self.hdrs[i].msg_hdr.msg_namelen,
        }
    }

    /// The control messages received with slot `i`.
    pub fn cmsgs(&self, i: usize) -> cmsg::Iter<'_> {
        let buf = self.ctrl.get(i).map(|c| c.bytes()).unwrap_or(&[]);
        cmsg::Iter::new(&self.hdrs[i].msg_hdr, buf)
    }

    /// The socket's cumulative drop count carried by slot `i` (SO_RXQ_OVFL). The kernel
    /// attaches it only once the socket has dropped something, so `None` means zero so far.
    pub fn rxq_ovfl(&self, i: usize) -> Option<u32> {
        self.cmsgs(i)
            .find(|c| c.level == libc::SOL_SOCKET && c.ty == libc::SO_RXQ_OVFL)
            .and_then(|c| c.read::<u32>())
    }

    /// When the kernel received slot `i`, in ns since the Unix epoch (CLOCK_REALTIME), from
    /// SO_TIMESTAMPNS (set with [`UdpSock::set_timestamp_ns`]) or SO_TIMESTAMPING's software
    /// stamp (set with [`UdpSock::set_timestamping`]); `None` without either.
    pub fn rx_timestamp_ns(&self, i: usize) -> Option<u64> {
        crate::timestamping::rx_stamp(self.cmsgs(i))
    }

    /// Queues slot `i`'s first `len` bytes to go back to the slot's sender.
    pub fn queue_reply(&mut self, i: usize, len: usize) {
        self.queue(i, len, true);
    }

    /// Queues slot `i`'s first `len` bytes to go back to the slot's sender, asking the
    /// kernel for this datagram's software transmit stamp (an SO_TIMESTAMPING control
    /// message with SOF_TIMESTAMPING_TX_SOFTWARE on this send only, as chronyd asks for
    /// the responses it will serve interleaved). The stamp comes back on the socket's
    /// error queue ([`crate::timestamping::ErrQueue`]) with the next key of the socket's
    /// count of stamped datagrams, when the socket reports software stamps with OPT_ID
    /// ([`crate::timestamping::TX_ON_REQUEST`]); other datagrams take no key. Not for
    /// [`SendMode::Gso`], which rebuilds the headers.
    pub fn queue_reply_stamped(&mut self, i: usize, len: usize) {
        if self.out_ctrl.is_empty() {
            self.out_ctrl = vec![Space::default(); self.capacity()];
        }
        let k = self.queued;
        self.queue(i, len, true);
        // SO_TIMESTAMPING as a control message takes the TX flags only (a u32); the key is
        // the socket's count.
        crate::timestamping::request_tx_stamp(
            &mut self.out_hdrs[k].msg_hdr,
            &mut self.out_ctrl[k],
            None,
        );
    }

    /// Queues slot `i`'s first `len` bytes for a connected socket (no address).
    pub fn queue_send(&mut self, i: usize, len: usize) {
        self.queue(i, len, false);
    }

    fn queue(&mut self, i: usize, len: usize, with_addr: bool) {
        let k = self.queued;
        self.out_iovs[k] = libc::iovec {
            iov_base: self.iovs[i].iov_base,
            iov_len: len.min(self.slot_size),
        };
        let h = &mut self.out_hdrs[k].msg_hdr;
        h.msg_iov = &mut self.out_iovs[k];
        h.msg_iovlen = 1;
        if with_addr {
            h.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = self.hdrs[i].msg_hdr.msg_namelen;
            self.queued_addressed = true;
        } else {
            h.msg_name = std::ptr::null_mut();
            h.msg_namelen = 0;
        }
        h.msg_control = std::ptr::null_mut();
        h.msg_controllen = 0;
        h.msg_flags = 0;
        self.queued += 1;
    }

    /// The queued indices (in queue order) that the last flush's sendto or sendmmsg calls
    /// refused: which of a batch took no transmit-stamp key. Not kept for UDP GSO sends,
    /// which reorder the queue.
    pub fn refused(&self) -> &[usize] {
        &self.refused
    }

    /// With [`Self::with_stamp_keys`], for each datagram of the last flush in queue order:
    /// the key of the send that carried it (its transmit stamp's key: the segments of a
    /// UDP GSO send share theirs), or [`NOT_SENT`] when the kernel refused it.
    pub fn carried_by(&self) -> &[u32] {
        &self.carried
    }

    /// The key a send whose first datagram is queued at `at` carries in its control
    /// message (only where sends carry keys).
    fn key_at(&self, at: usize) -> Option<u32> {
        match self.keys {
            Some(StampKeys::Given(k)) => Some(k.wrapping_add(at as u32)),
            _ => None,
        }
    }

    /// Records that queued datagrams `at..at + n` left, each in its own send (`together`:
    /// all in one, a GSO send keyed by its first): the one place each datagram's key is
    /// decided.
    fn carried(&mut self, at: usize, n: usize, together: bool) {
        match self.keys.as_mut() {
            None => {}
            Some(StampKeys::Given(first)) => {
                let first = *first;
                for k in at..at + n {
                    let send = if together { at } else { k };
                    self.carried[k] = first.wrapping_add(send as u32);
                }
            }
            Some(StampKeys::Counted(next)) => {
                for k in at..at + n {
                    self.carried[k] = *next;
                    *next = next.wrapping_add(1);
                }
            }
        }
    }

    /// Datagrams queued and not yet flushed.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Sends everything queued, by the batch's [`SendMode`]. A datagram the kernel
    /// refuses is counted and skipped, never retried forever: UDP may drop, and a full
    /// socket buffer is overload, not an error.
    pub fn flush(&mut self, sock: &UdpSock, flags: i32) -> Flushed {
        self.flush_as(sock, flags, self.send_mode)
    }

    /// As [`Self::flush`], one datagram per message whatever the batch's mode: a
    /// [`SendMode::Gso`] batch sends this queue by sendmmsg, so the receiver gets its
    /// datagrams one by one as the kernel delivers each (and, with stamp keys, each its
    /// own stamp) rather than as one super-datagram.
    pub fn flush_apart(&mut self, sock: &UdpSock, flags: i32) -> Flushed {
        let mode = match self.send_mode {
            SendMode::Gso => SendMode::Batch,
            m => m,
        };
        self.flush_as(sock, flags, mode)
    }

    fn flush_as(&mut self, sock: &UdpSock, flags: i32, mode: SendMode) -> Flushed {
        let mut f = Flushed::default();
        self.refused.clear();
        if self.keys.is_some() {
            self.carried.clear();
            self.carried.resize(self.queued, NOT_SENT);
        }
        let counted = matches!(self.keys, Some(StampKeys::Counted(_)));
        match mode {
            SendMode::Single => self.send_from(sock, 0, flags, true, &mut f),
            SendMode::Batch => self.send_from(sock, 0, flags, false, &mut f),
            // A GSO send is one count of the socket's, whatever it carries.
            SendMode::Gso if self.queued < 2 || self.queued_addressed || counted => {
                self.send_from(sock, 0, flags, false, &mut f)
            }
            SendMode::Gso if !sock.gso_usable() => {
                f.gso_unavailable = true;
                self.send_from(sock, 0, flags, false, &mut f)
            }
            SendMode::Gso => self.flush_gso(sock, &mut f),
        }
        if let Some(StampKeys::Given(k)) = self.keys.as_mut() {
            *k = k.wrapping_add(self.queued as u32);
        }
        self.queued = 0;
        self.queued_addressed = false;
        f
    }

    /// Sends queued datagrams `from..queued` with sendto each (`single`) or sendmmsg;
    /// a last lone datagram goes by sendto either way (sendmmsg of one only adds work).
    fn send_from(
        &mut self,
        sock: &UdpSock,
        from: usize,
        flags: i32,
        single: bool,
        f: &mut Flushed,
    ) {
        let total = self.queued;
        for k in from..total {
            if let Some(key) = self.key_at(k) {
                let mut enc =
                    cmsg::Encoder::new(&mut self.out_hdrs[k].msg_hdr, &mut self.out_ctrl[k]);
                let pushed = enc.push(libc::SOL_SOCKET, crate::timestamping::SCM_TS_OPT_ID, key);
                debug_assert!(pushed.is_ok(), "TX_REQUEST_LEN holds a key");
                enc.finish();
            }
        }
        let mut at = from;
        while at < total {
            f.syscalls += 1;
            let res = if single || total - at == 1 {
                self.send_single(sock, at, flags).map(|_| 1)
            } else {
                // SAFETY: out_hdrs[at..total] were filled by queue() and point at live
                // slots, iovecs and addresses owned by self.
                let r = unsafe {
                    libc::sendmmsg(
                        sock.as_raw_fd(),
                        self.out_hdrs.as_mut_ptr().add(at),
                        (total - at) as u32,
                        flags,
                    )
                };
                cvt(r, || "sendmmsg".into()).map(|r| r as usize)
            };
            match res {
                Ok(0) => {
                    f.failed += total - at;
                    self.refused.extend(at..total);
                    break;
                }
                Ok(n) => {
                    f.sent += n;
                    self.carried(at, n, false);
                    at += n;
                }
                Err(e) if e.errno() == Some(libc::EINTR) => continue,
                Err(e) => {
                    f.failed += 1;
                    f.last_error = e.errno();
                    self.refused.push(at);
                    at += 1;
                }
            }
        }
    }

    fn send_single(&self, sock: &UdpSock, k: usize, flags: i32) -> SysResult<usize> {
        let h = &self.out_hdrs[k].msg_hdr;
        if !h.msg_control.is_null() {
            // sendto carries no control message: a datagram asking for its stamp goes
            // by sendmsg.
            // SAFETY: out_hdrs[k] was filled by queue() and queue_reply_stamped(): its
            // iovec, address and control buffer are live and owned by self.
            let n = unsafe { libc::sendmsg(sock.as_raw_fd(), h, flags) };
            return cvt(n, || "sendmsg".into()).map(|n| n as usize);
        }
        let iov = &self.out_iovs[k];
        // SAFETY: iov points into one of our slots with a length within it.
        let data = unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len) };
        if h.msg_name.is_null() {
            sock.send_to(data, None, flags)
        } else {
            // SAFETY: msg_name points at one of our sockaddr_storage entries.
            let storage = unsafe { *(h.msg_name as *const libc::sockaddr_storage) };
            let raw = RawAddr {
                storage,
                len: h.msg_namelen,
            };
            sock.send_to(data, Some(&raw), flags)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A bound server socket and a client socket connected to it, on loopback.
    pub(crate) fn connected_pair() -> (UdpSock, UdpSock) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let srv = UdpSock::new_for(&any).unwrap();
        srv.bind(&any).unwrap();
        let cli = UdpSock::new_for(&any).unwrap();
        cli.bind(&any).unwrap();
        cli.connect(&srv.local_addr().unwrap()).unwrap();
        (srv, cli)
    }

    #[test]
    fn batch_echo_round_trip() {
        let (srv, cli) = connected_pair();
        srv.set_rxq_ovfl(true).unwrap();

        let mut tx = Batch::new(4, 2048);
        for i in 0..4 {
            tx.slot_mut(i)[..3].copy_from_slice(&[i as u8; 3]);
            tx.queue_send(i, 3);
        }
        let f = tx.flush(&cli, 0);
        assert_eq!(f.sent, 4);
        assert_eq!(f.syscalls, 1);

        let mut rx = Batch::new(8, 2048)
            .with_rxq_ovfl(true)
            .with_send(SendMode::Single);
        let mut got = 0;
        while got < 4 {
            let n = rx.recv(&srv, 8, 0).unwrap();
            for i in 0..n {
                assert_eq!(rx.data(i), &[(got + i) as u8; 3]);
                assert_eq!(rx.peer(i), Some(cli.local_addr().unwrap()));
                assert_eq!(rx.rxq_ovfl(i), None, "no drops yet, so no cmsg");
                rx.queue_reply(i, 3);
            }
            got += n;
            let f = rx.flush(&srv, 0);
            assert_eq!((f.sent, f.syscalls), (n, n), "one sendto each");
        }
        let mut back = Batch::new(8, 2048);
        let mut seen = 0;
        while seen < 4 {
            seen += back.recv(&cli, 8, 0).unwrap();
        }
    }

    #[test]
    fn the_drop_count_arrives_as_a_control_message() {
        let (srv, cli) = connected_pair();
        srv.set_rxq_ovfl(true).unwrap();
        srv.set_rcvbuf(1, false).unwrap(); // the kernel's minimum: a few datagrams
        let mut tx = Batch::new(64, 1000);
        for i in 0..64 {
            tx.queue_send(i, 1000);
        }
        assert_eq!(tx.flush(&cli, 0).sent, 64);
        let dropped = srv.drops().unwrap();
        assert!(dropped > 0, "a tiny receive buffer overflows");
        // The kernel stamps a datagram with the count when it queues it, so the ones
        // queued before the overflow carry nothing; one sent after it carries the count.
        let mut rx = Batch::new(64, 2048).with_rxq_ovfl(true);
        let n = rx.recv(&srv, 64, libc::MSG_DONTWAIT).unwrap();
        assert_eq!(n as u32 + dropped, 64, "every datagram read or dropped");
        assert_eq!(rx.rxq_ovfl(0), None);
        cli.send_to(b"after", None, 0).unwrap();
        assert_eq!(rx.recv(&srv, 64, 0).unwrap(), 1);
        assert_eq!(rx.data(0), b"after");
        assert_eq!(
            rx.rxq_ovfl(0),
            Some(dropped),
            "SO_RXQ_OVFL equals SO_MEMINFO"
        );
        // A receive of one still asks for control messages when they are wanted.
        cli.send_to(b"one", None, 0).unwrap();
        assert_eq!(rx.recv(&srv, 1, 0).unwrap(), 1);
        assert_eq!((rx.data(0), rx.rxq_ovfl(0)), (&b"one"[..], Some(dropped)));
    }

    #[test]
    fn receive_timestamps_arrive_as_control_messages() {
        let (srv, cli) = connected_pair();
        assert!(!srv.timestamp_ns().unwrap(), "off by default");
        srv.set_timestamp_ns(true).unwrap();
        assert!(srv.timestamp_ns().unwrap(), "read back on");
        let wall = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        };
        let before = wall();
        for b in [b"a", b"b"] {
            cli.send_to(b, None, 0).unwrap();
        }
        let mut rx = Batch::new(4, 64).with_control(true);
        let mut got = 0;
        while got < 2 {
            // Even a receive of one goes through recvmmsg, to carry the stamp.
            let n = rx.recv(&srv, 1, 0).unwrap();
            let t = rx.rx_timestamp_ns(0).expect("a stamp on every datagram");
            assert!(t >= before && t <= wall(), "{before} <= {t}");
            got += n;
        }
        // Without control space there is nothing to read.
        cli.send_to(b"c", None, 0).unwrap();
        let mut plain = Batch::new(4, 64);
        assert_eq!(plain.recv(&srv, 4, 0).unwrap(), 1);
        assert_eq!(plain.rx_timestamp_ns(0), None);
    }

    #[test]
    fn a_batch_without_names_takes_no_sender_address_from_the_kernel() {
        // The generator's reader: a connected socket, arrival stamps, no addresses.
        let (srv, cli) = connected_pair();
        cli.set_timestamp_ns(true).unwrap();
        let mut rx = Batch::new(4, 64).with_control(true).with_names(false);
        let mut plain = Batch::new(4, 64).with_names(false);
        for (batch, max) in [(&mut rx, 4), (&mut plain, 1)] {
            srv.send_to(
                b"abc",
                Some(&RawAddr::from_std(&cli.local_addr().unwrap())),
                0,
            )
            .unwrap();
            let mut got = 0;
            while got == 0 {
                got = batch.recv(&cli, max, 0).unwrap();
            }
            assert_eq!(batch.data(0), b"abc");
            // The kernel wrote no address: the slot's is still all zero.
            assert_eq!(batch.addrs[0].ss_family, 0, "an address was copied out");
            assert_eq!(batch.peer(0), None);
        }
        assert!(rx.rx_timestamp_ns(0).is_some(), "the stamp still comes");
    }

    #[test]
    fn lone_receives_and_sends_mix_with_batches() {
        let (srv, cli) = connected_pair();
        let mut tx = Batch::new(4, 64);
        let mut rx = Batch::new(4, 64);
        for round in 0..3u8 {
            let n = usize::from(round) + 1;
            for i in 0..n {
                tx.slot_mut(i)[..2].copy_from_slice(&[round, i as u8]);
                tx.queue_send(i, 2 + i);
            }
            assert_eq!((tx.flush(&cli, 0).sent, tx.queued()), (n, 0));
            let mut got = 0;
            while got < n {
                // Alternate receives of one (recvfrom) and of a batch (recvmmsg).
                let k = rx.recv(&srv, if got % 2 == 0 { 1 } else { 4 }, 0).unwrap();
                for i in 0..k {
                    assert_eq!(rx.len(i), 2 + got + i);
                    assert_eq!(&rx.data(i)[..2], &[round, (got + i) as u8]);
                    assert_eq!(rx.peer(i), Some(cli.local_addr().unwrap()));
                }
                got += k;
            }
        }
    }

    #[test]
    fn every_receive_call_reports_the_full_length_with_msg_trunc() {
        let (srv, cli) = connected_pair();
        for mode in [
            RecvMode::Recv,
            RecvMode::Single,
            RecvMode::Msg,
            RecvMode::Batch,
        ] {
            let mut rx = Batch::new(2, 64).with_recv(mode);
            for len in [3usize, 100] {
                cli.send_to(&vec![7u8; len], None, 0).unwrap();
                assert_eq!(rx.recv(&srv, 2, libc::MSG_TRUNC).unwrap(), 1, "{mode:?}");
                assert_eq!(rx.len(0), len, "{mode:?}: the datagram's length");
                assert_eq!(rx.data(0), &vec![7u8; len.min(64)][..], "{mode:?}");
            }
            // recvmsg and recvmmsg see the kernel's MSG_TRUNC; recv and recvfrom cannot.
            let cut = matches!(mode, RecvMode::Msg | RecvMode::Batch);
            assert_eq!(rx.truncated(0), cut, "{mode:?}");
            let named = matches!(mode, RecvMode::Single | RecvMode::Batch);
            assert_eq!(rx.peer(0).is_some(), named, "{mode:?}");
        }
    }

    #[test]
    fn single_receive_uses_slot_zero_and_carries_no_control_messages() {
        let (srv, cli) = connected_pair();
        srv.set_rxq_ovfl(true).unwrap();
        cli.send_to(b"hi", None, 0).unwrap();
        let mut rx = Batch::new(4, 64)
            .with_recv(RecvMode::Single)
            .with_rxq_ovfl(true);
        assert_eq!(rx.recv(&srv, 4, 0).unwrap(), 1);
        assert_eq!(rx.data(0), b"hi");
        assert_eq!(rx.cmsgs(0).count(), 0);
    }
}
