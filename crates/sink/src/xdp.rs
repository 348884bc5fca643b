//! The sink's AF_XDP setup: the shared receive path of [`firehose_sys::xdp::setup`] (one
//! socket per rx queue, the redirect program for the listen address and port, attached by a
//! BPF link), opened before any worker runs so a refusal stops the start with one line.
//!
//! Cleanup is by ownership: the [`Steered`] value held by the sink detaches the program when
//! it drops (normal exit, failed start, panic); on SIGKILL the kernel closes the link.

use super::{packet_interface, SinkConfig, SinkError};
use firehose_sys::xdp::queue::XdpQueue;
use firehose_sys::xdp::setup::{self, Iface, SetupError, Steered};
use std::net::SocketAddr;

fn setup_err(e: SetupError) -> SinkError {
    match e {
        SetupError::Config(m) => SinkError::Config(m),
        SetupError::Kernel(k) => SinkError::Kernel(k),
    }
}

/// Opens the sockets and attaches the program for `local` (the bound listen address);
/// returns the program's holder, each queue's driver, and the interface name.
pub(crate) fn open(
    cfg: &SinkConfig,
    local: &SocketAddr,
) -> Result<(Steered, Vec<XdpQueue>, String), SinkError> {
    setup::require_root("--io recvmmsg").map_err(setup_err)?;
    let (_, name) = packet_interface(cfg)?;
    let iface = Iface::open(&name).map_err(setup_err)?;
    iface.check_listen(local).map_err(setup_err)?;
    let queues = iface.queues(&cfg.xdp.queues).map_err(setup_err)?;
    if cfg.workers != 0 && cfg.workers != queues.len() {
        return Err(SinkError::Config(format!(
            "--io xdp runs one worker per queue: {} queue(s) of {name} for {} workers; choose \
             the queues with --queues (or --workers N for queues 0..N-1)",
            queues.len(),
            cfg.workers
        )));
    }
    let mut opts = cfg.xdp.clone();
    if let Some(us) = cfg.busy_poll_us {
        let budget = opts.busy_poll.map_or(cfg.batch as i32, |(_, b)| b);
        opts.busy_poll = Some((us.min(i32::MAX as u32) as i32, budget));
    }
    let (steered, sockets) = setup::steer(
        &iface,
        &iface.server_match(local).map_err(setup_err)?,
        &opts,
    )
    .map_err(setup_err)?;
    Ok((steered, sockets, name))
}
