//! A UDP socket with the options the NTT talk and the NFV sheet turn, each set and read back
//! by name.
//!
//! Every setter is paired with a getter so callers can report what the kernel
//! actually applied (it may round or clamp a value, or refuse it with an errno).

use crate::sockaddr::RawAddr;
use crate::{cvt, SysError, SysResult};
use std::mem;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The IP_MTU_DISCOVER modes, re-exported so callers need no libc.
pub mod consts {
    pub use libc::{
        IP_PMTUDISC_DO, IP_PMTUDISC_DONT, IP_PMTUDISC_INTERFACE, IP_PMTUDISC_OMIT,
        IP_PMTUDISC_PROBE, IP_PMTUDISC_WANT,
    };
}
use consts::*;

/// Length of the `SO_MEMINFO` array (the kernel's `SK_MEMINFO_VARS`, one past the last
/// index, `SK_MEMINFO_DROPS`; libc carries the indices but not the count).
pub(crate) const SK_MEMINFO_VARS: usize = libc::SK_MEMINFO_DROPS as usize + 1;

/// Receive flag: report a datagram's full length even when it did not fit.
pub const MSG_TRUNC: i32 = libc::MSG_TRUNC;
/// Non-blocking receive flag, re-exported so callers need no libc.
pub const MSG_DONTWAIT: i32 = libc::MSG_DONTWAIT;
/// Errno of a send the device or qdisc queue refused (reported with IP_RECVERR).
pub const ENOBUFS: i32 = libc::ENOBUFS;
/// Errno of a send/receive on a connected UDP socket whose peer port is closed.
pub const ECONNREFUSED: i32 = libc::ECONNREFUSED;

/// Name of an IP_MTU_DISCOVER mode as the kernel headers spell it.
pub fn pmtudisc_name(mode: i32) -> &'static str {
    match mode {
        IP_PMTUDISC_DONT => "dont",
        IP_PMTUDISC_WANT => "want",
        IP_PMTUDISC_DO => "do",
        IP_PMTUDISC_PROBE => "probe",
        IP_PMTUDISC_INTERFACE => "interface",
        IP_PMTUDISC_OMIT => "omit",
        _ => "unknown",
    }
}

/// An owned UDP socket (IPv4 or IPv6).
#[derive(Debug)]
pub struct UdpSock {
    fd: OwnedFd,
    v6: bool,
    gso: Gso,
}

/// What this socket knows about UDP GSO: probed once, then degraded at run time if a
/// send is refused (quinn-udp's approach). Atomic because workers may share a socket.
#[derive(Debug, Default)]
struct Gso {
    state: AtomicU8,
    why_not: OnceLock<String>,
}

const GSO_UNPROBED: u8 = 0;
const GSO_ON: u8 = 1;
const GSO_OFF: u8 = 2;

impl AsRawFd for UdpSock {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl UdpSock {
    /// Opens a UDP socket of the family that `addr` belongs to.
    pub fn new_for(addr: &SocketAddr) -> SysResult<Self> {
        let (family, v6) = match addr {
            SocketAddr::V4(_) => (libc::AF_INET, false),
            SocketAddr::V6(_) => (libc::AF_INET6, true),
        };
        // SAFETY: socket() takes no pointers; the returned fd is checked before use.
        let fd = cvt(
            unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
            || "socket(SOCK_DGRAM)".into(),
        )?;
        // SAFETY: fd was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(UdpSock {
            fd,
            v6,
            gso: Gso::default(),
        })
    }

    /// Whether UDP GSO sends (UDP_SEGMENT) may be tried on this socket. The first call
    /// probes with getsockopt(UDP_SEGMENT) (kernel 4.18+); false from then on if the
    /// probe failed or the kernel has since refused a GSO send.
    pub fn gso_usable(&self) -> bool {
        match self.gso.state.load(Ordering::Relaxed) {
            GSO_ON => true,
            GSO_OFF => false,
            _ => match self.get_int(libc::SOL_UDP, libc::UDP_SEGMENT, "UDP_SEGMENT") {
                Ok(_) => {
                    let _ = self.gso.state.compare_exchange(
                        GSO_UNPROBED,
                        GSO_ON,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    self.gso.state.load(Ordering::Relaxed) == GSO_ON
                }
                Err(e) => {
                    self.disable_gso(&e);
                    false
                }
            },
        }
    }

    /// Stops GSO on this socket for good, remembering the kernel's reason.
    pub(crate) fn disable_gso(&self, why: &SysError) {
        let _ = self.gso.why_not.set(why.to_string());
        self.gso.state.store(GSO_OFF, Ordering::Relaxed);
    }

    /// Why this socket sends without GSO: the failed probe or the refused send, with
    /// its errno. `None` while GSO is usable or untried.
    pub fn gso_unavailable(&self) -> Option<&str> {
        self.gso.why_not.get().map(String::as_str)
    }

    /// True for an AF_INET6 socket.
    pub fn is_v6(&self) -> bool {
        self.v6
    }

    /// Sets an integer socket option.
    pub fn set_int(&self, level: i32, name: i32, value: i32, label: &str) -> SysResult<()> {
        set_int_opt(self.as_raw_fd(), level, name, value, label)
    }

    /// Reads an integer socket option.
    pub fn get_int(&self, level: i32, name: i32, label: &str) -> SysResult<i32> {
        get_int_opt(self.as_raw_fd(), level, name, label)
    }

    /// SO_REUSEPORT on or off.
    pub fn set_reuseport(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            on as i32,
            "SO_REUSEPORT",
        )
    }

    /// Whether SO_REUSEPORT is set.
    pub fn reuseport(&self) -> SysResult<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_REUSEPORT, "SO_REUSEPORT")? != 0)
    }

    /// Asks for a receive buffer; with `force` uses SO_RCVBUFFORCE (needs CAP_NET_ADMIN)
    /// so the request may exceed net.core.rmem_max.
    pub fn set_rcvbuf(&self, bytes: i32, force: bool) -> SysResult<()> {
        if force {
            self.set_int(
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                bytes,
                "SO_RCVBUFFORCE",
            )
        } else {
            self.set_int(libc::SOL_SOCKET, libc::SO_RCVBUF, bytes, "SO_RCVBUF")
        }
    }

    /// The receive buffer the kernel granted (it doubles requests for bookkeeping).
    pub fn rcvbuf(&self) -> SysResult<i32> {
        self.get_int(libc::SOL_SOCKET, libc::SO_RCVBUF, "SO_RCVBUF")
    }

    /// Asks for a send buffer; `force` as for [`Self::set_rcvbuf`].
    pub fn set_sndbuf(&self, bytes: i32, force: bool) -> SysResult<()> {
        if force {
            self.set_int(
                libc::SOL_SOCKET,
                libc::SO_SNDBUFFORCE,
                bytes,
                "SO_SNDBUFFORCE",
            )
        } else {
            self.set_int(libc::SOL_SOCKET, libc::SO_SNDBUF, bytes, "SO_SNDBUF")
        }
    }

    /// The send buffer the kernel granted.
    pub fn sndbuf(&self) -> SysResult<i32> {
        self.get_int(libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF")
    }

    /// IP_MTU_DISCOVER (or IPV6_MTU_DISCOVER on an IPv6 socket).
    pub fn set_mtu_discover(&self, mode: i32) -> SysResult<()> {
        if self.v6 {
            self.set_int(
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                mode,
                "IPV6_MTU_DISCOVER",
            )
        } else {
            self.set_int(
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                mode,
                "IP_MTU_DISCOVER",
            )
        }
    }

    /// The path-MTU discovery mode in force.
    pub fn mtu_discover(&self) -> SysResult<i32> {
        if self.v6 {
            self.get_int(
                libc::IPPROTO_IPV6,
                libc::IPV6_MTU_DISCOVER,
                "IPV6_MTU_DISCOVER",
            )
        } else {
            self.get_int(libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, "IP_MTU_DISCOVER")
        }
    }

    /// SO_BUSY_POLL: microseconds to busy-poll the device queue on a blocking read.
    pub fn set_busy_poll(&self, usec: i32) -> SysResult<()> {
        self.set_int(libc::SOL_SOCKET, libc::SO_BUSY_POLL, usec, "SO_BUSY_POLL")
    }

    /// The SO_BUSY_POLL value in force.
    pub fn busy_poll(&self) -> SysResult<i32> {
        self.get_int(libc::SOL_SOCKET, libc::SO_BUSY_POLL, "SO_BUSY_POLL")
    }

    /// SO_PREFER_BUSY_POLL (kernel 5.11+).
    pub fn set_prefer_busy_poll(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_PREFER_BUSY_POLL,
            on as i32,
            "SO_PREFER_BUSY_POLL",
        )
    }

    /// Whether SO_PREFER_BUSY_POLL is set.
    pub fn prefer_busy_poll(&self) -> SysResult<bool> {
        Ok(self.get_int(
            libc::SOL_SOCKET,
            libc::SO_PREFER_BUSY_POLL,
            "SO_PREFER_BUSY_POLL",
        )? != 0)
    }

    /// SO_BUSY_POLL_BUDGET: packets per busy-poll round (kernel 5.11+; raising it above
    /// the default needs CAP_NET_ADMIN).
    pub fn set_busy_poll_budget(&self, budget: i32) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL_BUDGET,
            budget,
            "SO_BUSY_POLL_BUDGET",
        )
    }

    /// The busy-poll budget in force.
    pub fn busy_poll_budget(&self) -> SysResult<i32> {
        self.get_int(
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL_BUDGET,
            "SO_BUSY_POLL_BUDGET",
        )
    }

    /// SO_RXQ_OVFL: the kernel attaches the socket's cumulative drop count to each datagram.
    pub fn set_rxq_ovfl(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            on as i32,
            "SO_RXQ_OVFL",
        )
    }

    /// Whether SO_RXQ_OVFL is set.
    pub fn rxq_ovfl(&self) -> SysResult<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, "SO_RXQ_OVFL")? != 0)
    }

    /// SO_TIMESTAMPNS: the kernel attaches its receive time (CLOCK_REALTIME, ns) to each
    /// datagram, so a reader that drains its socket late still knows when each arrived.
    pub fn set_timestamp_ns(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            on as i32,
            "SO_TIMESTAMPNS",
        )
    }

    /// Whether SO_TIMESTAMPNS is set.
    pub fn timestamp_ns(&self) -> SysResult<bool> {
        Ok(self.get_int(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, "SO_TIMESTAMPNS")? != 0)
    }

    /// SO_INCOMING_CPU: the CPU that last processed this socket's packets in softirq.
    pub fn incoming_cpu(&self) -> SysResult<i32> {
        self.get_int(libc::SOL_SOCKET, libc::SO_INCOMING_CPU, "SO_INCOMING_CPU")
    }

    /// IP_RECVERR (IPV6_RECVERR on IPv6): without it the kernel hides a send the device
    /// queue dropped (ENOBUFS) and reports success; a generator that counts refusals sets it.
    pub fn set_recverr(&self, on: bool) -> SysResult<()> {
        if self.v6 {
            self.set_int(
                libc::IPPROTO_IPV6,
                libc::IPV6_RECVERR,
                on as i32,
                "IPV6_RECVERR",
            )
        } else {
            self.set_int(libc::IPPROTO_IP, libc::IP_RECVERR, on as i32, "IP_RECVERR")
        }
    }

    /// IPV6_V6ONLY, so a `[::]` listener does or does not take IPv4 too.
    pub fn set_v6only(&self, on: bool) -> SysResult<()> {
        self.set_int(
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            on as i32,
            "IPV6_V6ONLY",
        )
    }

    /// The socket's drop counter (receive-queue overflows and filter drops), via SO_MEMINFO.
    pub fn drops(&self) -> SysResult<u32> {
        let info: [u32; SK_MEMINFO_VARS] = crate::sockopt::get(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            "SO_MEMINFO",
        )?;
        Ok(info[libc::SK_MEMINFO_DROPS as usize])
    }

    /// Binds to a local address.
    pub fn bind(&self, addr: &SocketAddr) -> SysResult<()> {
        let raw = RawAddr::from_std(addr);
        // SAFETY: raw holds a valid sockaddr of raw.len() bytes for the duration of the call.
        let ret = unsafe { libc::bind(self.as_raw_fd(), raw.as_ptr(), raw.len()) };
        cvt(ret, || format!("bind({addr})")).map(|_| ())
    }

    /// Connects, so the kernel fixes the peer and plain send/recv can be used.
    pub fn connect(&self, addr: &SocketAddr) -> SysResult<()> {
        let raw = RawAddr::from_std(addr);
        // SAFETY: raw holds a valid sockaddr of raw.len() bytes for the duration of the call.
        let ret = unsafe { libc::connect(self.as_raw_fd(), raw.as_ptr(), raw.len()) };
        cvt(ret, || format!("connect({addr})")).map(|_| ())
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> SysResult<SocketAddr> {
        let mut raw = RawAddr::empty();
        // SAFETY: the kernel writes at most raw.len bytes into raw.storage and updates len.
        let ret = unsafe {
            libc::getsockname(
                self.as_raw_fd(),
                &mut raw.storage as *mut _ as *mut libc::sockaddr,
                &mut raw.len,
            )
        };
        cvt(ret, || "getsockname".into())?;
        raw.to_std().ok_or_else(|| SysError {
            what: "getsockname: unexpected address family".into(),
            source: std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT),
        })
    }

    /// O_NONBLOCK on or off.
    pub fn set_nonblocking(&self, on: bool) -> SysResult<()> {
        let fd = self.as_raw_fd();
        // SAFETY: fcntl on an fd we own, no pointers.
        let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) }, || {
            "fcntl(F_GETFL)".into()
        })?;
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: as above.
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }, || {
            "fcntl(F_SETFL)".into()
        })
        .map(|_| ())
    }

    /// SO_RCVTIMEO: a blocking receive returns EAGAIN after this long, so a worker can
    /// notice a shutdown request without a signal.
    pub fn set_recv_timeout(&self, d: Duration) -> SysResult<()> {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        };
        crate::sockopt::set(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv,
            || "SO_RCVTIMEO".into(),
        )
    }

    /// SO_RCVTIMEO read back (zero: a blocking receive waits indefinitely).
    pub fn recv_timeout(&self) -> SysResult<Duration> {
        let tv: libc::timeval = crate::sockopt::get(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            "SO_RCVTIMEO",
        )?;
        Ok(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
    }

    /// Attaches a classic BPF program to the reuseport group: the socket with index
    /// `cpu % n` (in bind order) receives packets that the kernel processed on `cpu`.
    /// This is the kernel selftest reuseport_bpf_cpu's program, plus a modulo so that
    /// a CPU without a socket still maps to one.
    pub fn attach_reuseport_cbpf_cpu(&self, n: u32) -> SysResult<()> {
        let prog = crate::bpf::cbpf_cpu_mod(n);
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: the kernel copies `len` instructions from `filter`, which lives for the call.
        let ret = unsafe {
            libc::setsockopt(
                self.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_REUSEPORT_CBPF,
                &fprog as *const _ as *const libc::c_void,
                mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        cvt(ret, || "setsockopt(SO_ATTACH_REUSEPORT_CBPF)".into()).map(|_| ())
    }

    /// Attaches a loaded eBPF socket-filter program to the reuseport group.
    pub fn attach_reuseport_ebpf(&self, prog: &crate::bpf::Program) -> SysResult<()> {
        self.set_int(
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_EBPF,
            prog.as_raw_fd(),
            "SO_ATTACH_REUSEPORT_EBPF",
        )
    }

    /// Receives one datagram into `buf` (recvfrom). Returns length and sender.
    pub fn recv_from(&self, buf: &mut [u8], flags: i32) -> SysResult<(usize, RawAddr)> {
        let mut raw = RawAddr::empty();
        // SAFETY: buf and raw.storage are live and writable for the lengths passed.
        let n = unsafe {
            libc::recvfrom(
                self.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                flags,
                &mut raw.storage as *mut _ as *mut libc::sockaddr,
                &mut raw.len,
            )
        };
        let n = cvt(n, || "recvfrom".into())?;
        Ok((n as usize, raw))
    }

    /// Receives one datagram into `buf` with recv (no sender address). Returns its length.
    pub fn recv(&self, buf: &mut [u8], flags: i32) -> SysResult<usize> {
        // SAFETY: buf is live and writable for buf.len() bytes.
        let n = unsafe {
            libc::recv(
                self.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                flags,
            )
        };
        cvt(n, || "recv".into()).map(|n| n as usize)
    }

    /// Receives one datagram into `buf` with recvmsg (one iovec, the sender address, no
    /// control data), the call udp_sink's `--recvmsg` makes. Returns length and sender.
    pub fn recv_msg(&self, buf: &mut [u8], flags: i32) -> SysResult<(usize, RawAddr)> {
        let mut raw = RawAddr::empty();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: msghdr is plain data; all-zero is valid before the fields are set.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_name = &mut raw.storage as *mut _ as *mut libc::c_void;
        msg.msg_namelen = raw.len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        // SAFETY: msg points at a live iovec over buf and at raw.storage, with their lengths.
        let n = unsafe { libc::recvmsg(self.as_raw_fd(), &mut msg, flags) };
        let n = cvt(n, || "recvmsg".into())?;
        raw.len = msg.msg_namelen;
        Ok((n as usize, raw))
    }

    /// shutdown(SHUT_RD): every thread blocked in a receive on this socket wakes and gets
    /// 0, and later receives on an empty queue return 0 at once; how a receiver without
    /// SO_RCVTIMEO is told to stop. An unconnected UDP socket is shut down all the same
    /// and the kernel then answers ENOTCONN, which is not an error here.
    pub fn shutdown_read(&self) -> SysResult<()> {
        // SAFETY: shutdown takes an fd and a constant.
        let ret = unsafe { libc::shutdown(self.as_raw_fd(), libc::SHUT_RD) };
        match cvt(ret, || "shutdown(SHUT_RD)".into()) {
            Err(e) if e.errno() == Some(libc::ENOTCONN) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Sends one datagram (sendto); `to` may be `None` on a connected socket.
    pub fn send_to(&self, buf: &[u8], to: Option<&RawAddr>, flags: i32) -> SysResult<usize> {
        let (ptr, len) = match to {
            Some(a) => (a.as_ptr(), a.len()),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: buf is readable for buf.len() bytes; ptr is null or a valid sockaddr of len bytes.
        let n = unsafe {
            libc::sendto(
                self.as_raw_fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                flags,
                ptr,
                len,
            )
        };
        cvt(n, || "sendto".into()).map(|n| n as usize)
    }
}

/// A port on `ip` free right now for both UDP and TCP (servers such as knotd listen on
/// both): the kernel picks a UDP port, kept only if TCP can bind it too. What the lab's peers
/// and the tests listen on.
pub fn free_port(ip: std::net::IpAddr) -> std::io::Result<u16> {
    for _ in 0..100 {
        let udp = std::net::UdpSocket::bind((ip, 0))?;
        let port = udp.local_addr()?.port();
        if std::net::TcpListener::bind((ip, port)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no port free for both UDP and TCP on {ip}"),
    ))
}

/// True when an error only means "nothing to read now" (EAGAIN/EWOULDBLOCK/EINTR).
pub fn is_would_block(e: &SysError) -> bool {
    matches!(e.errno(), Some(libc::EAGAIN) | Some(libc::EINTR))
}

/// Sets an integer option on any socket fd (UDP, AF_XDP, ...).
pub fn set_int_opt(fd: RawFd, level: i32, name: i32, value: i32, label: &str) -> SysResult<()> {
    crate::sockopt::set(fd, level, name, &value, || format!("{label}={value}"))
}

/// Reads an integer option of any socket fd.
pub fn get_int_opt(fd: RawFd, level: i32, name: i32, label: &str) -> SysResult<i32> {
    crate::sockopt::get(fd, level, name, label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_back() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let s = UdpSock::new_for(&addr).unwrap();
        s.set_reuseport(true).unwrap();
        assert!(s.reuseport().unwrap());
        s.set_mtu_discover(IP_PMTUDISC_OMIT).unwrap();
        assert_eq!(s.mtu_discover().unwrap(), IP_PMTUDISC_OMIT);
        s.set_rcvbuf(65536, false).unwrap();
        assert_eq!(s.rcvbuf().unwrap(), 131072, "kernel doubles the request");
        s.set_rxq_ovfl(true).unwrap();
        assert!(s.rxq_ovfl().unwrap());
        s.bind(&addr).unwrap();
        assert_ne!(s.local_addr().unwrap().port(), 0);
        assert_eq!(s.drops().unwrap(), 0);
    }

    #[test]
    fn recv_and_recvmsg_take_one_datagram_each() {
        let (srv, cli) = crate::mmsg::tests::connected_pair();
        cli.send_to(b"one", None, 0).unwrap();
        cli.send_to(b"two!", None, 0).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(srv.recv(&mut buf, 0).unwrap(), 3);
        assert_eq!(&buf[..3], b"one");
        let (n, from) = srv.recv_msg(&mut buf, 0).unwrap();
        assert_eq!((n, &buf[..4]), (4, &b"two!"[..]));
        assert_eq!(from.to_std(), Some(cli.local_addr().unwrap()));
        let e = srv.recv(&mut buf, libc::MSG_DONTWAIT).unwrap_err();
        assert!(is_would_block(&e), "{e}");
    }

    #[test]
    fn error_names_the_option_and_errno() {
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let s = UdpSock::new_for(&addr).unwrap();
        let e = s.set_int(libc::SOL_SOCKET, 9999, 1, "BOGUS").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("setsockopt(BOGUS=1)"), "{msg}");
        assert!(msg.contains("ENOPROTOOPT"), "{msg}");
    }
}
