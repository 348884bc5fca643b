//! The generator over AF_XDP: requests built as whole frames in UMEM and sent on a tx ring,
//! responses redirected by the XDP program on the client interface (UDP from the target to
//! the generator's range of source ports) into one AF_XDP socket per rx queue.
//!
//! Flows are source ports `base..base + flows`, so RSS spreads them like socket flows; the
//! ports are reserved by binding kernel UDP sockets to them, which keeps the kernel from
//! handing them to anyone else. The destination MAC is the target's entry in the kernel's
//! neighbour table, resolved first through the kernel (one empty datagram to the discard
//! port) when absent: the target must be on the interface's link. A reply may land on any
//! rx queue, so one thread reads every queue's socket; it sends on queue 0's.
//!
//! Cleanup is by ownership, as for the server: the BPF link (and the program with it) goes
//! when the [`XdpIo`] drops, on exit, failure or panic, and with the process on SIGKILL.

use crate::gen::LoadConfig;
use crate::io::{Caps, Datagram, FlowIo, Flushed, PathStats, SendShape};
use firehose_frame::{header_len, parse, write_headers, Endpoints};
use firehose_sys::epoll::Epoll;
use firehose_sys::xdp::prog::{AddrMatch, UdpMatch};
use firehose_sys::xdp::queue::{Wait, XdpQueue};
use firehose_sys::xdp::setup::{self, Iface, Queues, Steered, XdpApplied, XdpOptions};
use firehose_sys::xdp::xsk::{XskConfig, ZeroCopy};
use firehose_sys::xdp::{iface_addrs, netlink};
use firehose_sys::{Setting, SetupError};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Entries of each ring; each queue's UMEM has twice as many frames: a ring's worth on the
/// fill ring, the rest for requests in flight (queue 0's) and received responses.
const RING: u32 = 2048;
const FRAME: u32 = 2048;
/// Most flows (source ports) of one generator.
pub const MAX_FLOWS: usize = 16384;

pub use firehose_sys::xdp::setup::ModeChoice;

/// The AF_XDP switches of `load --io xdp`.
#[derive(Debug, Clone)]
pub struct XdpLoadConfig {
    pub iface: String,
    pub mode: ModeChoice,
    pub zerocopy: ZeroCopy,
    /// The largest request payload the workload writes (checked against the MTU).
    pub max_payload: usize,
}

/// One generator thread's AF_XDP path.
pub struct XdpIo {
    /// One driver per rx queue; index 0 also sends.
    queues: Vec<XdpQueue>,
    epoll: Option<Epoll>,
    ready: Vec<usize>,
    /// Endpoints of flow 0; flow f sends from port `base + f`.
    ends: Endpoints,
    base: u16,
    flows: usize,
    /// Header bytes before the payload.
    hl: usize,
    batch: usize,
    /// Frames holding the requests of the next send, by slot.
    tx_frames: Vec<u64>,
    tx_lens: Vec<usize>,
    /// The last read: its queue and, per datagram, (flow, addr, len) of the payload.
    rx_from: usize,
    rx: Vec<(u32, u64, usize)>,
    /// epoll waits; the drivers count their own calls.
    waits: u64,
    // Dropped after the sockets: the link detaches the program, then map and program go,
    // then the port reservations.
    _steered: Steered,
    _reserved: Vec<UdpSocket>,
}

/// Sets up the AF_XDP path for `cfg` (one thread) on `x.iface`.
pub fn open(cfg: &LoadConfig, x: &XdpLoadConfig) -> Result<(XdpIo, XdpApplied), SetupError> {
    setup::require_root("socket")?;
    let iface = &x.iface;
    if cfg.threads != 1 {
        return Err(SetupError::usage(
            Setting::Threads,
            format!(
                "{} xdp runs one generator thread, which reads every rx queue of {iface} (a reply \
                 may land on any); use {} 1",
                Setting::Io.r(),
                Setting::Threads.r()
            ),
        ));
    }
    if cfg.flows > MAX_FLOWS {
        return Err(SetupError::usage(
            Setting::Flows,
            format!(
                "{} {} with {} xdp: at most {MAX_FLOWS} (one source port each)",
                Setting::Flows.r(),
                cfg.flows,
                Setting::Io.r()
            ),
        ));
    }
    let nic = Iface::open(iface)?;
    let idx = nic.index;
    let target = cfg.target;
    let src_ip = source_ip(iface, target.ip())?;
    let mtu = nic.mtu;
    let ip_udp = if target.is_ipv6() { 48 } else { 28 };
    let room = mtu.min(FRAME as usize - 14) - ip_udp;
    if x.max_payload > room {
        return Err(SetupError::usage(
            Setting::Size,
            format!(
                "requests of {} bytes do not fit one frame on {iface} (MTU {mtu}): at most {room} with {} xdp",
                x.max_payload,
                Setting::Io.r()
            ),
        ));
    }
    let src_mac = nic.hwaddr()?;
    let dst_mac = resolve_mac(idx, iface, src_ip, target.ip())?;
    let (base, reserved) = reserve_ports(src_ip, cfg.flows)?;
    let last = base + (cfg.flows - 1) as u16;
    let mut m = match src_ip {
        IpAddr::V4(a) => UdpMatch::to(base, AddrMatch::Is(a), AddrMatch::Off),
        IpAddr::V6(a) => UdpMatch::to(base, AddrMatch::Off, AddrMatch::Is(a)),
    };
    m.port_last = Some(last);
    m.from = Some(target);
    let opts = XdpOptions {
        queues: Queues::All,
        mode: x.mode,
        xsk: XskConfig {
            ring: RING,
            frame_size: FRAME,
            frames: RING * 2,
            zerocopy: x.zerocopy,
            need_wakeup: true,
        },
        busy_poll: None,
        force: false,
    };
    let (steered, queues) = setup::steer(&nic, &m, &opts)?;
    let epoll = if cfg.spin {
        None
    } else {
        let ep = Epoll::new(queues.len())?;
        for (i, q) in queues.iter().enumerate() {
            ep.add_readable(q.as_raw_fd(), i as u64)?;
        }
        Some(ep)
    };
    let mut settings = steered.granted.settings();
    settings.insert("source".into(), format!("{src_ip} ports {base}-{last}"));
    settings.insert("dst_mac".into(), firehose_frame::mac_text(&dst_mac));
    let notes = steered.granted.notes.clone();
    let ends = Endpoints {
        src_mac,
        dst_mac,
        vlan: None,
        src: SocketAddr::new(src_ip, base),
        dst: target,
        ttl: 64,
    };
    let slots = cfg.batch.max(cfg.window.clamp(1, 1024));
    let io = XdpIo {
        queues,
        epoll,
        ready: Vec::new(),
        hl: header_len(&ends),
        ends,
        base,
        flows: cfg.flows,
        batch: cfg.batch,
        tx_frames: Vec::with_capacity(slots),
        tx_lens: vec![0; slots],
        rx_from: 0,
        rx: Vec::with_capacity(cfg.batch),
        waits: 0,
        _steered: steered,
        _reserved: reserved,
    };
    Ok((io, XdpApplied { settings, notes }))
}

fn is_link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// The interface's address of the target's family (link-local only for a link-local target).
fn source_ip(iface: &str, target: IpAddr) -> Result<IpAddr, SetupError> {
    let addrs = iface_addrs(iface)?;
    if addrs.contains(&target) {
        return Err(SetupError::usage(
            Setting::Target,
            format!(
                "{} {target} is an address of {iface} itself: AF_XDP frames leave by the wire, \
                 so the target must be another host (or namespace) on {iface}'s link",
                Setting::Target.r()
            ),
        ));
    }
    addrs
        .iter()
        .find(|a| a.is_ipv4() == target.is_ipv4() && is_link_local(a) == is_link_local(&target))
        .copied()
        .ok_or_else(|| {
            SetupError::usage(
                Setting::Target,
                format!(
                    "{iface} has no {} address to send from (it has {addrs:?}): add one or target the other family",
                    if target.is_ipv4() { "IPv4" } else { "IPv6" }
                ),
            )
        })
}

/// The target's MAC from the neighbour table, after making the kernel resolve it if needed.
fn resolve_mac(idx: u32, iface: &str, src: IpAddr, target: IpAddr) -> Result<[u8; 6], SetupError> {
    netlink::resolve_neighbour(idx, src, target, Duration::from_secs(2))
        ?
        .ok_or_else(|| {
            SetupError::usage(
                Setting::Target,
                format!(
                    "{target} did not resolve to a MAC address on {iface} within 2 s: {} xdp sends frames \
                     straight to the target's MAC, so the target must be up and on {iface}'s link (not routed)",
                    Setting::Io.r()
                ),
            )
        })
}

/// Finds `n` consecutive free UDP ports on `src` and holds them with kernel sockets.
fn reserve_ports(src: IpAddr, n: usize) -> Result<(u16, Vec<UdpSocket>), SetupError> {
    // Start somewhere that depends on the pid, so two generators rarely collide.
    let span = 60000 - 10000 - n as u32;
    let mut base = 10000 + (std::process::id() * 977) % span.max(1);
    for _ in 0..32 {
        let mut held = Vec::with_capacity(n);
        for p in base..base + n as u32 {
            match UdpSocket::bind(SocketAddr::new(src, p as u16)) {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
        if held.len() == n {
            return Ok((base as u16, held));
        }
        base = 10000 + (base - 10000 + n as u32 + 1009) % span.max(1);
    }
    Err(SetupError::usage(
        Setting::Flows,
        format!(
            "found no {n} consecutive free UDP ports on {src} for the generator's flows; lower {}",
            Setting::Flows.r()
        ),
    ))
}

impl XdpIo {
    /// Hands the frames of the last read back to their driver.
    fn give_back(&mut self) {
        self.queues[self.rx_from].recycle_rx();
        self.rx.clear();
    }
}

impl FlowIo for XdpIo {
    fn caps(&self) -> Caps {
        Caps {
            path: "af_xdp",
            source_per_flow: false,
            rx_timestamps: false,
            tx_timestamps: false,
            polls_every_source: false,
        }
    }

    fn flows(&self) -> usize {
        self.flows
    }

    fn tx_capacity(&mut self) -> usize {
        let q = &mut self.queues[0];
        q.reap();
        let ring = q.tx_room(self.tx_lens.len() as u32) as usize;
        ring.min(q.free_frames()).min(self.tx_lens.len())
    }

    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        let q = &mut self.queues[0];
        while self.tx_frames.len() <= k {
            let addr = q.alloc().expect("tx_capacity counted the frames");
            self.tx_frames.push(addr);
        }
        &mut q.frame_mut(self.tx_frames[k])[self.hl..]
    }

    fn queue(&mut self, k: usize, len: usize) {
        self.tx_lens[k] = len;
    }

    /// Every request is its own datagram on this path, in either shape.
    fn send(&mut self, flow: usize, _shape: SendShape) -> Flushed {
        let mut e = self.ends;
        e.src.set_port(self.base + flow as u16);
        let q = &mut self.queues[0];
        let mut out = Flushed::default();
        for (k, &addr) in self.tx_frames.iter().enumerate() {
            let sent = match write_headers(q.frame_mut(addr), &e, self.tx_lens[k]) {
                Some(len) => q.transmit(addr, len as u32),
                None => false,
            };
            if !sent {
                out.failed += 1;
                q.recycle(addr);
            }
        }
        self.tx_frames.clear();
        out
    }

    fn flush(&mut self) -> usize {
        // Requests that never leave (a refused kick) end as lost at their timeout.
        self.queues[0].flush();
        0
    }

    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        self.give_back();
        self.ready.clear();
        // Answers already on a ring need no syscall to be found.
        for (i, q) in self.queues.iter_mut().enumerate() {
            if q.rx_ready() {
                self.ready.push(i);
            }
        }
        if !self.ready.is_empty() {
            return Ok(self.ready.len());
        }
        match self.epoll.as_mut() {
            Some(ep) if !wait.is_zero() => {
                self.waits += 1;
                for token in ep.wait(wait)? {
                    self.ready.push(token as usize);
                }
            }
            _ => self.ready.extend(0..self.queues.len()),
        }
        Ok(self.ready.len())
    }

    fn source(&self, i: usize) -> usize {
        self.ready[i]
    }

    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError> {
        self.give_back();
        self.rx_from = s;
        let q = &mut self.queues[s];
        let n = q.receive(max.min(self.batch) as u32, Wait::Never).count;
        let target = self.ends.dst;
        let last = self.base as usize + self.flows;
        for d in q.rx() {
            let frame = q.data(d.addr, d.len as usize);
            let item = match parse(frame) {
                Ok(u) if u.src == target => {
                    let p = u.dst.port() as usize;
                    let flow = if (self.base as usize..last).contains(&p) {
                        (p - self.base as usize) as u32
                    } else {
                        u32::MAX
                    };
                    (flow, d.addr + u.payload() as u64, u.len)
                }
                // Not an answer from the target: whole frame, on no flow (stray).
                _ => (u32::MAX, d.addr, d.len as usize),
            };
            self.rx.push(item);
        }
        Ok(n as usize)
    }

    fn datagram(&self, i: usize) -> Datagram<'_> {
        let (flow, addr, len) = self.rx[i];
        Datagram {
            flow,
            data: self.queues[self.rx_from].data(addr, len),
            rx_time_ns: None,
        }
    }

    fn stats(&self) -> PathStats {
        PathStats {
            syscalls: self.waits
                + self
                    .queues
                    .iter()
                    .map(|q| q.counters().syscalls)
                    .sum::<u64>(),
            gso_refusal: None,
        }
    }
}
