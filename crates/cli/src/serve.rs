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
use firehose_proto::dns::options::{OptionsConfig, MAX_NSID};
use firehose_proto::dns::{Outcome, Reloader, RrlConfig, TcpConfig, TcpServer, DEFAULT_MAX_UDP};
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
to a CPU c with c % workers == j, so a packet is read on the CPU that received it.\n\n\
EXAMPLES:\n  \
  firehose serve --listen '[::1]:9000' --workers 2\n  \
  firehose serve --profile naive --interval 1\n  \
  firehose serve --proto dns --zone examples/example.zone --listen 127.0.0.1:5300")]
pub struct ServeArgs {
    /// Protocol to serve.
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Zone file (RFC 1035 master file) for --proto dns; repeat for more zones.
    #[arg(long = "zone", value_name = "FILE")]
    zones: Vec<std::path::PathBuf>,
    /// Address and port to listen on (IPv4 or [IPv6]); port 0 picks a free one.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9000")]
    listen: String,
    /// Preset for a step of the NTT ladder [default: tuned], or `xdp` (the default with
    /// --io xdp): tuned settings for the fallback socket, workers pinned, batches of 64.
    /// One of: naive, reuseport, steered, tuned, latency, xdp.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
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
    /// CPUs of the workers, one each in order: none, auto (1:1 over allowed CPUs) or a CPU
    /// list like 0-3,6 (formerly --pin).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
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
    #[arg(short = 'i', long, value_name = "DURATION", value_parser = parse_duration)]
    interval: Option<Duration>,
    /// The counters as one JSON document at exit (`--json`: stdout, `--json-file FILE`;
    /// formerly --stats-json), with a record per --interval.
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Stop by itself after this long (otherwise run until SIGINT/SIGTERM).
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<SocketAddr>,
    #[command(flatten)]
    xdp: XdpArgs,
    #[command(flatten)]
    dns: DnsArgs,
}

/// Options of `--proto dns` beyond the zone files.
#[derive(Debug, Args)]
struct DnsArgs {
    /// DNS over TCP on the same address (RFC 7766): on or off.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "on", action = clap::ArgAction::Set)]
    tcp: bool,
    /// TCP threads, each an event loop over its share of the connections (at most 4 per
    /// allowed CPU, as --workers).
    #[arg(long, value_name = "N", value_parser = parse_positive, default_value = "1")]
    tcp_threads: usize,
    /// TCP connections open at once, all clients together.
    #[arg(long, value_parser = parse_positive, default_value = "128")]
    tcp_max_conns: usize,
    /// TCP connections open at once from one client address.
    #[arg(long, value_parser = parse_positive, default_value = "8")]
    tcp_max_per_client: usize,
    /// Close a TCP connection idle this long (advertised with edns-tcp-keepalive).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    tcp_idle: Duration,
    /// Largest zone file accepted, e.g. 512M (zone files must be regular files).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, default_value = "256M")]
    zone_max_size: usize,
    /// Response rate limiting: responses per second per client network (/24, /56),
    /// response kind and name; past it UDP responses are dropped or slipped (off by
    /// default; TCP is never limited).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    rrl: Option<usize>,
    /// With --rrl, every Nth limited response goes out as TC=1 so real clients retry
    /// over TCP (0 drops them all).
    #[arg(long, value_name = "N")]
    rrl_slip: Option<u32>,
    /// Answer NSID requests (RFC 5001) with this identifier (e.g. the host name).
    #[arg(long, value_name = "TEXT")]
    nsid: Option<String>,
    /// DNS cookies (RFC 7873, server cookies per RFC 9018): on or off. A query with a
    /// valid server cookie is exempt from --rrl.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "off", action = clap::ArgAction::Set)]
    cookies: bool,
    /// The cookie secret, 32 hex digits, shared by servers behind one address
    /// [default: random at start].
    #[arg(long, value_name = "HEX", value_parser = parse_secret)]
    cookie_secret: Option<[u8; 16]>,
    /// Address or prefix allowed to pull zones with AXFR over TCP; repeat for more.
    #[arg(long, value_name = "PREFIX")]
    allow_transfer: Vec<firehose_proto::dns::Prefix>,
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
        check_threads("--workers", workers)?;
        check_threads("--tcp-threads", self.dns.tcp_threads)?;
        self.xdp.refuse_socket_only(self.rxq_ovfl, self.workers)?;
        let base = match self.profile {
            // --io xdp without a profile takes the xdp profile's socket settings.
            None if self.xdp.io == IoArg::Xdp => Profile::Tuned,
            // The fast configuration unless asked otherwise (before 0.2 it was naive).
            None => Profile::Tuned,
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
        if let Some(p) = &self.cpus {
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

/// Workers per allowed CPU beyond which more threads only contend.
const WORKERS_PER_CPU: usize = 4;

/// Refuses a thread count (`flag`'s value) far beyond the CPUs this process may run on.
fn check_threads(flag: &str, workers: usize) -> Result<()> {
    let cpus = firehose_sys::cpu::allowed_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
        .max(1);
    let max = cpus * WORKERS_PER_CPU;
    if workers > max {
        return Err(Usage(format!(
            "{flag} {workers} is more than {WORKERS_PER_CPU} per allowed CPU ({cpus} allowed); use at most {max}"
        ))
        .into());
    }
    Ok(())
}

fn parse_secret(s: &str) -> Result<[u8; 16], String> {
    let bad = || format!("'{s}' is not 32 hex digits (16 bytes)");
    if s.len() != 32 || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// The EDNS options to answer, from the flags.
fn options_config(d: &DnsArgs) -> Result<OptionsConfig> {
    if let Some(n) = &d.nsid {
        if n.is_empty() || n.len() > MAX_NSID {
            return Err(Usage(format!("--nsid must be 1 to {MAX_NSID} bytes")).into());
        }
    }
    if d.cookie_secret.is_some() && !d.cookies {
        return Err(Usage("--cookie-secret needs --cookies on".into()).into());
    }
    let cookie_secret = match (d.cookies, d.cookie_secret) {
        (false, _) => None,
        (true, Some(s)) => Some(s),
        (true, None) => {
            use std::io::Read;
            let mut s = [0u8; 16];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut s))
                .context("reading a cookie secret from /dev/urandom")?;
            Some(s)
        }
    };
    Ok(OptionsConfig {
        nsid: d.nsid.as_ref().map(|n| n.as_bytes().to_vec()),
        cookie_secret,
    })
}

pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}

/// The UDP engine and, for DNS, the TCP side beside it.
struct Running {
    server: Server,
    tcp: Option<TcpServer>,
    /// Re-reads the zone files on SIGHUP.
    reloader: Option<Reloader>,
}

fn start_server(
    cfg: &ServeConfig,
    proto: Proto,
    a: &ServeArgs,
    mut xdp: Option<XdpIo>,
) -> Result<Running> {
    let zones = &a.zones;
    let res = match proto {
        Proto::Echo if !zones.is_empty() => {
            return Err(Usage("--zone applies only to --proto dns".into()).into())
        }
        Proto::Echo if !a.dns.allow_transfer.is_empty() || a.dns.rrl.is_some() => {
            return Err(Usage("--allow-transfer and --rrl apply only to --proto dns".into()).into())
        }
        Proto::Echo => match xdp {
            Some(io) => Server::start_with(cfg, io, |_| firehose_proto::Echo),
            None => Server::start(cfg, |_| firehose_proto::Echo),
        },
        Proto::Dns => {
            if zones.is_empty() {
                return Err(Usage("--proto dns needs at least one --zone FILE".into()).into());
            }
            if a.dns.rrl_slip.is_some() && a.dns.rrl.is_none() {
                return Err(Usage("--rrl-slip needs --rrl N".into()).into());
            }
            if !a.dns.tcp && !a.dns.allow_transfer.is_empty() {
                return Err(
                    Usage("--allow-transfer needs --tcp on (AXFR runs over TCP)".into()).into(),
                );
            }
            let options = options_config(&a.dns)?;
            let transfers = !a.dns.allow_transfer.is_empty();
            let reloader = Reloader::load(zones, a.dns.zone_max_size as u64, transfers)
                .map_err(|e| Usage(e.to_string()))?;
            let live = reloader.live();
            // With port 0 the UDP side picks the port; TCP must get the same one, so a
            // port already taken for TCP means starting over on another (not with XDP,
            // whose queues are taken once).
            let tries = if cfg.listen.port() == 0 && xdp.is_none() {
                5
            } else {
                1
            };
            for attempt in 1..=tries {
                let mut h = firehose_proto::DnsHandler::live(live.clone(), DEFAULT_MAX_UDP)
                    .with_options(options.clone());
                if let Some(rate) = a.dns.rrl {
                    // Each worker keeps its own table and allows its share.
                    h = h.with_rrl(RrlConfig {
                        rate: rate.div_ceil(cfg.workers).min(u32::MAX as usize) as u32,
                        slip: a.dns.rrl_slip.unwrap_or(2),
                    });
                }
                let server = match xdp.take() {
                    Some(io) => Server::start_with(cfg, io, move |_| h.clone()),
                    None => Server::start(cfg, move |_| h.clone()),
                }
                .map_err(serve_error)?;
                if !a.dns.tcp {
                    return Ok(Running {
                        server,
                        tcp: None,
                        reloader: Some(reloader),
                    });
                }
                let tcfg = TcpConfig {
                    max_conns: a.dns.tcp_max_conns,
                    max_per_client: a.dns.tcp_max_per_client,
                    idle: a.dns.tcp_idle,
                    allow_transfer: a.dns.allow_transfer.clone(),
                    max_udp: DEFAULT_MAX_UDP,
                    options: options.clone(),
                    threads: a.dns.tcp_threads,
                };
                match TcpServer::start(server.local_addr(), live.clone(), tcfg) {
                    Ok(t) => {
                        return Ok(Running {
                            server,
                            tcp: Some(t),
                            reloader: Some(reloader),
                        })
                    }
                    Err(e) if attempt < tries && e.kind() == std::io::ErrorKind::AddrInUse => {
                        server.shutdown();
                    }
                    Err(e) => {
                        return Err(Usage(format!(
                            "cannot listen on TCP {}: {e} — pick another --listen port or pass --tcp off",
                            server.local_addr()
                        ))
                        .into())
                    }
                }
            }
            return Err(
                Usage("no port free for both UDP and TCP; pass a --listen port".into()).into(),
            );
        }
    };
    Ok(Running {
        server: res.map_err(serve_error)?,
        tcp: None,
        reloader: None,
    })
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
    let mut json = a.json.open()?;
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
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing signal handler")?;
    let Running {
        server,
        tcp,
        mut reloader,
    } = start_server(&cfg, a.proto, &a, xdp)?;
    print_applied(&server, a.proto);
    if let Some(t) = &tcp {
        say!(
            "  tcp: listening on {} ({} thread{}, max {} connections, {} per client, idle {:?}, AXFR to {})",
            t.local_addr(),
            a.dns.tcp_threads,
            if a.dns.tcp_threads == 1 { "" } else { "s" },
            a.dns.tcp_max_conns,
            a.dns.tcp_max_per_client,
            a.dns.tcp_idle,
            if a.dns.allow_transfer.is_empty() {
                "nobody".to_string()
            } else {
                let v: Vec<String> = a.dns.allow_transfer.iter().map(|p| p.to_string()).collect();
                v.join(" ")
            }
        );
    }
    if let Some(addr) = a.metrics {
        let mut source = server.metrics_source(proto_name(a.proto));
        if let Some(t) = &tcp {
            source = source.with_provider(std::sync::Arc::new(t.counter_reader()));
        }
        let version = env!("CARGO_PKG_VERSION");
        let bound = crate::metrics::spawn(addr, move || source.render(version))
            .map_err(|e| Usage(format!("{e:#}")))?;
        say!("  metrics: http://{bound}/metrics");
    }
    if a.duration.is_none() {
        say!("  Ctrl-C to stop");
    }
    let started = Instant::now();
    let mut records = Vec::new();
    let mut last = WorkerStats::total(&server.worker_stats());
    let mut last_t = started;
    let mut next_tick = a.interval.map(|i| started + i);
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) || a.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if hup.swap(false, Ordering::Relaxed) {
            match reloader.as_mut() {
                Some(r) => reload(r),
                None => say!("firehose serve: SIGHUP ignored: --proto echo has nothing to reload"),
            }
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
                if json.wanted() {
                    records.push(IntervalRecord {
                        t: started.elapsed().as_secs_f64(),
                        rx_pps: d.packets_in as f64 / secs,
                        tx_pps: d.packets_out as f64 / secs,
                        totals: total.clone(),
                        kernel_drops: drops,
                    });
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
    let mut handler: std::collections::BTreeMap<String, u64> = server
        .shutdown()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if let Some(t) = tcp {
        handler.extend(t.shutdown().into_iter().map(|(k, v)| (k.to_string(), v)));
    }
    let totals = WorkerStats::total(&workers);
    print_counters(&workers, &sockets, &totals, elapsed);
    if a.proto == Proto::Dns {
        let line: Vec<String> = handler
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        say!("  dns: {}", line.join(", "));
    }
    if json.wanted() {
        let (u, s) = firehose_sys::cpu::process_rusage()?;
        let stats = StatsDocument {
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
        json.write(&ServeDocument {
            stats: &stats,
            intervals: records,
        })?;
    }
    Ok(())
}

/// Re-reads the zone files (SIGHUP) and says what happened to each.
fn reload(r: &mut Reloader) {
    let t = Instant::now();
    match r.reload() {
        Ok(outcomes) => {
            for (p, o) in outcomes {
                match o {
                    Outcome::Loaded(n) => {
                        say!("firehose serve: reloaded {} ({n} records)", p.display())
                    }
                    Outcome::Kept(e) => say!(
                        "firehose serve: reload of {} failed, still serving its previous version: {e}",
                        p.display()
                    ),
                }
            }
            say!(
                "firehose serve: zones swapped in {:.1} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        Err(e) => say!("firehose serve: reload failed, nothing changed: {e}"),
    }
}

/// What `serve --json` writes: the counters at exit, and one record per `--interval`.
#[derive(serde::Serialize)]
struct ServeDocument<'a> {
    #[serde(flatten)]
    stats: &'a StatsDocument,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    intervals: Vec<IntervalRecord>,
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
