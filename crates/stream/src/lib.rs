//! `firehose stream`: bulk TCP as in the Bloomberg netdev 0x18 talk "Drinking From The Host
//! Packet Fire Hose" — long flows of large application messages, sent with copy,
//! MSG_ZEROCOPY, sendfile, vmsplice+splice, io_uring SEND or SEND_ZC and received with copy,
//! TCP_ZEROCOPY_RECEIVE (mmap) or io_uring — measured in Gbit/s, CPU and the talk's return
//! on investment, ROI = (Gbit/s)^2 / CPU cores.
//!
//! Every flow opens with a [`pattern::Header`] and carries a known byte pattern, which the
//! receiver checks, so a fast mode that corrupts or reuses buffers early cannot look good.
//! When the data is in, the receiver sends its own report back on flow 0, so the sender's
//! report has both sides.

pub mod cpu;
pub mod modes;
pub mod pattern;
pub mod receiver;
mod recv_modes;
pub mod report;
mod send_modes;
pub mod sender;
mod side;

pub use modes::{RecvMode, SendMode};
pub use report::StreamReport;

use firehose_sys::SysError;

/// What can end a stream run.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The kernel refused a mode (no SO_ZEROCOPY, io_uring disabled, zcrx unsupported...).
    #[error("{mode} is unsupported here: {source}")]
    Unsupported { mode: String, source: SysError },
    /// A setting that cannot work, found before any traffic.
    #[error("{0}")]
    Config(String),
    /// Setting up failed (bind, connect refused, a socket option refused).
    #[error("{what}: {source}")]
    Setup { what: String, source: SysError },
    /// A flow failed mid-run; `bytes` is what all flows had moved by then.
    #[error("flow {flow} failed after {bytes} bytes transferred in total: {source}")]
    Transfer {
        flow: u32,
        bytes: u64,
        source: SysError,
    },
    /// The receiver saw bytes that are not the pattern.
    #[error("flow {flow}: pattern mismatch at stream byte {offset}: expected {expected:#04x}, got {got:#04x}")]
    Corrupt {
        flow: u32,
        offset: u64,
        expected: u8,
        got: u8,
    },
    /// The peer did not speak the stream protocol.
    #[error("{0}")]
    Protocol(String),
}

impl StreamError {
    /// True when the error is the user's or the kernel's "no" before traffic (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StreamError::Unsupported { .. } | StreamError::Config(_)
        )
    }

    pub(crate) fn setup(what: impl Into<String>) -> impl FnOnce(SysError) -> StreamError {
        let what = what.into();
        move |source| StreamError::Setup { what, source }
    }
}

/// Per-interval throughput, for live lines.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    /// Seconds since the start of the measured window, at the end of this interval.
    pub t: f64,
    pub per_flow_gbps: Vec<f64>,
    pub total_gbps: f64,
}

/// Gbit/s for `bytes` over `secs`.
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}
