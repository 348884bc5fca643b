//! The firehose UDP transaction engine.
//!
//! `config -> sockets (+ options, read back) -> one thread per worker -> Backend -> Handler`.
//! Each worker runs one loop ([`worker`]) over its own [`backend::Backend`]: a batch of
//! requests in, each handled in place by the [`Handler`], a batch of replies out. The
//! backend is the only part that knows how packets move; the first one is the socket
//! path ([`socket_io`]: recvfrom or recvmmsg, sendto or sendmmsg), where a request is
//! handled in the slot it arrived in and the reply leaves from the same slot, so the hot
//! path neither allocates nor copies beyond what the kernel does. The others are AF_XDP
//! ([`xdp_io`], [`xdp_backend`]) and io_uring ([`uring_io`]: multishot RECVMSG into
//! provided buffers, SENDMSG replies from them).
//!
//! Socket order and steering: sockets are bound in worker order, and the kernel numbers
//! a reuseport group in bind order. The steering program returns `cpu % workers`, and
//! workers are ordered so that worker (and socket) `j` is pinned to a CPU `c` with
//! `c % workers == j`; with `--cpus auto` on CPUs `0..N` that is simply socket `j` on CPU `j`.

pub mod backend;
pub mod config;
pub mod handler;
pub mod metrics;
pub mod metrics_http;
mod placement;
pub mod server;
pub mod socket_io;
mod sockets;
pub mod stats;
mod tx_stamps;
pub mod uring_io;
pub mod worker;
pub mod xdp_backend;
pub mod xdp_io;

pub use backend::{Backend, BackendApplied, Flushed, Io, Received, Request, TxStamped, WorkerSeat};
pub use config::{Pin, PmtuDisc, Profile, ServeConfig, SocketMode, Steer};
pub use firehose_sys::xdp::xsk::ZeroCopy;
pub use handler::{Handler, Peer, Verdict};
pub use server::{Applied, Server};
pub use socket_io::{SocketIo, SLOT_SIZE};
pub use sockets::AppliedSocket;
pub use stats::{
    IntervalRecord, ProcessCpu, ServeDocument, SocketStats, StatsDocument, WorkerStats,
};
pub use uring_io::UringIo;
pub use xdp_io::{ModeChoice, Queues, XdpConfig, XdpIo, XdpOptions};
