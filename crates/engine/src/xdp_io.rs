//! The AF_XDP backend's setup: checks of the interface, queues and whatever XDP program is
//! already attached, then one AF_XDP socket per rx queue, the XSKMAP, the redirect program and
//! its BPF link. The sockets are opened here, before the workers start, so that what the
//! kernel granted (zero-copy, native or generic mode) is known for the applied
//! configuration and a refusal stops the start with one line; each worker then takes its
//! queue's socket (see [`crate::xdp_backend`]).
//!
//! Cleanup is by ownership: the link (and with it the program on the interface), the map and
//! the sockets close when the last worker and the server have dropped this value, which
//! happens on normal exit, on a failed start and on a panic. After a SIGKILL the kernel closes
//! the link fd itself, so the program leaves with the process.

use crate::backend::{BackendApplied, Io, WorkerSeat};
use crate::xdp_backend::XdpBackend;
use firehose_sys::xdp::setup::{self, Iface, Steered, Stocked};
pub use firehose_sys::xdp::setup::{ModeChoice, Queues};
use firehose_sys::xdp::xsk::{XskConfig, ZeroCopy};
use firehose_sys::{Setting, SetupError, Usage};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;

/// The AF_XDP switches of `serve --io xdp`.
#[derive(Debug, Clone)]
pub struct XdpConfig {
    pub iface: String,
    pub queues: Queues,
    pub mode: ModeChoice,
    pub zerocopy: ZeroCopy,
    /// Entries of each of the four rings (a power of two).
    pub ring: u32,
    /// UMEM frame size: 2048 or 4096.
    pub frame_size: u32,
    pub need_wakeup: bool,
    /// Preferred busy polling: (SO_BUSY_POLL µs, SO_BUSY_POLL_BUDGET).
    pub busy_poll: Option<(i32, i32)>,
    /// Replace a foreign XDP program.
    pub force: bool,
    /// Most requests per batch.
    pub batch: usize,
}

/// The AF_XDP path of a server, shared by its workers.
pub struct XdpIo {
    queues: Vec<u32>,
    /// Each queue's socket with its free frames (the rest already on its fill ring).
    xsks: Mutex<Vec<Option<Stocked>>>,
    cfg: XdpConfig,
    mtu: usize,
    applied: BackendApplied,
    /// The attached program; dropping it detaches (workers hold the sockets).
    _steered: Steered,
}

impl XdpIo {
    /// Checks, opens and attaches everything for serving `listen` on `cfg.iface`. The
    /// listen socket itself (the fallback path) is opened by the server as usual.
    pub fn new(cfg: XdpConfig, listen: SocketAddr) -> Result<XdpIo, SetupError> {
        setup::require_root("socket")?;
        if listen.port() == 0 {
            return Err(Usage::new(
                Setting::Listen,
                format!(
                    "{} xdp needs a fixed {} port (the program matches it)",
                    Setting::Io.r(),
                    Setting::Listen.r()
                ),
            )
            .into());
        }
        let iface = Iface::open(&cfg.iface)?;
        iface.check_listen(&listen)?;
        let mtu = iface.mtu;
        let xcfg = XskConfig {
            ring: cfg.ring,
            frame_size: cfg.frame_size,
            frames: cfg.ring * 2,
            zerocopy: cfg.zerocopy,
            need_wakeup: cfg.need_wakeup,
        };
        let opts = setup::RxOptions {
            queues: cfg.queues.clone(),
            mode: cfg.mode,
            xsk: xcfg,
            busy_poll: cfg.busy_poll,
            force: cfg.force,
        };
        let (steered, sockets) = setup::steer(&iface, &setup::listen_match(&listen), &opts)?;
        let xsks: Vec<Option<Stocked>> = sockets.into_iter().map(Some).collect();
        let queues = steered.queues.clone();
        let mut s = BTreeMap::new();
        s.insert("iface".into(), cfg.iface.clone());
        s.insert(
            "queues".into(),
            queues
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
        s.insert("xdp_mode".into(), steered.mode.name().into());
        s.insert(
            "zerocopy".into(),
            if steered.zerocopy { "on" } else { "off" }.into(),
        );
        s.insert("need_wakeup".into(), cfg.need_wakeup.to_string());
        s.insert("ring".into(), cfg.ring.to_string());
        s.insert("frame_size".into(), cfg.frame_size.to_string());
        s.insert("frames_per_queue".into(), xcfg.frames.to_string());
        s.insert("batch".into(), cfg.batch.to_string());
        s.insert("mtu".into(), mtu.to_string());
        s.insert("prog_id".into(), steered.prog_id.to_string());
        s.insert("busy_poll".into(), setup::busy_poll_text(steered.busy));
        s.insert("fallback".into(), format!("kernel UDP socket on {listen}"));
        Ok(XdpIo {
            queues,
            xsks: Mutex::new(xsks),
            cfg,
            mtu,
            applied: BackendApplied {
                name: "af_xdp".into(),
                settings: s,
                notes: steered.notes.clone(),
            },
            _steered: steered,
        })
    }

    /// The queues served, one worker each in this order.
    pub fn queues(&self) -> &[u32] {
        &self.queues
    }
}

impl Io for XdpIo {
    type Backend = XdpBackend;

    fn open(&self, seat: &WorkerSeat) -> Result<XdpBackend, SetupError> {
        let Some(&queue) = self.queues.get(seat.index) else {
            return Err(Usage::new(
                Setting::Workers,
                format!(
                    "worker {} has no queue: {} xdp runs one worker per queue ({} queues)",
                    seat.index,
                    Setting::Io.r(),
                    self.queues.len()
                ),
            )
            .into());
        };
        let (xsk, free) = self
            .xsks
            .lock()
            .map_err(|_| Usage::host("a worker panicked during start"))?[seat.index]
            .take()
            .ok_or_else(|| Usage::host(format!("queue {queue} opened twice")))?;
        Ok(XdpBackend::new(
            xsk,
            free,
            seat.socket.clone(),
            &self.cfg,
            self.mtu,
        ))
    }

    fn applied(&self) -> Option<BackendApplied> {
        Some(self.applied.clone())
    }

    fn queue(&self, index: usize) -> Option<u32> {
        self.queues.get(index).copied()
    }
}
