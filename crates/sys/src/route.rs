//! Where the kernel would send a packet from this network namespace (RTM_GETROUTE), and
//! what an interface is linked to (RTM_GETLINK: its kind, and a veth's peer): enough to
//! tell whether a destination stays on this host, as `flood` must before it sends.
//!
//! Messages are built and parsed as bytes over the rtnetlink socket of `xdp::netlink`.

use crate::xdp::netlink::{attrs, message, push_attr, u32_of, Nl};
use crate::SysResult;
use std::net::IpAddr;

const RTM_GETLINK: u16 = 18;
const RTM_GETROUTE: u16 = 26;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_VIA: u16 = 18;
const IFLA_LINK: u16 = 5;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const RTN_UNICAST: u8 = 1;
const RTN_LOCAL: u8 = 2;

/// The kernel's route to one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The address is this namespace's own (RTN_LOCAL): the packet never leaves it.
    pub local: bool,
    /// A unicast route (RTN_UNICAST), possibly through a gateway.
    pub unicast: bool,
    /// The output interface.
    pub oif: Option<u32>,
    /// The next hop, when it is not the destination itself.
    pub gateway: Option<IpAddr>,
}

/// The route the kernel picks for `ip` in the calling thread's network namespace; `None`
/// when there is none (ENETUNREACH, EHOSTUNREACH).
pub fn route_to(ip: IpAddr) -> SysResult<Option<Route>> {
    let (family, addr): (u8, Vec<u8>) = match ip {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let mut body = vec![family, (addr.len() * 8) as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    push_attr(&mut body, RTA_DST, &addr);
    let mut m = Vec::with_capacity(16 + body.len());
    m.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&body);
    let reply = match Nl::new()?.request(&m, "RTM_GETROUTE") {
        Ok(r) => r,
        Err(e)
            if matches!(
                e.source.raw_os_error(),
                Some(libc::ENETUNREACH | libc::EHOSTUNREACH)
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    Ok(parse_route(&reply))
}

fn parse_route(reply: &[u8]) -> Option<Route> {
    let rt = reply.get(16..28)?;
    let mut r = Route {
        local: rt[7] == RTN_LOCAL,
        unicast: rt[7] == RTN_UNICAST,
        oif: None,
        gateway: None,
    };
    for (kind, p) in attrs(&reply[28..]) {
        match kind {
            RTA_OIF => r.oif = Some(u32_of(p)),
            RTA_GATEWAY => r.gateway = ip_of(p),
            // An IPv4 route through an IPv6 next hop: family (2 bytes), then the address.
            RTA_VIA => r.gateway = p.get(2..).and_then(ip_of),
            _ => {}
        }
    }
    Some(r)
}

fn ip_of(p: &[u8]) -> Option<IpAddr> {
    match p.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(p).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(p).ok()?)),
        _ => None,
    }
}

/// What an interface is: its kind (`veth`, `bridge`...; `None` for a physical device) and
/// the interface it is linked to (a veth's peer, by index in the peer's namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub kind: Option<String>,
    pub link: Option<u32>,
}

/// Reads interface `ifindex` of the calling thread's network namespace.
pub fn link(ifindex: u32) -> SysResult<Link> {
    let reply = Nl::new()?.request(&message(RTM_GETLINK, 0, ifindex, &[]), "RTM_GETLINK")?;
    let mut l = Link {
        kind: None,
        link: None,
    };
    for (kind, p) in attrs(reply.get(32..).unwrap_or_default()) {
        match kind {
            IFLA_LINK => l.link = Some(u32_of(p)),
            IFLA_LINKINFO => {
                for (k, v) in attrs(p) {
                    if k == IFLA_INFO_KIND {
                        let name = v.split(|&b| b == 0).next().unwrap_or_default();
                        l.kind = Some(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
            _ => {}
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_local_and_lo_is_a_plain_device() {
        let r = route_to("127.0.0.1".parse().unwrap()).unwrap().unwrap();
        assert!(r.local && !r.unicast, "{r:?}");
        let lo = crate::ifaddr::ifindex("lo").unwrap();
        assert_eq!(r.oif, Some(lo));
        let l = link(lo).unwrap();
        assert_eq!(l.kind, None, "{l:?}");
    }
}
