//! AF_XDP: one driver for every user of it (the server's workers, the generator, the sink's
//! workers, the flood's threads), in these parts:
//!
//! - [`queue`]: **the driver**. An [`queue::XdpQueue`] owns one socket and its frames: UMEM
//!   frame ownership, completion reaping, fill-ring refill, receive with or without a wait,
//!   transmit, and the one kick policy (need_wakeup, busy polling, copy mode's 32 frames per
//!   `sendto`). Users are thin adapters: they parse and build frames (crate
//!   `firehose-frame`) and count what their role needs.
//! - [`setup`]: what every user does before its first packet, with one wording for each
//!   refusal: check the interface, deal with an XDP program already attached, open each
//!   queue's socket (zero-copy probed, a busy queue waited for), and [`setup::steer`]: the
//!   XSKMAP, the redirect program and its BPF link, one stocked driver per queue. The options
//!   ([`setup::XdpOptions`]) are one type from the command line to the sockets, and what the
//!   kernel granted is one description ([`setup::Granted`]) that every user prints and writes.
//! - [`xsk`] (socket, UMEM registration, ring mapping, bind, XDP_OPTIONS / XDP_STATISTICS
//!   read back, the zero-length kicks), [`ring`] (the four shared rings), [`umem`] (the frame
//!   area).
//! - [`prog`] (the redirect program, assembled in Rust), [`attach`] (XSKMAP, program load,
//!   BPF link), [`netlink`] (what an interface runs; removing a leftover; neighbour look-up).

pub mod attach;
pub mod netlink;
pub mod prog;
pub mod queue;
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
