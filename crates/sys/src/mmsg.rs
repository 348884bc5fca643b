//! Batched datagram I/O with recvmmsg(2)/sendmmsg(2).
//!
//! A [`Batch`] owns `slots` buffers of `slot_size` bytes plus the kernel structures that
//! point into them, allocated once. Receiving fills slots `0..n`; a handler rewrites a slot
//! in place; [`Batch::queue_reply`] marks it to go back to its sender, and
//! [`Batch::flush`] sends everything queued in as few sendmmsg calls as the kernel allows.
//! Nothing is allocated per packet.

use crate::sockaddr::{storage_to_std, RawAddr};
use crate::socket::{consts::SO_RXQ_OVFL, is_would_block, UdpSock};
use crate::{cvt, SysError, SysResult};
use std::mem;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

const CTRL_LEN: usize = 64;
const SOL_UDP: i32 = 17;
const UDP_SEGMENT: i32 = 103;
/// Most segments the kernel accepts in one UDP GSO send (UDP_MAX_SEGMENTS was 64 before 6.x).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Largest UDP GSO send: the IP total length field (16 bits) less IPv6/UDP headers.
const GSO_MAX_BYTES: usize = 65535 - 48;

/// What a flush did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flushed {
    /// Datagrams the kernel accepted.
    pub sent: usize,
    /// Datagrams dropped because the kernel refused them (the errno is in `last_error`).
    pub failed: usize,
    /// sendmmsg calls made.
    pub syscalls: usize,
    /// The errno of the last refusal, if any.
    pub last_error: Option<i32>,
    /// sendmsg calls that carried a UDP GSO super-datagram.
    pub gso_sends: usize,
}

/// The sender of a received datagram, converted to a `SocketAddr` only on demand.
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
    ctrl: Vec<[u8; CTRL_LEN]>,
    out_iovs: Vec<libc::iovec>,
    out_hdrs: Vec<libc::mmsghdr>,
    queued: usize,
    with_ctrl: bool,
}

// SAFETY: the raw pointers inside the headers point only into this Batch's own heap
// buffers, which move with it; a Batch is used by one thread at a time.
unsafe impl Send for Batch {}

impl Batch {
    /// Allocates `slots` buffers of `slot_size` bytes. With `with_ctrl`, receive calls
    /// also collect control messages (the SO_RXQ_OVFL drop counter).
    pub fn new(slots: usize, slot_size: usize, with_ctrl: bool) -> Self {
        let slots = slots.max(1);
        let mut b = Batch {
            slot_size,
            bufs: vec![0u8; slots * slot_size],
            // SAFETY (all zeroed below): iovec, mmsghdr and sockaddr_storage are plain C
            // structs for which all-zero is a valid value.
            iovs: vec![unsafe { mem::zeroed() }; slots],
            hdrs: vec![unsafe { mem::zeroed() }; slots],
            addrs: vec![unsafe { mem::zeroed() }; slots],
            ctrl: vec![[0u8; CTRL_LEN]; slots],
            out_iovs: vec![unsafe { mem::zeroed() }; slots],
            out_hdrs: vec![unsafe { mem::zeroed() }; slots],
            queued: 0,
            with_ctrl,
        };
        let base = b.bufs.as_mut_ptr();
        for i in 0..slots {
            // SAFETY: i * slot_size is within bufs (slots * slot_size bytes).
            b.iovs[i].iov_base = unsafe { base.add(i * slot_size) } as *mut libc::c_void;
            b.iovs[i].iov_len = slot_size;
        }
        b
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Size of each slot in bytes.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    fn prepare_recv(&mut self, n: usize) {
        for i in 0..n {
            let h = &mut self.hdrs[i].msg_hdr;
            self.iovs[i].iov_len = self.slot_size;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            if self.with_ctrl {
                h.msg_control = self.ctrl[i].as_mut_ptr() as *mut libc::c_void;
                h.msg_controllen = CTRL_LEN;
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
    }

    /// Receives up to `max` datagrams (recvmmsg). `flags` may hold MSG_DONTWAIT; with a
    /// blocking socket the call waits for the first datagram only (MSG_WAITFORONE).
    pub fn recv(&mut self, sock: &UdpSock, max: usize, flags: i32) -> SysResult<usize> {
        let n = max.min(self.capacity()).max(1);
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
        cvt(got, || "recvmmsg".into()).map(|g| g as usize)
    }

    /// Receives one datagram into slot 0 with recvfrom, the one-packet-per-call path.
    pub fn recv_one(&mut self, sock: &UdpSock, flags: i32) -> SysResult<usize> {
        let slot = &mut self.bufs[..self.slot_size];
        let (len, raw) = sock.recv_from(slot, flags)?;
        self.addrs[0] = raw.storage;
        self.hdrs[0].msg_hdr.msg_namelen = raw.len;
        self.hdrs[0].msg_hdr.msg_controllen = 0;
        self.hdrs[0].msg_hdr.msg_flags = 0;
        self.hdrs[0].msg_len = len as u32;
        Ok(1)
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
        storage_to_std(&self.addrs[i])
    }

    /// The sender of slot `i` in kernel layout.
    pub fn peer_raw(&self, i: usize) -> RawAddr {
        RawAddr {
            storage: self.addrs[i],
            len: self.hdrs[i].msg_hdr.msg_namelen,
        }
    }

    /// The socket's cumulative drop count carried by slot `i` (SO_RXQ_OVFL). The kernel
    /// attaches it only once the socket has dropped something, so `None` means zero so far.
    pub fn rxq_ovfl(&self, i: usize) -> Option<u32> {
        if !self.with_ctrl {
            return None;
        }
        let h = &self.hdrs[i].msg_hdr;
        // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
        // msg_controllen, which the kernel set to the bytes it wrote.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_RXQ_OVFL {
                    let p = libc::CMSG_DATA(c) as *const u32;
                    return Some(std::ptr::read_unaligned(p));
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
        None
    }

    /// Queues slot `i`'s first `len` bytes to go back to the slot's sender.
    pub fn queue_reply(&mut self, i: usize, len: usize) {
        self.queue(i, len, true);
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
        } else {
            h.msg_name = std::ptr::null_mut();
            h.msg_namelen = 0;
        }
        h.msg_control = std::ptr::null_mut();
        h.msg_controllen = 0;
        h.msg_flags = 0;
        self.queued += 1;
    }

    /// Datagrams queued and not yet flushed.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Sends everything queued. `one_by_one` uses sendto per datagram (the unbatched
    /// baseline). A datagram the kernel refuses is counted and skipped, never retried
    /// forever: UDP may drop, and a full socket buffer is overload, not an error.
    pub fn flush(&mut self, sock: &UdpSock, flags: i32, one_by_one: bool) -> Flushed {
        let mut f = Flushed::default();
        let total = self.queued;
        let mut at = 0;
        while at < total {
            let res = if one_by_one {
                f.syscalls += 1;
                self.send_single(sock, at, flags).map(|_| 1)
            } else {
                f.syscalls += 1;
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
                    break;
                }
                Ok(n) => {
                    f.sent += n;
                    at += n;
                }
                Err(e) if e.errno() == Some(libc::EINTR) => continue,
                Err(e) => {
                    f.failed += 1;
                    f.last_error = e.errno();
                    at += 1;
                }
            }
        }
        self.queued = 0;
        f
    }

    /// Sends everything queued for a connected socket as UDP GSO super-datagrams
    /// (UDP_SEGMENT): one skb carries up to 64 equal datagrams through the sender's IP
    /// stack, and the kernel splits it late. Datagrams are grouped by size (their order on
    /// a connected socket does not matter) and each group goes in as few sends as the
    /// limits allow; when the sizes are too mixed for groups to pay, it uses sendmmsg.
    /// Returns `Err` with the errno if the kernel refuses GSO on the first send (the caller
    /// then falls back to [`Self::flush`]); nothing queued is lost in that case.
    pub fn flush_gso(&mut self, sock: &UdpSock) -> SysResult<Flushed> {
        let total = self.queued;
        // Descending and stable: same-size datagrams keep their order.
        self.out_iovs[..total].sort_by_key(|v| std::cmp::Reverse(v.iov_len));
        let groups = 1 + self.out_iovs[..total]
            .windows(2)
            .filter(|w| w[0].iov_len != w[1].iov_len)
            .count();
        if groups > 1 && groups * 3 > total {
            return Ok(self.flush(sock, 0, false));
        }
        let mut f = Flushed::default();
        let mut at = 0;
        while at < total {
            let seg = self.out_iovs[at].iov_len;
            let run = self.out_iovs[at..total]
                .iter()
                .take_while(|v| v.iov_len == seg)
                .count();
            let per_send = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / seg.max(1)).max(1);
            let end = at + run;
            while at < end {
                let n = per_send.min(end - at);
                f.syscalls += 1;
                match self.send_gso(sock, at, n, seg) {
                    Ok(()) => {
                        f.sent += n;
                        f.gso_sends += 1;
                        at += n;
                    }
                    Err(e) if e.errno() == Some(libc::EINTR) => f.syscalls -= 1,
                    Err(e) if f.sent == 0 && f.failed == 0 && gso_unsupported(&e) => return Err(e),
                    Err(e) => {
                        f.failed += n;
                        f.last_error = e.errno();
                        at += n;
                    }
                }
            }
        }
        self.queued = 0;
        Ok(f)
    }

    /// One sendmsg of `n` queued datagrams from `at`, all `seg` bytes, with UDP_SEGMENT.
    fn send_gso(&mut self, sock: &UdpSock, at: usize, n: usize, seg: usize) -> SysResult<()> {
        let mut ctrl = [0u64; 4];
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut h: libc::msghdr = unsafe { mem::zeroed() };
        h.msg_iov = self.out_iovs[at..].as_mut_ptr();
        h.msg_iovlen = n;
        h.msg_control = ctrl.as_mut_ptr() as *mut libc::c_void;
        // SAFETY: CMSG_SPACE only computes a size.
        h.msg_controllen = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as u32) } as usize;
        // SAFETY: the control buffer (32 bytes, 8-aligned) holds one cmsghdr with a u16;
        // CMSG_FIRSTHDR/CMSG_DATA point inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = SOL_UDP;
            (*c).cmsg_type = UDP_SEGMENT;
            (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg as u16);
        }
        // SAFETY: h points at n live iovecs (our slots) and the local control buffer.
        let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &h, 0) };
        cvt(r, || format!("sendmsg(UDP_SEGMENT={seg})")).map(|_| ())
    }

    fn send_single(&self, sock: &UdpSock, k: usize, flags: i32) -> SysResult<usize> {
        let h = &self.out_hdrs[k].msg_hdr;
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

/// Errnos that mean "this kernel or path cannot do UDP GSO" rather than a lost datagram.
fn gso_unsupported(e: &SysError) -> bool {
    matches!(
        e.errno(),
        Some(libc::EINVAL) | Some(libc::EIO) | Some(libc::ENOPROTOOPT) | Some(libc::EOPNOTSUPP)
    )
}

/// Receives with recvmmsg or recvfrom; EAGAIN becomes `Ok(0)`.
pub fn recv_some(
    batch: &mut Batch,
    sock: &UdpSock,
    max: usize,
    flags: i32,
    one_by_one: bool,
) -> Result<usize, SysError> {
    let r = if one_by_one {
        batch.recv_one(sock, flags)
    } else {
        batch.recv(sock, max, flags)
    };
    match r {
        Ok(n) => Ok(n),
        Err(e) if is_would_block(&e) => Ok(0),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound server socket and a client socket connected to it, on loopback.
    fn connected_pair() -> (UdpSock, UdpSock) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let srv = UdpSock::new_for(&any).unwrap();
        srv.bind(&any).unwrap();
        let cli = UdpSock::new_for(&any).unwrap();
        cli.bind(&any).unwrap();
        cli.connect(&srv.local_addr().unwrap()).unwrap();
        (srv, cli)
    }

    #[test]
    fn gso_send_arrives_as_separate_datagrams() {
        let (srv, cli) = connected_pair();
        let n = 100; // more than one GSO send's worth of segments
        let mut tx = Batch::new(n, 256, false);
        for i in 0..n {
            let len = if i == n - 1 { 7 } else { 100 };
            tx.slot_mut(i)[..len].fill(i as u8);
            tx.queue_send(i, len);
        }
        let f = tx.flush_gso(&cli).expect("loopback supports UDP GSO");
        assert_eq!(f.sent, n);
        // 99 of 100 bytes (two sends: 64 + 35 segments) and the 7-byte one on its own.
        assert_eq!(f.syscalls, 3);
        let mut rx = Batch::new(128, 2048, false);
        let mut got = 0;
        while got < n {
            let k = rx.recv(&srv, 128, 0).unwrap();
            for i in 0..k {
                let want = if got + i == n - 1 { 7 } else { 100 };
                assert_eq!(
                    rx.data(i),
                    &vec![(got + i) as u8; want][..],
                    "datagram {}",
                    got + i
                );
            }
            got += k;
        }
    }

    #[test]
    fn gso_groups_mixed_sizes_and_never_cuts_a_datagram() {
        let (srv, cli) = connected_pair();
        // Three sizes, interleaved: 29, 33, 31, 29, 33, 31, ...
        let sizes = [29usize, 33, 31];
        let n = 30;
        let mut tx = Batch::new(n, 64, false);
        for i in 0..n {
            let len = sizes[i % 3];
            tx.slot_mut(i)[..len].fill(i as u8);
            tx.queue_send(i, len);
        }
        let f = tx.flush_gso(&cli).unwrap();
        assert_eq!((f.sent, f.gso_sends), (n, 3), "one send per size");
        let mut rx = Batch::new(64, 2048, false);
        let mut seen = vec![false; n];
        let mut got = 0;
        while got < n {
            let k = rx.recv(&srv, 64, 0).unwrap();
            for i in 0..k {
                let d = rx.data(i);
                let id = d[0] as usize;
                assert_eq!(d.len(), sizes[id % 3], "datagram {id} arrived whole");
                assert!(d.iter().all(|&b| b as usize == id));
                seen[id] = true;
            }
            got += k;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn batch_echo_round_trip() {
        let (srv, cli) = connected_pair();
        srv.set_rxq_ovfl(true).unwrap();

        let mut tx = Batch::new(4, 2048, false);
        for i in 0..4 {
            tx.slot_mut(i)[..3].copy_from_slice(&[i as u8; 3]);
            tx.queue_send(i, 3);
        }
        let f = tx.flush(&cli, 0, false);
        assert_eq!(f.sent, 4);
        assert_eq!(f.syscalls, 1);

        let mut rx = Batch::new(8, 2048, true);
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
            assert_eq!(rx.flush(&srv, 0, true).sent, n);
        }
        let mut back = Batch::new(8, 2048, false);
        let mut seen = 0;
        while seen < 4 {
            seen += back.recv(&cli, 8, 0).unwrap();
        }
    }
}
