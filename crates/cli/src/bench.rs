//! `firehose bench`: the engine benchmark (`make bench`, and `make demo` in short form).
//! The work is in `firehose_lab::studies::bench`, run like every lab study; here: flags.

use crate::args::{parse_cpu_list, parse_duration, parse_positive, parse_rate, Usage};
use crate::lab::run::{lab_err, run_study, StudyRun};
use anyhow::Result;
use clap::Args;
use firehose_lab::studies::bench::{Bench, PROFILES};
use firehose_lab::study::Placement;
use firehose_sys::cpu::CpuSet;
use std::time::Duration;

/// Arguments of `firehose bench`.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:\n  \
  firehose bench --repetitions 1 --duration 2          (what make demo runs)\n  \
  firehose bench --profiles naive,tuned --server-cpus 0 --client-cpus 1 -J > bench.json")]
pub struct BenchArgs {
    /// Measured time per run, e.g. 3, 2.5s (each run also warms up for 1 s).
    #[arg(short = 't', long, value_name = "DURATION", default_value = "3", value_parser = parse_duration)]
    duration: Duration,
    /// Repetitions of every measurement, interleaved across profiles.
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// CPUs the server process is confined to (its one worker runs on one of them).
    #[arg(long, value_name = "CPULIST", default_value = "0", value_parser = parse_cpu_list)]
    server_cpus: CpuSet,
    /// CPUs of the client: its one generator thread runs on the first.
    #[arg(long, value_name = "CPULIST", default_value = "1", value_parser = parse_cpu_list)]
    client_cpus: CpuSet,
    /// Open-loop rate for the latency column, e.g. 50000, 50k.
    #[arg(long, value_name = "RATE", default_value = "50k", value_parser = parse_rate)]
    rate: f64,
    /// Profiles to measure, comma-separated, of: naive, reuseport, steered, tuned, latency
    /// [default: all in ladder order].
    #[arg(long, value_name = "PROFILES", value_delimiter = ',')]
    profiles: Vec<String>,
    /// Skip the ping-pong comparison with sockperf.
    #[arg(long)]
    no_pingpong: bool,
    /// Serve and load with this firehose binary instead of this one, e.g. a build from
    /// before a change.
    #[arg(long, value_name = "PATH")]
    firehose_bin: Option<std::path::PathBuf>,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
}

/// Runs `firehose bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let placement = Placement::new(a.server_cpus.to_vec(), a.client_cpus.to_vec(), &allowed)
        .map_err(lab_err)?;
    let profiles: Vec<String> = if a.profiles.is_empty() {
        PROFILES.iter().map(|s| s.to_string()).collect()
    } else {
        for p in &a.profiles {
            if !PROFILES.contains(&p.as_str()) {
                return Err(Usage(format!(
                    "unknown profile '{p}' (valid: {})",
                    PROFILES.join(", ")
                ))
                .into());
            }
        }
        a.profiles.clone()
    };
    let bin = crate::lab::run::firehose_bin(&a.firehose_bin)?;
    let mut study = Bench::new(profiles, a.duration, a.rate, !a.no_pingpong);
    let guess_s = 2.0 * (a.duration.as_secs_f64() + 1.5);
    run_study(
        &mut study,
        StudyRun {
            json: &a.json,
            report: None,
            placement,
            repetitions: a.repetitions,
            guess_s,
            bin,
        },
    )
}
