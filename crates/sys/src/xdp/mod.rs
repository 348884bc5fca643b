//! AF_XDP: sockets with a UMEM and four rings ([`xsk`]), the program that steers UDP to them
//! ([`prog`]), the XSKMAP and BPF link that put it on an interface ([`attach`]), and the
//! netlink query/removal of whatever an interface runs ([`netlink`]), and the checks and
//! steps every user shares before its first packet ([`setup`]).
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
pub mod setup;
pub mod umem;
pub mod xsk;

use crate::SysResult;

/// The errno of a netlink removal refused because a BPF link holds the program.
pub const EBUSY: i32 = libc::EBUSY;

pub use crate::ifaddr::ifindex;

/// The IPv4 and IPv6 addresses configured on interface `name` (getifaddrs).
pub fn iface_addrs(name: &str) -> SysResult<Vec<std::net::IpAddr>> {
    Ok(crate::ifaddr::addresses()?
        .into_iter()
        .filter(|a| a.name == name)
        .map(|a| a.ip)
        .collect())
}
