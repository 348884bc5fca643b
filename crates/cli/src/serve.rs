//! `firehose serve`: the engine with a protocol handler, every technique a switch.

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_positive, thousands, Cpus, Usage,
};
use crate::serve_xdp::{IoArg, XdpArgs, PROFILE_XDP};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use firehose_engine::stats::syscalls_per_packet;
use firehose_engine::{
    IntervalRecord, Pin, PmtuDisc, ProcessCpu, Profile, ServeConfig, ServeError, Server,
    SocketMode, StatsDocument, Steer, WorkerStats, XdpIo,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// Send every datagram back to its sender, byte for byte.
    Echo,
    /// Answer DNS queries authoritatively from the --zone files.
    Dns,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SocketsArg {
    Shared,
    Reuseport,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SteerArg {
    None,
    Cpu,
    CpuEbpf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PmtuArg {
    Default,
    Dont,
    Do,
    Omit,
}

/// Arguments of `firehose serve`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
#[command(after_help = "Profiles (explicit flags override them):\n  \
  naive      one shared socket, N threads, recvfrom/sendto (the talk's baseline)\n  \
  reuseport  one SO_REUSEPORT socket per worker\n  \
  steered    reuseport + CPU steering (CBPF) + workers pinned 1:1\n  \
  tuned      steered + recvmmsg/sendmmsg batches of 64 + IP_PMTUDISC_DO, no SO_RXQ_OVFL\n  \
  latency    steered + busy polling (50 us) + batches of 8 + IP_PMTUDISC_DO\n\n\
Steering: the program returns cpu % workers, and socket j is read by the worker pinned\n\
to a CPU c with c % workers == j, so a packet is read on the CPU that received it.")]
pub struct ServeArgs {
    /// Protocol to serve.
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Zone file (RFC 1035 master file) for --proto dns; repeat for more zones.
    #[arg(long = "zone", value_name = "FILE")]
    zones: Vec<std::path::PathBuf>,
    /// Address and port to listen on (IPv4 or [IPv6]); port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: String,
    /// Preset for a step of the NTT ladder, or `xdp` (the default with --io xdp): tuned
    /// settings for the fallback socket, workers pinned, batches of 64.
    #[arg(long, value_parser = parse_profile)]
    profile: Option<ProfileArg>,
    /// Worker threads [default: 1].
    #[arg(long, value_parser = parse_positive)]
    workers: Option<usize>,
    /// One socket for all workers, or one SO_REUSEPORT socket each.
    #[arg(long, value_enum)]
    sockets: Option<SocketsArg>,
    /// Pick the reuseport socket by receiving CPU (classic BPF or eBPF program).
    #[arg(long, value_enum)]
    steer: Option<SteerArg>,
    /// Pin workers: none, auto (1:1 over allowed CPUs) or a CPU list like 0-3,6.
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    pin: Option<Cpus>,
    /// Datagrams per recvmmsg/sendmmsg; 1 uses recvfrom/sendto.
    #[arg(long, value_parser = parse_positive)]
    batch: Option<usize>,
    /// SO_BUSY_POLL microseconds; workers then poll instead of sleeping (0 turns it off).
    #[arg(long)]
    busy_poll: Option<u32>,
    /// IP_MTU_DISCOVER: kernel default (want), dont (no DF), do (always DF: the kernel
    /// skips per-packet IP ID work, the talk's step), omit (no DF, IP ID computed).
    #[arg(long, value_enum)]
    pmtudisc: Option<PmtuArg>,
    /// SO_RXQ_OVFL: the socket's drop count on every datagram (a control message per
    /// packet); drops are read with SO_MEMINFO either way.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    rxq_ovfl: Option<bool>,
    /// Receive buffer per socket (SO_RCVBUFFORCE as root, else SO_RCVBUF), e.g. 4M.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    rcvbuf: Option<usize>,
    /// Send buffer per socket, e.g. 4M.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    sndbuf: Option<usize>,
    /// Print a counter line every interval (e.g. 1, 500ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Write counters as JSON to this file at exit (and a line per interval with --interval).
    #[arg(long)]
    stats_json: Option<std::path::PathBuf>,
    /// Stop by itself after this long (otherwise run until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    xdp: XdpArgs,
}

/// A socket-path profile, or `xdp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProfileArg {
    Socket(Profile),
    Xdp,
}

fn parse_profile(s: &str) -> Result<ProfileArg, String> {
    if s == PROFILE_XDP {
        return Ok(ProfileArg::Xdp);
    }
    s.parse::<Profile>()
        .map(ProfileArg::Socket)
        .map_err(|e| e.replace(")", ", xdp)"))
}

impl ServeArgs {
    /// Merges the profile preset with explicit flags.
    fn config(&self) -> Result<ServeConfig> {
        let listen: SocketAddr = self.listen.parse().map_err(|_| {
            Usage(format!(
                "--listen '{}' is not an address:port (examples: 127.0.0.1:9000, [::1]:9000)",
                self.listen
            ))
        })?;
        let workers = self.workers.unwrap_or(1);
        self.xdp.refuse_socket_only(self.rxq_ovfl, self.workers)?;
        let base = match self.profile {
            // --io xdp without a profile takes the xdp profile's socket settings.
            None if self.xdp.io == IoArg::Xdp => Profile::Tuned,
            None => Profile::Naive,
            Some(ProfileArg::Socket(p)) => p,
            // The fallback socket gets the tuned settings; workers pinned, batches of 64.
            Some(ProfileArg::Xdp) => Profile::Tuned,
        };
        let mut cfg = ServeConfig::profile(base, listen, workers);
        if self.xdp.io == IoArg::Xdp && self.profile != Some(ProfileArg::Socket(base)) {
            // The fallback socket answers what XDP cannot, large replies included: let
            // the kernel fragment them rather than refuse with EMSGSIZE.
            cfg.pmtudisc = PmtuDisc::Default;
        }
        if let Some(s) = self.sockets {
            cfg.sockets = match s {
                SocketsArg::Shared => SocketMode::Shared,
                SocketsArg::Reuseport => SocketMode::Reuseport,
            };
        }
        if let Some(s) = self.steer {
            cfg.steer = match s {
                SteerArg::None => Steer::None,
                SteerArg::Cpu => Steer::Cpu,
                SteerArg::CpuEbpf => Steer::CpuEbpf,
            };
        }
        if let Some(p) = &self.pin {
            cfg.pin = match p {
                Cpus::None => Pin::None,
                Cpus::Auto => Pin::Auto,
                Cpus::List(l) => Pin::List(l.to_vec()),
            };
        }
        if let Some(b) = self.batch {
            cfg.batch = b;
        }
        if let Some(us) = self.busy_poll {
            cfg.busy_poll = (us > 0).then_some(us);
        }
        if let Some(p) = self.pmtudisc {
            cfg.pmtudisc = match p {
                PmtuArg::Default => PmtuDisc::Default,
                PmtuArg::Dont => PmtuDisc::Dont,
                PmtuArg::Do => PmtuDisc::Do,
                PmtuArg::Omit => PmtuDisc::Omit,
            };
        }
        if let Some(on) = self.rxq_ovfl {
            cfg.rxq_ovfl = on;
        }
        cfg.rcvbuf = self.rcvbuf.or(cfg.rcvbuf);
        cfg.sndbuf = self.sndbuf.or(cfg.sndbuf);
        Ok(cfg)
    }
}

pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}

fn start_server(
    cfg: &ServeConfig,
    proto: Proto,
    zones: &[std::path::PathBuf],
    xdp: Option<XdpIo>,
) -> Result<Server> {
    let res = match proto {
        Proto::Echo if !zones.is_empty() => {
            return Err(Usage("--zone applies only to --proto dns".into()).into())
        }
        Proto::Echo => match xdp {
            Some(io) => Server::start_with(cfg, io, |_| firehose_proto::Echo),
            None => Server::start(cfg, |_| firehose_proto::Echo),
        },
        Proto::Dns => {
            if zones.is_empty() {
                return Err(Usage("--proto dns needs at least one --zone FILE".into()).into());
            }
            let db = firehose_proto::dns::load_zones(zones).map_err(|e| Usage(e.to_string()))?;
            let h = firehose_proto::DnsHandler::new(db, firehose_proto::dns::DEFAULT_MAX_UDP);
            match xdp {
                Some(io) => Server::start_with(cfg, io, move |_| h.clone()),
                None => Server::start(cfg, move |_| h.clone()),
            }
        }
    };
    res.map_err(serve_error)
}

/// A start-up refusal as one line of bad usage (exit 2), with a hint for common errnos.
fn serve_error(e: ServeError) -> anyhow::Error {
    match e {
        ServeError::Config(m) => Usage(m).into(),
        ServeError::Kernel(k) => {
            let hint = match k.errno().map(firehose_sys::errno_name) {
                Some("EADDRINUSE") => {
                    " — another process holds this port; pick another --listen port"
                }
                Some("EACCES") | Some("EPERM") => {
                    " — this needs more privilege (run as root or lower the value)"
                }
                _ => "",
            };
            Usage(format!("the kernel refused {k}{hint}")).into()
        }
    }
}

fn proto_name(p: Proto) -> &'static str {
    match p {
        Proto::Echo => "echo",
        Proto::Dns => "dns",
    }
}

/// Runs `firehose serve`.
pub fn run(a: ServeArgs) -> Result<()> {
    let mut cfg = a.config()?;
    let xdp_cfg = a.xdp.config(&cfg, a.profile == Some(ProfileArg::Xdp))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let xdp = match xdp_cfg {
        Some(x) => {
            let io = XdpIo::new(x, cfg.listen).map_err(serve_error)?;
            cfg.workers = io.queues().len();
            Some(io)
        }
        None => None,
    };
    let server = start_server(&cfg, a.proto, &a.zones, xdp)?;
    print_applied(&server, a.proto);
    if let Some(addr) = a.metrics {
        let source = server.metrics_source(proto_name(a.proto));
        let version = env!("CARGO_PKG_VERSION");
        let bound = crate::metrics::spawn(addr, move || source.render(version))
            .map_err(|e| Usage(format!("{e:#}")))?;
        say!("  metrics: http://{bound}/metrics");
    }
    let started = Instant::now();
    let mut json_lines = match (&a.stats_json, a.interval) {
        (Some(p), Some(_)) => Some(interval_file(p)?),
        _ => None,
    };
    let mut last = WorkerStats::total(&server.worker_stats());
    let mut last_t = started;
    let mut next_tick = a.interval.map(|i| started + i);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) || a.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let (Some(t), Some(iv)) = (next_tick, a.interval) {
            if Instant::now() >= t {
                let now = Instant::now();
                let total = WorkerStats::total(&server.worker_stats());
                let d = total.delta(&last);
                let secs = now.duration_since(last_t).as_secs_f64();
                let drops: u64 = server.socket_stats().iter().map(|s| s.kernel_drops).sum();
                say!(
                    "[{:7.1}s] rx {:>11} pps  tx {:>11} pps  syscalls/pkt {:.3}  kernel drops {}",
                    started.elapsed().as_secs_f64(),
                    thousands(d.packets_in as f64 / secs),
                    thousands(d.packets_out as f64 / secs),
                    if d.packets_in > 0 {
                        d.syscalls as f64 / d.packets_in as f64
                    } else {
                        0.0
                    },
                    drops
                );
                if let Some(f) = json_lines.as_mut() {
                    let rec = IntervalRecord {
                        t: started.elapsed().as_secs_f64(),
                        rx_pps: d.packets_in as f64 / secs,
                        tx_pps: d.packets_out as f64 / secs,
                        totals: total.clone(),
                        kernel_drops: drops,
                    };
                    use std::io::Write;
                    writeln!(f, "{}", serde_json::to_string(&rec)?)?;
                }
                last = total;
                last_t = now;
                next_tick = Some(t + iv);
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let workers = server.worker_stats();
    let sockets = server.socket_stats();
    let applied = server.applied().clone();
    let handler = server
        .shutdown()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let totals = WorkerStats::total(&workers);
    print_counters(&workers, &sockets, &totals, elapsed);
    if let Some(p) = &a.stats_json {
        let (u, s) = firehose_sys::cpu::process_rusage()?;
        let doc = StatsDocument {
            proto: proto_name(a.proto).to_string(),
            applied,
            elapsed_s: elapsed,
            syscalls_per_packet: syscalls_per_packet(&totals),
            totals,
            workers,
            sockets,
            handler,
            cpu: ProcessCpu {
                user_s: u.as_secs_f64(),
                sys_s: s.as_secs_f64(),
            },
        };
        let text = serde_json::to_string_pretty(&doc)?;
        if json_lines.is_some() {
            // Interval records came first, one per line; the final document is the last line.
            use std::io::Write;
            let mut f = interval_file(p)?;
            writeln!(f, "{}", serde_json::to_string(&doc)?)?;
        } else {
            std::fs::write(p, text + "\n")
                .with_context(|| format!("writing --stats-json {}", p.display()))?;
        }
    }
    Ok(())
}

fn interval_file(p: &std::path::Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| Usage(format!("cannot open --stats-json {}: {e}", p.display())).into())
}

fn print_applied(server: &Server, proto: Proto) {
    let a = server.applied();
    say!("firehose serve: listening on {}", a.listen);
    say!(
        "  proto {}, {} worker(s), sockets {}, steer {}, batch {}{}, busy-poll {}",
        proto_name(proto),
        a.workers,
        match a.sockets {
            SocketMode::Shared => "shared",
            SocketMode::Reuseport => "reuseport",
        },
        a.socket_detail
            .first()
            .map_or("none", |s| s.steering.as_str()),
        a.batch,
        if a.backend.is_some() {
            " (AF_XDP rings; fallback socket by recvmmsg/sendmmsg)"
        } else if a.batch == 1 {
            " (recvfrom/sendto)"
        } else {
            " (recvmmsg/sendmmsg)"
        },
        if a.busy_poll {
            "on (workers poll)"
        } else {
            "off"
        }
    );
    for (i, c) in a.worker_cpus.iter().enumerate() {
        say!(
            "  worker {i}: {} -> socket {}",
            c.map(|c| format!("pinned to CPU {c}"))
                .unwrap_or_else(|| "unpinned".into()),
            a.worker_sockets[i]
        );
    }
    for s in &a.socket_detail {
        let mut line = format!(
            "  socket {}: SO_REUSEPORT={} SO_RCVBUF={} SO_SNDBUF={} IP_MTU_DISCOVER={} SO_BUSY_POLL={} SO_RXQ_OVFL={}",
            s.index, s.reuseport as u8, s.rcvbuf, s.sndbuf, s.mtu_discover, s.busy_poll_us, s.rxq_ovfl as u8
        );
        if let Some(p) = s.prefer_busy_poll {
            line.push_str(&format!(" SO_PREFER_BUSY_POLL={}", p as u8));
        }
        if let Some(b) = s.busy_poll_budget {
            line.push_str(&format!(" SO_BUSY_POLL_BUDGET={b}"));
        }
        say!("{line}");
    }
    if let Some(b) = &a.backend {
        say!("  {b}");
    }
    for n in a
        .notes
        .iter()
        .chain(a.backend.iter().flat_map(|b| &b.notes))
    {
        say!("  note: {n}");
    }
}

fn print_counters(
    workers: &[WorkerStats],
    sockets: &[firehose_engine::SocketStats],
    t: &WorkerStats,
    elapsed: f64,
) {
    say!("firehose serve: stopped after {elapsed:.1} s");
    say!(
        "  {:>6} {:>5} {:>13} {:>13} {:>10} {:>12} {:>8} {:>8} {:>8}",
        "worker",
        "cpu",
        "packets_in",
        "packets_out",
        "batches",
        "syscalls",
        "h_err",
        "h_drop",
        "send_err"
    );
    for w in workers.iter().chain(std::iter::once(t)) {
        let name = if std::ptr::eq(w, t) {
            "total".to_string()
        } else {
            w.worker.to_string()
        };
        say!(
            "  {:>6} {:>5} {:>13} {:>13} {:>10} {:>12} {:>8} {:>8} {:>8}",
            name,
            w.cpu.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            w.packets_in,
            w.packets_out,
            w.batches,
            w.syscalls,
            w.handler_errors,
            w.handler_drops,
            w.send_errors
        );
    }
    for s in sockets {
        say!(
            "  socket {}: kernel drops {} (SO_MEMINFO), last incoming CPU {}",
            s.index,
            s.kernel_drops,
            s.incoming_cpu
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    if t.rxq_ovfl > 0 {
        say!("  SO_RXQ_OVFL reported {} drops in-band", t.rxq_ovfl);
    }
    for (name, v) in &t.backend {
        say!("  {name}: {v}");
    }
}
