//! The firehose UDP transaction engine.
//!
//! `config -> sockets (+ options, read back) -> one thread per worker -> Handler`.
//! Each worker owns a [`firehose_sys::mmsg::Batch`] of receive slots; a request is
//! handled in place and the reply goes out from the same slot, so the hot path neither
//! allocates nor copies beyond what the kernel does.
//!
//! Socket order and steering: sockets are bound in worker order, and the kernel numbers
//! a reuseport group in bind order. The steering program returns `cpu % workers`, and
//! workers are ordered so that worker (and socket) `j` is pinned to a CPU `c` with
//! `c % workers == j`; with `--pin auto` on CPUs `0..N` that is simply socket `j` on CPU `j`.

pub mod config;
pub mod handler;
pub mod server;
pub mod stats;

pub use config::{parse_cpu_list, Pin, PmtuDisc, Profile, ServeConfig, SocketMode, Steer};
pub use handler::{Handler, Peer, Verdict};
pub use server::{Applied, AppliedSocket, ServeError, Server};
pub use stats::{IntervalRecord, ProcessCpu, SocketStats, StatsDocument, WorkerStats};
