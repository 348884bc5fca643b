//! `firehose lab latency`: latency against load per server profile, beside sockperf's
//! under-load mode (the work is in `firehose_lab::studies::latency`).

use super::placement;
use super::run::{run_study, StudyRun};
use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, Cpus, Usage,
};
use anyhow::Result;
use clap::builder::TypedValueParser as _;
use clap::Args;
use firehose_lab::studies::bench::PROFILES;
use firehose_lab::studies::latency::LatencyCurve;
use firehose_lab::topology::Kind;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `firehose lab latency`.
#[derive(Debug, Args)]
#[command(
    after_help = "First each profile's max tps: closed loop (4 flows x window 32), then the highest\n\
open-loop rate it holds (no loss, the rate kept) under the curve's own load, searched down\n\
from the closed-loop max (x0.8 a step, then 2 bisections, 8 runs at most; a client-bound step\n\
above it makes it a lower bound); the percents are of that one. Then, interleaved: the\n\
unloaded point (load --flows 1 --window 1 --stamps --spin, the base of the tail goal) and, at\n\
each --percents of the max, serve --profile P with load --rate R --stamps (latency and\n\
kernel-stamped rtt, p50/p99/p99.9), and sockperf sr with sockperf under-load --mps R\n\
--full-rtt (1 reply in 100 timed and answered). Like for like: the latency profile's server\n\
polls (sockperf sr --nonblocked), the others sleep in the kernel (sockperf sr blocking); the\n\
clients spin in every pair (load --spin; sockperf's sender busy-waits in every mode, its\n\
receiver blocks). Both servers on the server CPU, both clients on the same client CPU. Each\n\
row says how the server's busy thread was scheduled (sleeps, preemptions, run-queue delay per\n\
second, from /proc). The summary ends with issue 25's goals, each met, not met, or\n\
client-bound (the client did not keep the rate: the row cannot judge the server).\n\n\
EXAMPLES:\n  \
  firehose lab latency\n  \
  firehose lab latency --topology veth --report results/latency-veth\n  \
  firehose lab latency --profiles latency --percents 50,100 --repetitions 1 --duration 2"
)]
pub struct LatencyArgs {
    /// Server profiles, comma-separated, of naive, reuseport, steered, tuned, latency.
    #[arg(long, value_name = "PROFILES", default_value = "tuned,latency")]
    profiles: String,
    /// Fractions of each profile's max tps (the open-loop one) to measure at, in percent,
    /// comma-separated.
    #[arg(
        long,
        value_name = "PERCENTS",
        value_delimiter = ',',
        default_value = "10,20,30,40,50,60,70,80,90,100",
        value_parser = clap::value_parser!(u32).range(1..=100)
    )]
    percents: Vec<u32>,
    /// Test host: the host's loopback, or two namespaces joined by a veth pair (root).
    #[arg(long, default_value = "loopback", value_parser = clap::builder::PossibleValuesParser::new(["loopback", "veth"])
        .try_map(|s| s.parse::<Kind>()))]
    topology: Kind,
    /// Runs of each cell, interleaved (A B A B ...).
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// Measured time per run (each step of the max's search too), whole seconds, e.g. 5.
    #[arg(short = 't', long, value_name = "DURATION", default_value = "5", value_parser = parse_duration)]
    duration: Duration,
    /// Load before the measured window, whole seconds, 0 for none.
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = parse_duration_or_zero)]
    warmup: Duration,
    /// CPUs of the server, or auto: the first half of the allowed CPUs [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    server_cpus: Option<Cpus>,
    /// CPUs of the client (both clients run on the first), or auto [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    client_cpus: Option<Cpus>,
    /// Flows (sockets) of firehose load.
    #[arg(long, default_value = "4", value_parser = parse_positive)]
    flows: usize,
    /// Request payload bytes, both clients.
    #[arg(long, value_name = "SIZE", default_value = "100", value_parser = parse_bytes)]
    size: usize,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Also write report.md, report.html (the curve as an SVG chart) and the run logs into
    /// this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// Runs the study, prints its table, writes its document and report.
pub(super) fn run(a: LatencyArgs) -> Result<()> {
    let mut profiles = Vec::new();
    for p in a
        .profiles
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        if !PROFILES.contains(&p) {
            return Err(Usage(format!(
                "--profiles: unknown profile {p:?}; use {}",
                PROFILES.join(", ")
            ))
            .into());
        }
        if !profiles.iter().any(|q| q == p) {
            profiles.push(p.to_string());
        }
    }
    if profiles.is_empty() {
        return Err(Usage("--profiles: name at least one profile".into()).into());
    }
    let whole = |flag: &str, d: Duration| {
        if d.subsec_nanos() != 0 {
            Err(Usage(format!("{flag}: whole seconds, e.g. 5")))
        } else {
            Ok(d)
        }
    };
    let duration = whole("--duration", a.duration)?;
    let warmup = whole("--warmup", a.warmup)?;
    let placement = placement(&a.server_cpus, &a.client_cpus)?;
    let mut percents = a.percents;
    percents.sort_unstable();
    percents.dedup();
    let mut study = LatencyCurve::new(profiles, percents, duration);
    study.warmup = warmup;
    study.topology = a.topology;
    study.flows = a.flows;
    study.size = a.size;
    let guess_s = (duration + warmup).as_secs_f64() + 1.0;
    run_study(
        &mut study,
        StudyRun {
            json: &a.json,
            report: a.report.as_deref(),
            placement,
            repetitions: a.repetitions,
            guess_s,
            bin: None,
        },
    )
}
