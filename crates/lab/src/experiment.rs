//! Runs a plan of cells (server x generator x OS knobs) for R repetitions, interleaved
//! (A B C A B C ...) so slow drifts of a shared host hit every cell alike, and reports
//! progress through a callback (the binary decides whether to print it).

use crate::runner::{Generator, Runner, Trial};
use crate::server::ServerKind;
use crate::topology::{Knobs, Topology};
use crate::LabResult;
use serde::Serialize;

/// One configuration to measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub name: String,
    pub describe: String,
    pub server: ServerKind,
    pub generator: Generator,
    /// OS knobs to set before each of its trials (veth only).
    pub knobs: Option<Knobs>,
}

/// Where a run is.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Trials finished so far.
    pub done: usize,
    pub total: usize,
    /// The trial about to start.
    pub cell: String,
    pub repetition: usize,
    pub repetitions: usize,
    /// Estimate from the trials so far (or from durations before the first one).
    pub seconds_left: f64,
}

/// Runs every cell `repetitions` times, interleaved; trials come back in run order.
pub fn run(
    runner: &Runner<'_>,
    topo: &Topology,
    cells: &[Cell],
    repetitions: usize,
    progress: &mut dyn FnMut(&Progress),
) -> LabResult<Vec<Trial>> {
    let total = cells.len() * repetitions;
    let started = std::time::Instant::now();
    // Before any trial, guess the window, the warm-up and a second of start and stop.
    let guess = (runner.load.duration_s + runner.load.warmup_s) as f64 + 1.0;
    let mut trials = Vec::with_capacity(total);
    for rep in 0..repetitions {
        for cell in cells {
            let done = trials.len();
            let per_trial = if done == 0 {
                guess
            } else {
                started.elapsed().as_secs_f64() / done as f64
            };
            progress(&Progress {
                done,
                total,
                cell: cell.name.clone(),
                repetition: rep + 1,
                repetitions,
                seconds_left: per_trial * (total - done) as f64,
            });
            let state = match &cell.knobs {
                Some(k) => topo.set_knobs(
                    k,
                    &runner.placement.server_cpus,
                    &runner.placement.client_cpus,
                )?,
                None => None,
            };
            trials.push(runner.trial(&cell.name, rep, &cell.server, cell.generator, state)?);
        }
    }
    Ok(trials)
}
