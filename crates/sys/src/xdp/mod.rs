//! AF_XDP: sockets with a UMEM and four rings ([`xsk`]), the program that steers UDP to them
//! ([`prog`]), the XSKMAP and BPF link that put it on an interface ([`attach`]), and the
//! netlink query/removal of whatever an interface runs ([`netlink`]).
//!
//! Contract for a backend (the engine's server or the generator): open one [`xsk::Xsk`] per
//! rx queue, put each in the [`attach::XskMap`] at its queue, load the [`attach::XdpProg`]
//! and attach it; then per socket: keep the fill ring stocked with free frames, take
//! descriptors from the rx ring, write frames to the tx ring, reap the completion ring, and
//! make a syscall only when a ring's `needs_wakeup()` says so (or always, when busy polling).

pub mod attach;
pub mod netlink;
pub mod prog;
pub mod ring;
pub mod umem;
pub mod xsk;

use crate::{cvt, SysError, SysResult};
use std::ffi::CString;

/// The errno of a netlink removal refused because a BPF link holds the program.
pub const EBUSY: i32 = libc::EBUSY;

/// The index of interface `name` (if_nametoindex).
pub fn ifindex(name: &str) -> SysResult<u32> {
    let c = CString::new(name).map_err(|_| SysError {
        what: format!("interface name {name:?}"),
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })?;
    // SAFETY: c is a live NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        cvt(-1i32, || format!("if_nametoindex({name})"))?;
    }
    Ok(idx)
}

/// The IPv4 and IPv6 addresses configured on interface `name` (getifaddrs).
pub fn iface_addrs(name: &str) -> SysResult<Vec<std::net::IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into a live local; freed below.
    cvt(unsafe { libc::getifaddrs(&mut head) }, || {
        "getifaddrs".into()
    })?;
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let ifname = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if ifname.to_bytes() == name.as_bytes() && !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says how long it is.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: AF_INET means the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into());
            } else if family == libc::AF_INET6 {
                // SAFETY: AF_INET6 means the sockaddr is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into());
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs and is freed once; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}
