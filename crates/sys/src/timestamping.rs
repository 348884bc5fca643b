//! Kernel transmit timestamps (SO_TIMESTAMPING): when each datagram a socket sent left the
//! host's stack, read back in batches from the socket's error queue.
//!
//! With [`TX_SOFTWARE`] set, the kernel takes a software stamp of every datagram as the
//! device takes it (`skb_tx_timestamp` in the driver: loopback and veth do this too) and
//! queues it on the sender's error queue, with no copy of the packet (OPT_TSONLY) and
//! with a key (OPT_ID): the socket's count of datagrams sent since the option was set,
//! starting at 0, one per datagram (one per sendmsg of a UDP GSO super-datagram). A send
//! the kernel refuses takes no key. Receive stamps ride on the same option (RX_SOFTWARE),
//! as an SCM_TIMESTAMPING control message on each datagram read.
//!
//! Stamps are charged to the socket's receive buffer until read, and a socket whose error
//! queue holds something reports EPOLLERR: a reader drains the queue soon after sending.
//!
//! [`ts_info`] asks a device what it can stamp (ETHTOOL_GET_TS_INFO), so a report can
//! name hardware stamps as unavailable with the device's own answer.

use crate::cmsg::{self, Cmsg, Space};
use crate::ethtool::Ethtool;
use crate::socket::{get_int_opt, set_int_opt, UdpSock};
use crate::SysResult;
use std::mem;
use std::os::fd::AsRawFd;

/// Software TX and RX stamps, reported in software, each TX stamp keyed and without its
/// packet.
pub const TX_SOFTWARE: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE
    | libc::SOF_TIMESTAMPING_RX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

/// Software RX stamps on every datagram, and software TX stamps only for the datagrams
/// whose send asks for one (`Batch::queue_reply_stamped`: an SO_TIMESTAMPING control
/// message), each keyed (OPT_ID counts only the stamped datagrams) and without its packet.
/// What chronyd sets on a server socket: a response that will not be served interleaved
/// costs no stamp.
pub const TX_ON_REQUEST: u32 = libc::SOF_TIMESTAMPING_RX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_TSONLY;

/// The control message that gives one send's stamp its key (Linux 6.13+; not in the libc
/// crate yet: `SCM_TS_OPT_ID` of asm-generic/socket.h). With it the key is the sender's
/// own, not the socket's count, so a stamp cannot be matched to the wrong datagram when
/// sends complete out of order (io_uring retries a send that found the buffer full after
/// later ones). The socket's count does not move. An older kernel refuses it with EINVAL.
pub const SCM_TS_OPT_ID: i32 = 81;

/// Room for a stamped send's control messages: SO_TIMESTAMPING's TX flags and, with a key
/// of the sender's own, SCM_TS_OPT_ID (two u32 messages, CMSG_SPACE(4) = 24 each).
pub const TX_REQUEST_LEN: usize = 48;

/// Writes a send's request for its software transmit stamp into `space` and points `hdr`
/// at it: SO_TIMESTAMPING with the TX flags, and with `key` an SCM_TS_OPT_ID carrying it.
pub fn request_tx_stamp(
    hdr: &mut libc::msghdr,
    space: &mut Space<TX_REQUEST_LEN>,
    key: Option<u32>,
) {
    let mut enc = cmsg::Encoder::new(hdr, space);
    let asked = enc.push(
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPING,
        libc::SOF_TIMESTAMPING_TX_SOFTWARE,
    );
    let keyed = key.map_or(Ok(()), |k| enc.push(libc::SOL_SOCKET, SCM_TS_OPT_ID, k));
    debug_assert!(asked.is_ok() && keyed.is_ok(), "TX_REQUEST_LEN holds both");
    enc.finish();
}

/// Whether this kernel takes a send's stamp key in the send ([`SCM_TS_OPT_ID`]): one
/// empty datagram from a loopback socket with [`TX_ON_REQUEST`] to itself, asking a stamp
/// under a key. The kernel reads control messages before it routes, so only EINVAL (the
/// message unknown) means no; a namespace whose loopback is down (ENETUNREACH) still
/// answers yes. The stamp and the datagram go with the socket.
pub fn key_per_send() -> SysResult<()> {
    let addr: std::net::SocketAddr = (std::net::Ipv4Addr::LOCALHOST, 0).into();
    let sock = UdpSock::new_for(&addr)?;
    sock.set_timestamping(TX_ON_REQUEST)?;
    let _ = sock.bind(&addr);
    let to = crate::sockaddr::RawAddr::from_std(&sock.local_addr().unwrap_or(addr));
    // SAFETY: an all-zero msghdr is valid (no name, no data, no control).
    let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
    let mut space = Space::<TX_REQUEST_LEN>::default();
    request_tx_stamp(&mut hdr, &mut space, Some(0));
    hdr.msg_name = to.as_ptr() as *mut libc::c_void;
    hdr.msg_namelen = to.len();
    // SAFETY: hdr points at `space` and `to`, both alive across the call; no data.
    let r = unsafe { libc::sendmsg(sock.as_raw_fd(), &hdr, libc::MSG_DONTWAIT) };
    let e = std::io::Error::last_os_error();
    if r < 0 && e.raw_os_error() == Some(libc::EINVAL) {
        return Err(crate::SysError {
            what: "sendmsg with SCM_TS_OPT_ID (a transmit stamp's key in the send: Linux 6.13+)"
                .into(),
            source: e,
        });
    }
    Ok(())
}

/// Whether this host stamps datagrams as they arrive, waiting up to `wait` for it to
/// start. The kernel turns receive stamping on for the whole host (a static key) a little
/// after the first socket asks for it, from a work queue; a datagram that arrives before
/// that has no stamp, and SO_TIMESTAMPING reports none for it, while SO_TIMESTAMPNS
/// stamps it when it is read (and SO_TIMESTAMPING then reports that read-time stamp as
/// well, so with both set every datagram carries two and neither says which it was).
/// The probe: a loopback socket with SO_TIMESTAMPING's software receive stamps only
/// sends itself a datagram until one comes back with its SCM_TIMESTAMPING, which it can
/// only have been given on arrival. A socket that holds [`TX_SOFTWARE`] keeps stamping
/// on, so once this says yes every datagram it receives later is stamped on arrival.
/// `Ok(false)`: not on within `wait`.
pub fn host_rx_stamping(wait: std::time::Duration) -> SysResult<bool> {
    let addr: std::net::SocketAddr = (std::net::Ipv4Addr::LOCALHOST, 0).into();
    let sock = UdpSock::new_for(&addr)?;
    sock.set_timestamping(libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE)?;
    sock.bind(&addr)?;
    sock.connect(&sock.local_addr()?)?;
    sock.set_recv_timeout(std::time::Duration::from_millis(100))?;
    let mut rx = crate::mmsg::Batch::new(1, 16).with_control(true);
    let end = std::time::Instant::now() + wait;
    loop {
        sock.send_to(b"stamp?", None, 0)?;
        // Loopback delivers inside the send: the datagram is there (the timeout is a
        // bound, not a wait).
        if rx.recv(&sock, 1, 0)? == 1 && rx.rx_timestamp_ns(0).is_some() {
            return Ok(true);
        }
        if std::time::Instant::now() >= end {
            return Ok(false);
        }
        // The work that turns it on runs on another CPU: give it one.
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// `ee_origin` of an error-queue message that carries a timestamp.
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
/// `ee_info` of a stamp taken as the device took the packet.
const SCM_TSTAMP_SND: u32 = 0;
/// Room for one message's control data: SCM_TIMESTAMPING (3 timespecs: 64 bytes with its
/// header) and IP(V6)_RECVERR (sock_extended_err and the offender's sockaddr_in6: 64).
const CTRL_LEN: usize = 128;

/// One transmit stamp: the `key`-th datagram sent on the socket left at `ns` (CLOCK_REALTIME,
/// ns since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    pub key: u32,
    pub ns: u64,
}

impl UdpSock {
    /// Sets SO_TIMESTAMPING to `flags` (e.g. [`TX_SOFTWARE`]; 0 turns stamping off).
    /// Setting OPT_ID restarts the socket's key count at 0.
    pub fn set_timestamping(&self, flags: u32) -> SysResult<()> {
        set_int_opt(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            flags as i32,
            "SO_TIMESTAMPING",
        )
    }

    /// The SO_TIMESTAMPING flags in force (the first field of `struct so_timestamping`).
    pub fn timestamping(&self) -> SysResult<u32> {
        get_int_opt(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            "SO_TIMESTAMPING",
        )
        .map(|v| v as u32)
    }
}

/// Reads a socket's error queue in batches (recvmmsg with MSG_ERRQUEUE) and hands out the
/// transmit stamps found; allocated once.
pub struct ErrQueue {
    hdrs: Vec<libc::mmsghdr>,
    ctrl: Vec<Space<CTRL_LEN>>,
}

// SAFETY: the headers' pointers are set up before each call and point only into this
// value's own heap buffers; an ErrQueue is used by one thread at a time.
unsafe impl Send for ErrQueue {}

impl ErrQueue {
    /// Room for `batch` messages per call.
    pub fn new(batch: usize) -> Self {
        let batch = batch.max(1);
        // SAFETY: mmsghdr is plain data; all-zero is an empty header.
        let hdr: libc::mmsghdr = unsafe { mem::zeroed() };
        ErrQueue {
            hdrs: vec![hdr; batch],
            ctrl: vec![Space::default(); batch],
        }
    }

    /// Messages read per call at most.
    pub fn batch(&self) -> usize {
        self.hdrs.len()
    }

    /// Appends to `out` every transmit stamp queued on `sock` now, without waiting; returns
    /// how many error-queue messages were read (other errors, such as an ICMP error with
    /// IP_RECVERR set, are read and skipped).
    pub fn drain(&mut self, sock: &UdpSock, out: &mut Vec<TxStamp>) -> SysResult<usize> {
        let mut read = 0;
        loop {
            let n = self.hdrs.len();
            for i in 0..n {
                let h = &mut self.hdrs[i].msg_hdr;
                // OPT_TSONLY: no packet comes back, so no data buffer is needed.
                h.msg_name = std::ptr::null_mut();
                h.msg_namelen = 0;
                h.msg_iov = std::ptr::null_mut();
                h.msg_iovlen = 0;
                h.msg_control = self.ctrl[i].as_mut_ptr();
                h.msg_controllen = CTRL_LEN as _;
                h.msg_flags = 0;
                self.hdrs[i].msg_len = 0;
            }
            // SAFETY: hdrs[0..n] point at live control buffers of CTRL_LEN bytes owned by
            // self and at no data; the kernel writes within them.
            let got = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    n as u32,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if got < 0 {
                let e = std::io::Error::last_os_error();
                if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                    return Ok(read);
                }
                return Err(crate::SysError {
                    what: "recvmmsg(MSG_ERRQUEUE)".into(),
                    source: e,
                });
            }
            let got = got as usize;
            for i in 0..got {
                let it = cmsg::Iter::new(&self.hdrs[i].msg_hdr, self.ctrl[i].bytes());
                if let Some(s) = tx_stamp(it) {
                    out.push(s);
                }
            }
            read += got;
            if got < n {
                return Ok(read);
            }
        }
    }
}

/// The transmit stamp in one error-queue message's control messages, if it carries one:
/// an SCM_TIMESTAMPING software time and an IP_RECVERR/IPV6_RECVERR `sock_extended_err`
/// whose origin is SO_EE_ORIGIN_TIMESTAMPING, kind SCM_TSTAMP_SND, key in `ee_data`.
pub fn tx_stamp<'a>(cmsgs: impl Iterator<Item = Cmsg<'a>>) -> Option<TxStamp> {
    let mut ns = None;
    let mut key = None;
    for c in cmsgs {
        match (c.level, c.ty) {
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPING) => {
                // struct scm_timestamping: ts[0] software, ts[2] raw hardware; timespec
                // on 64-bit Linux is i64 seconds then i64 nanoseconds.
                let (sec, nsec) = (c.read_at::<i64>(0)?, c.read_at::<i64>(8)?);
                if sec != 0 || nsec != 0 {
                    ns = timespec_ns(sec, nsec);
                }
            }
            (libc::SOL_IP, libc::IP_RECVERR) | (libc::SOL_IPV6, libc::IPV6_RECVERR) => {
                // struct sock_extended_err: errno u32, origin u8, type u8, code u8, pad
                // u8, info u32, data u32.
                let origin = c.read_at::<u8>(4)?;
                let info = c.read_at::<u32>(8)?;
                if origin == SO_EE_ORIGIN_TIMESTAMPING && info == SCM_TSTAMP_SND {
                    key = Some(c.read_at::<u32>(12)?);
                }
            }
            _ => {}
        }
    }
    Some(TxStamp { key: key?, ns: ns? })
}

/// The receive stamp among one datagram's control messages: SO_TIMESTAMPNS's
/// (SCM_TIMESTAMPNS) or SO_TIMESTAMPING's software stamp (SCM_TIMESTAMPING's first
/// timespec: the same layout), in ns since the Unix epoch (CLOCK_REALTIME). `None` without
/// either, or when the software stamp is zero (only a hardware stamp was asked for).
pub fn rx_stamp<'a>(mut cmsgs: impl Iterator<Item = Cmsg<'a>>) -> Option<u64> {
    let c = cmsgs.find(is_rx_stamp)?;
    // struct timespec on 64-bit Linux: i64 seconds, then i64 nanoseconds.
    let (sec, nsec) = (c.read_at::<i64>(0)?, c.read_at::<i64>(8)?);
    if sec == 0 && nsec == 0 {
        return None;
    }
    timespec_ns(sec, nsec)
}

/// Whether a received control message is a receive stamp (SO_TIMESTAMPNS's or
/// SO_TIMESTAMPING's).
pub fn is_rx_stamp(c: &Cmsg<'_>) -> bool {
    c.level == libc::SOL_SOCKET && (c.ty == libc::SCM_TIMESTAMPNS || c.ty == libc::SCM_TIMESTAMPING)
}

fn timespec_ns(sec: i64, nsec: i64) -> Option<u64> {
    u64::try_from(sec)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(nsec).ok()?)
}

/// What a device can stamp, as ETHTOOL_GET_TS_INFO reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TsInfo {
    /// SOF_TIMESTAMPING_* capabilities.
    pub so_timestamping: u32,
    /// The PTP hardware clock's index, -1 without one.
    pub phc_index: i32,
}

impl TsInfo {
    /// Whether the device stamps transmitted packets in hardware.
    pub fn tx_hardware(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_TX_HARDWARE != 0
    }

    /// Whether the device stamps in software (the stack's stamps work on it).
    pub fn tx_software(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_TX_SOFTWARE != 0
    }
}

#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// Asks device `iface` what it can timestamp.
pub fn ts_info(iface: &str) -> SysResult<TsInfo> {
    let mut v = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..Default::default()
    };
    let eth = Ethtool::new()?;
    // SAFETY: v is a live, writable struct ethtool_ts_info, the size the kernel uses for
    // ETHTOOL_GET_TS_INFO.
    unsafe {
        eth.ioctl(
            iface,
            (&mut v as *mut EthtoolTsInfo).cast(),
            "ETHTOOL_GET_TS_INFO",
        )?
    };
    Ok(TsInfo {
        so_timestamping: v.so_timestamping,
        phc_index: v.phc_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmsg::tests::connected_pair;
    use crate::mmsg::Batch;

    #[test]
    fn the_flags_read_back() {
        let (_srv, cli) = connected_pair();
        assert_eq!(cli.timestamping().unwrap(), 0);
        cli.set_timestamping(TX_SOFTWARE).unwrap();
        assert_eq!(cli.timestamping().unwrap(), TX_SOFTWARE);
        cli.set_timestamping(0).unwrap();
        assert_eq!(cli.timestamping().unwrap(), 0);
    }

    #[test]
    fn every_datagram_sent_comes_back_as_one_stamp_keyed_in_order() {
        let (srv, cli) = connected_pair();
        cli.set_timestamping(TX_SOFTWARE).unwrap();
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mut tx = Batch::new(8, 64);
        for round in 0..3 {
            for i in 0..8 {
                tx.slot_mut(i)[0] = (round * 8 + i) as u8;
                tx.queue_send(i, 10);
            }
            assert_eq!(tx.flush(&cli, 0).sent, 8);
        }
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        // A queue of 5 per call: the 24 stamps take several calls, in key order.
        let mut q = ErrQueue::new(5);
        let mut got = Vec::new();
        assert_eq!(q.drain(&cli, &mut got).unwrap(), 24);
        assert_eq!(
            got.iter().map(|s| s.key).collect::<Vec<_>>(),
            (0..24).collect::<Vec<u32>>()
        );
        assert!(got.windows(2).all(|w| w[0].ns <= w[1].ns), "{got:?}");
        assert!(
            got.iter().all(|s| s.ns >= before && s.ns <= after),
            "{got:?}"
        );
        // Drained: nothing more, and the datagrams themselves arrived untouched.
        assert_eq!(q.drain(&cli, &mut got).unwrap(), 0);
        let mut rx = Batch::new(32, 64);
        assert_eq!(rx.recv(&srv, 32, libc::MSG_DONTWAIT).unwrap(), 24);
        assert_eq!(rx.data(23).len(), 10);
    }

    /// With [`TX_ON_REQUEST`], only the replies queued stamped come back, keyed 0, 1, ...
    /// in send order, by sendmmsg and by a lone send alike; the others take no key.
    #[test]
    fn only_replies_that_ask_are_stamped_and_keyed() {
        use crate::mmsg::SendMode;
        let (srv, cli) = connected_pair();
        srv.set_timestamping(TX_ON_REQUEST).unwrap();
        assert_eq!(srv.timestamping().unwrap(), TX_ON_REQUEST);
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        };
        for mode in [SendMode::Batch, SendMode::Single] {
            let mut rx = Batch::new(4, 64).with_control(true).with_send(mode);
            for i in 0..4u8 {
                cli.send_to(&[i], None, 0).unwrap();
            }
            srv.set_recv_timeout(std::time::Duration::from_secs(5))
                .unwrap();
            // Loopback queues each datagram as it is sent: all four are there.
            assert_eq!(rx.recv(&srv, 4, 0).unwrap(), 4);
            let before = now();
            rx.queue_reply_stamped(0, 1);
            rx.queue_reply(1, 1);
            rx.queue_reply_stamped(2, 1);
            rx.queue_reply(3, 1);
            assert_eq!(rx.flush(&srv, 0).sent, 4, "{mode:?}");
            let after = now();
            let mut stamps = Vec::new();
            ErrQueue::new(8).drain(&srv, &mut stamps).unwrap();
            let keys: Vec<u32> = stamps.iter().map(|s| s.key).collect();
            // The key count goes on from the first round's two.
            let first = if mode == SendMode::Batch { 0 } else { 2 };
            assert_eq!(keys, vec![first, first + 1], "{mode:?}");
            assert!(stamps.iter().all(|s| s.ns >= before && s.ns <= after));
            // Every reply arrived, stamped or not, with its bytes.
            let mut back = Batch::new(4, 64);
            cli.set_recv_timeout(std::time::Duration::from_secs(5))
                .unwrap();
            let mut n = 0;
            while n < 4 {
                n += back.recv(&cli, 1, 0).unwrap();
                assert_eq!(back.data(0).len(), 1);
            }
        }
    }

    /// The socket counts the datagrams it accepts; a batch that keys by that count gives
    /// each accepted datagram the kernel's key and a refused one none, even as a GSO batch
    /// (a counted batch never sends GSO: one send would be one count for many).
    #[test]
    fn a_refused_send_takes_no_key() {
        use crate::mmsg::{SendMode, NOT_SENT};
        let (_srv, cli) = connected_pair();
        cli.set_timestamping(TX_SOFTWARE).unwrap();
        let mut tx = Batch::new(3, 65536).with_send(SendMode::Gso);
        tx.count_stamp_keys_from(0);
        // The middle datagram is too big for UDP over IPv4 (EMSGSIZE).
        for (i, len) in [10, 65536, 10].into_iter().enumerate() {
            tx.queue_send(i, len);
        }
        let f = tx.flush(&cli, 0);
        assert_eq!((f.sent, f.failed, f.gso_sends), (2, 1, 0));
        assert_eq!(tx.refused(), &[1]);
        assert_eq!(tx.carried_by(), &[0, NOT_SENT, 1]);
        let mut got = Vec::new();
        ErrQueue::new(8).drain(&cli, &mut got).unwrap();
        assert_eq!(got.iter().map(|s| s.key).collect::<Vec<_>>(), vec![0, 1]);
        // The next flush forgets the refusal, and its keys go on from the socket's count.
        tx.count_stamp_keys_from(2);
        for i in 0..2 {
            tx.queue_send(i, 10);
        }
        assert_eq!(
            (tx.flush(&cli, 0).gso_sends, tx.carried_by()),
            (0, &[2, 3][..])
        );
        assert!(tx.refused().is_empty());
        got.clear();
        ErrQueue::new(8).drain(&cli, &mut got).unwrap();
        assert_eq!(got.iter().map(|s| s.key).collect::<Vec<_>>(), vec![2, 3]);
    }

    #[test]
    fn received_datagrams_carry_their_software_arrival_stamp() {
        let (srv, cli) = connected_pair();
        srv.set_timestamping(TX_SOFTWARE).unwrap();
        // The host's receive stamping starts a little after the first socket asks for it
        // (a deferred static key): wait until it does.
        assert!(host_rx_stamping(std::time::Duration::from_secs(5)).unwrap());
        let mut rx = Batch::new(4, 64).with_control(true);
        srv.set_recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        cli.send_to(b"ping", None, 0).unwrap();
        assert_eq!(rx.recv(&srv, 4, 0).unwrap(), 1);
        let ns = rx
            .rx_timestamp_ns(0)
            .expect("an SCM_TIMESTAMPING arrival stamp");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(ns <= now && now - ns < 5_000_000_000, "{ns} vs {now}");
    }

    /// The receive stamps among a received datagram's control messages, by type.
    fn rx_stamp_types(rx: &Batch, i: usize) -> Vec<i32> {
        rx.cmsgs(i).filter(is_rx_stamp).map(|c| c.ty).collect()
    }

    /// The probe says yes while a socket holds receive stamping on; from then a socket
    /// with SO_TIMESTAMPING alone gets one stamp per datagram (taken on arrival), while
    /// SO_TIMESTAMPNS beside it makes two of every datagram.
    #[test]
    fn once_the_host_stamps_arrivals_one_option_gives_one_stamp() {
        let (srv, cli) = connected_pair();
        srv.set_timestamping(TX_SOFTWARE).unwrap();
        assert!(host_rx_stamping(std::time::Duration::from_secs(5)).unwrap());
        srv.set_recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let mut rx = Batch::new(4, 64).with_control(true);
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        for both in [false, true] {
            srv.set_timestamp_ns(both).unwrap();
            cli.send_to(b"one", None, 0).unwrap();
            assert_eq!(rx.recv(&srv, 4, 0).unwrap(), 1);
            let want = if both {
                vec![libc::SCM_TIMESTAMPNS, libc::SCM_TIMESTAMPING]
            } else {
                vec![libc::SCM_TIMESTAMPING]
            };
            assert_eq!(rx_stamp_types(&rx, 0), want, "SO_TIMESTAMPNS {both}");
            assert!(rx.rx_timestamp_ns(0).unwrap() >= before);
        }
    }

    /// With keys in the sends (SCM_TS_OPT_ID), a UDP GSO send of 12 datagrams comes back
    /// as one stamp under its key, a sendmmsg as one stamp per datagram under each's, and
    /// a refused datagram burns its key without moving the others'.
    #[test]
    fn keyed_sends_give_one_stamp_per_send_under_the_senders_keys() {
        use crate::mmsg::{SendMode, NOT_SENT};
        if let Err(e) = key_per_send() {
            eprintln!("skipped: this kernel takes no stamp key in a send: {e}");
            return;
        }
        let (srv, cli) = connected_pair();
        cli.set_timestamping(TX_SOFTWARE).unwrap();
        let mut tx = Batch::new(16, 65536)
            .with_send(SendMode::Gso)
            .with_stamp_keys(100);
        for (round, sizes) in [vec![100; 12], vec![10, 20, 30], vec![10, 65536, 10]]
            .into_iter()
            .enumerate()
        {
            for (k, &len) in sizes.iter().enumerate() {
                tx.slot_mut(k)[..len.min(16)].fill(round as u8);
                tx.queue_send(k, len);
            }
            let f = tx.flush(&cli, 0);
            let want: Vec<u32> = match round {
                0 => vec![100; 12],
                1 => vec![112, 113, 114],
                _ => vec![115, NOT_SENT, 117],
            };
            assert_eq!(tx.carried_by(), &want[..], "round {round}");
            let gso = if round == 0 { 1 } else { 0 };
            assert_eq!((f.gso_sends, f.failed), (gso, usize::from(round == 2)));
        }
        let mut q = ErrQueue::new(64);
        let mut got = Vec::new();
        q.drain(&cli, &mut got).unwrap();
        let keys: Vec<u32> = got.iter().map(|s| s.key).collect();
        assert_eq!(keys, vec![100, 112, 113, 114, 115, 117]);
        // Every datagram the kernel took arrived.
        let mut rx = Batch::new(32, 2048);
        srv.set_recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
        let mut n = 0;
        while n < 17 {
            n += rx.recv(&srv, 32, 0).unwrap();
        }
    }

    fn cmsg_bytes(fields: &[(usize, &[u8])], len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        for (at, b) in fields {
            v[*at..*at + b.len()].copy_from_slice(b);
        }
        v
    }

    #[test]
    fn the_parser_takes_only_a_keyed_send_stamp() {
        let ts = cmsg_bytes(&[(0, &5i64.to_ne_bytes()), (8, &7i64.to_ne_bytes())], 48);
        let ee = |origin: u8, info: u32| {
            cmsg_bytes(
                &[
                    (0, &(libc::ENOMSG as u32).to_ne_bytes()),
                    (4, &[origin]),
                    (8, &info.to_ne_bytes()),
                    (12, &42u32.to_ne_bytes()),
                ],
                32,
            )
        };
        let stamp = Cmsg {
            level: libc::SOL_SOCKET,
            ty: libc::SCM_TIMESTAMPING,
            data: &ts,
        };
        let send = ee(SO_EE_ORIGIN_TIMESTAMPING, SCM_TSTAMP_SND);
        let err = |data| Cmsg {
            level: libc::SOL_IP,
            ty: libc::IP_RECVERR,
            data,
        };
        assert_eq!(
            tx_stamp([stamp, err(&send)].into_iter()),
            Some(TxStamp {
                key: 42,
                ns: 5_000_000_007
            })
        );
        // An ICMP error (origin 2), a scheduler stamp (info 1), a stamp without its key,
        // and a truncated value are not send stamps.
        let (icmp, sched) = (ee(2, 0), ee(4, 1));
        assert_eq!(tx_stamp([stamp, err(&icmp)].into_iter()), None);
        assert_eq!(tx_stamp([stamp, err(&sched)].into_iter()), None);
        assert_eq!(tx_stamp([stamp].into_iter()), None);
        assert_eq!(tx_stamp([stamp, err(&send[..10])].into_iter()), None);
    }

    #[test]
    fn loopback_stamps_in_software_only() {
        let lo = ts_info("lo").unwrap();
        assert!(lo.tx_software(), "{lo:?}");
        assert!(!lo.tx_hardware(), "{lo:?}");
        assert_eq!(lo.phc_index, -1);
    }
}
