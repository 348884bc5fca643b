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
use crate::io::{Datagram, FlowIo, Flushed};
use firehose_frame::{header_len, parse, write_headers, Endpoints};
use firehose_sys::epoll::Epoll;
use firehose_sys::xdp::attach::{XdpLink, XdpProg, XskMap};
use firehose_sys::xdp::prog::{AddrMatch, UdpMatch};
use firehose_sys::xdp::ring::Desc;
use firehose_sys::xdp::setup::{self, Iface, XdpApplied};
use firehose_sys::xdp::xsk::{Xsk, XskConfig, ZeroCopy};
use firehose_sys::xdp::{iface_addrs, netlink};
use firehose_sys::{Setting, SetupError};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Entries of each ring; the UMEM of queue 0's socket has four times as many frames (fill,
/// rx, tx and completion may all hold some), the others twice as many.
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
    /// One socket per rx queue; index 0 also sends.
    xsks: Vec<Xsk>,
    /// Each socket's frames that are neither with the kernel nor holding a datagram.
    free: Vec<Vec<u64>>,
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
    /// Frames put on the tx ring since the last kick.
    unkicked: u32,
    /// The last read: its socket, its descriptors and, per datagram, (flow, addr, len) of
    /// the payload.
    rx_from: usize,
    rx_descs: u32,
    rx: Vec<(u32, u64, usize)>,
    syscalls: u64,
    // Dropped after the sockets: the link detaches the program, then map and program go,
    // then the port reservations.
    _link: XdpLink,
    _prog: XdpProg,
    _map: XskMap,
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
    nic.refuse_attached()?;
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
    let queues = nic.rx_queues as u32;
    let map = XskMap::new(queues)?;
    let last = base + (cfg.flows - 1) as u16;
    let mut m = match src_ip {
        IpAddr::V4(a) => UdpMatch::to(base, AddrMatch::Is(a), AddrMatch::Off),
        IpAddr::V6(a) => UdpMatch::to(base, AddrMatch::Off, AddrMatch::Is(a)),
    };
    m.port_last = Some(last);
    m.from = Some(target);
    let prog = XdpProg::load(&m, &map)?;
    let mut notes = Vec::new();
    let mut xsks = Vec::new();
    let mut free = Vec::new();
    for q in 0..queues {
        let xc = XskConfig {
            ring: RING,
            frame_size: FRAME,
            frames: RING * if q == 0 { 4 } else { 2 },
            zerocopy: x.zerocopy,
            need_wakeup: true,
        };
        let mut xsk = nic.open_queue(q, &xc, &mut notes)?;
        map.set(q, xsk.as_raw_fd())?;
        // Stock the fill ring before the program can redirect anything.
        let mut f = xsk.all_frames();
        xsk.refill(&mut f);
        xsks.push(xsk);
        free.push(f);
    }
    let (link, mode) = nic.attach(&prog, x.mode, &mut notes)?;
    notes.extend(setup::zerocopy_note(&xsks[0], iface));
    let epoll = if cfg.spin {
        None
    } else {
        let ep = Epoll::new(xsks.len())?;
        for (i, s) in xsks.iter().enumerate() {
            ep.add_readable(s.as_raw_fd(), i as u64)?;
        }
        Some(ep)
    };
    let mut s = BTreeMap::new();
    s.insert("iface".into(), iface.clone());
    s.insert("queues".into(), queues.to_string());
    s.insert("xdp_mode".into(), mode.name().into());
    s.insert(
        "zerocopy".into(),
        if xsks[0].zerocopy() { "on" } else { "off" }.into(),
    );
    s.insert("source".into(), format!("{src_ip} ports {base}-{last}"));
    s.insert("dst_mac".into(), firehose_frame::mac_text(&dst_mac));
    s.insert("ring".into(), RING.to_string());
    s.insert("frame_size".into(), FRAME.to_string());
    s.insert("prog_id".into(), prog.id()?.to_string());
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
        xsks,
        free,
        epoll,
        ready: Vec::new(),
        hl: header_len(&ends),
        ends,
        base,
        flows: cfg.flows,
        batch: cfg.batch,
        tx_frames: Vec::with_capacity(slots),
        tx_lens: vec![0; slots],
        unkicked: 0,
        rx_from: 0,
        rx_descs: 0,
        rx: Vec::with_capacity(cfg.batch),
        syscalls: 0,
        _link: link,
        _prog: prog,
        _map: map,
        _reserved: reserved,
    };
    Ok((io, XdpApplied { settings: s, notes }))
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
    /// Hands the frames of the last read back and releases its descriptors.
    fn give_back(&mut self) {
        if self.rx_descs == 0 {
            return;
        }
        let s = self.rx_from;
        let xsk = &mut self.xsks[s];
        for i in 0..self.rx_descs {
            self.free[s].push(xsk.rx.read(i).addr);
        }
        xsk.rx.release(self.rx_descs);
        self.rx_descs = 0;
        self.rx.clear();
    }
}

impl FlowIo for XdpIo {
    fn flows(&self) -> usize {
        self.flows
    }

    fn tx_capacity(&mut self) -> usize {
        let xsk = &mut self.xsks[0];
        xsk.reap(&mut self.free[0]);
        let ring = xsk.tx.free(self.tx_lens.len() as u32) as usize;
        ring.min(self.free[0].len()).min(self.tx_lens.len())
    }

    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        while self.tx_frames.len() <= k {
            let addr = self.free[0].pop().expect("tx_capacity counted the frames");
            self.tx_frames.push(addr);
        }
        &mut self.xsks[0].umem.frame_mut(self.tx_frames[k])[self.hl..]
    }

    fn queue(&mut self, k: usize, len: usize) {
        self.tx_lens[k] = len;
    }

    fn send(&mut self, flow: usize) -> Flushed {
        let mut e = self.ends;
        e.src.set_port(self.base + flow as u16);
        let xsk = &mut self.xsks[0];
        let mut out = Flushed::default();
        let mut n = 0;
        for (k, &addr) in self.tx_frames.iter().enumerate() {
            match write_headers(xsk.umem.frame_mut(addr), &e, self.tx_lens[k]) {
                Some(len) => {
                    xsk.tx.write(
                        n,
                        Desc {
                            addr,
                            len: len as u32,
                            options: 0,
                        },
                    );
                    n += 1;
                }
                None => {
                    out.failed += 1;
                    self.free[0].push(addr);
                }
            }
        }
        self.tx_frames.clear();
        xsk.tx.submit(n);
        self.unkicked += n;
        out
    }

    fn flush(&mut self) -> usize {
        let xsk = &self.xsks[0];
        if self.unkicked > 0 && (!xsk.uses_need_wakeup() || xsk.tx.needs_wakeup()) {
            self.syscalls += 1;
            // A refused kick leaves the frames on the ring for the next one; requests that
            // never leave end as lost at their timeout.
            let _ = xsk.kick_tx();
        }
        self.unkicked = 0;
        0
    }

    fn gso_refusal(&self, _flow: usize) -> Option<String> {
        None
    }

    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        self.give_back();
        self.ready.clear();
        // Answers already on a ring need no syscall to be found.
        for (i, x) in self.xsks.iter_mut().enumerate() {
            if x.rx.available(1) > 0 {
                self.ready.push(i);
            }
        }
        if !self.ready.is_empty() {
            return Ok(self.ready.len());
        }
        match self.epoll.as_mut() {
            Some(ep) if !wait.is_zero() => {
                self.syscalls += 1;
                for token in ep.wait(wait)? {
                    self.ready.push(token as usize);
                }
            }
            _ => self.ready.extend(0..self.xsks.len()),
        }
        Ok(self.ready.len())
    }

    fn source(&self, i: usize) -> usize {
        self.ready[i]
    }

    fn source_flow(&self, _s: usize) -> Option<usize> {
        None
    }

    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError> {
        self.give_back();
        let xsk = &mut self.xsks[s];
        xsk.refill(&mut self.free[s]);
        let n = xsk.rx.available(max.min(self.batch) as u32);
        if n == 0 {
            if xsk.uses_need_wakeup() && xsk.fill.needs_wakeup() {
                self.syscalls += 1;
                xsk.kick_rx()?;
            }
            return Ok(0);
        }
        let target = self.ends.dst;
        let last = self.base as usize + self.flows;
        for i in 0..n {
            let d = xsk.rx.read(i);
            let frame = xsk.umem.data(d.addr, d.len as usize);
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
        self.rx_from = s;
        self.rx_descs = n;
        Ok(n as usize)
    }

    fn datagram(&self, i: usize) -> Datagram<'_> {
        let (flow, addr, len) = self.rx[i];
        Datagram {
            flow,
            data: self.xsks[self.rx_from].umem.data(addr, len),
        }
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }

    fn path(&self) -> &'static str {
        "af_xdp"
    }
}
