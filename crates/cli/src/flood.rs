//! `firehose flood`: send-only packet-rate generator (pktgen's job in user space).

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_positive, parse_rate, thousands, Cpus, Usage,
};
use anyhow::Result;
use clap::Args;
use firehose_flood::document::FloodReport;
use firehose_flood::{is_local_target, Flood, FloodConfig, FloodIo};
use firehose_host::document::PacketRates;
use firehose_host::env::Environment;
use firehose_sys::supervise::Ended;
use firehose_sys::xdp::xsk::XskConfig;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The send calls and rings, from the flood's own table of modes.
fn flood_modes() -> impl clap::builder::TypedValueParser<Value = &'static FloodIo> {
    crate::args::table_parser(FloodIo::ALL, |m| m.name(), |m| m.help())
}

/// RFC 2544's frame sizes (bytes on the wire, Ethernet header and FCS included).
const RFC2544_FRAMES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Arguments of `firehose flood`.
#[derive(Debug, Args)]
#[command(
    after_help = "Sends UDP datagrams to --target until --count have left, --duration \
passes, or Ctrl-C.\nA refused send (ENOBUFS: queue full) is counted and retried, never fatal.\n\
Only local targets (loopback, an address of this host or of one of its network namespaces)\n\
unless --allow-remote.\n\n\
EXAMPLES:\n  \
  firehose flood --target 127.0.0.1:9000 --io sendmmsg -t 5\n  \
  firehose flood --target 127.0.0.1:9000 --rate 100k --size 64\n  \
  firehose flood --target 127.0.0.1:9000 --io uring --count 1000000\n  \
  firehose flood --target 10.0.0.2:9000 --io xdp --frame 64 --flows 16 --threads 2"
)]
pub struct FloodArgs {
    /// Where to send, e.g. 127.0.0.1:9000 or [::1]:9000.
    #[arg(long, value_name = "ADDR:PORT")]
    target: SocketAddr,
    /// Send call.
    #[arg(long, default_value = "sendmmsg", value_parser = flood_modes())]
    io: &'static FloodIo,
    /// UDP payload bytes [default: 18, a 64-byte IPv4 frame].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, conflicts_with = "frame")]
    size: Option<usize>,
    /// RFC 2544 frame size on the wire: 64, 128, 256, 512, 1024, 1280 or 1518.
    #[arg(long, value_name = "BYTES", value_parser = parse_positive)]
    frame: Option<usize>,
    /// Distinct source ports (one socket each).
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    flows: usize,
    /// Sending threads (flows are shared out among them).
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    threads: usize,
    /// Pin thread i to the i-th CPU of this list, or auto, or none [default: none].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
    /// Datagrams per second across all threads (e.g. 100k); flat out without.
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,
    /// Send exactly this many datagrams.
    #[arg(long, value_parser = parse_positive)]
    count: Option<usize>,
    /// Stop after this long, e.g. 10, 2.5s.
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Datagrams per send call (sendmmsg, gso, uring).
    #[arg(long, default_value = "64", value_parser = parse_positive)]
    batch: usize,
    /// Allow a target that is not an address of this host.
    #[arg(long)]
    allow_remote: bool,
    #[command(flatten)]
    uring: crate::uring_args::UringArgs,
    #[command(flatten)]
    xsk: crate::xdp_args::XskArgs,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Print only the summary.
    #[arg(long)]
    quiet: bool,
}

/// UDP payload for an RFC 2544 frame: minus Ethernet header and FCS (18), IP, UDP (8).
fn payload_for_frame(frame: usize, v6: bool) -> Result<usize, Usage> {
    if !RFC2544_FRAMES.contains(&frame) {
        return Err(Usage(format!(
            "--frame {frame}: RFC 2544 sizes are 64, 128, 256, 512, 1024, 1280, 1518"
        )));
    }
    let overhead = 18 + if v6 { 40 } else { 20 } + 8;
    frame.checked_sub(overhead).ok_or_else(|| {
        Usage(format!(
            "--frame {frame} is too small for UDP over IPv6 ({overhead} bytes of headers); use 128 or more"
        ))
    })
}

/// Runs `firehose flood`.
pub fn run(a: FloodArgs) -> Result<()> {
    let mut json = a.json.open()?;
    let v6 = a.target.is_ipv6();
    let ip_hdr = if v6 { 40 } else { 20 };
    let payload = match (a.size, a.frame) {
        (Some(s), _) => s,
        (None, Some(f)) => payload_for_frame(f, v6)?,
        (None, None) => payload_for_frame(if v6 { 128 } else { 64 }, v6)?,
    };
    if payload > 65507 {
        return Err(Usage(format!(
            "--size {payload}: a UDP datagram holds at most 65507 bytes"
        ))
        .into());
    }
    if !a.allow_remote && !is_local_target(a.target.ip())? {
        return Err(Usage(format!(
            "--target {}: not an address of this host or of a namespace this one reaches straight over a veth; a flood goes only where you own the receiver (add --allow-remote if you do)",
            a.target.ip()
        ))
        .into());
    }
    let cpus = match &a.cpus {
        None | Some(Cpus::None) => None,
        Some(Cpus::List(l)) => Some(l.to_vec()),
        Some(Cpus::Auto) => Some(firehose_sys::cpu::allowed_cpus()?),
    };
    let xsk = if *a.io == FloodIo::Xdp {
        a.xsk.config()?
    } else {
        if let Some(flag) = a.xsk.any_given() {
            return Err(Usage(format!("{flag} applies only to --io xdp")).into());
        }
        XskConfig::default()
    };
    let cfg = FloodConfig {
        target: a.target,
        io: *a.io,
        payload,
        flows: a.flows,
        threads: a.threads,
        cpus,
        rate: a.rate,
        count: a.count.map(|c| c as u64),
        batch: a.batch,
        uring: a.uring.setup(*a.io == FloodIo::Uring)?,
        xsk,
    };
    let stop = crate::supervise::stop_on_signals()?;
    let cpu0 = firehose_sys::cpu::process_cpu_time()?;
    let flood =
        Flood::start(&cfg).map_err(|e| crate::refusal::setup_error(e, Some(cfg.io.name())))?;
    let start = Instant::now();
    let frame = payload + 8 + ip_hdr + 18;
    if !a.quiet {
        say!(
            "firehose flood: {} --io {}, {}-byte payload ({}-byte frame), {} flow(s), {} thread(s){}",
            a.target,
            cfg.io.name(),
            payload,
            frame,
            a.flows,
            a.threads,
            match a.rate {
                Some(r) => format!(", {} pps", thousands(r)),
                None => ", flat out".into(),
            }
        );
        if let Some(x) = &flood.xdp {
            let kv: Vec<String> = x.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            say!("  af_xdp {}", kv.join(" "));
            for n in &x.notes {
                say!("  note: {n}");
            }
        }
    }
    let mut last = (start, 0u64);
    let mut sv = crate::supervise::supervisor(
        &stop,
        a.duration,
        (!a.quiet).then_some(Duration::from_secs(1)),
    );
    sv.poll = Duration::from_millis(5);
    let flood = std::cell::RefCell::new(flood);
    let ended = sv.run(
        start,
        |_| Ok::<_, anyhow::Error>(flood.borrow_mut().health()),
        |now| {
            let s = flood.borrow().snapshot();
            let dt = now.duration_since(last.0).as_secs_f64();
            say!(
                "  {:>6.1}s  {:>12} pps  ENOBUFS {}  other errors {}",
                now.duration_since(start).as_secs_f64(),
                thousands((s.sent - last.1) as f64 / dt),
                s.enobufs,
                s.other_errors
            );
            last = (now, s.sent);
            Ok(())
        },
    )?;
    let flood = flood.into_inner();
    if let Ended::Failed(f) = ended {
        let _ = flood.stop();
        return Err(crate::supervise::failed("the flood", f));
    }
    let seconds = start.elapsed().as_secs_f64();
    let ports = flood.source_ports.clone();
    let xdp = flood.xdp.as_ref().map(|x| x.settings.clone());
    let s = flood
        .stop()
        .map_err(|f| crate::supervise::failed("the flood", f))?;
    let cpu = firehose_sys::cpu::process_cpu_time()?.saturating_sub(cpu0);
    let r = FloodReport {
        mode: cfg.io.name().into(),
        target: a.target.to_string(),
        payload,
        frame,
        flows: a.flows,
        threads: a.threads,
        source_ports: ports,
        sent: s.sent,
        rates: PacketRates::new(
            s.sent,
            s.sent * frame as u64,
            seconds,
            cpu.as_secs_f64(),
            s.syscalls,
        ),
        enobufs: s.enobufs,
        other_errors: s.other_errors,
        last_errno: s
            .last_errno
            .map(|e| firehose_sys::errno_name(e).to_string()),
        xdp_tx_ring_full: s.xdp_tx_ring_full,
        xdp_uncompleted: s.xdp_uncompleted,
        xdp,
        per_thread: s.per_thread.clone(),
        environment: Environment::capture(),
    };
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "n/a".into());
    say!(
        "flood {}: {} datagrams in {:.3} s: {} pps, {:.1} Mbit/s of frames",
        r.mode,
        r.sent,
        r.rates.seconds,
        thousands(r.rates.pps),
        r.rates.mbit_s
    );
    say!(
        "  cpu {} us/packet, {} syscalls/packet, ENOBUFS {}, other errors {}{}",
        opt(r.rates.cpu_us_per_packet),
        opt(r.rates.syscalls_per_packet),
        r.enobufs,
        r.other_errors,
        r.last_errno
            .as_ref()
            .map(|e| format!(" (last {e})"))
            .unwrap_or_default()
    );
    if r.xdp.is_some() {
        say!(
            "  xdp: tx ring full {} (retried), frames never completed {}",
            r.xdp_tx_ring_full,
            r.xdp_uncompleted
        );
    }
    json.write(&r)?;
    Ok(())
}
