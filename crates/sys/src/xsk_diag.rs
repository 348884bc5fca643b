//! AF_XDP sockets seen from outside their process: the sock_diag netlink dump (`ss --xdp`)
//! with each socket's interface, queue and ring statistics (the XDP_STATISTICS counters:
//! rx dropped, rx invalid, rx ring full, fill ring empty, tx invalid, tx ring empty).
//! Sockets of the caller's network namespace only.

use crate::{cvt, SysError, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const AF_XDP: u8 = 44;
const XDP_SHOW_INFO: u32 = 1;
const XDP_SHOW_STATS: u32 = 1 << 4;
const XDP_DIAG_INFO: u16 = 1;
const XDP_DIAG_STATS: u16 = 9;

/// The ring statistics of one AF_XDP socket (struct xdp_diag_stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XskStats {
    pub rx_dropped: u64,
    pub rx_invalid: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
    pub tx_invalid: u64,
    pub tx_ring_empty: u64,
}

/// One AF_XDP socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct XskInfo {
    pub inode: u32,
    /// 0 for a socket not bound yet.
    pub ifindex: u32,
    pub queue: u32,
    pub stats: Option<XskStats>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// What one reply buffer held: sockets, whether the dump is done, or the kernel's errno.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    pub sockets: Vec<XskInfo>,
    pub done: bool,
    pub errno: Option<i32>,
}

/// Decodes one buffer of a sock_diag dump of AF_XDP sockets; malformed parts end it.
pub fn parse_reply(mut b: &[u8]) -> Reply {
    let mut r = Reply::default();
    while b.len() >= 16 {
        let len = u32_at(b, 0).unwrap_or(0) as usize;
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        if len < 16 || len > b.len() {
            break;
        }
        let body = &b[16..len];
        match kind {
            NLMSG_DONE => r.done = true,
            NLMSG_ERROR => {
                let e = u32_at(body, 0).unwrap_or(0) as i32;
                if e != 0 {
                    r.errno = Some(-e);
                }
                r.done = true;
            }
            SOCK_DIAG_BY_FAMILY if body.len() >= 16 && body[0] == AF_XDP => {
                let mut x = XskInfo {
                    inode: u32_at(body, 4).unwrap_or(0),
                    ..Default::default()
                };
                let mut a = &body[16..];
                while a.len() >= 4 {
                    let alen = u16::from_ne_bytes([a[0], a[1]]) as usize;
                    let akind = u16::from_ne_bytes([a[2], a[3]]) & 0x3fff;
                    if alen < 4 || alen > a.len() {
                        break;
                    }
                    let p = &a[4..alen];
                    match akind {
                        XDP_DIAG_INFO => {
                            x.ifindex = u32_at(p, 0).unwrap_or(0);
                            x.queue = u32_at(p, 4).unwrap_or(0);
                        }
                        XDP_DIAG_STATS if p.len() >= 48 => {
                            let v = |i: usize| u64_at(p, 8 * i).unwrap_or(0);
                            x.stats = Some(XskStats {
                                rx_dropped: v(0),
                                rx_invalid: v(1),
                                rx_ring_full: v(2),
                                fill_ring_empty: v(3),
                                tx_invalid: v(4),
                                tx_ring_empty: v(5),
                            });
                        }
                        _ => {}
                    }
                    a = &a[((alen + 3) & !3).min(a.len())..];
                }
                r.sockets.push(x);
            }
            _ => {}
        }
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    r
}

/// Every AF_XDP socket of this network namespace with its statistics. A kernel without
/// AF_XDP diagnostics (CONFIG_XDP_SOCKETS_DIAG) answers ENOENT.
pub fn xdp_sockets() -> SysResult<Vec<XskInfo>> {
    // SAFETY: socket() takes no pointers; the result is checked by cvt.
    let fd = cvt(
        unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        },
        || "socket(AF_NETLINK, NETLINK_SOCK_DIAG)".into(),
    )?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = [0u8; 32];
    req[0..4].copy_from_slice(&32u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = AF_XDP;
    req[24..28].copy_from_slice(&(XDP_SHOW_INFO | XDP_SHOW_STATS).to_ne_bytes());
    // SAFETY: req is a live buffer of the length passed; the kernel only reads it.
    let n = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    cvt(n as isize, || "send(sock_diag AF_XDP dump)".into())?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    for _ in 0..10_000 {
        // SAFETY: buf is a live writable buffer of the length passed.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let n = cvt(n as isize, || "recv(sock_diag AF_XDP dump)".into())? as usize;
        let r = parse_reply(&buf[..n]);
        out.extend(r.sockets);
        if let Some(e) = r.errno {
            return Err(SysError {
                what: "sock_diag dump of AF_XDP sockets".into(),
                source: std::io::Error::from_raw_os_error(e),
            });
        }
        if r.done || n == 0 {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    #[test]
    fn a_dump_with_one_socket_then_done() {
        let mut body = vec![AF_XDP, 3, 0, 0];
        body.extend_from_slice(&777u32.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&12u16.to_ne_bytes());
        body.extend_from_slice(&XDP_DIAG_INFO.to_ne_bytes());
        body.extend_from_slice(&5u32.to_ne_bytes());
        body.extend_from_slice(&1u32.to_ne_bytes());
        body.extend_from_slice(&52u16.to_ne_bytes());
        body.extend_from_slice(&XDP_DIAG_STATS.to_ne_bytes());
        for v in 1..=6u64 {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        let mut b = msg(SOCK_DIAG_BY_FAMILY, &body);
        b.extend(msg(NLMSG_DONE, &[0; 4]));
        let r = parse_reply(&b);
        assert!(r.done);
        assert_eq!(r.sockets.len(), 1);
        let s = r.sockets[0];
        assert_eq!((s.inode, s.ifindex, s.queue), (777, 5, 1));
        assert_eq!(s.stats.unwrap().rx_ring_full, 3);
        assert_eq!(s.stats.unwrap().tx_ring_empty, 6);
        // Truncated at every length: never a panic.
        for cut in 0..b.len() {
            let _ = parse_reply(&b[..cut]);
        }
        let err = msg(NLMSG_ERROR, &(-2i32).to_ne_bytes());
        assert_eq!(parse_reply(&err).errno, Some(2));
    }

    #[test]
    fn the_live_dump_answers() {
        match xdp_sockets() {
            Ok(v) => assert!(v.iter().all(|s| s.inode != 0), "{v:?}"),
            Err(e) => assert!(e.errno().is_some(), "{e}"),
        }
    }
}
