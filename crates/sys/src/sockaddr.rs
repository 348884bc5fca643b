//! Conversions between `std::net::SocketAddr` and the kernel's `sockaddr_storage`.

use std::mem;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address in the kernel's layout, ready to pass to a syscall.
#[derive(Clone, Copy)]
pub struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl RawAddr {
    /// An empty address with room for any family (for the kernel to fill).
    pub fn empty() -> Self {
        RawAddr {
            // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (AF_UNSPEC) value.
            storage: unsafe { mem::zeroed() },
            len: mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    /// Converts a std address into the kernel layout.
    pub fn from_std(addr: &SocketAddr) -> Self {
        let mut raw = RawAddr::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
                unsafe {
                    std::ptr::write(&mut raw.storage as *mut _ as *mut libc::sockaddr_in, sin)
                };
                raw.len = mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write(&mut raw.storage as *mut _ as *mut libc::sockaddr_in6, sin6)
                };
                raw.len = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        raw
    }

    /// Converts the kernel layout back into a std address; `None` for other families.
    pub fn to_std(&self) -> Option<SocketAddr> {
        storage_to_std(&self.storage)
    }

    /// Pointer for syscalls that read the address.
    pub fn as_ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const _ as *const libc::sockaddr
    }

    /// Length of the address in bytes.
    pub fn len(&self) -> libc::socklen_t {
        self.len
    }

    /// True for an address the kernel left empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Reads a `sockaddr_storage` filled by the kernel.
pub(crate) fn storage_to_std(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, and storage is aligned for it.
            let sin = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, and storage is aligned for it.
            let sin6 = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Reads a `sockaddr_in` or `sockaddr_in6` from bytes as the kernel wrote them (e.g. the
/// name an io_uring RECVMSG puts in a provided buffer, which carries no alignment); `None`
/// for another family or a record too short for its family.
pub fn from_bytes(b: &[u8]) -> Option<SocketAddr> {
    let u16_at = |i: usize| b.get(i..i + 2).map(|s| [s[0], s[1]]);
    let u32_at = |i: usize| b.get(i..i + 4).map(|s| [s[0], s[1], s[2], s[3]]);
    let family = u16::from_ne_bytes(u16_at(0)?) as i32;
    let port = u16::from_be_bytes(u16_at(2)?);
    match family {
        libc::AF_INET => Some(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32_at(4)?),
            port,
        ))),
        libc::AF_INET6 => {
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                u32::from_ne_bytes(u32_at(4)?),
                u32::from_ne_bytes(u32_at(24)?),
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v4_and_v6() {
        for s in ["127.0.0.1:53", "[::1]:9000", "[fe80::1%2]:7"] {
            let a: SocketAddr = s.parse().unwrap();
            assert_eq!(RawAddr::from_std(&a).to_std(), Some(a));
            let raw = RawAddr::from_std(&a);
            // SAFETY: test only; reads the initialised bytes of a live sockaddr_storage.
            let bytes = unsafe {
                std::slice::from_raw_parts(raw.as_ptr() as *const u8, raw.len() as usize)
            };
            assert_eq!(from_bytes(bytes), Some(a), "{s}");
            assert_eq!(from_bytes(&bytes[..6]), None, "{s} cut short");
        }
        assert_eq!(from_bytes(&[0u8; 28]), None, "AF_UNSPEC");
    }
}
