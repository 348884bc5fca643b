//! What the sender and the receiver do alike once their flow threads ran: join them, turn
//! the counters and the CPU samples into a [`SideReport`].

use crate::cpu::{self, Sample};
use crate::report::{cpu_report, notes, FlowReport, SideReport};
use crate::{gbps, StreamError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ScopedJoinHandle;

/// Joins flow threads in order; a panicked thread becomes an error naming the flow and the
/// panic's message, not a panic.
pub(crate) fn join_all(
    handles: Vec<ScopedJoinHandle<'_, Result<FlowReport, StreamError>>>,
) -> Vec<Result<FlowReport, StreamError>> {
    handles
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            h.join().unwrap_or_else(|p| {
                Err(StreamError::Protocol(format!(
                    "flow {i} panicked: {}",
                    firehose_sys::supervise::panic_message(p.as_ref())
                )))
            })
        })
        .collect()
}

/// The facts of one side that are not measured.
pub(crate) struct Side<'a> {
    pub role: &'static str,
    pub mode: &'static str,
    pub cpus: &'a [usize],
    pub checked: bool,
}

/// Builds the side's report over the window `before..now`. A flow that failed mid-run
/// fails the side, with every flow's bytes so far.
pub(crate) fn finish(
    side: Side<'_>,
    before: &Sample,
    counters: &[AtomicU64],
    results: Vec<Result<FlowReport, StreamError>>,
) -> Result<SideReport, StreamError> {
    let after = cpu::sample();
    let secs = before.elapsed(&after);
    let total: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    let mut flows = Vec::new();
    for r in results {
        match r {
            Ok(fr) => flows.push(fr),
            Err(StreamError::Transfer { flow, source, .. }) => {
                return Err(StreamError::Transfer {
                    flow,
                    bytes: total,
                    source,
                })
            }
            Err(e) => return Err(e),
        }
    }
    for f in &mut flows {
        f.gbps = gbps(f.bytes, secs);
    }
    let host = cpu::host_cpu(before, &after, side.cpus);
    Ok(SideReport {
        role: side.role.into(),
        mode: side.mode.into(),
        bytes: total,
        seconds: secs,
        gbps: gbps(total, secs),
        notes: notes(&flows),
        flows,
        cpu: cpu_report(cpu::process_cpu(before, &after), host, total, secs),
        power: cpu::power(before, &after),
        checked: side.checked,
        cpus: side.cpus.to_vec(),
    })
}
