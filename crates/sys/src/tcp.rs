//! A TCP socket and listener for bulk streams, with the options the Bloomberg netdev 0x18
//! talk turns (buffers, MSS, congestion control, SO_ZEROCOPY), each set and read back.

use crate::sockaddr::{storage_to_std, RawAddr};
use crate::sockopt::{get_bytes, get_int, set_bytes, set_int};
use crate::tcp_info::TcpInfo;
use crate::{cvt, SysError, SysResult};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// SO_ZEROCOPY (Linux 4.14), missing from some libc releases.
pub const SO_ZEROCOPY: i32 = 60;
/// MSG_ZEROCOPY send flag.
pub const MSG_ZEROCOPY: i32 = 0x0400_0000;

fn open(addr: &SocketAddr) -> SysResult<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket() takes no pointers; the returned fd is checked before use.
    let fd = cvt(
        unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) },
        || "socket(SOCK_STREAM)".into(),
    )?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn sockname(fd: RawFd, peer: bool) -> SysResult<SocketAddr> {
    let mut raw = RawAddr::empty();
    let p = &mut raw.storage as *mut _ as *mut libc::sockaddr;
    // SAFETY: the kernel writes at most raw.len bytes into raw.storage and updates len.
    let ret = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut raw.len)
        } else {
            libc::getsockname(fd, p, &mut raw.len)
        }
    };
    cvt(ret, || {
        if peer { "getpeername" } else { "getsockname" }.into()
    })?;
    raw.to_std().ok_or_else(|| SysError {
        what: "getsockname: unexpected address family".into(),
        source: std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT),
    })
}

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    fd: OwnedFd,
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl TcpListener {
    /// Binds (with SO_REUSEADDR) and listens. Buffer sizes set with [`Self::set_rcvbuf`]
    /// before connections arrive are inherited by accepted sockets, so the window scale
    /// is negotiated for them.
    pub fn bind(addr: &SocketAddr, backlog: i32) -> SysResult<Self> {
        let fd = open(addr)?;
        set_int(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            1,
            "SO_REUSEADDR",
        )?;
        let raw = RawAddr::from_std(addr);
        // SAFETY: raw holds a valid sockaddr of raw.len() bytes for the duration of the call.
        let ret = unsafe { libc::bind(fd.as_raw_fd(), raw.as_ptr(), raw.len()) };
        cvt(ret, || format!("bind({addr})"))?;
        // SAFETY: listen takes no pointers.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }, || {
            "listen".into()
        })?;
        Ok(TcpListener { fd })
    }

    /// SO_RCVBUF on the listener (inherited by accepted sockets).
    pub fn set_rcvbuf(&self, bytes: i32) -> SysResult<()> {
        set_int(
            self.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            bytes,
            "SO_RCVBUF",
        )
    }

    /// The address actually bound (port 0 becomes the kernel's choice).
    pub fn local_addr(&self) -> SysResult<SocketAddr> {
        sockname(self.as_raw_fd(), false)
    }

    /// Accepts one connection, waiting at most `timeout_ms` (-1: forever); `None` on timeout.
    pub fn accept(&self, timeout_ms: i32) -> SysResult<Option<(TcpSock, SocketAddr)>> {
        if crate::sockopt::poll_one(self.as_raw_fd(), libc::POLLIN, timeout_ms)? == 0 {
            return Ok(None);
        }
        let mut storage = RawAddr::empty();
        // SAFETY: the kernel writes the peer address into storage (at most len bytes).
        let fd = unsafe {
            libc::accept4(
                self.as_raw_fd(),
                &mut storage.storage as *mut _ as *mut libc::sockaddr,
                &mut storage.len,
                libc::SOCK_CLOEXEC,
            )
        };
        let fd = cvt(fd, || "accept4".into())?;
        // SAFETY: accept4 returned a new fd that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let peer = storage_to_std(&storage.storage).ok_or_else(|| SysError {
            what: "accept4: unexpected address family".into(),
            source: std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT),
        })?;
        Ok(Some((TcpSock { fd }, peer)))
    }
}

/// A connected TCP socket.
#[derive(Debug)]
pub struct TcpSock {
    fd: OwnedFd,
}

impl AsRawFd for TcpSock {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Options to set before `connect`, so window scaling and MSS take effect on the handshake.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub sndbuf: Option<i32>,
    pub rcvbuf: Option<i32>,
    pub mss: Option<i32>,
    pub congestion: Option<String>,
    pub zerocopy: bool,
}

impl TcpSock {
    /// Opens a socket, applies `opts`, and connects (blocking).
    pub fn connect(addr: &SocketAddr, opts: &ConnectOptions) -> SysResult<Self> {
        let s = TcpSock { fd: open(addr)? };
        if let Some(b) = opts.sndbuf {
            s.set_sndbuf(b)?;
        }
        if let Some(b) = opts.rcvbuf {
            s.set_rcvbuf(b)?;
        }
        if let Some(m) = opts.mss {
            s.set_maxseg(m)?;
        }
        if let Some(c) = &opts.congestion {
            s.set_congestion(c)?;
        }
        if opts.zerocopy {
            s.set_zerocopy(true)?;
        }
        let raw = RawAddr::from_std(addr);
        // SAFETY: raw holds a valid sockaddr of raw.len() bytes for the duration of the call.
        let ret = unsafe { libc::connect(s.as_raw_fd(), raw.as_ptr(), raw.len()) };
        cvt(ret, || format!("connect({addr})"))?;
        Ok(s)
    }

    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }

    /// SO_SNDBUF request (clamped by net.core.wmem_max; the kernel doubles it).
    pub fn set_sndbuf(&self, bytes: i32) -> SysResult<()> {
        set_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            bytes,
            "SO_SNDBUF",
        )
    }

    /// The send buffer granted.
    pub fn sndbuf(&self) -> SysResult<i32> {
        get_int(self.fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF")
    }

    /// SO_RCVBUF request (clamped by net.core.rmem_max; the kernel doubles it).
    pub fn set_rcvbuf(&self, bytes: i32) -> SysResult<()> {
        set_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            bytes,
            "SO_RCVBUF",
        )
    }

    /// The receive buffer granted.
    pub fn rcvbuf(&self) -> SysResult<i32> {
        get_int(self.fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, "SO_RCVBUF")
    }

    /// TCP_MAXSEG: caps the MSS announced and used.
    pub fn set_maxseg(&self, mss: i32) -> SysResult<()> {
        set_int(
            self.fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            mss,
            "TCP_MAXSEG",
        )
    }

    /// The MSS in force (after connect: the negotiated one).
    pub fn maxseg(&self) -> SysResult<i32> {
        get_int(self.fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, "TCP_MAXSEG")
    }

    /// TCP_CONGESTION by name (e.g. "cubic", "bbr"); ENOENT when the module is not loaded.
    pub fn set_congestion(&self, name: &str) -> SysResult<()> {
        set_bytes(
            self.fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_bytes(),
            "TCP_CONGESTION",
        )
    }

    /// The congestion control in force.
    pub fn congestion(&self) -> SysResult<String> {
        let mut buf = [0u8; 32];
        let n = get_bytes(
            self.fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            &mut buf,
            "TCP_CONGESTION",
        )?;
        let s = &buf[..n];
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        Ok(String::from_utf8_lossy(&s[..end]).into_owned())
    }

    /// SO_ZEROCOPY: permits MSG_ZEROCOPY sends on this socket.
    pub fn set_zerocopy(&self, on: bool) -> SysResult<()> {
        set_int(
            self.fd(),
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            on as i32,
            "SO_ZEROCOPY",
        )
    }

    /// Whether SO_ZEROCOPY is set.
    pub fn zerocopy(&self) -> SysResult<bool> {
        Ok(get_int(self.fd(), libc::SOL_SOCKET, SO_ZEROCOPY, "SO_ZEROCOPY")? != 0)
    }

    /// SO_RCVLOWAT: wake a reader only when this many bytes are queued (the tcp_mmap
    /// selftest sets it to its chunk so each zero-copy call maps many pages at once).
    pub fn set_rcvlowat(&self, bytes: i32) -> SysResult<()> {
        set_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            bytes,
            "SO_RCVLOWAT",
        )
    }

    /// The SO_RCVLOWAT in force.
    pub fn rcvlowat(&self) -> SysResult<i32> {
        get_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            "SO_RCVLOWAT",
        )
    }

    /// TCP_INFO, parsed.
    pub fn tcp_info(&self) -> SysResult<TcpInfo> {
        let mut buf = [0u8; 256];
        let n = get_bytes(
            self.fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut buf,
            "TCP_INFO",
        )?;
        Ok(TcpInfo::parse(&buf[..n]))
    }

    /// The local address.
    pub fn local_addr(&self) -> SysResult<SocketAddr> {
        sockname(self.fd(), false)
    }

    /// The peer address.
    pub fn peer_addr(&self) -> SysResult<SocketAddr> {
        sockname(self.fd(), true)
    }

    /// One send(2); returns the bytes the kernel took (may be short).
    pub fn send(&self, buf: &[u8], flags: i32) -> SysResult<usize> {
        // SAFETY: buf is readable for buf.len() bytes during the call. With MSG_ZEROCOPY the
        // kernel pins the pages and keeps its own references; our memory stays valid to us.
        let n = unsafe {
            libc::send(
                self.fd(),
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        cvt(n, || "send".into()).map(|n| n as usize)
    }

    /// Sends all of `buf`, retrying short writes and EINTR.
    pub fn send_all(&self, mut buf: &[u8]) -> SysResult<()> {
        while !buf.is_empty() {
            match self.send(buf, 0) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.errno() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// One recv(2); 0 means the peer closed its side.
    pub fn recv(&self, buf: &mut [u8], flags: i32) -> SysResult<usize> {
        // SAFETY: buf is writable for buf.len() bytes during the call.
        let n = unsafe {
            libc::recv(
                self.fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                flags,
            )
        };
        cvt(n, || "recv".into()).map(|n| n as usize)
    }

    /// Fills `buf` completely; `Ok(false)` when the peer closed before the first byte.
    pub fn recv_exact(&self, buf: &mut [u8]) -> SysResult<bool> {
        let mut got = 0;
        while got < buf.len() {
            match self.recv(&mut buf[got..], 0) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => {
                    return Err(SysError {
                        what: format!("recv: peer closed after {got} of {} bytes", buf.len()),
                        source: std::io::Error::from_raw_os_error(libc::ECONNRESET),
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.errno() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// shutdown(SHUT_WR): the peer reads end-of-stream, and can still answer.
    pub fn shutdown_write(&self) -> SysResult<()> {
        // SAFETY: shutdown takes no pointers.
        cvt(unsafe { libc::shutdown(self.fd(), libc::SHUT_WR) }, || {
            "shutdown(SHUT_WR)".into()
        })
        .map(|_| ())
    }

    /// SO_RCVTIMEO/SO_SNDTIMEO, so a blocked call returns EAGAIN and a stop flag is seen.
    pub fn set_timeouts(&self, d: std::time::Duration) -> SysResult<()> {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        };
        for (opt, label) in [
            (libc::SO_RCVTIMEO, "SO_RCVTIMEO"),
            (libc::SO_SNDTIMEO, "SO_SNDTIMEO"),
        ] {
            // SAFETY: the kernel reads a timeval from a live local.
            let ret = unsafe {
                libc::setsockopt(
                    self.fd(),
                    libc::SOL_SOCKET,
                    opt,
                    &tv as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            cvt(ret, || format!("setsockopt({label})"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_read_back_and_loopback_transfer() {
        let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let addr = l.local_addr().unwrap();
        let opts = ConnectOptions {
            sndbuf: Some(1 << 20),
            mss: Some(1000),
            congestion: Some("reno".into()),
            zerocopy: true,
            ..Default::default()
        };
        let c = TcpSock::connect(&addr, &opts).unwrap();
        let (s, peer) = l.accept(5000).unwrap().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        assert_eq!(c.sndbuf().unwrap(), 2 << 20, "kernel doubles the request");
        assert_eq!(c.congestion().unwrap(), "reno");
        assert!(c.zerocopy().unwrap());
        s.set_rcvlowat(65536).unwrap();
        assert_eq!(s.rcvlowat().unwrap(), 65536);
        assert!(c.maxseg().unwrap() <= 1000);
        c.send_all(b"hello").unwrap();
        c.shutdown_write().unwrap();
        let mut buf = [0u8; 5];
        assert!(s.recv_exact(&mut buf).unwrap());
        assert_eq!(&buf, b"hello");
        assert_eq!(s.recv(&mut buf, 0).unwrap(), 0);
        let info = c.tcp_info().unwrap();
        assert_eq!(info.bytes_sent, Some(5), "payload only");
        assert_eq!(
            s.tcp_info().unwrap().bytes_received,
            Some(6),
            "5 bytes + the FIN's sequence number, read after end of stream"
        );
    }

    #[test]
    fn unknown_congestion_names_the_option() {
        let opts = ConnectOptions {
            congestion: Some("no-such-cc".into()),
            ..Default::default()
        };
        let e = TcpSock::connect(&"127.0.0.1:9".parse().unwrap(), &opts).unwrap_err();
        assert!(e.to_string().contains("TCP_CONGESTION"), "{e}");
        assert_eq!(e.errno(), Some(libc::ENOENT));
    }
}
