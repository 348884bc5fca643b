//! The cli's side of supervision (the loop itself is `firehose_sys::supervise`): SIGINT and
//! SIGTERM end a run through one flag, and a worker's failure becomes the run's error line
//! (exit code 1).

use anyhow::{Context, Result};
use firehose_sys::supervise::{Supervisor, WorkerFailure};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// A flag that SIGINT and SIGTERM set.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    Ok(stop)
}

/// A supervisor ended by a signal, after `duration` if given, ticking every `interval`.
pub fn supervisor(
    stop: &AtomicBool,
    duration: Option<Duration>,
    interval: Option<Duration>,
) -> Supervisor<'_> {
    let mut s = Supervisor::new(stop);
    s.duration = duration;
    s.interval = interval;
    s
}

/// The error a failed worker ends the run with: what failed, where, why, and that the run
/// stopped rather than go on without it (docs/serve.md, "When a worker fails").
pub fn failed(what: &str, f: WorkerFailure) -> anyhow::Error {
    anyhow::anyhow!("{f}; {what} stopped")
}
