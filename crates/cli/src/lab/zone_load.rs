//! `firehose lab zone-load`: load time and peak memory of DNS servers on one large zone
//! (the work is in `firehose_lab::zone_load`).

use super::run::{lab_err, run_study, StudyRun};
use crate::args::{parse_bytes, parse_cpus, parse_duration, parse_positive, Cpus, Usage};
use anyhow::Result;
use clap::Args;
use firehose_lab::server::ServerKind;
use firehose_lab::studies::dns::parse_names;
use firehose_lab::studies::zone_load::ZoneLoad;
use firehose_lab::study::Placement;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `firehose lab zone-load`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each server is started pinned to --cpus with as many workers, timed \
until it answers the\napex SOA, and left --settle. Its memory is its whole process tree's \
(NSD keeps its zone in a\nchild): the peak of the summed RSS, sampled every 10 ms, and the \
summed PSS after settling.\nServers are interleaved (A B A B ...); figures are medians (min-max).\n\n\
EXAMPLES:\n  \
  firehose lab zone-load\n  \
  firehose lab zone-load --zone-size 10M --servers firehose,knotd,nsd\n  \
  firehose lab zone-load --baseline-bin /tmp/firehose-before\n  \
  firehose lab zone-load --zone my.zone --apex example.com. --json-file load.json"
)]
pub struct ZoneLoadArgs {
    /// Size of the generated zone file, e.g. 50M (A, AAAA, MX, TXT, CNAME, delegations
    /// with glue) [default: 50M].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, conflicts_with = "zone")]
    zone_size: Option<usize>,
    /// Load this zone file instead of a generated one (needs --apex).
    #[arg(long, value_name = "FILE", requires = "apex")]
    zone: Option<PathBuf>,
    /// Apex of --zone, e.g. example.com.
    #[arg(long, value_name = "NAME", requires = "zone")]
    apex: Option<String>,
    /// Servers, comma-separated, of firehose, knotd, nsd [default: firehose,knotd].
    #[arg(long, value_name = "SERVERS")]
    servers: Option<String>,
    /// Another firehose binary to measure first, as firehose-baseline (before and
    /// after a change, in one run).
    #[arg(long, value_name = "PATH")]
    baseline_bin: Option<PathBuf>,
    /// Starts of each server, interleaved.
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// CPUs of the server (one worker on each) [default: 0].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
    /// How long a server may take to answer its first query.
    #[arg(long, value_name = "DURATION", default_value = "60", value_parser = parse_duration)]
    ready_within: Duration,
    /// How long a server runs after its first answer before its memory is read.
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = parse_duration)]
    settle: Duration,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
}

/// Runs the measurement, prints the table and writes the JSON.
pub(super) fn run(a: ZoneLoadArgs) -> Result<()> {
    let servers = parse_names(
        "--servers",
        a.servers.as_deref().unwrap_or("firehose,knotd"),
        ServerKind::dns_from_name,
        "firehose, knotd, nsd",
    )
    .map_err(lab_err)?;
    let cpus = match &a.cpus {
        None | Some(Cpus::Auto) => vec![0],
        Some(Cpus::List(l)) => l.to_vec(),
        Some(Cpus::None) => {
            return Err(Usage("--cpus none: the servers are pinned; give a CPU list".into()).into())
        }
    };
    let zone = match (a.zone, a.apex) {
        (Some(z), Some(apex)) if apex.ends_with('.') => Some((z, apex)),
        (Some(_), Some(apex)) => {
            return Err(Usage(format!(
                "--apex {apex}: write the name with its trailing dot"
            ))
            .into())
        }
        _ => None,
    };
    if let Some(b) = a.baseline_bin.as_ref().filter(|b| !b.is_file()) {
        return Err(Usage(format!(
            "--baseline-bin {}: no such file; give the path of a firehose binary",
            b.display()
        ))
        .into());
    }
    let mut study = ZoneLoad::new(servers);
    study.baseline = a.baseline_bin;
    study.size = a.zone_size.unwrap_or(50 << 20) as u64;
    study.zone = zone;
    study.ready_within = a.ready_within;
    study.settle = a.settle;
    let guess_s = 2.0 + a.settle.as_secs_f64();
    run_study(
        &mut study,
        StudyRun {
            json: &a.json,
            report: None,
            placement: Placement {
                server_cpus: cpus,
                client_cpus: Vec::new(),
            },
            repetitions: a.repetitions,
            guess_s,
            bin: None,
        },
    )
}
