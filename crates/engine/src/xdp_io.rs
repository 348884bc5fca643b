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
use firehose_sys::xdp::queue::XdpQueue;
use firehose_sys::xdp::setup::{self, Iface, Steered};
pub use firehose_sys::xdp::setup::{ModeChoice, Queues, XdpOptions};
use firehose_sys::{Setting, SetupError, Usage};
use std::net::SocketAddr;
use std::sync::Mutex;

/// What `serve --io xdp` serves on: the interface, the AF_XDP options, the most requests
/// per batch, and whether to verify each request's checksums.
#[derive(Debug, Clone)]
pub struct XdpConfig {
    pub iface: String,
    pub options: XdpOptions,
    pub batch: usize,
    /// Drop (and count) a request whose IPv4 header or UDP checksum is wrong: the kernel
    /// verifies them on the socket path, AF_XDP hands frames over unchecked.
    pub verify_checksum: bool,
    /// Hand each request its arrival time (NTP's receive timestamp): the XDP program stamps
    /// each frame it redirects, the fallback socket has SO_TIMESTAMPNS.
    pub rx_timestamps: bool,
}

/// The AF_XDP path of a server, shared by its workers.
pub struct XdpIo {
    queues: Vec<u32>,
    /// Each queue's driver (fill ring stocked), taken by its worker.
    drivers: Mutex<Vec<Option<XdpQueue>>>,
    batch: usize,
    mtu: usize,
    verify_checksum: bool,
    rx_timestamps: bool,
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
        let mut m = iface.server_match(&listen)?;
        m.stamp = cfg.rx_timestamps;
        let (steered, drivers) = setup::steer(&iface, &m, &cfg.options)?;
        let g = &steered.granted;
        let mut settings = g.settings();
        settings.insert("batch".into(), cfg.batch.to_string());
        settings.insert("mtu".into(), mtu.to_string());
        settings.insert("fallback".into(), format!("kernel UDP socket on {listen}"));
        settings.insert("verify_checksum".into(), cfg.verify_checksum.to_string());
        if cfg.rx_timestamps {
            settings.insert(
                "rx_timestamps".into(),
                "XDP program (bpf_ktime_get_tai_ns in the frame's metadata)".into(),
            );
        }
        Ok(XdpIo {
            queues: g.queues.clone(),
            drivers: Mutex::new(drivers.into_iter().map(Some).collect()),
            batch: cfg.batch,
            mtu,
            verify_checksum: cfg.verify_checksum,
            rx_timestamps: cfg.rx_timestamps,
            applied: BackendApplied {
                name: "af_xdp".into(),
                settings,
                notes: g.notes.clone(),
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
        let queue = self
            .drivers
            .lock()
            .map_err(|_| Usage::host("a worker panicked during start"))?[seat.index]
            .take()
            .ok_or_else(|| Usage::host(format!("queue {queue} opened twice")))?;
        Ok(XdpBackend::new(
            queue,
            seat.socket.clone(),
            self.batch,
            self.mtu,
            self.verify_checksum,
            self.rx_timestamps,
        ))
    }

    fn applied(&self) -> Option<BackendApplied> {
        Some(self.applied.clone())
    }

    fn queue(&self, index: usize) -> Option<u32> {
        self.queues.get(index).copied()
    }
}
