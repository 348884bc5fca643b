//! `firehose lab sink` and `firehose lab flood`: the packet-rate study on the veth topology
//! (the work is in `firehose_lab::studies::sink`). Here: flags, defaults, the outputs.

use super::placement;
use super::run::{run_study, StudyRun};
use crate::args::{
    comma_list_or_all, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, Cpus,
    Usage,
};
use crate::meta::JsonArgs;
use anyhow::Result;
use clap::Args;
use firehose_flood::FloodIo;
use firehose_lab::studies::sink::{Kind, PacketStudy, Subject, RFC2544_FRAMES};
use firehose_lab::study::Placement;
use firehose_sink::SinkIo;
use std::path::PathBuf;
use std::time::Duration;

/// What both studies take.
#[derive(Debug, Args)]
pub(super) struct Common {
    /// Modes to run, comma-separated, or all [default: all].
    #[arg(long, value_name = "MODES")]
    modes: Option<String>,
    /// Peers to run beside firehose where installed, comma-separated, or none [default: all].
    #[arg(long, value_name = "PEERS")]
    peers: Option<String>,
    /// Runs of each cell, interleaved (every cell once, then again).
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// Measured time per run, whole seconds, e.g. 3, 5s.
    #[arg(short = 't', long, value_name = "DURATION", default_value = "3", value_parser = parse_duration)]
    duration: Duration,
    /// Sending before the measured window, whole seconds, 0 for none.
    #[arg(long, value_name = "DURATION", default_value = "1", value_parser = parse_duration_or_zero)]
    warmup: Duration,
    /// CPUs of the receiver (it runs on the first), or auto: the first allowed CPU
    /// [default: auto].
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

#[derive(Debug, Args)]
#[command(
    after_help = "Receive modes: those of firehose sink (recv, recvfrom, recvmsg, recvmmsg, \
uring, packet, xdp).\nPeers: udp_sink (the Red Hat article's receiver, --recvmsg; not packaged: \
build it from\nnetoptimizer/network-testing, `make` in src/, and put it on PATH), sockperf \
(sockperf sr,\nthe receiving side of its throughput mode). Each is fed by firehose flood --io \
sendmmsg with\none thread per receive queue; after the repetitions, one more run per mode at the \
largest\nqueue count samples the receiving CPU with perf (cpu-clock) for its top kernel symbols.\n\n\
EXAMPLES:\n  \
  firehose lab sink --queues 2 --repetitions 3 --duration 3\n  \
  firehose lab sink --queues 1 --modes recvmsg,recvmmsg --repetitions 1 --duration 1 --no-profile"
)]
pub(super) struct SinkArgs {
    #[command(flatten)]
    common: Common,
    /// Receive queue counts to run, 1..N [default: the number of allowed CPUs].
    #[arg(long, value_parser = parse_positive)]
    queues: Option<usize>,
    /// Frame size on the wire of the flood (RFC 2544).
    #[arg(long, value_name = "BYTES", default_value = "64", value_parser = parse_positive)]
    frame: usize,
    /// Do not sample the receiving CPU with perf.
    #[arg(long)]
    no_profile: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Send modes: those of firehose flood (sendto, sendmmsg, gso, uring, packet, \
xdp).\nPeers: trafgen (netsniff-ng: AF_PACKET, qdisc bypassed), iperf3 (iperf3 -u -b 0; it needs \
its TCP\ncontrol connection, so its cells run with its own server instead of the XDP_DROP \
receiver), sockperf\n(sockperf tp: its throughput mode's sender, one sendto() per message).\n\n\
EXAMPLES:\n  \
  firehose lab flood --repetitions 3 --duration 3\n  \
  firehose lab flood --frames 64,1518 --modes sendto,packet --peers none --repetitions 1"
)]
pub(super) struct FloodArgs {
    #[command(flatten)]
    common: Common,
    /// Frame sizes on the wire, comma-separated, of the RFC 2544 sizes.
    #[arg(
        long,
        value_name = "BYTES",
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518"
    )]
    frames: Vec<usize>,
}

/// A comma list of names from `all` (each once), or all of them; "none" for `--peers`.
fn pick(flag: &str, text: Option<&str>, all: &[&str]) -> Result<Vec<String>> {
    let text = text.unwrap_or("all");
    if text == "none" && flag == "--peers" {
        return Ok(Vec::new());
    }
    let named = comma_list_or_all(
        flag,
        text,
        all,
        |w| all.iter().copied().find(|a| *a == w),
        &all.join(", "),
    )?;
    let mut out: Vec<String> = Vec::new();
    for w in named {
        if !out.iter().any(|x| x == w) {
            out.push(w.to_string());
        }
    }
    Ok(out)
}

/// The settings both studies share; `modes` and `peers` already picked.
fn study(
    c: &Common,
    kind: Kind,
    modes: Vec<String>,
    peers: Vec<Subject>,
    all: &[&str],
) -> Result<PacketStudy> {
    if c.duration < Duration::from_secs(1) {
        return Err(Usage(format!(
            "--duration {:?}: at least 1 second (each trial measures its last 0.5 s less)",
            c.duration
        ))
        .into());
    }
    let mut s = PacketStudy::new(kind, modes, peers);
    s.available = all.iter().map(|m| m.to_string()).collect();
    s.duration = c.duration;
    s.warmup = c.warmup;
    Ok(s)
}

fn root_or_usage(what: &str) -> Result<()> {
    if !firehose_sys::cpu::is_root() {
        return Err(Usage(format!(
            "lab {what} needs root: it creates network namespaces and a veth pair"
        ))
        .into());
    }
    Ok(())
}

/// Runs `firehose lab sink`.
pub(super) fn sink(a: SinkArgs) -> Result<()> {
    root_or_usage("sink")?;
    let names: Vec<&str> = SinkIo::ALL.iter().map(|m| m.name()).collect();
    let modes = pick("--modes", a.common.modes.as_deref(), &names)?;
    let peers = pick(
        "--peers",
        a.common.peers.as_deref(),
        &["udp_sink", "sockperf"],
    )?
    .iter()
    .map(|p| {
        if p == "udp_sink" {
            Subject::UdpSink
        } else {
            Subject::Sockperf
        }
    })
    .collect();
    if !RFC2544_FRAMES.contains(&a.frame) {
        return Err(Usage(format!(
            "--frame {}: RFC 2544 sizes are 64, 128, 256, 512, 1024, 1280, 1518",
            a.frame
        ))
        .into());
    }
    let p = placement(&a.common.server_cpus, &a.common.client_cpus)?;
    let mut s = study(&a.common, Kind::Sink, modes, peers, &names)?;
    let n = a
        .queues
        .unwrap_or_else(|| firehose_sys::cpu::allowed_cpus().map_or(1, |c| c.len()));
    if n > 64 {
        return Err(Usage(format!("--queues {n}: at most 64")).into());
    }
    s.queues = (1..=n).collect();
    s.frames = vec![a.frame];
    s.profile = !a.no_profile;
    run(&a.common, s, p)
}

/// Runs `firehose lab flood`.
pub(super) fn flood(a: FloodArgs) -> Result<()> {
    root_or_usage("flood")?;
    let names: Vec<&str> = FloodIo::ALL.iter().map(|m| m.name()).collect();
    let modes = pick("--modes", a.common.modes.as_deref(), &names)?;
    let peers = pick(
        "--peers",
        a.common.peers.as_deref(),
        &["trafgen", "iperf3", "sockperf"],
    )?
    .iter()
    .map(|p| match p.as_str() {
        "trafgen" => Subject::Trafgen,
        "iperf3" => Subject::Iperf3,
        _ => Subject::SockperfTp,
    })
    .collect();
    for f in &a.frames {
        if !RFC2544_FRAMES.contains(f) {
            return Err(Usage(format!(
                "--frames {f}: RFC 2544 sizes are 64, 128, 256, 512, 1024, 1280, 1518"
            ))
            .into());
        }
    }
    let p = placement(&a.common.server_cpus, &a.common.client_cpus)?;
    let mut s = study(&a.common, Kind::Flood, modes, peers, &names)?;
    s.frames = a.frames.clone();
    run(&a.common, s, p)
}

fn run(c: &Common, mut s: PacketStudy, placement: Placement) -> Result<()> {
    let guess_s = (s.duration + s.warmup).as_secs_f64() + 2.0;
    run_study(
        &mut s,
        StudyRun {
            json: &c.json,
            report: c.report.as_deref(),
            placement,
            repetitions: c.repetitions,
            guess_s,
            bin: None,
        },
    )
}
