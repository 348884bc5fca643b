//! The I/O paths of `serve` and `load` (`--io NAME`), one row each: the name and help the
//! command line shows, how `serve` starts its workers on the path, how `load` opens its
//! generator threads' flows on it, and the path's own flags, refused when another path is
//! chosen (a flag never accepted and ignored). Adding a backend is its driver (crates/sys),
//! its adapters (an engine `Io`, a load `FlowIo`) and a row here; nothing else in the cli
//! names a path.

use crate::args::Usage;
use crate::load::LoadArgs;
use crate::serve::ServeArgs;
use anyhow::Result;
use firehose_engine::{Io, ServeConfig, Server, SocketIo, UringIo, XdpIo};
use firehose_load::io::FlowIo;
use firehose_load::LoadConfig;
use firehose_sys::SetupError;
use std::collections::BTreeMap;

/// One I/O path.
pub struct IoPath {
    /// The value of `--io`.
    pub name: &'static str,
    /// Its line in `--help`.
    pub help: &'static str,
    /// Serve: the workers' I/O on this path, made from the flags (AF_XDP sets the worker
    /// count to its queues').
    serve: fn(&ServeArgs, &mut ServeConfig) -> Result<ServeOn>,
    /// Serve: the workers hand each request the kernel's arrival stamp when the
    /// configuration asks for it (`ServeConfig::rx_timestamps`, NTP's receive timestamp);
    /// who takes it, for the start-up line. `None`: this path has none.
    pub rx_timestamps: Option<&'static str>,
    /// Serve: the workers can hand back the kernel's transmit stamp of a reply the handler
    /// asks one for (`ServeConfig::tx_timestamps`, NTP's interleaved mode); who takes it,
    /// for the start-up line. `None`: this path has none.
    pub tx_timestamps: Option<&'static str>,
    /// Serve: the workers can send before a received batch is done (`--send-batch`); the
    /// io_uring and AF_XDP drivers give the batch's buffers back at a send.
    pub send_batch: bool,
    /// Serve: how the workers receive and send, for the start-up line, by `--batch`.
    pub calls: fn(usize) -> &'static str,
    /// Serve: `--busy-poll` also sets the device's per-NAPI busy-poll parameters: the
    /// workers' sockets busy-poll the NAPI they receive from. Not AF_XDP: a socket in copy
    /// mode on veth does not busy-poll the veth's NAPI, so with its hard interrupts deferred
    /// every packet would wait for the gro-flush-timeout (busy-polled AF_XDP ping-pong fell
    /// from 120k to 4.7k tps).
    pub napi_busy_poll: bool,
    /// Serve: why this path's own flags cannot be given when another path is chosen.
    serve_flags: fn(&ServeArgs) -> Option<String>,
    /// Load: each generator thread's flows on this path, for requests up to
    /// `max_payload` bytes.
    load: fn(&LoadArgs, &LoadConfig, usize) -> Result<LoadOn>,
    /// Load: requests may leave as UDP GSO super-datagrams (unless `--no-gso`; with
    /// `--stamps` only where each send carries its stamp's key).
    pub gso: bool,
    /// Load: why this path's own flags cannot be given when another path is chosen.
    load_flags: fn(&LoadArgs) -> Option<String>,
}

impl std::fmt::Debug for IoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every path, the default first.
pub static IO_PATHS: &[IoPath] = &[
    IoPath {
        name: "socket",
        help: "Kernel UDP sockets (recvfrom/recvmmsg)",
        serve: |_, cfg| Ok(ServeOn::again(SocketIo::new(cfg))),
        rx_timestamps: Some("the socket (SO_TIMESTAMPNS)"),
        tx_timestamps: Some("the socket (SO_TIMESTAMPING, asked per reply, read from its error queue)"),
        send_batch: true,
        calls: |batch| {
            if batch == 1 {
                "recvfrom/sendto"
            } else {
                "recvmmsg/sendmmsg"
            }
        },
        napi_busy_poll: true,
        serve_flags: crate::serve::socket_only_flags,
        load: |_, cfg, _| {
            let flows = firehose_load::socket_flows(cfg).map_err(crate::load::load_error)?;
            Ok(LoadOn::new(flows, None))
        },
        gso: true,
        load_flags: crate::load::socket_only_flags,
    },
    IoPath {
        name: "xdp",
        help: "AF_XDP: an XDP program steers the UDP traffic of this run (to the served port, \
               or the replies to the generator's ports) to one AF_XDP socket per queue",
        serve: |a, cfg| {
            let io =
                XdpIo::new(a.xdp_config(cfg)?, cfg.listen).map_err(crate::serve::serve_error)?;
            cfg.workers = io.queues().len();
            Ok(ServeOn::once(io))
        },
        rx_timestamps: Some(
            "the XDP program (CLOCK_TAI in each frame's metadata; the fallback socket's SO_TIMESTAMPNS)",
        ),
        // A frame sent from an AF_XDP socket in copy mode (veth) comes back with no stamp.
        tx_timestamps: None,
        // A flush hands back only the frames of the requests already answered.
        send_batch: true,
        calls: |_| "AF_XDP rings; fallback socket by recvmmsg/sendmmsg",
        napi_busy_poll: false,
        serve_flags: crate::serve::xdp_only_flags,
        load: |a, cfg, max_payload| {
            let (io, settings) = crate::load::xdp_flows(a, cfg, max_payload)?;
            Ok(LoadOn::new(vec![io], Some(settings)))
        },
        gso: false,
        load_flags: crate::load::xdp_only_flags,
    },
    IoPath {
        name: "uring",
        help: "io_uring: a multishot IORING_OP_RECVMSG (serve; load's connected flows: RECV) into \
               a provided-buffer ring and batched sends, one ring per worker (or generator \
               thread)",
        serve: |a, cfg| {
            let io = UringIo::new(cfg, a.uring_setup()?);
            // A kernel that refuses a stamp's key in the send (before 6.13): no stamps,
            // with the errno in the backend's notes.
            cfg.tx_timestamps &= io.tx_stamps();
            Ok(ServeOn::again(io))
        },
        rx_timestamps: Some("the socket (SO_TIMESTAMPNS, in each provided buffer's control room)"),
        tx_timestamps: Some(
            "the socket (SO_TIMESTAMPING, asked per reply by IORING_OP_SENDMSG with its key, read from its error queue)",
        ),
        send_batch: false,
        calls: |_| "io_uring: multishot recvmsg, send batches",
        napi_busy_poll: false,
        serve_flags: |a| a.uring_flags(),
        load: |a, cfg, max_payload| {
            let flows = crate::load::uring_flows(a, cfg, max_payload)?;
            Ok(LoadOn::new(flows, None))
        },
        gso: false,
        load_flags: |a| a.uring_flags(),
    },
];

/// The value parser of `--io`: a row's name, its help beside it in `--help`.
pub fn parser() -> impl clap::builder::TypedValueParser<Value = &'static IoPath> {
    crate::args::table_parser(IO_PATHS, |p| p.name, |p| p.help)
}

/// The first flag of another path than `chosen` that was given, as a refusal.
fn refuse_others(chosen: &IoPath, flags: impl Fn(&IoPath) -> Option<String>) -> Result<()> {
    for p in IO_PATHS.iter().filter(|p| p.name != chosen.name) {
        if let Some(m) = flags(p) {
            return Err(Usage(m).into());
        }
    }
    Ok(())
}

impl IoPath {
    /// Serve: refuses other paths' flags, then makes this path's worker I/O.
    pub fn serve_on(&self, a: &ServeArgs, cfg: &mut ServeConfig) -> Result<ServeOn> {
        refuse_others(self, |p| (p.serve_flags)(a))?;
        (self.serve)(a, cfg)
    }

    /// Load: refuses other paths' flags, then opens this path's flows.
    pub fn load_on(&self, a: &LoadArgs, cfg: &LoadConfig, max_payload: usize) -> Result<LoadOn> {
        refuse_others(self, |p| (p.load_flags)(a))?;
        (self.load)(a, cfg, max_payload)
    }
}

/// The handlers a server can run: the protocol's per-worker factory, as data.
#[derive(Clone)]
pub enum Handlers {
    Echo,
    /// Each worker a clone of this one.
    Dns(Box<firehose_proto::DnsHandler>),
    /// Each worker a handler of its own over the shared, reloadable files.
    Radius(
        std::sync::Arc<firehose_proto::radius::LiveDb>,
        firehose_proto::radius::RadiusOptions,
    ),
    /// Each worker a handler of its own over the shared clock state.
    Ntp(
        std::sync::Arc<firehose_proto::ntp::LiveState>,
        firehose_proto::ntp::NtpOptions,
    ),
}

/// Starts `cfg`'s workers on `io` with `h`'s handler.
fn start_on<I: Io>(cfg: &ServeConfig, io: I, h: &Handlers) -> Result<Server, SetupError> {
    match h {
        Handlers::Echo => Server::start_with(cfg, io, |_| firehose_proto::Echo),
        Handlers::Dns(d) => {
            let d = (**d).clone();
            Server::start_with(cfg, io, move |_| d.clone())
        }
        Handlers::Radius(live, opts) => {
            let (live, opts) = (live.clone(), *opts);
            Server::start_with(cfg, io, move |_| {
                firehose_proto::RadiusHandler::new(live.clone(), &opts)
            })
        }
        Handlers::Ntp(live, opts) => {
            let (live, opts) = (live.clone(), opts.clone());
            Server::start_with(cfg, io, move |_| {
                firehose_proto::NtpHandler::new(live.clone(), &opts)
            })
        }
    }
}

/// A path's worker I/O, ready to start a server; with `Server::start_with` the workers
/// keep static dispatch over the backend.
pub struct ServeOn(Box<dyn Start>);

trait Start {
    fn start(&mut self, cfg: &ServeConfig, h: &Handlers) -> Result<Server, SetupError>;
    fn once(&self) -> bool;
}

/// A path that may start again (another port after a TCP clash).
struct Again<I>(I);

impl<I: Io + Clone> Start for Again<I> {
    fn start(&mut self, cfg: &ServeConfig, h: &Handlers) -> Result<Server, SetupError> {
        start_on(cfg, self.0.clone(), h)
    }
    fn once(&self) -> bool {
        false
    }
}

/// A path whose resources are taken by the first start (AF_XDP queues).
struct Once<I>(Option<I>);

impl<I: Io> Start for Once<I> {
    fn start(&mut self, cfg: &ServeConfig, h: &Handlers) -> Result<Server, SetupError> {
        let io = self.0.take().ok_or_else(|| {
            SetupError::host("this I/O path's queues were taken by a first start")
        })?;
        start_on(cfg, io, h)
    }
    fn once(&self) -> bool {
        true
    }
}

impl ServeOn {
    fn again<I: Io + Clone>(io: I) -> Self {
        ServeOn(Box::new(Again(io)))
    }

    fn once<I: Io>(io: I) -> Self {
        ServeOn(Box::new(Once(Some(io))))
    }

    /// Starts a server on this path.
    pub fn start(&mut self, cfg: &ServeConfig, h: &Handlers) -> Result<Server, SetupError> {
        self.0.start(cfg, h)
    }

    /// True when the path can start only once (no retry on another port).
    pub fn once_only(&self) -> bool {
        self.0.once()
    }
}

/// A path's generator flows, one entry per thread, and what the path set up (printed and
/// in the JSON config).
pub struct LoadOn {
    pub flows: Vec<Box<dyn FlowIo>>,
    pub settings: Option<BTreeMap<String, String>>,
}

impl LoadOn {
    fn new<I: FlowIo + 'static>(flows: Vec<I>, settings: Option<BTreeMap<String, String>>) -> Self {
        LoadOn {
            flows: flows
                .into_iter()
                .map(|f| Box::new(f) as Box<dyn FlowIo>)
                .collect(),
            settings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_socket_is_the_default() {
        assert_eq!(IO_PATHS[0].name, "socket");
        for (i, p) in IO_PATHS.iter().enumerate() {
            assert!(IO_PATHS[i + 1..].iter().all(|q| q.name != p.name), "{p:?}");
        }
    }
}
