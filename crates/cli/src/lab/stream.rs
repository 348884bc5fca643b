//! `firehose lab stream`: the Bloomberg talk's matrix on the veth topology (the work is in
//! `firehose_lab::studies::stream`). Here: flags, defaults, the plan of cells, the outputs.

use super::placement;
use super::run::{run_study, StudyRun};
use crate::args::{
    comma_list_or_all as list, parse_bytes, parse_cpus, parse_duration, parse_positive, whole_secs,
    Cpus, Usage,
};
use crate::meta::JsonArgs;
use anyhow::Result;
use clap::Args;
use firehose_lab::studies::stream::{Engine, Profile, StreamMatrix};
use firehose_stream::{RecvMode, SendMode};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(
    after_help = "Cells (--cells), each at every MTU of --mtus, on both veth ends:\n  \
  base          GRO on, TSO/GSO on, gso_max_size/gro_max_size 65536\n  \
  gro-off       the receiver without GRO\n  \
  tso-off       the sender without TSO and GSO\n  \
  big-tcp-128k  BIG TCP: gso_max_size/gro_max_size 131072 (IPv6)\n  \
  big-tcp-185k  BIG TCP: gso_max_size/gro_max_size 185000 (IPv6)\n\
Inside every cell: firehose stream with each sender mode (receiver copy) and each receiver\n\
mode (sender copy), or the cross product of --send and --recv when either is given; then\n\
the --peers. A mode the kernel refuses is marked unsupported with its errno. Every setting\n\
is read back after it is set and restored after each cell, on Ctrl-C and on failure.\n\n\
EXAMPLES:\n  \
  firehose lab stream --mtus 1500,9000 --cells base,big-tcp-185k --duration 3\n  \
  firehose lab stream --mtus 1500 --cells base --send copy,zerocopy --recv copy --peers none\n  \
  firehose lab stream --repetitions 3 --json-file stream.json --report results/stream"
)]
pub(super) struct StreamArgs {
    /// MTUs to run each cell at, comma-separated (the talk: 1500, 4168 for a 4K MSS, 9000).
    #[arg(
        long,
        value_name = "MTUS",
        value_delimiter = ',',
        default_value = "1500,4168,9000"
    )]
    mtus: Vec<u32>,
    /// Link settings to run, comma-separated, of the cells listed below [default: all].
    #[arg(long, value_name = "CELLS")]
    cells: Option<String>,
    /// Sender modes, comma-separated, or all: copy, zerocopy, sendfile, splice, uring, uring-zc.
    #[arg(long, value_name = "MODES")]
    send: Option<String>,
    /// Receiver modes, comma-separated, or all: copy, mmap, uring, uring-zcrx.
    #[arg(long, value_name = "MODES")]
    recv: Option<String>,
    /// Peers to run beside firehose: iperf3 (its copy path), iperf3-zerocopy (its -Z
    /// sendfile path), or none.
    #[arg(long, value_name = "PEERS", default_value = "iperf3,iperf3-zerocopy")]
    peers: String,
    /// Runs of each cell, interleaved (the whole plan once, then again).
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// Sending time per run, whole seconds, e.g. 3, 5s.
    #[arg(short = 't', long, value_name = "DURATION", default_value = "5", value_parser = parse_duration)]
    duration: Duration,
    /// Parallel TCP flows (the talk: 16).
    #[arg(long, default_value = "16", value_parser = parse_positive)]
    flows: usize,
    /// Application message size (the talk: 512 KiB).
    #[arg(long, value_name = "SIZE", default_value = "512K", value_parser = parse_bytes)]
    msg_size: usize,
    /// CPUs of the receiver, or auto: the first half of the allowed CPUs [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    server_cpus: Option<Cpus>,
    /// CPUs of the sender, or auto: the allowed CPUs the receiver does not use [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    client_cpus: Option<Cpus>,
    #[command(flatten)]
    json: JsonArgs,
    /// Also write report.md and report.html (SVG charts) into this directory.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// The firehose cells of a block: one side varied at a time, or the cross product.
fn engines(a: &StreamArgs) -> Result<Vec<Engine>> {
    let sends = a
        .send
        .as_deref()
        .map(|t| {
            list(
                "--send",
                t,
                &SendMode::ALL,
                |w| w.parse().ok(),
                "copy, zerocopy, sendfile, splice, uring, uring-zc",
            )
        })
        .transpose()?;
    let recvs = a
        .recv
        .as_deref()
        .map(|t| {
            list(
                "--recv",
                t,
                &RecvMode::ALL,
                |w| w.parse().ok(),
                "copy, mmap, uring, uring-zcrx",
            )
        })
        .transpose()?;
    let mut out = Vec::new();
    if sends.is_none() && recvs.is_none() {
        out.extend(SendMode::ALL.map(|send| Engine::Firehose {
            send,
            recv: RecvMode::Copy,
        }));
        out.extend(RecvMode::ALL[1..].iter().map(|&recv| Engine::Firehose {
            send: SendMode::Copy,
            recv,
        }));
    } else {
        for send in sends.unwrap_or(vec![SendMode::Copy]) {
            for &recv in recvs.as_deref().unwrap_or(&[RecvMode::Copy]) {
                out.push(Engine::Firehose { send, recv });
            }
        }
    }
    if a.peers != "none" {
        let peers = [
            Engine::Iperf3 { zerocopy: false },
            Engine::Iperf3 { zerocopy: true },
        ];
        out.extend(list(
            "--peers",
            &a.peers,
            &peers,
            |w| match w {
                "iperf3" => Some(peers[0]),
                "iperf3-zerocopy" => Some(peers[1]),
                _ => None,
            },
            "iperf3, iperf3-zerocopy, none",
        )?);
    }
    let mut seen = Vec::new();
    out.retain(|e| {
        let new = !seen.contains(e);
        seen.push(*e);
        new
    });
    Ok(out)
}

/// Runs `firehose lab stream`.
pub(super) fn run(a: StreamArgs) -> Result<()> {
    if let Some(m) = a.mtus.iter().find(|m| !(1280..=65535).contains(*m)) {
        return Err(Usage(format!(
            "--mtus {m}: an IPv6 veth takes an MTU from 1280 to 65535"
        ))
        .into());
    }
    let profiles = list(
        "--cells",
        a.cells.as_deref().unwrap_or("all"),
        &Profile::ALL,
        Profile::from_name,
        "base, gro-off, tso-off, big-tcp-128k, big-tcp-185k",
    )?;
    let engines = engines(&a)?;
    let secs = whole_secs("--duration", a.duration)?;
    if !firehose_sys::cpu::is_root() {
        return Err(Usage(
            "lab stream needs root: it creates network namespaces and sets MTU, offloads and BIG TCP on their veth pair"
                .into(),
        )
        .into());
    }
    let place = placement(&a.server_cpus, &a.client_cpus)?;
    let mut study = StreamMatrix::new(a.mtus.clone(), profiles, engines);
    study.duration = Duration::from_secs(secs);
    study.flows = a.flows;
    study.msg_size = a.msg_size;
    let guess_s = secs as f64 + 2.0;
    run_study(
        &mut study,
        StudyRun {
            json: &a.json,
            report: a.report.as_deref(),
            placement: place,
            repetitions: a.repetitions,
            guess_s,
            bin: None,
        },
    )
}
