//! The firehose lab: test hosts in network namespaces, one experiment framework that runs
//! every study the same way and measures each trial with the NTT talk's instruments, the
//! programs it compares firehose with, and one report writer.
//!
//! Flow of one run: the binary builds a study ([`studies`]: ladder, compare, compare --proto
//! dns, compare --io, sink, flood, stream, zone-load, bench) and hands it to
//! [`study::run`], which makes a private work directory ([`workdir`]), lets the study plan
//! its cells and build its test host ([`topology`]: loopback, or two namespaces joined by a
//! veth pair with chosen knobs), runs every cell R times, interleaved, tears the host down
//! whatever happened, and returns what ran. Each trial starts its programs through
//! [`peers`] (knotd, nsd, sockperf, iperf3, trafgen, dnsperf, udp_sink, perf, firehose's own
//! subcommands) on disjoint CPUs, samples /proc at both edges of its window ([`sample`]),
//! and turns the two samples and what the children counted into figures ([`metrics`]). The
//! study summarises the trials into rows (medians with min-max, [`stats`]) and a page that
//! [`report`] renders as the terminal's text, Markdown and HTML with SVG charts, and
//! [`study::document`] is its JSON.
//!
//! Nothing here uses `unsafe`: namespaces, links and knobs are driven through iproute2,
//! ethtool and sysctl commands (`ip netns exec NS ...`), and signals through `kill`. Nothing
//! here prints: progress goes to the binary through a callback.

pub mod cmd;
pub use firehose_host::cputime;
pub use firehose_host::env;
pub mod linkset;
pub mod loss;
pub mod memory;
pub mod metrics;
pub mod peers;
pub mod plain_echo;
pub mod proc;
pub mod report;
pub mod sample;
pub mod server;
pub mod stats;
pub mod studies;
pub mod study;
pub mod topology;
pub mod workdir;

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
