//! The firehose lab: test hosts in network namespaces, an experiment runner that measures
//! each run with the NTT talk's instruments, the NTT ladder, peer comparisons and reports.
//!
//! Flow of one run: [`topology::Topology`] (host loopback, or two namespaces joined by a
//! veth pair with chosen knobs) -> [`runner`] starts a server and the load generator on
//! disjoint CPUs and samples /proc around the measured window ([`sample`]) -> a
//! [`runner::Trial`] -> the ladder or comparison aggregates trials into medians with min-max
//! ([`stats`]) -> [`report`] writes JSON, a text table, Markdown and HTML with SVG charts.
//!
//! Nothing here uses `unsafe`: namespaces, links and knobs are driven through iproute2,
//! ethtool and sysctl commands (`ip netns exec NS ...`), and signals through `kill`.

pub mod cmd;
pub mod compare;
pub use firehose_host::cputime;
pub mod dns_compare;
pub use firehose_host::env;
pub mod experiment;
pub mod freeradius;
pub mod ladder;
pub mod linkset;
pub mod metrics;
pub mod perf;
pub mod plain_echo;
pub mod proc;
pub mod report;
pub mod runner;
pub mod sample;
pub mod server;
pub mod session;
pub mod sink_study;
pub mod sockperf;
pub mod stats;
pub mod stream_matrix;
pub mod topology;
pub mod xdp_compare;
pub mod zone_load;

/// Why a lab run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The user asked for something that cannot work (bad usage, exit code 2).
    #[error("{0}")]
    Usage(String),
    /// An external command failed; the message names the command and its output.
    #[error("{0}")]
    Command(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A /proc file could not be read or parsed.
    #[error(transparent)]
    Proc(#[from] firehose_host::procfs::ReadError),
    /// A run failed (a process died, a result file was missing or malformed).
    #[error("{0}")]
    Run(String),
    /// The user pressed Ctrl-C or the lab got SIGTERM.
    #[error("interrupted: stopped and cleaned up")]
    Interrupted,
}

impl LabError {
    /// An I/O error on `path`.
    pub fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        LabError::Io {
            path: path.to_string(),
            source,
        }
    }
}

/// Result of lab operations.
pub type LabResult<T> = Result<T, LabError>;
