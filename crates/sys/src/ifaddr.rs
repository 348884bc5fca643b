//! The host's interface addresses (getifaddrs): which interface holds a local IP address
//! (to bind a packet socket or probe zero-copy receive on it), and whether an address is
//! this host's at all (a flood refuses other targets).

use crate::sockaddr::storage_to_std;
use crate::{cvt, SysResult};
use std::ffi::CStr;
use std::net::IpAddr;

/// One configured address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    /// The address.
    pub ip: IpAddr,
    /// The interface's index.
    pub ifindex: u32,
    /// The interface's name.
    pub name: String,
}

/// Every IPv4 and IPv6 address configured in this network namespace.
pub fn addresses() -> SysResult<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head pointer into the local; freed below.
    cvt(unsafe { libc::getifaddrs(&mut head) }, || {
        "getifaddrs".into()
    })?;
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr of the family it names; copy what fits.
        let storage = unsafe {
            let mut s: libc::sockaddr_storage = std::mem::zeroed();
            let len = match (*ifa.ifa_addr).sa_family as i32 {
                libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
                libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
                _ => continue,
            };
            std::ptr::copy_nonoverlapping(
                ifa.ifa_addr as *const u8,
                &mut s as *mut _ as *mut u8,
                len,
            );
            s
        };
        if let Some(a) = storage_to_std(&storage) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
            // SAFETY: if_nametoindex reads the NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
            out.push(IfAddr {
                ip: a.ip(),
                ifindex,
                name: name.to_string_lossy().into_owned(),
            });
        }
    }
    // SAFETY: frees the list getifaddrs returned; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The addresses configured in the network namespace bound at `path` (an `ip netns`
/// file such as /run/netns/NAME). See [`in_netns`].
pub fn addresses_in_netns(path: &std::path::Path) -> SysResult<Vec<IfAddr>> {
    in_netns(path, addresses)
}

/// Runs `f` in a short-lived thread that enters the network namespace bound at `path`
/// (setns needs CAP_SYS_ADMIN; EPERM otherwise). The calling thread's namespace is
/// untouched.
pub fn in_netns<T: Send>(
    path: &std::path::Path,
    f: impl FnOnce() -> SysResult<T> + Send,
) -> SysResult<T> {
    use std::os::fd::AsRawFd;
    let ns = std::fs::File::open(path).map_err(|e| crate::SysError {
        what: format!("open({})", path.display()),
        source: e,
    })?;
    let what = format!("setns({}, CLONE_NEWNET)", path.display());
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on an open namespace fd; it moves only this helper thread.
            let ret = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            cvt(ret, || what)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(crate::SysError {
                what: format!("a thread in {}", path.display()),
                source: std::io::Error::other("thread panicked"),
            })
        })
    })
}

/// The (ifindex, name) of the interface that has `ip` configured; `None` if none has it.
pub fn interface_of(ip: IpAddr) -> SysResult<Option<(u32, String)>> {
    Ok(addresses()?
        .into_iter()
        .find(|a| a.ip == ip)
        .map(|a| (a.ifindex, a.name)))
}

/// The index of interface `name` (if_nametoindex).
pub fn ifindex(name: &str) -> SysResult<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| crate::SysError {
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

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_address_is_on_lo() {
        let (idx, name) = super::interface_of("127.0.0.1".parse().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(name, "lo");
        assert!(idx >= 1);
        assert_eq!(
            super::interface_of("192.0.2.77".parse().unwrap()).unwrap(),
            None
        );
        assert!(super::addresses()
            .unwrap()
            .iter()
            .any(|a| a.ip == "::1".parse::<std::net::IpAddr>().unwrap() && a.name == "lo"));
    }
}
