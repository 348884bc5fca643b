//! Which interface holds a local IP address (getifaddrs), e.g. to probe zero-copy receive
//! on the interface a connection arrived on.

use crate::sockaddr::storage_to_std;
use crate::{cvt, SysResult};
use std::ffi::CStr;
use std::net::IpAddr;

/// The (ifindex, name) of the interface that has `ip` configured; `None` if none has it.
pub fn interface_of(ip: IpAddr) -> SysResult<Option<(u32, String)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head pointer into the local; freed below.
    cvt(unsafe { libc::getifaddrs(&mut head) }, || {
        "getifaddrs".into()
    })?;
    let mut found = None;
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
        if storage_to_std(&storage).map(|a| a.ip()) == Some(ip) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
            // SAFETY: if_nametoindex reads the NUL-terminated name.
            let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
            found = Some((idx, name.to_string_lossy().into_owned()));
            break;
        }
    }
    // SAFETY: frees the list getifaddrs returned; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
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
    }
}
