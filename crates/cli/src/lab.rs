//! `firehose lab`: test hosts, measured runs, the NTT ladder and peer comparisons
//! in one command, with a report. The work is in the `firehose-lab` crate (each study an
//! implementation of `firehose_lab::study::Study`); this module and its children parse
//! arguments and build the study, and `lab/run.rs` runs it: Ctrl-C/SIGTERM, progress,
//! the page, the JSON and the report.

mod dns;
mod latency;
pub(crate) mod run;
mod served;
mod sink;
mod stream;
mod xdp;
mod zone_load;

use run::{lab_err, stop_flag};

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, parse_rate,
    whole_millis, whole_rate, whole_secs, Cpus, Usage,
};
use crate::serve::Proto;
use anyhow::{Context, Result};
use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand};
use firehose_lab::plain_echo::PlainEcho;
use firehose_lab::studies::compare::Compare;
use firehose_lab::studies::echo::EchoOptions;
use firehose_lab::studies::ladder::Ladder;
use firehose_lab::studies::ntp::Ntp;
use firehose_lab::studies::radius::Radius;
use firehose_lab::study::Placement;
use firehose_lab::topology::{self, Kind};
use run::{run_study, StudyRun};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `firehose lab`.
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Debug, Subcommand)]
enum LabCommand {
    /// Climb the NTT ladder: each step adds one technique; tps, CPU, syscalls, latency, drops.
    Ladder(LadderArgs),
    /// Run servers and generators under the same load, interleaved; ratios (--proto dns: vs Knot, NSD; radius: vs FreeRADIUS; ntp: vs chronyd, ntpd).
    Compare(CompareArgs),
    /// Latency against load (10%...100% of max tps) per server profile, beside sockperf's under-load mode.
    Latency(latency::LatencyArgs),
    /// The Bloomberg talk's bulk TCP matrix on veth: MTU, GRO, TSO, BIG TCP x stream modes, iperf3; ROI.
    Stream(stream::StreamArgs),
    /// The Red Hat UDP receive study on veth: pps per receive mode by queue count, CPU, drops, perf.
    Sink(sink::SinkArgs),
    /// Each flood send mode's pps and CPU per packet at RFC 2544 sizes into an XDP_DROP receiver.
    Flood(sink::FloodArgs),
    /// DNS servers loading one large zone: time until the first answer and peak memory.
    ZoneLoad(zone_load::ZoneLoadArgs),
    /// Remove namespaces, veths and temporary logs left by lab runs whose process is gone.
    Down(DownArgs),
    /// The NTT talk's baseline server: one UDP socket, N threads, recvfrom/sendto echo.
    #[command(hide = true)]
    PlainEcho(PlainEchoArgs),
    /// Holds an XDP_DROP program on an interface until SIGINT/SIGTERM (lab flood's receiver).
    #[command(hide = true)]
    XdpDrop(XdpDropArgs),
    /// Exits 0 once a DNS server answers its apex SOA (the lab's readiness check, run on
    /// the client's side of a veth test host), 1 when it did not in time.
    #[command(hide = true)]
    Answers(AnswersArgs),
}

#[derive(Debug, Args)]
struct AnswersArgs {
    /// The server's address and port.
    #[arg(long, value_name = "ADDR:PORT")]
    target: std::net::SocketAddr,
    /// The zone's apex, with its trailing dot.
    #[arg(long, value_name = "NAME")]
    apex: String,
    /// How long to keep asking.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    within: Duration,
}

/// What every measured run needs.
#[derive(Debug, Args)]
struct RunArgs {
    /// Test host: the host's loopback, or two namespaces joined by a veth pair (root)
    /// [default: loopback].
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["loopback", "veth"])
        .try_map(|s| s.parse::<Kind>()))]
    topology: Option<Kind>,
    /// Queues per veth end [default: number of CPUs].
    #[arg(long, value_parser = parse_positive)]
    queues: Option<usize>,
    /// Runs of each configuration, interleaved (A B A B ...).
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// Measured time per run, e.g. 5, 10s (whole seconds, except with --proto dns, radius and ntp).
    #[arg(short = 't', long, value_name = "DURATION", default_value = "5", value_parser = parse_duration)]
    duration: Duration,
    /// Load before the measured window, whole seconds, 0 for none [default: 1].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero)]
    warmup: Option<Duration>,
    /// CPUs of the server, or auto: the first half of the allowed CPUs [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    server_cpus: Option<Cpus>,
    /// CPUs of the client, or auto: the allowed CPUs the server does not use [default: auto].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    client_cpus: Option<Cpus>,
    /// Server workers [default: one per server CPU]. With `compare --proto dns`, radius or
    /// ntp, a list of counts to try, e.g. 1,2 [default: dns 1 and the number of server CPUs;
    /// radius and ntp the number of server CPUs].
    #[arg(long, value_parser = parse_positive, value_delimiter = ',')]
    workers: Option<Vec<usize>>,
    /// Generator threads [default: one per client CPU].
    #[arg(long, value_parser = parse_positive)]
    threads: Option<usize>,
    /// Flows (sockets) of the generator [default: ladder 16, compare 1].
    #[arg(long, value_parser = parse_positive)]
    flows: Option<usize>,
    /// Requests outstanding per flow [default: ladder 4; compare: no cap in open loop].
    #[arg(long, value_parser = parse_positive)]
    window: Option<usize>,
    /// Open loop at this many transactions/s, e.g. 10000, 10k [default: ladder closed
    /// loop, compare 10k].
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rate: Option<f64>,
    /// Request payload bytes (the talk used 100) [default: 100].
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    size: Option<usize>,
    /// An unanswered request is lost after this long, e.g. 200ms, 1 [default: 200ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Also write report.md, report.html (SVG charts) and the run logs into this directory
    /// (with `compare --proto dns`: report.md).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Steps, in ladder order (each includes those above it but a step that hurt,\n\
which is reverted unless --keep-hurt):\n  \
  shared, reuseport, steer, pin, batch, busy-poll, pmtu-do  (the application's)\n  \
  rps, xps, gro-off, rp-filter-off  (OS knobs; only on --topology veth)\n\n\
EXAMPLES:\n  \
  firehose lab ladder --repetitions 1 --duration 2\n  \
  firehose lab ladder --topology veth --json-file ladder.json --report results/ladder"
)]
#[command(mut_arg("duration", |a| a.help("Measured time per run, whole seconds, e.g. 5")))]
#[command(mut_arg("workers", |a| a.help("Server workers [default: one per server CPU]")))]
#[command(mut_arg("flows", |a| a.help("Flows (sockets) of the generator [default: 16]")))]
#[command(mut_arg("window", |a| a.help("Requests outstanding per flow [default: 4]")))]
#[command(mut_arg("rate", |a| a.help("Open loop at this many transactions/s, e.g. 10k [default: closed loop]")))]
#[command(mut_arg("report", |a| a.help("Also write report.md, report.html (SVG charts) and the run logs into this directory")))]
struct LadderArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Comma-separated subset of the steps listed below [default: all this topology allows].
    #[arg(long, value_name = "STEPS")]
    steps: Option<String>,
    /// Keep a step that hurt in every later step (by default it is reverted before the
    /// next one and shown as "hurt, reverted"); all steps are then interleaved.
    #[arg(long)]
    keep_hurt: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "--proto echo (default):\n\
Servers: naive, reuseport, steered, tuned, latency (firehose serve \
profiles), uring (tuned over io_uring), plain (the lab's one-socket echo), sockperf (sockperf sr).\n\
Generators: firehose (firehose load), sockperf (sockperf ping-pong, one request in flight).\n\
Everything runs open loop at --rate (default 10000/s) from one flow, so generators and\n\
servers are compared at the same rate: CPU per transaction and latency.\n\n\
--proto dns:\n\
Servers: firehose (serve --proto dns --profile tuned), knotd, nsd, over one generated zone.\n\
Generators: dnsperf, firehose (firehose load --proto dns), one thread on the client CPU,\n\
--window queries outstanding (default 100); closed loop, or open loop at --rate.\n\
Applies: --repetitions --duration --server-cpus --client-cpus (one) --workers (a list)\n\
--window --rate --json --json-file --report --names --query-count --no-syscalls\n\
--tcp-connections --queries-per-conn (over TCP, dnsperf only) --firehose-bin.\n\n\
--proto radius:\n\
Servers: firehose (serve --proto radius), freeradius (its files, pap and chap modules, its\n\
thread pool the worker count), on the same CPUs and the same generated clients.conf and\n\
users file. Generator: firehose load --proto radius (PAP, Message-Authenticator), one thread\n\
on the client CPU; closed loop, or open loop at --rate. On loopback, or --topology veth\n\
(servers in the server namespace, the generator in the client namespace; root).\n\
Applies: --repetitions --duration --server-cpus --client-cpus (one) --workers (a list)\n\
--flows --window (flows x window <= 256: RADIUS ids are 8 bits, one id space per generator\n\
thread) --rate --timeout --topology --queues (veth) --json --json-file --report\n\
--firehose-bin.\n\n\
--proto ntp:\n\
Servers: firehose (serve --proto ntp --ntp-local-stratum 10), chronyd (local stratum 10, no\n\
ratelimit, one instance per worker on one SO_REUSEPORT port), ntpd (ntpsec: orphan stratum\n\
10, no rate limit; port 123 only, one process: --topology veth and one worker only), on\n\
the same CPUs. Generator: firehose load --proto ntp (every answer checked; hold time and\n\
offset), one thread on the client CPU; closed loop, or open loop at --rate. On loopback,\n\
or --topology veth (servers in the server namespace, the generator in the client one; root).\n\
Applies: --repetitions --duration --server-cpus --client-cpus (one) --workers (a list)\n\
--flows --window --rate --timeout --topology --queues (veth) --json --json-file --report\n\
--firehose-bin.\n\n\
EXAMPLES:\n  \
  firehose lab compare --servers naive,tuned --rate 10k\n  \
  firehose lab compare --proto dns --duration 5 --report results/dns\n  \
  firehose lab compare --proto radius --server-cpus 0 --client-cpus 1\n  \
  firehose lab compare --proto radius --topology veth --duration 5\n  \
  firehose lab compare --proto ntp --server-cpus 0 --client-cpus 1 --rate 50k\n  \
  firehose lab compare --proto ntp --topology veth --servers firehose,chronyd,ntpd")]
struct CompareArgs {
    #[command(flatten)]
    run: RunArgs,
    /// What the servers speak.
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Servers to compare, comma-separated, of (echo) naive, reuseport, steered, tuned,
    /// latency, uring (tuned over io_uring), plain, sockperf, (dns) firehose, knotd, nsd, (radius)
    /// firehose, freeradius or (ntp) firehose, chronyd, ntpd [default: echo
    /// naive,tuned,plain,sockperf; dns firehose,knotd,nsd; radius firehose,freeradius; ntp
    /// firehose,chronyd,ntpd].
    #[arg(long, value_name = "SERVERS")]
    servers: Option<String>,
    /// Generators to drive them with, of (echo) firehose, sockperf or (dns) dnsperf,
    /// firehose [default: echo firehose,sockperf; dns dnsperf,firehose].
    #[arg(long, value_name = "GENERATORS")]
    generators: Option<String>,
    /// Names in the generated zone (--proto dns) [default: 10000].
    #[arg(long, value_parser = parse_positive)]
    names: Option<usize>,
    /// Queries in the generated query file, 3 of 4 for names that exist (--proto dns)
    /// [default: 100000].
    #[arg(long, value_parser = parse_positive)]
    query_count: Option<usize>,
    /// Do not count the servers' syscalls with perf (--proto dns).
    #[arg(long)]
    no_syscalls: bool,
    /// Query over TCP on this many connections instead of UDP (--proto dns, dnsperf -m
    /// tcp; --window is the total outstanding, spread over them).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    tcp_connections: Option<usize>,
    /// With --tcp-connections, close and reopen each connection after N queries
    /// (dnsperf's num-queries-per-conn; its reconnects are slow: about 100/s here, whatever
    /// the server).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    queries_per_conn: Option<usize>,
    /// Serve with this firehose binary instead of this one (--proto dns, radius, ntp), e.g. a build
    /// from before a change.
    #[arg(long, value_name = "PATH")]
    firehose_bin: Option<std::path::PathBuf>,
    /// Compare I/O paths on veth instead: socket, xdp, uring or a list such as
    /// socket,xdp,uring (echo saturation with two generators, busy-polled ping-pong; root).
    /// With --proto ntp: firehose's rows, one per path, beside the peers (xdp on veth).
    #[arg(long, value_name = "PATHS")]
    io: Option<String>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Removes the namespaces, veth pairs, XDP programs and temporary \
directories that runs killed with SIGKILL left behind.\n\n\
EXAMPLES:\n  \
  firehose lab down\n  \
  firehose lab down --all    also those of runs still in progress"
)]
struct DownArgs {
    /// Also remove those of runs still in progress.
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Args)]
struct XdpDropArgs {
    /// Interface to attach to (in this process's network namespace).
    #[arg(long, value_name = "NAME")]
    iface: String,
}

#[derive(Debug, Args)]
struct PlainEchoArgs {
    /// Address and port to listen on.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// Threads sharing the one socket.
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    threads: usize,
}

/// The CPUs of one side if given as a list; `None` for auto.
fn side_cpus(flag: &str, c: &Option<Cpus>) -> Result<Option<Vec<usize>>> {
    match c {
        None | Some(Cpus::Auto) => Ok(None),
        Some(Cpus::List(l)) => Ok(Some(l.to_vec())),
        Some(Cpus::None) => Err(Usage(format!(
            "{flag} none: the lab always pins server and client apart; give a CPU list or auto"
        ))
        .into()),
    }
}

/// Runs `firehose lab`.
pub fn run(a: LabArgs) -> Result<()> {
    match a.command {
        LabCommand::Ladder(l) => ladder_cmd(l),
        LabCommand::Compare(c) => compare_cmd(c),
        LabCommand::Latency(l) => latency::run(l),
        LabCommand::Stream(s) => stream::run(s),
        LabCommand::Sink(s) => sink::sink(s),
        LabCommand::Flood(f) => sink::flood(f),
        LabCommand::ZoneLoad(z) => zone_load::run(z),
        LabCommand::Down(d) => down_cmd(d),
        LabCommand::PlainEcho(p) => plain_echo_cmd(p),
        LabCommand::XdpDrop(x) => xdp_drop_cmd(x),
        LabCommand::Answers(a) => answers_cmd(a),
    }
}

fn down_cmd(d: DownArgs) -> Result<()> {
    if !firehose_sys::cpu::is_root() {
        return Err(Usage("lab down needs root to delete network namespaces".into()).into());
    }
    let mut removed = topology::down(d.all).map_err(lab_err)?;
    removed.extend(firehose_lab::workdir::remove_stale(d.all));
    if removed.is_empty() {
        println!("firehose lab down: nothing left over");
    }
    for r in removed {
        println!("firehose lab down: removed {r}");
    }
    Ok(())
}

fn answers_cmd(a: AnswersArgs) -> Result<()> {
    use firehose_lab::peers::dns_server::answers_soa;
    let by = std::time::Instant::now() + a.within;
    let (addr, port) = (a.target.ip().to_string(), a.target.port());
    while !answers_soa(&addr, port, &a.apex, Duration::from_millis(20)) {
        if std::time::Instant::now() >= by {
            anyhow::bail!(
                "{} did not answer {} SOA within {:?}",
                a.target,
                a.apex,
                a.within
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn plain_echo_cmd(p: PlainEchoArgs) -> Result<()> {
    let listen = p.listen.parse().map_err(|_| {
        Usage(format!(
            "--listen '{}' is not an address:port (example: 127.0.0.1:9000)",
            p.listen
        ))
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let srv = PlainEcho::bind(listen, p.threads).with_context(|| format!("binding {listen}"))?;
    println!(
        "firehose lab plain-echo: listening on {}",
        srv.local_addr()?
    );
    let _ = std::io::stdout().flush();
    let c = srv.run(&stop);
    println!(
        "firehose lab plain-echo: packets_in {} packets_out {} send_errors {}",
        c.packets_in, c.packets_out, c.send_errors
    );
    Ok(())
}

/// Attaches the discard program through a BPF link and holds it until a signal: the link
/// goes with this process however it ends, so the program never outlives the run.
fn xdp_drop_cmd(x: XdpDropArgs) -> Result<()> {
    use firehose_sys::xdp::attach::{XdpMode, XdpProg};
    let stop = stop_flag()?;
    let ifindex = firehose_sys::ifaddr::ifindex(&x.iface)
        .map_err(|e| Usage(format!("--iface {}: {e}", x.iface)))?;
    let prog = XdpProg::load_drop().context("loading the XDP_DROP program")?;
    let link = prog
        .attach(ifindex, XdpMode::Native)
        .or_else(|_| prog.attach(ifindex, XdpMode::Generic))
        .with_context(|| format!("attaching XDP_DROP to {}", x.iface))?;
    println!(
        "firehose lab xdp-drop: program {} drops every packet on {}",
        prog.id()?,
        x.iface
    );
    let _ = std::io::stdout().flush();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(link);
    Ok(())
}

impl CompareArgs {
    /// Refuses, rather than ignores, the flags a served-protocol comparison (`--proto
    /// radius`, `ntp`: `title` in messages, lower case `proto`) has no use for; `size` says
    /// why `--size` does not apply.
    fn refuse_for_served(&self, proto: &str, size: &str) -> Result<()> {
        let r = &self.run;
        let size = format!("--size: {size}");
        let given = [
            (
                r.warmup.is_some(),
                "--warmup: the servers' CPU is measured over the whole generator run, so there is none",
            ),
            (
                r.threads.is_some(),
                "--threads: the generator runs one thread on the client CPU",
            ),
            (r.size.is_some(), size.as_str()),
            (self.names.is_some(), "--names applies to --proto dns"),
            (
                self.query_count.is_some(),
                "--query-count applies to --proto dns",
            ),
            (self.no_syscalls, "--no-syscalls applies to --proto dns"),
            (
                self.tcp_connections.is_some() || self.queries_per_conn.is_some(),
                "--tcp-connections and --queries-per-conn apply to --proto dns",
            ),
            (
                self.io.is_some() && proto != "ntp",
                "--io: the I/O path comparison is for --proto echo, dns and ntp",
            ),
        ];
        match given.iter().find(|(g, _)| *g) {
            Some((_, msg)) => Err(Usage(format!("{msg} (not for --proto {proto})")).into()),
            None => Ok(()),
        }
    }

    /// `--firehose-bin`, checked: the binary that serves and loads instead of this one.
    fn firehose_bin(&self) -> Result<Option<PathBuf>> {
        run::firehose_bin(&self.firehose_bin)
    }

    /// The placement of a study whose generator runs one thread: the server CPUs, and the
    /// first client CPU (more given explicitly is refused, naming `who`).
    fn one_client_cpu(&self, who: &str) -> Result<Placement> {
        let place = self.run.placement()?;
        if matches!(self.run.client_cpus, Some(Cpus::List(_))) && place.client_cpus.len() > 1 {
            return Err(Usage(format!(
                "--client-cpus {}: {who} one thread; give one CPU",
                firehose_sys::cpu::CpuSet::from(&place.client_cpus)
            ))
            .into());
        }
        Ok(Placement {
            server_cpus: place.server_cpus,
            client_cpus: place.client_cpus[..1].to_vec(),
        })
    }
}

/// The server and client CPUs of a study (`--server-cpus`, `--client-cpus`): as given, or
/// the CPUs this process may use split in two halves.
pub(crate) fn placement(server: &Option<Cpus>, client: &Option<Cpus>) -> Result<Placement> {
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    Placement::resolve(
        side_cpus("--server-cpus", server)?,
        side_cpus("--client-cpus", client)?,
        &allowed,
    )
    .map_err(lab_err)
}

impl RunArgs {
    /// The server and client CPUs ([`placement`]).
    fn placement(&self) -> Result<Placement> {
        placement(&self.server_cpus, &self.client_cpus)
    }

    /// The echo options of a ladder or comparison.
    fn options(&self) -> Result<EchoOptions> {
        let workers = match self.workers.as_deref() {
            None => None,
            Some([w]) => Some(*w),
            Some(_) => return Err(Usage(
                "--workers takes one count here; a list of counts is for lab compare --proto dns"
                    .into(),
            )
            .into()),
        };
        Ok(EchoOptions {
            topology: self.topology,
            queues: self.queues,
            duration_s: whole_secs("--duration", self.duration)?,
            warmup_s: self.warmup.map(|w| whole_secs("--warmup", w)).transpose()?,
            workers,
            threads: self.threads,
            flows: self.flows,
            window: self.window,
            rate: self.rate.map(|x| whole_rate("--rate", x)).transpose()?,
            size: self.size,
            timeout_ms: self
                .timeout
                .map(|t| whole_millis("--timeout", t))
                .transpose()?,
        })
    }

    /// How the study's run reaches the command line.
    fn study_run(&self, placement: Placement, guess_s: f64) -> StudyRun<'_> {
        StudyRun {
            json: &self.json,
            report: self.report.as_deref(),
            placement,
            repetitions: self.repetitions,
            guess_s,
            bin: None,
        }
    }
}

fn ladder_cmd(l: LadderArgs) -> Result<()> {
    let p = l.run.placement()?;
    let mut study =
        Ladder::new(&l.run.options()?, &p, l.steps.as_deref(), l.keep_hurt).map_err(lab_err)?;
    let guess = study.echo.guess_s();
    run_study(&mut study, l.run.study_run(p, guess))
}

fn compare_cmd(c: CompareArgs) -> Result<()> {
    if c.proto == Proto::Radius {
        let size = "RADIUS requests are Access-Requests of the generated users";
        return served::compare(c, Radius::default(), size);
    }
    if c.proto == Proto::Ntp {
        return served::compare(c, Ntp::default(), "NTP requests are 48 bytes");
    }
    if let Some(io) = c.io.clone() {
        return xdp::compare(c, &io);
    }
    if c.proto == Proto::Dns {
        return dns::compare(c);
    }
    for (given, flag, to) in [
        (c.names.is_some(), "--names", "dns"),
        (c.query_count.is_some(), "--query-count", "dns"),
        (c.no_syscalls, "--no-syscalls", "dns"),
        (c.tcp_connections.is_some(), "--tcp-connections", "dns"),
        (c.queries_per_conn.is_some(), "--queries-per-conn", "dns"),
        (
            c.firehose_bin.is_some(),
            "--firehose-bin",
            "dns, radius or ntp",
        ),
    ] {
        if given {
            return Err(Usage(format!("{flag} applies only to lab compare --proto {to}")).into());
        }
    }
    let p = c.run.placement()?;
    let mut study = Compare::new(
        &c.run.options()?,
        &p,
        c.servers.as_deref(),
        c.generators.as_deref(),
    )
    .map_err(lab_err)?;
    let guess = study.echo.guess_s();
    run_study(&mut study, c.run.study_run(p, guess))
}
