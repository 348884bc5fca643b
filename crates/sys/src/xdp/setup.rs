//! What every AF_XDP user (serve, load, sink, flood) does before its first packet: check the
//! interface, deal with the XDP program it already runs, open a queue's socket, and attach the
//! redirect program in the chosen mode, with one wording for each refusal.
//!
//! A refusal the user can fix is a [`Usage`] error saying how; anything else is the kernel's
//! [`SysError`] naming the call and errno.

use super::attach::{prog_info, XdpLink, XdpMode, XdpProg, XskMap};
use super::prog::{AddrMatch, UdpMatch};
use super::queue::XdpQueue;
use super::xsk::{BusyPoll, Xsk, XskConfig, ZeroCopy};
use super::{iface_addrs, ifindex, netlink, EBUSY};
use crate::ethtool::Ethtool;
use crate::{errno_name, Setting, SetupError, SysError, Usage};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Where to attach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeChoice {
    /// Native where the driver has it, else generic.
    Auto,
    Native,
    Generic,
}

impl ModeChoice {
    /// Every choice, the default first.
    pub const ALL: &'static [ModeChoice] =
        &[ModeChoice::Auto, ModeChoice::Native, ModeChoice::Generic];

    /// The name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            ModeChoice::Auto => "auto",
            ModeChoice::Native => "native",
            ModeChoice::Generic => "generic",
        }
    }
}

/// Which rx queues to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queues {
    All,
    List(Vec<u32>),
}

/// IFF_UP in the interface flags.
const IFF_UP: u32 = 1;

/// How long a queue a closing socket still holds (EBUSY) is waited for.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Refuses a run without the privileges AF_XDP needs; `fallback` is the I/O path to suggest.
pub fn require_root(fallback: &str) -> Result<(), SetupError> {
    if crate::cpu::is_root() {
        return Ok(());
    }
    let io = Setting::Io.r();
    Err(Usage::new(
        Setting::Io,
        format!(
            "{io} xdp needs root (CAP_NET_ADMIN and CAP_BPF): run as root, or use {io} {fallback}"
        ),
    )
    .into())
}

/// A ring size the kernel takes for every AF_XDP ring.
pub fn check_ring(ring: u32) -> Result<(), SetupError> {
    if !ring.is_power_of_two() || !(64..=16384).contains(&ring) {
        return Err(Usage::new(
            Setting::Ring,
            format!(
                "{} {ring}: use a power of two from 64 to 16384",
                Setting::Ring.r()
            ),
        )
        .into());
    }
    Ok(())
}

/// An interface that exists and is up, asked about through ioctls (so the answers are about
/// this thread's network namespace).
pub struct Iface {
    pub name: String,
    pub index: u32,
    pub rx_queues: usize,
    pub mtu: usize,
    et: Ethtool,
}

impl Iface {
    /// Checks that `name` exists here and is up.
    pub fn open(name: &str) -> Result<Iface, SetupError> {
        let index = ifindex(name).map_err(|_| {
            Usage::new(
                Setting::Iface,
                format!(
                    "{} {name}: no such interface here (see `ip link`)",
                    Setting::Iface.r()
                ),
            )
        })?;
        let et = Ethtool::new()?;
        if et.if_flags(name)? & IFF_UP == 0 {
            return Err(Usage::new(
                Setting::Iface,
                format!(
                    "{} {name} is down: bring it up with `ip link set {name} up`",
                    Setting::Iface.r()
                ),
            )
            .into());
        }
        Ok(Iface {
            name: name.to_string(),
            index,
            rx_queues: et.rx_queues(name),
            mtu: et.mtu(name)? as usize,
            et,
        })
    }

    /// The interface's MAC address.
    pub fn hwaddr(&self) -> Result<[u8; 6], SetupError> {
        Ok(self.et.hwaddr(&self.name)?)
    }

    /// The queue numbers `q` names, each checked against the interface's rx queues.
    pub fn queues(&self, q: &Queues) -> Result<Vec<u32>, SetupError> {
        let count = self.rx_queues;
        let queues: Vec<u32> = match q {
            Queues::All => (0..count as u32).collect(),
            Queues::List(l) => l.clone(),
        };
        if let Some(q) = queues.iter().find(|&&q| q as usize >= count) {
            return Err(Usage::new(
                Setting::Queues,
                format!(
                    "{}: queue {q} is out of range, {} has {count} rx queue(s) (0-{})",
                    Setting::Queues.r(),
                    self.name,
                    count - 1
                ),
            )
            .into());
        }
        Ok(queues)
    }

    /// Refuses `listen` unless it is unspecified or one of this interface's addresses.
    pub fn check_listen(&self, listen: &SocketAddr) -> Result<(), SetupError> {
        if listen.ip().is_unspecified() {
            return Ok(());
        }
        let addrs = iface_addrs(&self.name)?;
        if addrs.contains(&listen.ip()) {
            return Ok(());
        }
        let have = if addrs.is_empty() {
            "none".to_string()
        } else {
            let all: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
            all.join(", ")
        };
        Err(Usage::new(
            Setting::Listen,
            format!(
                "{} {} is not an address of {} (it has {have}): listen on one of its \
                 addresses or on the unspecified address",
                Setting::Listen.r(),
                listen.ip(),
                self.name
            ),
        )
        .into())
    }

    /// What a server on `listen` (already checked) has the program match, with this
    /// interface's addresses and the host's read now (see [`listen_match`]).
    pub fn server_match(&self, listen: &SocketAddr) -> Result<UdpMatch, SetupError> {
        let own = iface_addrs(&self.name)?;
        let host: Vec<IpAddr> = crate::ifaddr::addresses()?
            .into_iter()
            .map(|a| a.ip)
            .collect();
        Ok(listen_match(listen, &own, &host))
    }

    /// Refuses an interface that runs any XDP program: a generator wants it to itself.
    pub fn refuse_attached(&self) -> Result<(), SetupError> {
        let now = netlink::query(self.index)?;
        let Some(id) = [now.native, now.generic, now.any]
            .into_iter()
            .find(|&i| i != 0)
        else {
            return Ok(());
        };
        let name = prog_info(id).map(|p| p.name).unwrap_or_else(|_| "?".into());
        let iface = &self.name;
        Err(Usage::new(
            Setting::Iface,
            format!(
                "{iface} already runs XDP program '{name}' (id {id}); this run needs the \
                 interface to itself: stop what attached it or remove it (`ip link set dev {iface} xdp off`)"
            ),
        )
        .into())
    }

    /// Refuses a foreign program (unless `force`) and removes a leftover of ours; returns
    /// what was removed. A program held by a BPF link belongs to a live process and is never
    /// removed.
    pub fn clear_attached(&self, force: bool) -> Result<Vec<String>, SetupError> {
        let iface = &self.name;
        let now = netlink::query(self.index)?;
        let mut notes = Vec::new();
        if now.native == 0 && now.generic == 0 && now.any != 0 {
            return Err(Usage::new(
                Setting::Iface,
                format!(
                    "{iface} runs an offloaded XDP program (id {}): remove it with `ip link set dev {iface} xdpoffload off`",
                    now.any
                ),
            )
            .into());
        }
        for (id, generic) in [(now.native, false), (now.generic, true)] {
            if id == 0 {
                continue;
            }
            let info = prog_info(id)?;
            if !info.is_ours() && !force {
                return Err(Usage::new(
                    Setting::Force,
                    format!(
                        "{iface} already runs a foreign XDP program '{}' (id {id}): remove it \
                         (`ip link set dev {iface} xdp off`) or pass {} to replace it",
                        info.name,
                        Setting::Force.r()
                    ),
                )
                .into());
            }
            match netlink::detach(self.index, generic) {
                Ok(()) => notes.push(format!(
                    "removed XDP program '{}' (id {id}) from {iface}",
                    info.name
                )),
                Err(e) if e.errno() == Some(EBUSY) => {
                    let whose = if info.is_ours() {
                        "another firehose run"
                    } else {
                        "another process"
                    };
                    return Err(Usage::new(
                        Setting::Iface,
                        format!(
                            "{iface} runs XDP program '{}' (id {id}) held by a BPF link of {whose}: \
                             stop that process first",
                            info.name
                        ),
                    )
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(notes)
    }

    /// Opens queue `q`'s socket. A queue stays busy (EBUSY) for a moment after a previous
    /// owner died, while the kernel releases its socket; that wait is bounded and noted.
    pub fn open_queue(
        &self,
        q: u32,
        cfg: &XskConfig,
        notes: &mut Vec<String>,
    ) -> Result<Xsk, SetupError> {
        let started = Instant::now();
        let mut waited = false;
        loop {
            match Xsk::open(self.index, q, cfg) {
                Ok(x) => {
                    if waited {
                        notes.push(format!(
                            "queue {q} was busy for {} ms (a previous socket closing)",
                            started.elapsed().as_millis()
                        ));
                    }
                    return Ok(x);
                }
                Err(e) if e.errno() == Some(EBUSY) && started.elapsed() < BUSY_WAIT => {
                    waited = true;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if e.errno() == Some(EBUSY) => {
                    return Err(Usage::new(
                        Setting::Queues,
                        format!(
                            "queue {q} of {} is in use by another AF_XDP socket ({e}): stop the program using it",
                            self.name
                        ),
                    )
                    .into())
                }
                Err(e) if cfg.zerocopy == ZeroCopy::On => {
                    let zc = Setting::ZeroCopy.r();
                    return Err(Usage::new(
                        Setting::ZeroCopy,
                        format!(
                            "{zc} on: {} refused zero-copy on queue {q} ({e}); use {zc} auto",
                            self.name
                        ),
                    )
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Attaches `prog` in the asked mode; under `auto`, native first and generic when
    /// refused (noted).
    pub fn attach(
        &self,
        prog: &XdpProg,
        choice: ModeChoice,
        notes: &mut Vec<String>,
    ) -> Result<(XdpLink, XdpMode), SetupError> {
        let iface = &self.name;
        let refused = |mode: XdpMode, e: SysError| {
            let errno = e.errno().map(errno_name).unwrap_or("?");
            let m = Setting::XdpMode.r();
            SetupError::from(Usage::new(
                Setting::XdpMode,
                format!(
                    "{m} {}: {iface} refused {} XDP ({e}, {errno}); try {m} auto",
                    mode.name(),
                    mode.name()
                ),
            ))
        };
        let one = |m: XdpMode| prog.attach(self.index, m).map(|l| (l, m));
        match choice {
            ModeChoice::Native => one(XdpMode::Native).map_err(|e| refused(XdpMode::Native, e)),
            ModeChoice::Generic => one(XdpMode::Generic).map_err(|e| refused(XdpMode::Generic, e)),
            ModeChoice::Auto => one(XdpMode::Native).or_else(|native| {
                let r = one(XdpMode::Generic)?;
                let errno = native.errno().map(errno_name).unwrap_or("?");
                notes.push(format!(
                    "native XDP refused by {iface} ({errno}): generic mode"
                ));
                Ok(r)
            }),
        }
    }
}

/// The note for a zero-copy probe the interface refused, if it was.
pub fn zerocopy_note(xsk: &Xsk, iface: &str) -> Option<String> {
    xsk.zerocopy_refusal()
        .map(|why| format!("zero-copy refused by {iface} ({why}): copy mode"))
}

/// The note for a copy-mode socket's transmit budget: raised by XDP_MAX_TX_SKB_BUDGET, or
/// the kernel's refusal of it.
pub fn tx_budget_note(xsk: &Xsk) -> Option<String> {
    if xsk.zerocopy() {
        return None;
    }
    Some(match xsk.tx_budget_refusal() {
        Some(errno) => format!(
            "XDP_MAX_TX_SKB_BUDGET refused ({errno}): copy-mode transmit moves {} frames per call",
            xsk.tx_budget()
        ),
        None => format!(
            "copy-mode transmit moves up to {} frames per call (XDP_MAX_TX_SKB_BUDGET)",
            xsk.tx_budget()
        ),
    })
}

/// What a server on `listen` has the program match: its port, of its family only (IPv6
/// sockets here are IPV6_V6ONLY), at its address, and never from one of `host` (the host's
/// own addresses: nothing answers a request that claims to come from us). On the unspecified
/// address it matches only `own` (the interface's addresses) and untagged frames: a frame for
/// another address, or behind an 802.1Q tag (a VLAN device with addresses of its own), goes
/// to the kernel, which answers it through the listen socket if it is ours at all.
pub fn listen_match(listen: &SocketAddr, own: &[IpAddr], host: &[IpAddr]) -> UdpMatch {
    let port = listen.port();
    let v4s = || {
        let l = own.iter().filter_map(|a| match a {
            IpAddr::V4(x) => Some(*x),
            IpAddr::V6(_) => None,
        });
        AddrMatch::AnyOf(l.collect())
    };
    let v6s = || {
        let l = own.iter().filter_map(|a| match a {
            IpAddr::V6(x) => Some(*x),
            IpAddr::V4(_) => None,
        });
        AddrMatch::AnyOf(l.collect())
    };
    let mut m = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => UdpMatch::to(port, v4s(), AddrMatch::Off),
        IpAddr::V4(a) => UdpMatch::to(port, AddrMatch::Is(a), AddrMatch::Off),
        IpAddr::V6(a) if a.is_unspecified() => UdpMatch::to(port, AddrMatch::Off, v6s()),
        IpAddr::V6(a) => UdpMatch::to(port, AddrMatch::Off, AddrMatch::Is(a)),
    };
    m.tagged = !listen.ip().is_unspecified();
    m.not_from = host.to_vec();
    m
}

/// How an AF_XDP path is set up: the one options type of every AF_XDP user (serve, load,
/// sink, flood), from the command line to the sockets.
#[derive(Debug, Clone, PartialEq)]
pub struct XdpOptions {
    pub queues: Queues,
    pub mode: ModeChoice,
    pub xsk: XskConfig,
    /// Preferred busy polling: (SO_BUSY_POLL µs, SO_BUSY_POLL_BUDGET).
    pub busy_poll: Option<(i32, i32)>,
    /// Replace a foreign XDP program.
    pub force: bool,
}

impl Default for XdpOptions {
    /// Every rx queue, native where possible, the default sockets, no busy polling.
    fn default() -> Self {
        XdpOptions {
            queues: Queues::All,
            mode: ModeChoice::Auto,
            xsk: XskConfig::default(),
            busy_poll: None,
            force: false,
        }
    }
}

/// What the kernel granted plus a user's own settings (a generator's source ports, a
/// sender's MACs), for the start line and the JSON.
#[derive(Debug, Clone, Default)]
pub struct XdpApplied {
    pub settings: BTreeMap<String, String>,
    pub notes: Vec<String>,
}

/// What the kernel granted for an AF_XDP run, read back rather than assumed: the one
/// description every user prints at start and writes into its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub iface: String,
    pub queues: Vec<u32>,
    /// The redirect program's attach mode and id; None for a sender without one.
    pub program: Option<(XdpMode, u32)>,
    /// Zero-copy as read back (XDP_OPTIONS) on the first queue.
    pub zerocopy: bool,
    pub need_wakeup: bool,
    pub ring: u32,
    pub frame_size: u32,
    pub frames_per_queue: u32,
    pub busy_poll: Option<BusyPoll>,
    /// What was chosen for the user or found on the way (fallbacks, removed leftovers).
    pub notes: Vec<String>,
}

impl Granted {
    /// The settings by name, as printed (`key=value`) and written to JSON.
    pub fn settings(&self) -> BTreeMap<String, String> {
        let queues: Vec<String> = self.queues.iter().map(u32::to_string).collect();
        let mut s = BTreeMap::from([
            ("iface".to_string(), self.iface.clone()),
            ("queues".into(), queues.join(",")),
            ("zerocopy".into(), on_off(self.zerocopy).into()),
            ("need_wakeup".into(), self.need_wakeup.to_string()),
            ("ring".into(), self.ring.to_string()),
            ("frame_size".into(), self.frame_size.to_string()),
            ("frames_per_queue".into(), self.frames_per_queue.to_string()),
            ("busy_poll".into(), busy_poll_text(self.busy_poll)),
        ]);
        match self.program {
            Some((mode, id)) => {
                s.insert("xdp_mode".into(), mode.name().into());
                s.insert("prog_id".into(), id.to_string());
            }
            None => {
                s.insert("xdp_program".into(), "none (send only)".into());
            }
        }
        s
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// A path in place: one driver per queue, each socket in the XSKMAP, and the redirect
/// program attached through a BPF link. Dropping it detaches the program (the link goes
/// first), then map and program close.
pub struct Steered {
    pub granted: Granted,
    _link: XdpLink,
    _prog: XdpProg,
    _map: XskMap,
}

/// Sets up the receive path matching `m` on `iface` (see [`Steered`]); returns it with one
/// [`XdpQueue`] per queue, fill rings stocked, in the order of the granted queues. A
/// foreign program is refused unless `opts.force`; a leftover of ours is removed (noted).
pub fn steer(
    iface: &Iface,
    m: &UdpMatch,
    opts: &XdpOptions,
) -> Result<(Steered, Vec<XdpQueue>), SetupError> {
    check_ring(opts.xsk.ring)?;
    let queues = iface.queues(&opts.queues)?;
    if queues.is_empty() {
        return Err(Usage::new(
            Setting::Queues,
            format!("{} names no queue", Setting::Queues.r()),
        )
        .into());
    }
    let mut notes = iface.clear_attached(opts.force)?;
    let max_q = queues.iter().copied().max().unwrap_or(0);
    let map = XskMap::new(max_q + 1)?;
    let prog = XdpProg::load(m, &map)?;
    let mut sockets = Vec::with_capacity(queues.len());
    let mut busy = None;
    for &q in &queues {
        let xsk = iface.open_queue(q, &opts.xsk, &mut notes)?;
        map.set(q, xsk.as_raw_fd())?;
        if let Some((usec, budget)) = opts.busy_poll {
            busy = Some(xsk.set_busy_poll(usec, budget)?);
        }
        let mut queue = XdpQueue::new(xsk, busy.is_some());
        // Stock the fill ring now: once the program is attached, a packet that finds it
        // empty is dropped.
        queue.refill();
        sockets.push(queue);
    }
    let (link, mode) = iface.attach(&prog, opts.mode, &mut notes)?;
    let first = sockets.first().expect("at least one queue").xsk();
    notes.extend(zerocopy_note(first, &iface.name));
    notes.extend(tx_budget_note(first));
    let granted = Granted {
        iface: iface.name.clone(),
        queues,
        program: Some((mode, prog.id()?)),
        zerocopy: first.zerocopy(),
        need_wakeup: opts.xsk.need_wakeup,
        ring: opts.xsk.ring,
        frame_size: opts.xsk.frame_size,
        frames_per_queue: opts.xsk.frames,
        busy_poll: busy,
        notes,
    };
    let steered = Steered {
        granted,
        _link: link,
        _prog: prog,
        _map: map,
    };
    Ok((steered, sockets))
}

/// `prefer=.. usec=.. budget=..` as read back, or `off`.
pub fn busy_poll_text(b: Option<BusyPoll>) -> String {
    match b {
        Some(b) => format!(
            "prefer={} usec={} budget={}",
            b.prefer,
            b.usec,
            b.budget
                .map_or("set(no read-back)".to_string(), |v| v.to_string())
        ),
        None => "off".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_address_matches_its_family_port_and_address() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let own = [ip("10.0.0.1"), ip("10.0.0.2"), ip("fd00::1")];
        let host = [
            ip("10.0.0.1"),
            ip("10.0.0.2"),
            ip("fd00::1"),
            ip("127.0.0.1"),
        ];
        let m = listen_match(&"0.0.0.0:53".parse().unwrap(), &own, &host);
        let mine = vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        assert_eq!(
            (m.port, &m.v4, &m.v6),
            (53, &AddrMatch::AnyOf(mine), &AddrMatch::Off)
        );
        assert!(
            !m.tagged,
            "a wildcard listener leaves tagged frames to the kernel"
        );
        assert_eq!(m.not_from, host);
        let m = listen_match(&"10.0.0.1:9".parse().unwrap(), &own, &host);
        assert_eq!(m.v4, AddrMatch::Is("10.0.0.1".parse().unwrap()));
        assert!(m.tagged);
        let m = listen_match(&"[::]:9".parse().unwrap(), &own, &host);
        let mine6 = vec!["fd00::1".parse().unwrap()];
        assert_eq!((&m.v4, &m.v6), (&AddrMatch::Off, &AddrMatch::AnyOf(mine6)));
        let m = listen_match(&"[fd00::1]:9".parse().unwrap(), &own, &host);
        assert_eq!(m.v6, AddrMatch::Is("fd00::1".parse().unwrap()));
        assert!(m.from.is_none() && m.port_last.is_none());
    }

    #[test]
    fn ring_sizes_outside_the_kernel_range_are_refused() {
        assert!(check_ring(2048).is_ok());
        for bad in [0, 100, 32, 32768] {
            let e = check_ring(bad).unwrap_err().to_string();
            assert!(e.contains("power of two from 64 to 16384"), "{e}");
        }
    }
}
