//! `firehose sink`: receive-only packet-rate benchmark (udp_sink's job, plus AF_PACKET).

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_positive, thousands, Cpus, Usage,
};
use crate::xdp_args::XdpRxArgs;
use anyhow::Result;
use clap::Args;
use firehose_engine::SocketMode;
use firehose_host::document::PacketRates;
use firehose_host::env::Environment;
use firehose_sink::document::{Round, SinkReport};
use firehose_sink::drops::HostDrops;
use firehose_sink::{Sink, SinkConfig, SinkIo, Snapshot};
use firehose_sys::af_packet::{Fanout, RxRingConfig};
use firehose_sys::supervise::{Ended, Health};
use firehose_sys::xdp::setup::XdpOptions;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The receive calls and rings, from the sink's own table of modes.
fn sink_modes() -> impl clap::builder::TypedValueParser<Value = &'static SinkIo> {
    crate::args::table_parser(SinkIo::ALL, |m| m.name(), |m| m.help())
}

/// Arguments of `firehose sink`.
#[derive(Debug, Args)]
#[command(
    after_help = "Counts datagrams to --listen until --count x --repetitions are in, --duration \
passes, or Ctrl-C.\nEach round (--count) is timed from its first datagram to its last and reported.\n\
Drops: the sockets' own (SO_MEMINFO), Udp RcvbufErrors/InErrors and softnet dropped/time_squeeze\n\
(host-wide deltas), in packet mode the rings' (PACKET_STATISTICS), in xdp mode the AF_XDP\n\
sockets' (XDP_STATISTICS).\n\n\
EXAMPLES:\n  \
  firehose sink --listen 127.0.0.1:9000 --io recvmmsg -t 5\n  \
  firehose sink --listen 127.0.0.1:9000 --count 1000000 --repetitions 3\n  \
  firehose sink --listen 127.0.0.1:9000 --io uring --single-issuer --defer-taskrun\n  \
  firehose sink --listen 10.0.0.2:9000 --io xdp --queues 0-1 --count 1000000"
)]
pub struct SinkArgs {
    /// Address and port to receive on, e.g. 127.0.0.1:9000 or [::1]:9000.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Receive call.
    #[arg(long, default_value = "recvmsg", value_parser = sink_modes())]
    io: &'static SinkIo,
    /// Stop a round after this many datagrams.
    #[arg(long, value_parser = parse_positive)]
    count: Option<usize>,
    /// Rounds of --count, each reported.
    #[arg(long, default_value = "1", value_parser = parse_positive, requires = "count")]
    repetitions: usize,
    /// Stop after this long (from start), e.g. 10, 2.5s.
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Receiving threads [default: 1; --io xdp: one per queue, queues 0..N-1 when given].
    #[arg(long, value_parser = parse_positive)]
    workers: Option<usize>,
    /// Pin worker i to the i-th CPU of this list, or auto, or none [default: none].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
    /// Datagrams per recvmmsg call.
    #[arg(long, default_value = "64", value_parser = parse_positive)]
    batch: usize,
    /// SO_BUSY_POLL microseconds on each socket.
    #[arg(long, value_name = "USEC", value_parser = parse_positive)]
    busy_poll: Option<usize>,
    /// Receive buffer per socket (SO_RCVBUFFORCE when permitted), e.g. 4M.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    rcvbuf: Option<usize>,
    /// Sockets: one SO_REUSEPORT socket per worker, or one shared by all.
    #[arg(long, default_value = "reuseport", value_parser = crate::args::choice(SocketMode::ALL, SocketMode::name))]
    sockets: SocketMode,
    /// Packet mode: how the fanout group spreads frames over workers.
    #[arg(long, default_value = "hash", value_parser = crate::args::choice(Fanout::ALL, Fanout::name))]
    fanout: Fanout,
    #[command(flatten)]
    uring: crate::uring_args::UringArgs,
    #[command(flatten)]
    xdp: XdpRxArgs,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Print only the summary.
    #[arg(long)]
    quiet: bool,
    /// Do not attribute drops (as root, a drop watch on skb:kfree_skb runs with the sink
    /// and the summary says where the kernel dropped datagrams to --listen).
    #[arg(long)]
    no_drops: bool,
}

fn config(a: &SinkArgs) -> Result<SinkConfig> {
    let cpus = match &a.cpus {
        None | Some(Cpus::None) => None,
        Some(Cpus::List(l)) => Some(l.to_vec()),
        Some(Cpus::Auto) => Some(firehose_sys::cpu::allowed_cpus()?),
    };
    let workers = match (*a.io, a.workers) {
        (SinkIo::Xdp, w) => w.unwrap_or(0),
        (_, w) => w.unwrap_or(1),
    };
    if let Some(c) = &cpus {
        if c.len() < workers {
            return Err(Usage(format!(
                "--cpus names {} CPU(s) for {} workers: give one CPU per worker or lower --workers",
                c.len(),
                workers
            ))
            .into());
        }
    }
    let xdp = if *a.io == SinkIo::Xdp {
        if a.rcvbuf.is_some() {
            return Err(
                Usage("--rcvbuf does not apply to --io xdp (no socket buffer)".into()).into(),
            );
        }
        let mut o = a.xdp.options(a.busy_poll, a.batch)?;
        a.xdp.workers_as_queues(&mut o, a.workers)?;
        o
    } else {
        if let Some(flag) = a.xdp.any_given().filter(|f| *f != "--iface") {
            return Err(Usage(format!("{flag} applies only to --io xdp")).into());
        }
        if *a.io != SinkIo::Packet && a.xdp.iface.is_some() {
            return Err(Usage("--iface applies only to --io packet and --io xdp".into()).into());
        }
        XdpOptions::default()
    };
    Ok(SinkConfig {
        listen: a.listen,
        io: *a.io,
        workers,
        cpus,
        batch: a.batch,
        busy_poll_us: a.busy_poll.map(|u| u.min(u32::MAX as usize) as u32),
        rcvbuf: a.rcvbuf,
        reuseport: a.sockets == SocketMode::Reuseport,
        interface: a.xdp.iface.clone(),
        fanout: a.fanout,
        ring: RxRingConfig::default(),
        uring: a.uring.setup(*a.io == SinkIo::Uring)?,
        xdp,
    })
}

/// Runs `firehose sink`.
pub fn run(a: SinkArgs) -> Result<()> {
    let cfg = config(&a)?;
    let mut json = a.json.open()?;
    let stop = crate::supervise::stop_on_signals()?;
    let loss_watch = crate::drops::watch_loss(a.no_drops, "sink");
    let host0 = HostDrops::read();
    let mut sink =
        Sink::start(&cfg).map_err(|e| crate::refusal::setup_error(e, Some(cfg.io.name())))?;
    let workers = sink.workers();
    let xdp = sink.xdp.as_ref().map(|s| s.granted.settings());
    if !a.quiet {
        say!(
            "firehose sink: {} --io {}, {} worker(s){}{}",
            sink.local_addr(),
            cfg.io.name(),
            workers,
            cfg.cpus
                .as_ref()
                .map(|c| format!(" on CPUs {:?}", &c[..workers]))
                .unwrap_or_default(),
            match (&sink.interface, workers > 1) {
                (Some(_), _) if xdp.is_some() => {
                    let kv: Vec<String> = xdp
                        .iter()
                        .flatten()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    format!(", af_xdp {}", kv.join(" "))
                }
                (Some(i), true) => format!(", ring on {i}, fanout {}", cfg.fanout.name()),
                (Some(i), false) => format!(", ring on {i}"),
                (None, _) => format!(
                    ", {} socket(s), rcvbuf {}",
                    if cfg.reuseport { workers } else { 1 },
                    sink.rcvbuf_granted.unwrap_or(0)
                ),
            }
        );
        for n in sink.xdp.iter().flat_map(|s| &s.granted.notes) {
            say!("  note: {n}");
        }
    }
    let start = Instant::now();
    let cpu0 = firehose_sys::cpu::process_cpu_time()?;
    let mut first: Option<(Instant, Duration)> = None;
    let mut rounds = Vec::new();
    let mut round_start: Option<(Instant, u64)> = None;
    let mut last_line = (Instant::now(), 0u64, 0u64);
    let mut last_packet = (Instant::now(), 0u64);
    // This thread may share the receiving CPU: it wakes every 10 ms (1 ms while timing
    // --count rounds) and reads only the packet counts; the drop counters (a getsockopt
    // per socket) once per interval line.
    let mut sv = crate::supervise::supervisor(&stop, a.duration, None);
    // How often the loop looks at the counters: a datagram is seen at most a tick late.
    let tick = Duration::from_millis(if a.count.is_some() { 1 } else { 10 });
    sv.poll = tick;
    let ended = sv.run(
        start,
        |now| {
            let total = sink.packets();
            if total != last_packet.1 {
                last_packet = (now, total);
            }
            if total > 0 && first.is_none() {
                first = Some((now, firehose_sys::cpu::process_cpu_time()?));
                last_line = (now, 0, 0);
            }
            if let Some(n) = a.count {
                let base = rounds.len() as u64 * n as u64;
                if round_start.is_none() && total > base {
                    round_start = Some((now, base));
                }
                if let Some((t0, b)) = round_start {
                    if total >= b + n as u64 {
                        let secs = now.duration_since(t0).as_secs_f64();
                        let r = Round {
                            packets: n as u64,
                            seconds: secs,
                            pps: n as f64 / secs.max(1e-9),
                        };
                        if !a.quiet {
                            say!(
                                "  round {}: {} datagrams in {:.3} s, {} pps",
                                rounds.len() + 1,
                                thousands(r.packets as f64),
                                r.seconds,
                                thousands(r.pps)
                            );
                        }
                        rounds.push(r);
                        round_start = None;
                        if rounds.len() >= a.repetitions {
                            return Ok(Health::Done);
                        }
                    }
                }
            }
            if !a.quiet
                && first.is_some()
                && now.duration_since(last_line.0) >= Duration::from_secs(1)
            {
                let snap = sink.snapshot();
                let bytes = snap.total(|w| w.bytes);
                let dt = now.duration_since(last_line.0).as_secs_f64();
                say!(
                    "  {:>6.1}s  {:>12} pps  {:>9.1} Mbit/s  socket drops {}  ring drops {}",
                    now.duration_since(first.map(|f| f.0).unwrap_or(start))
                        .as_secs_f64(),
                    thousands((total - last_line.1) as f64 / dt),
                    (bytes - last_line.2) as f64 * 8.0 / dt / 1e6,
                    snap.total(|w| w.socket_drops),
                    snap.total(|w| w.ring_drops),
                );
                last_line = (now, total, bytes);
            }
            Ok::<_, anyhow::Error>(sink.health())
        },
        |_| Ok(()),
    )?;
    if let Ended::Failed(f) = ended {
        let _ = sink.stop();
        return Err(crate::supervise::failed("the sink", f));
    }
    let end = if first.is_some() {
        last_packet.0
    } else {
        Instant::now()
    };
    let cpu1 = firehose_sys::cpu::process_cpu_time()?;
    let held = sink.held_port_drops();
    let interface = sink.interface.clone();
    let rcvbuf_granted = sink.rcvbuf_granted;
    let listen = sink.local_addr();
    let snap: Snapshot = sink
        .stop()
        .map_err(|f| crate::supervise::failed("the sink", f))?;
    let mut host = HostDrops::read().since(&host0);
    let loss_attribution = crate::drops::attribute(loss_watch, &[listen.port()], &[], "sink");
    host.udp_in_errors = host.udp_in_errors.saturating_sub(held);
    let packets = snap.total(|w| w.packets);
    let bytes = snap.total(|w| w.bytes);
    let (t0, c0) = first.unwrap_or((start, cpu0));
    // The first datagrams arrived within the tick before they were seen: the window starts a
    // tick earlier, so a burst read within one tick is timed as one tick (a rate no higher
    // than the truth), never as zero seconds (a rate of billions).
    let seconds = (end.duration_since(t0)
        + if first.is_some() {
            tick
        } else {
            Duration::ZERO
        })
    .as_secs_f64();
    let report = SinkReport {
        mode: cfg.io.name().into(),
        listen: listen.to_string(),
        workers,
        interface,
        fanout: (cfg.io == SinkIo::Packet && workers > 1).then(|| cfg.fanout.name().into()),
        rcvbuf_granted,
        packets,
        bytes,
        rates: PacketRates::new(
            packets,
            bytes,
            seconds,
            cpu1.saturating_sub(c0).as_secs_f64(),
            snap.total(|w| w.syscalls),
        ),
        socket_drops: snap.total(|w| w.socket_drops),
        ring_drops: snap.total(|w| w.ring_drops),
        ring_freezes: snap.total(|w| w.ring_freezes),
        xsk_rx_dropped: snap.total(|w| w.xsk_rx_dropped),
        xsk_rx_ring_full: snap.total(|w| w.xsk_rx_ring_full),
        xsk_fill_ring_empty: snap.total(|w| w.xsk_fill_ring_empty),
        xdp,
        host,
        held_port_filtered: held,
        rounds,
        per_worker: snap.workers.clone(),
        per_cpu: snap.per_cpu.clone(),
        loss_attribution,
        environment: Environment::capture(),
    };
    print_summary(&report);
    if let Some(at) = &report.loss_attribution {
        crate::drops::print_attribution(&format!("dropped {}", at.drops), at);
    }
    json.write(&report)?;
    Ok(())
}

fn print_summary(r: &SinkReport) {
    let opt = |v: Option<f64>, digits: usize| match v {
        Some(v) => format!("{v:.digits$}"),
        None => "n/a (no datagrams)".into(),
    };
    say!(
        "sink {}: {} datagrams, {} bytes in {:.3} s: {} pps, {:.1} Mbit/s",
        r.mode,
        r.packets,
        r.bytes,
        r.rates.seconds,
        thousands(r.rates.pps),
        r.rates.mbit_s
    );
    say!(
        "  cpu {} us/packet, {} syscalls/packet",
        opt(r.rates.cpu_us_per_packet, 3),
        opt(r.rates.syscalls_per_packet, 3)
    );
    say!(
        "  drops: socket {}, ring {} (freezes {}), Udp RcvbufErrors {}, InErrors {}, softnet dropped {}, time_squeeze {}",
        r.socket_drops,
        r.ring_drops,
        r.ring_freezes,
        r.host.udp_rcvbuf_errors,
        r.host.udp_in_errors,
        r.host.softnet_dropped,
        r.host.softnet_time_squeeze
    );
    if r.xdp.is_some() {
        say!(
            "  xdp drops: rx_dropped {}, rx_ring_full {}, rx_fill_ring_empty_descs {}; {} datagrams the program passed to the kernel stack (a queue without a socket, fragments)",
            r.xsk_rx_dropped,
            r.xsk_rx_ring_full,
            r.xsk_fill_ring_empty,
            r.held_port_filtered
        );
    }
    for w in &r.per_worker {
        say!(
            "  worker {}{}{}: {} datagrams, {} bytes, {} syscalls, socket drops {}, ring drops {}",
            w.worker,
            w.queue.map(|q| format!(" (queue {q})")).unwrap_or_default(),
            w.cpu.map(|c| format!(" (cpu {c})")).unwrap_or_default(),
            w.packets,
            w.bytes,
            w.syscalls,
            w.socket_drops,
            w.ring_drops
        );
    }
    let cpus: Vec<String> = r
        .per_cpu
        .iter()
        .map(|(c, n)| format!("cpu{c} {n}"))
        .collect();
    if !cpus.is_empty() {
        say!("  per CPU: {}", cpus.join(", "));
    }
}
