//! Flood over an AF_PACKET TPACKET TX ring with PACKET_QDISC_BYPASS: frames built once per
//! flow with crates/frame and written into the ring's slots once, each behind a
//! virtio_net_hdr (PACKET_VNET_HDR) asking for the whole frame in the socket buffer's linear
//! area; sending marks free slots and hands them to the driver with one send().
//! [`resolve`] (interface, MACs) serves the AF_XDP mode too.
//!
//! The path is the kernel's own choice: a UDP socket connected to the target gives the source
//! address, the interface holding it is the one to send on, and the neighbour table gives the
//! destination MAC (resolved, when missing, by one datagram to the target's discard port). Loopback has
//! no link layer to speak of, so the target must be reached over a real interface (veth).

use firehose_frame::{write_request, Endpoints};
use firehose_sys::af_packet::{self, PacketSock, TxRing, TxRingConfig};
use firehose_sys::mmsg::Flushed;
use firehose_sys::socket::UdpSock;
use firehose_sys::xdp::netlink;
use firehose_sys::{Setting, SetupError, SysError};
use std::net::SocketAddr;
use std::time::Duration;

/// Where frames go out and what their link and network headers say.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    pub ifindex: u32,
    pub interface: String,
    pub endpoints: Endpoints,
}

/// The route the kernel would take to `target`, from `probe` (a UDP socket connected to it);
/// `mode` names the send mode in refusals.
pub(crate) fn resolve(probe: &UdpSock, target: SocketAddr, mode: &str) -> Result<Path, SetupError> {
    let src = probe.local_addr()?;
    let Some((ifindex, interface)) = firehose_sys::ifaddr::interface_of(src.ip())? else {
        return Err(SetupError::usage(
            Setting::Target,
            format!(
                "{} {mode}: no interface holds {}, the source address toward {target}",
                Setting::Io.r(),
                src.ip()
            ),
        ));
    };
    if src.ip().is_loopback() || target.ip() == src.ip() {
        return Err(SetupError::usage(
            Setting::Target,
            format!(
                "{} {mode}: {target} is reached over {interface}, not a real link; target an address behind an interface such as a veth peer",
                Setting::Io.r()
            ),
        ));
    }
    let mac_text =
        std::fs::read_to_string(format!("/sys/class/net/{interface}/address")).map_err(|e| {
            SysError {
                what: format!("reading {interface}'s MAC (/sys/class/net/{interface}/address)"),
                source: e,
            }
        })?;
    let src_mac = firehose_frame::parse_mac(mac_text.trim()).ok_or_else(|| {
        SetupError::usage(
            Setting::Target,
            format!(
                "{} {mode}: {interface} has no Ethernet address",
                Setting::Io.r()
            ),
        )
    })?;
    let dst_mac = netlink::resolve_neighbour(ifindex, src.ip(), target.ip(), Duration::from_secs(2))?
        .ok_or_else(|| {
            SetupError::usage(
                Setting::Target,
                format!(
                    "{} {mode}: {target} has no neighbour entry on {interface} (not on the link, or it does not answer ARP/ND)",
                    Setting::Io.r()
                ),
            )
        })?;
    Ok(Path {
        ifindex,
        interface,
        endpoints: Endpoints {
            src_mac,
            dst_mac,
            vlan: None,
            src,
            dst: target,
            ttl: 64,
        },
    })
}

/// Slots of a thread's TX ring when the flows allow: one send() hands the kernel up to
/// this many frames (trafgen fills its whole ring before each send()).
const RING_SLOTS: usize = 4096;

/// A thread's TX ring, its slots written once with the flows' frames in turn.
pub(crate) struct PacketSender {
    ring: TxRing,
}

impl PacketSender {
    /// A ring on the path's interface with qdisc bypass; slot i holds the frame of flow
    /// `ports[i % ports.len()]` (source ports), written here and never again: sending is
    /// marking slots, as the kernel only reads their data. The slot count is a multiple of
    /// the flow count where the ring's geometry allows, so the flows take turns exactly
    /// across laps.
    pub fn new(path: &Path, ports: &[u16], payload: usize) -> Result<Self, SetupError> {
        let body: Vec<u8> = (0..payload).map(|k| (k % 251) as u8).collect();
        let mut frames = Vec::new();
        for &p in ports {
            let mut e = path.endpoints;
            e.src.set_port(p);
            let mut f = vec![0u8; firehose_frame::header_len(&e) + payload];
            let n = write_request(&mut f, &e, &body).ok_or_else(|| {
                SetupError::usage(
                    Setting::Size,
                    format!(
                        "{} packet: a {payload}-byte payload does not fit a frame",
                        Setting::Io.r()
                    ),
                )
            })?;
            f.truncate(n);
            // The vnet header asks for the whole frame in the linear area.
            let mut v = af_packet::vnet_hdr_linear(n as u16).to_vec();
            v.extend_from_slice(&f);
            frames.push(v);
        }
        let longest = frames.iter().map(Vec::len).max().unwrap_or(0);
        let flows = frames.len().max(1);
        let slots = if 2 * flows <= 4 * RING_SLOTS {
            RING_SLOTS.next_multiple_of(2 * flows)
        } else {
            RING_SLOTS
        };
        let sock = PacketSock::open(path.ifindex)?;
        sock.set_qdisc_bypass(true)?;
        sock.set_vnet_hdr(true)?;
        let mut ring = TxRing::new(sock, TxRingConfig::for_frames(longest, slots))?;
        ring.prefill(|i| &frames[i % flows][..])?;
        Ok(PacketSender { ring })
    }

    /// Frames committed to the ring and not yet taken by the kernel.
    pub fn pending(&self) -> usize {
        self.ring.marked()
    }

    /// Frames one call may mark: the whole ring.
    pub fn capacity(&self) -> usize {
        self.ring.slots()
    }

    /// Marks up to `n` slots (flows in turn) and sends every marked frame with one send();
    /// `sent` is what the kernel took, a refused send() (ENOBUFS) is one `failed` with its
    /// errno.
    pub fn send(&mut self, n: usize) -> Result<Flushed, firehose_sys::SysError> {
        for _ in 0..n {
            if !self.ring.mark() {
                break;
            }
        }
        let s = self.ring.send()?;
        if s.frames == 0 && self.ring.marked() > 0 {
            self.ring.sock().poll(true, Duration::from_millis(1))?;
        }
        Ok(Flushed {
            sent: s.frames,
            failed: usize::from(s.error.is_some()),
            syscalls: 1,
            last_error: s.error,
            ..Flushed::default()
        })
    }
}
