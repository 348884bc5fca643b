//! rtnetlink for XDP: which program an interface runs (RTM_GETLINK, IFLA_XDP) and removing
//! one (RTM_SETLINK with IFLA_XDP_FD = -1), the way `ip link set dev X xdp off` does.
//!
//! Messages are built and parsed as bytes; only the socket calls are unsafe.

use super::attach::{refused, XdpProg, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use crate::{cvt, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_DONE: u16 = 3;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
const NUD_INCOMPLETE: u16 = 0x01;
const NUD_FAILED: u16 = 0x20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NLA_F_NESTED: u16 = 1 << 15;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;

/// XDP programs on an interface, by mode (0 = none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attached {
    pub native: u32,
    pub generic: u32,
    /// The single program id the kernel reports when one mode is in use (may be offload).
    pub any: u32,
}

pub(crate) fn push_attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// nlmsghdr + ifinfomsg for `ifindex`, then `attrs`.
pub(crate) fn message(kind: u16, flags: u16, ifindex: u32, attrs: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    let len = 16 + 16 + attrs.len();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills it
                                              // ifinfomsg: family, pad, type, index, flags, change
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(attrs);
    m
}

/// Iterates over (type, payload) of netlink attributes in `b`.
pub(crate) fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let kind = u16::from_ne_bytes([b[2], b[3]]) & !NLA_F_NESTED;
        if len < 4 || len > b.len() {
            return None;
        }
        let payload = &b[4..len];
        b = &b[len.next_multiple_of(4).min(b.len())..];
        Some((kind, payload))
    })
}

pub(crate) fn u32_of(p: &[u8]) -> u32 {
    p.get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0)
}

/// Parses an RTM_NEWLINK reply's IFLA_XDP.
fn parse_link(reply: &[u8]) -> Attached {
    let mut out = Attached::default();
    let Some(body) = reply.get(32..) else {
        return out;
    };
    for (kind, payload) in attrs(body) {
        if kind != IFLA_XDP {
            continue;
        }
        for (k, p) in attrs(payload) {
            match k {
                IFLA_XDP_PROG_ID => out.any = u32_of(p),
                IFLA_XDP_DRV_PROG_ID => out.native = u32_of(p),
                IFLA_XDP_SKB_PROG_ID => out.generic = u32_of(p),
                IFLA_XDP_ATTACHED => {}
                _ => {}
            }
        }
    }
    out
}

/// A netlink socket for one request/response at a time (route netlink unless opened with
/// another protocol).
pub(crate) struct Nl {
    fd: OwnedFd,
}

impl Nl {
    pub(crate) fn new() -> SysResult<Self> {
        Self::open(libc::NETLINK_ROUTE)
    }

    /// A netlink socket of `protocol` (NETLINK_ROUTE, NETLINK_GENERIC).
    pub(crate) fn open(protocol: i32) -> SysResult<Self> {
        // SAFETY: socket() takes no pointers; checked before use.
        let fd = cvt(
            unsafe {
                libc::socket(
                    libc::AF_NETLINK,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    protocol,
                )
            },
            || format!("socket(AF_NETLINK, {protocol})"),
        )?;
        // SAFETY: fresh fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Nl { fd })
    }

    pub(crate) fn send(&self, msg: &[u8], what: &str) -> SysResult<()> {
        // SAFETY: the kernel reads msg.len() bytes from a live slice.
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
            )
        };
        cvt(sent as isize, || format!("send(netlink {what})")).map(|_| ())
    }

    /// One datagram from the kernel (one or more messages).
    pub(crate) fn recv(&self, what: &str) -> SysResult<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        // SAFETY: the kernel writes at most buf.len() bytes into a live buffer.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
            )
        };
        let n = cvt(n as isize, || format!("recv(netlink {what})"))? as usize;
        buf.truncate(n);
        Ok(buf)
    }

    /// Sends `msg` and returns the first reply message.
    pub(crate) fn request(&self, msg: &[u8], what: &str) -> SysResult<Vec<u8>> {
        self.send(msg, what)?;
        let buf = self.recv(what)?;
        if buf.len() >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == NLMSG_ERROR {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err != 0 {
                return Err(refused(format!("netlink {what}"), -err));
            }
        }
        Ok(buf)
    }
}

/// Splits a netlink datagram into its messages: (type, whole message).
fn messages(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 16 {
            return None;
        }
        let len = u32_of(b) as usize;
        if len < 16 || len > b.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([b[4], b[5]]);
        let m = &b[..len];
        b = &b[len.next_multiple_of(4).min(b.len())..];
        Some((kind, m))
    })
}

/// `target`'s link-layer address on `ifindex`, making the kernel resolve it when the table
/// has none: an empty datagram from `src` to the target's discard port (9, so no server under
/// test counts it) every 500 ms, asking again every 10 ms, for at most `within`. None when
/// the target never answered ARP/ND (not on the link, or down).
pub fn resolve_neighbour(
    ifindex: u32,
    src: std::net::IpAddr,
    target: std::net::IpAddr,
    within: std::time::Duration,
) -> SysResult<Option<[u8; 6]>> {
    use std::time::{Duration, Instant};
    if let Some(m) = neighbour(ifindex, target)? {
        return Ok(Some(m));
    }
    let s = std::net::UdpSocket::bind((src, 0)).map_err(|e| crate::SysError {
        what: format!("bind(UDP {src}) to resolve {target}"),
        source: e,
    })?;
    let started = Instant::now();
    let mut last_send = None::<Instant>;
    while started.elapsed() < within {
        if last_send.is_none_or(|t| t.elapsed() >= Duration::from_millis(500)) {
            let _ = s.send_to(&[], (target, 9));
            last_send = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(10));
        if let Some(m) = neighbour(ifindex, target)? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The link-layer address of `ip` in `ifindex`'s neighbour table, if the kernel has
/// resolved it (an entry neither incomplete nor failed). A generator that finds none sends
/// one datagram through a kernel socket to make the kernel resolve it, then asks again.
pub fn neighbour(ifindex: u32, ip: std::net::IpAddr) -> SysResult<Option<[u8; 6]>> {
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    } as u8;
    let mut m = Vec::with_capacity(28);
    m.extend_from_slice(&28u32.to_ne_bytes());
    m.extend_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    // ndmsg: family, pad, pad, ifindex, state, flags, type
    m.extend_from_slice(&[family, 0, 0, 0]);
    m.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    m.extend_from_slice(&[0, 0, 0, 0]);
    let want: Vec<u8> = match ip {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    };
    let nl = Nl::new()?;
    nl.send(&m, "RTM_GETNEIGH")?;
    let mut found = None;
    loop {
        let buf = nl.recv("RTM_GETNEIGH")?;
        for (kind, msg) in messages(&buf) {
            match kind {
                NLMSG_DONE => return Ok(found),
                NLMSG_ERROR => {
                    return Err(refused(
                        "netlink RTM_GETNEIGH".into(),
                        -(u32_of(&msg[16..]) as i32),
                    ))
                }
                RTM_NEWNEIGH if msg.len() >= 28 => {
                    let idx = u32_of(&msg[20..]);
                    let state = u16::from_ne_bytes([msg[24], msg[25]]);
                    if idx != ifindex || state & (NUD_INCOMPLETE | NUD_FAILED) != 0 {
                        continue;
                    }
                    let (mut dst, mut ll) = (None, None);
                    for (k, p) in attrs(&msg[28..]) {
                        match k {
                            NDA_DST => dst = Some(p),
                            NDA_LLADDR if p.len() == 6 => {
                                ll = Some([p[0], p[1], p[2], p[3], p[4], p[5]])
                            }
                            _ => {}
                        }
                    }
                    if dst == Some(&want[..]) {
                        found = ll.or(found);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The XDP programs attached to `ifindex`.
pub fn query(ifindex: u32) -> SysResult<Attached> {
    let nl = Nl::new()?;
    let reply = nl.request(&message(RTM_GETLINK, 0, ifindex, &[]), "RTM_GETLINK")?;
    Ok(parse_link(&reply))
}

/// Sets (`prog_fd` >= 0) or removes (-1) the netlink-attached program of `ifindex`.
fn set_prog(ifindex: u32, prog_fd: i32, generic: bool, what: &str) -> SysResult<()> {
    let mut inner = Vec::new();
    push_attr(&mut inner, IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    let flag = if generic {
        XDP_FLAGS_SKB_MODE
    } else {
        XDP_FLAGS_DRV_MODE
    };
    push_attr(&mut inner, IFLA_XDP_FLAGS, &flag.to_ne_bytes());
    let mut outer = Vec::new();
    push_attr(&mut outer, IFLA_XDP | NLA_F_NESTED, &inner);
    let nl = Nl::new()?;
    nl.request(&message(RTM_SETLINK, NLM_F_ACK, ifindex, &outer), what)?;
    Ok(())
}

/// Removes the netlink-attached program of `ifindex` in the mode of `generic`. A program held
/// by a BPF link cannot be removed this way (EBUSY): its owner must close the link.
pub fn detach(ifindex: u32, generic: bool) -> SysResult<()> {
    set_prog(ifindex, -1, generic, "RTM_SETLINK xdp off")
}

/// Attaches `prog` through netlink, the way `ip link set dev X xdp` does: it stays after
/// this process exits, until someone removes it.
pub fn attach(ifindex: u32, prog: &XdpProg, generic: bool) -> SysResult<()> {
    set_prog(ifindex, prog.as_raw_fd(), generic, "RTM_SETLINK xdp on")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_xdp_ids() {
        let mut inner = Vec::new();
        push_attr(&mut inner, IFLA_XDP_ATTACHED, &[1, 0, 0, 0]);
        push_attr(&mut inner, IFLA_XDP_PROG_ID, &42u32.to_ne_bytes());
        push_attr(&mut inner, IFLA_XDP_DRV_PROG_ID, &42u32.to_ne_bytes());
        let mut outer = Vec::new();
        push_attr(&mut outer, 3, b"eth0\0"); // IFLA_IFNAME first, odd length
        push_attr(&mut outer, IFLA_XDP | NLA_F_NESTED, &inner);
        let msg = message(16, 0, 3, &outer);
        let a = parse_link(&msg);
        assert_eq!((a.any, a.native, a.generic), (42, 42, 0));
    }
}
