//! `firehose stream`: bulk TCP sender (`--target`) or receiver (`--listen`), after the
//! Bloomberg netdev 0x18 talk. Prints interval lines and a summary, or `--json`.

use crate::args::{parse_bytes, parse_cpus, parse_duration, parse_positive, Cpus, Usage};
use anyhow::{Context, Result};
use clap::Args;
use firehose_host::env::Environment;
use firehose_stream::receiver::{Receiver, ReceiverConfig};
use firehose_stream::report::{ReceiverRun, SenderRun, SideReport, StreamReport};
use firehose_stream::sender::{self, SenderConfig};
use firehose_stream::{Interval, RecvMode, SendMode, StreamError};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("side").required(true).args(["listen", "target"])))]
#[command(after_help = "EXAMPLES:\n  \
  firehose stream --listen [::]:5201                                  receiver\n  \
  firehose stream --target 10.0.0.2:5201 --flows 16 --msg-size 512K  sender, 10 s\n  \
  firehose stream --target 10.0.0.2:5201 --send zerocopy --duration 5 -J\n  \
  firehose stream --listen [::]:5201 --recv mmap --once --json-file rx.json")]
pub struct StreamArgs {
    /// Receive: listen on ADDR:PORT (e.g. [::]:5201, 127.0.0.1:5201).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<SocketAddr>,
    /// Send: connect to a `firehose stream --listen` at ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    target: Option<SocketAddr>,
    /// Sender mode: copy, zerocopy (MSG_ZEROCOPY), sendfile, splice, uring, uring-zc.
    #[arg(long, value_name = "MODE")]
    send: Option<SendMode>,
    /// Receiver mode: copy, mmap (TCP_ZEROCOPY_RECEIVE), uring, uring-zcrx.
    #[arg(long, value_name = "MODE")]
    recv: Option<RecvMode>,
    /// Parallel TCP flows (the talk uses 16).
    #[arg(long, value_parser = parse_positive)]
    flows: Option<usize>,
    /// Application message size per send (the talk uses 512 KiB).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    msg_size: Option<usize>,
    /// How long to send.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Send exactly SIZE bytes per flow instead of running for --duration.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    bytes: Option<usize>,
    /// CPUs for the flow threads, round robin: a list (0-3,8), auto (every allowed CPU)
    /// or none (the default: not pinned).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
    /// Socket buffer to request on both SO_SNDBUF and SO_RCVBUF (the granted size is reported).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    window: Option<usize>,
    /// SO_SNDBUF request (sender).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    sndbuf: Option<usize>,
    /// SO_RCVBUF request.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    rcvbuf: Option<usize>,
    /// TCP_MAXSEG for the sender's flows.
    #[arg(long, value_parser = parse_positive)]
    mss: Option<usize>,
    /// TCP_CONGESTION for the sender's flows (e.g. cubic, bbr, reno).
    #[arg(long, value_name = "NAME")]
    congestion: Option<String>,
    /// Buffers per flow that the sender cycles through (zero-copy sends in flight).
    #[arg(long, value_parser = parse_positive)]
    buffers: Option<usize>,
    /// Rewrite each send buffer with the next message as soon as the kernel releases it,
    /// so an early release shows up at the receiver's pattern check.
    #[arg(long)]
    rewrite_buffers: bool,
    /// Receiver: do not check the bytes against the pattern.
    #[arg(long)]
    no_check: bool,
    /// Receiver: exit after one sender run.
    #[arg(long)]
    once: bool,
    /// Interval between progress lines.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    interval: Option<Duration>,
    /// Sender: do not attribute retransmits (as root, a drop watch on skb:kfree_skb runs
    /// with the sender and the summary says where the kernel dropped segments).
    #[arg(long)]
    no_drops: bool,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
}

fn usage(m: impl Into<String>) -> anyhow::Error {
    Usage(m.into()).into()
}

fn int_size(flag: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| usage(format!("{flag} {v} is too large (at most 2 GiB)")))
}

/// Exit 2 for the user's or the kernel's "no" before traffic; 1 for failures mid-run.
fn stream_err(e: StreamError) -> anyhow::Error {
    if e.is_usage() {
        return usage(e.to_string());
    }
    match e {
        StreamError::Setup { .. } => anyhow::anyhow!("{e} (0 bytes transferred)"),
        other => other.into(),
    }
}

/// Runs `firehose stream`.
pub fn run(a: StreamArgs) -> Result<()> {
    let cpus = match &a.cpus {
        None | Some(Cpus::None) => Vec::new(),
        Some(Cpus::Auto) => firehose_sys::cpu::allowed_cpus().context("sched_getaffinity")?,
        Some(Cpus::List(l)) => l.to_vec(),
    };
    match (a.listen, a.target) {
        (Some(l), None) => receive(&a, l, cpus),
        (None, Some(t)) => send(&a, t, cpus),
        _ => Err(usage(
            "give exactly one of --listen ADDR:PORT or --target ADDR:PORT",
        )),
    }
}

fn reject(present: bool, flag: &str, side: &str) -> Result<()> {
    if present {
        return Err(usage(format!("{flag} applies only to {side}")));
    }
    Ok(())
}

fn send(a: &StreamArgs, target: SocketAddr, cpus: Vec<usize>) -> Result<()> {
    let side = "the receiver (--listen)";
    reject(a.recv.is_some(), "--recv", side)?;
    reject(a.no_check, "--no-check", side)?;
    reject(a.once, "--once", side)?;
    if a.bytes.is_some() && a.duration.is_some() {
        return Err(usage("give --duration or --bytes, not both"));
    }
    let mut cfg = SenderConfig::new(target, a.send.unwrap_or(SendMode::Copy));
    if let Some(f) = a.flows {
        cfg.flows = u32::try_from(f).map_err(|_| usage("--flows is too large"))?;
    }
    if let Some(m) = a.msg_size {
        cfg.msg_size = m;
    }
    if let Some(d) = a.duration {
        cfg.duration = d;
    }
    cfg.bytes_per_flow = a.bytes.map(|b| b as u64);
    cfg.cpus = cpus;
    cfg.sndbuf = a
        .sndbuf
        .or(a.window)
        .map(|v| int_size("--sndbuf", v))
        .transpose()?;
    cfg.rcvbuf = a
        .rcvbuf
        .or(a.window)
        .map(|v| int_size("--rcvbuf", v))
        .transpose()?;
    cfg.mss = a.mss.map(|v| int_size("--mss", v)).transpose()?;
    cfg.congestion = a.congestion.clone();
    if let Some(b) = a.buffers {
        cfg.buffers = b;
    }
    cfg.rewrite = a.rewrite_buffers;
    if let Some(i) = a.interval {
        cfg.interval = i;
    }
    let mut json = a.json.open()?;
    let stop = crate::supervise::stop_on_signals()?;
    let loss_watch = crate::drops::watch_loss(a.no_drops, "stream");
    let report = sender::run(&cfg, &stop, &mut print_interval).map_err(stream_err)?;
    let attribution = crate::drops::attribute(loss_watch, &[target.port()], &[], "stream");
    print_report(&report);
    if let Some(at) = &attribution {
        crate::drops::print_attribution(
            &format!("retransmits {}", retransmits(&report.sender)),
            at,
        );
    }
    if stop.load(Ordering::Relaxed) {
        say!("(stopped early by a signal)");
    }
    json.write(&SenderRun {
        report,
        loss_attribution: attribution,
        environment: Environment::capture(),
    })
}

fn receive(a: &StreamArgs, listen: SocketAddr, cpus: Vec<usize>) -> Result<()> {
    let side = "the sender (--target)";
    reject(a.send.is_some(), "--send", side)?;
    reject(a.flows.is_some(), "--flows", side)?;
    reject(
        a.msg_size.is_some(),
        "--msg-size (the receiver learns it from the header)",
        side,
    )?;
    reject(a.duration.is_some(), "--duration", side)?;
    reject(a.bytes.is_some(), "--bytes", side)?;
    reject(a.sndbuf.is_some(), "--sndbuf", side)?;
    reject(a.mss.is_some(), "--mss", side)?;
    reject(a.congestion.is_some(), "--congestion", side)?;
    reject(a.buffers.is_some(), "--buffers", side)?;
    reject(a.rewrite_buffers, "--rewrite-buffers", side)?;
    reject(a.no_drops, "--no-drops", side)?;
    let mut cfg = ReceiverConfig::new(listen, a.recv.unwrap_or(RecvMode::Copy));
    cfg.cpus = cpus;
    cfg.rcvbuf = a
        .rcvbuf
        .or(a.window)
        .map(|v| int_size("--rcvbuf", v))
        .transpose()?;
    cfg.check = !a.no_check;
    if let Some(i) = a.interval {
        cfg.interval = i;
    }
    let mut json = a.json.open()?;
    let rx = Receiver::bind(cfg).map_err(stream_err)?;
    let stop = crate::supervise::stop_on_signals()?;
    say!(
        "listening on {} (--recv {}), Ctrl-C to stop",
        rx.local_addr().map_err(stream_err)?,
        a.recv.unwrap_or(RecvMode::Copy)
    );
    let mut runs = Vec::new();
    loop {
        let r = rx
            .serve_one(&stop, &mut print_interval)
            .map_err(stream_err)?;
        let Some(r) = r else { break };
        print_side(&r, r.gbps);
        runs.push(r);
        if a.once || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    json.write(&ReceiverRun {
        runs,
        environment: Environment::capture(),
    })
}

fn print_interval(i: &Interval) {
    let (lo, hi) = i
        .per_flow_gbps
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &g| (lo.min(g), hi.max(g)));
    say!(
        "{:7.2}s  {:8.2} Gbit/s   per flow {:.2}..{:.2}",
        i.t,
        i.total_gbps,
        lo,
        hi
    );
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| format!("{v:.1}"))
}

fn print_side(s: &SideReport, gbps: f64) {
    let c = &s.cpu;
    let host = c.host.as_ref().map_or_else(
        || "host n/a".to_string(),
        |h| {
            let on = if h.cpus.is_empty() {
                "all CPUs".to_string()
            } else {
                format!("CPUs {:?}", h.cpus)
            };
            format!(
                "host ({on}) {:.2} cores: usr {:.2} sys {:.2} softirq {:.2} irq {:.2}",
                h.busy, h.usr, h.sys, h.softirq, h.irq
            )
        },
    );
    say!(
        "{:8} --{} {}: {:.2} Gbit/s, {:.3} GB in {:.2} s{}",
        s.role,
        if s.role == "sender" { "send" } else { "recv" },
        s.mode,
        s.gbps,
        s.bytes as f64 / 1e9,
        s.seconds,
        if s.checked && s.role == "receiver" {
            ", every byte matched the pattern"
        } else {
            ""
        }
    );
    say!(
        "         CPU: process {:.2} cores (usr {:.2}s sys {:.2}s), {:.2} CPU-s/GB; {host}",
        c.process.cores,
        c.process.user_s,
        c.process.sys_s,
        c.process_cpu_s_per_gb
    );
    let retrans = retransmits(s);
    if let Some(f) = s.flows.first() {
        let rtt = f.tcp_info.as_ref().and_then(|t| t.rtt_us);
        say!(
            "         TCP: sndbuf {} rcvbuf {} granted, MSS {}, retransmits {retrans}, flow 0 rtt {} us",
            f.sndbuf,
            f.rcvbuf,
            f.mss,
            rtt.map_or("n/a".into(), |r| r.to_string())
        );
    }
    let zc = s.flows.iter().filter_map(|f| f.zerocopy.as_ref());
    let (mut sends, mut notifs, mut done, mut copied, mut enobufs) = (0, 0, 0, 0, 0);
    for z in zc {
        sends += z.sends;
        notifs += z.notifications;
        done += z.completed;
        copied += z.copied;
        enobufs += z.enobufs;
    }
    if sends > 0 {
        say!("         zero-copy: {sends} sends, {notifs} notifications, {done} completed, {copied} copied by the kernel anyway, {enobufs} ENOBUFS waits");
    }
    let mm = s.flows.iter().filter_map(|f| f.mmap.as_ref());
    let (mut mapped, mut mcopied, mut falls) = (0, 0, 0);
    for m in mm {
        mapped += m.mapped_bytes;
        mcopied += m.copied_bytes;
        falls += m.fallbacks;
    }
    if s.flows.iter().any(|f| f.mmap.is_some()) {
        say!("         mmap receive: {mapped} bytes mapped, {mcopied} bytes copied in {falls} fallbacks");
    }
    if let Some(u) = s.flows.iter().find_map(|f| f.uring_recv.as_ref()) {
        say!(
            "         io_uring receive: multishot {}, flow 0: {} completions, armed {} times",
            u.multishot,
            u.cqes,
            u.arms
        );
    }
    for n in &s.notes {
        say!("         note: {n}");
    }
    let roi = |cores: f64| firehose_stream::cpu::roi(gbps, cores);
    say!(
        "         ROI (Gbit/s)^2/CPU: process {}",
        opt(roi(c.process.cores))
    );
}

fn print_report(r: &StreamReport) {
    say!(
        "{} flows x {} B messages to {}, congestion {}",
        r.flows,
        r.msg_size,
        r.target,
        r.congestion
    );
    print_side(&r.sender, r.roi.gbps);
    match &r.receiver {
        Some(rx) => print_side(rx, r.roi.gbps),
        None => say!(
            "receiver: no report ({})",
            r.receiver_missing.as_deref().unwrap_or("unknown")
        ),
    }
    let roi = &r.roi;
    say!(
        "ROI = (Gbit/s)^2 / CPU cores at {:.2} Gbit/s: host {}, sender {}, receiver {}, both processes {}",
        roi.gbps,
        opt(roi.host),
        opt(roi.sender),
        opt(roi.receiver),
        opt(roi.processes)
    );
    match roi.power {
        Some(p) => say!("ROI-power = (Gbit/s)^2 / W: {p:.2} ({})", roi.power_source),
        None => say!("ROI-power: {}", roi.power_source),
    }
}

/// The segments TCP retransmitted over a side's flows (TCP_INFO's total_retrans).
fn retransmits(s: &SideReport) -> u64 {
    s.flows
        .iter()
        .filter_map(|f| f.tcp_info.as_ref()?.total_retrans)
        .map(u64::from)
        .sum()
}
