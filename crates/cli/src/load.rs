//! `firehose load`: drive a UDP request/response server and measure it.

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, parse_rate,
    parse_unix_time, Cpus, Usage,
};
mod ntp;
mod output;
mod radius;

use crate::io_paths::{IoPath, LoadOn};
use crate::proto::Proto;
use crate::xdp_args::{xdp_mode_parser, zerocopy_parser};
use anyhow::{Context, Result};
use clap::Args;
use firehose_host::cputime::{self, Scope};
use firehose_host::env::Environment;
use firehose_load::dns::DnsWorkload;
use firehose_load::document::{LoadRun, LoadSettings};
use firehose_load::interval::HdrLogFile;
use firehose_load::io::FlowIo;
use firehose_load::ntp::NtpWorkload;
use firehose_load::pace::Arrivals;
use firehose_load::radius::RadiusWorkload;
use firehose_load::watch::{HdrIntervals, IntervalLines, ServerWindow};
use firehose_load::xdp::{XdpIo, XdpLoadConfig};
use firehose_load::{summarize, EchoWorkload, Length, LoadConfig, LoadReport, Workload};
use firehose_sys::cpu::CpuSet;
use firehose_sys::supervise::Ended;
use firehose_sys::xdp::setup::ModeChoice;
use firehose_sys::xdp::xsk::ZeroCopy;
use firehose_sys::SetupError;
use ntp::{ntp_workload, NtpLoadArgs};
pub use output::print_summary;
use output::{print_header, print_interval};
use radius::{radius_workload, RadiusLoadArgs};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Arguments of `firehose load`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
#[command(
    after_help = "Closed loop (default): each flow keeps --window requests outstanding.\n\
Open loop (--rate): requests leave on a fixed schedule; latency is measured from the\n\
intended send time, so a slow server cannot hide its delay (coordinated omission).\n\
A request unanswered within --timeout counts as lost and the run goes on.\n\
Each thread tells its answers apart by request id, one id space for all its flows: DNS\n\
and NTP ids hold 65536 requests in flight per thread, RADIUS's 8-bit Identifier 256, so\n\
with --proto radius a thread's flows x --window may not exceed 256 (closed or open loop;\n\
add --threads for more). In open loop, what the ids cannot hold is counted as unsent.\n\
Exit code 1 when no transaction completed, or more were lost than --max-loss.\n\n\
EXAMPLES:\n  \
  firehose load --target 127.0.0.1:9000 -t 5\n  \
  firehose load --target '[::1]:9000' --rate 50k --flows 8 -J > run.json\n  \
  firehose load --target 127.0.0.1:9000 --rate 50k --flows 4 --stamps\n  \
  firehose load --target 127.0.0.1:5300 --proto dns -q examples/queries.txt\n  \
  firehose load --target 127.0.0.1:1812 --proto radius --radius-users examples/radius/users \\\n      \
--radius-clients examples/radius/clients.conf --rate 20k -t 5\n  \
  firehose load --target 127.0.0.1:12300 --proto ntp --rate 100k -t 5\n  \
  firehose load --target 127.0.0.1:12300 --proto ntp --rate 20k -t 5 --ntp-interleaved"
)]
pub struct LoadArgs {
    /// Server address and port (IPv4, [IPv6] or host:port).
    #[arg(long, value_name = "ADDR:PORT")]
    target: String,
    /// Protocol to speak.
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Query file for --proto dns, dnsperf's format: "NAME TYPE" per line.
    #[arg(short = 'q', long, value_name = "FILE", conflicts_with = "size")]
    queries: Option<std::path::PathBuf>,
    /// Flows: each its own socket and source port.
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    flows: usize,
    /// Requests outstanding per flow (closed loop) [default: 1]; in open loop, the most in
    /// flight per flow [default: no cap but the timeout's worth].
    #[arg(long, value_parser = parse_positive)]
    window: Option<usize>,
    /// Open loop at this many transactions/s across all flows (e.g. 50000, 50k).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rate: Option<f64>,
    /// Generator threads; flows are shared out among them.
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    threads: usize,
    /// Pin thread i to the i-th CPU of this list (e.g. 1 or 2-3), or auto (the i-th
    /// allowed CPU), or none [default: none].
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    cpus: Option<Cpus>,
    /// Measurement length (after warm-up), e.g. 10, 2.5s.
    #[arg(
        short = 't',
        long,
        value_name = "DURATION",
        default_value = "10",
        value_parser = parse_duration,
        conflicts_with = "requests"
    )]
    duration: Duration,
    /// Send exactly this many requests instead of running for --duration.
    #[arg(long, value_parser = parse_positive)]
    requests: Option<usize>,
    /// Run this long before measuring (e.g. 1, 500ms; 0 for none).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_duration_or_zero)]
    warmup: Duration,
    /// Request payload bytes (echo: at least 20 for the id and timestamp header).
    #[arg(long, value_name = "SIZE", default_value = "100", value_parser = parse_bytes)]
    size: usize,
    /// An unanswered request is lost after this long (e.g. 1s, 200ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    timeout: Duration,
    /// Datagrams per sendmmsg/recvmmsg.
    #[arg(long, default_value = "64", value_parser = parse_positive)]
    batch: usize,
    /// Open loop: requests sent per wake-up, at most half of --window per flow [default:
    /// as many as one wake-up per 80 µs needs: 4 at 50k/s, 12 at 150k/s]; fewer give a
    /// smoother schedule for more CPU per request, 1 wakes for each (every 10 µs at most).
    /// Given, a wake-up's N leave together (one GSO send); by default they leave apart.
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    per_wake: Option<usize>,
    /// Poll sockets without sleeping: lowest latency, one busy CPU per thread. In open loop
    /// each request then leaves when it is intended.
    #[arg(long)]
    spin: bool,
    /// Open loop: the schedule's shape at --rate: uniform (evenly spaced), poisson
    /// (exponential gaps) or burst:N (N at once every N intervals, one wake-up each).
    /// --stamps shows the gaps the server saw.
    #[arg(long, value_name = "PATTERN", value_parser = parse_arrivals)]
    arrivals: Option<Arrivals>,
    /// Send with sendmmsg only, never as UDP GSO super-datagrams (UDP_SEGMENT). By
    /// default GSO carries what is sent together: closed-loop refills, --arrivals
    /// burst:N, --per-wake N, a paced wake-up of more than 10 requests or behind its
    /// schedule (one of up to 10 on schedule uses sendmmsg).
    #[arg(long)]
    no_gso: bool,
    /// Take latency apart with kernel timestamps (--io socket): each request stamped as it
    /// leaves, each response as it arrives, giving rtt (the network and the server),
    /// send_lag and recv_lag (the generator's) beside latency. Sends keep the shape they
    /// have without --stamps where the kernel takes a stamp's key in the send (Linux
    /// 6.13+: a GSO send's segments share its one stamp), else go by sendmmsg.
    #[arg(long)]
    stamps: bool,
    /// Do not attribute losses (as root, a drop watch on skb:kfree_skb runs with the load
    /// and the summary says where lost requests were dropped).
    #[arg(long)]
    no_drops: bool,
    /// Print a line every interval (0 for none).
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "1", value_parser = parse_duration_or_zero)]
    interval: Duration,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Start at this Unix time in seconds (e.g. $(( $(date +%s) + 10 ))), so generators on
    /// several machines run together; at most a day ahead.
    #[arg(long, value_name = "UNIX_TIME", value_parser = parse_unix_time)]
    start_at: Option<SystemTime>,
    /// Write an HdrHistogram interval log here: one latency histogram (ns) per --interval,
    /// in the format of HdrHistogram's log tools (HistogramLogWriter/Reader).
    #[arg(long, value_name = "FILE")]
    hdr_log: Option<std::path::PathBuf>,
    /// PID of the server, to measure its CPU per transaction over the same window.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Server worker count, to tell a saturated server from a saturated client.
    #[arg(long, value_parser = parse_positive)]
    server_workers: Option<usize>,
    /// Exit 1 when more than this percentage of the requests sent was lost (e.g. 0.1);
    /// whatever the value, a run that completed nothing exits 1.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    max_loss: Option<f64>,
    /// Print only the summary.
    #[arg(long)]
    quiet: bool,
    /// I/O path: kernel sockets, AF_XDP on --iface (root; the target on its link), or
    /// io_uring on the sockets (one ring per thread).
    #[arg(long = "io", default_value = "socket", value_parser = crate::io_paths::parser())]
    io: &'static IoPath,
    #[command(flatten)]
    uring: crate::uring_args::UringArgs,
    /// Interface to send and receive on with --io xdp.
    #[arg(long)]
    iface: Option<String>,
    /// With --io xdp: where the XDP program runs (auto: native where the driver has it).
    #[arg(long, value_parser = xdp_mode_parser())]
    xdp_mode: Option<ModeChoice>,
    /// With --io xdp: AF_XDP zero-copy: probe (auto), insist (on), or never (off).
    #[arg(long, value_parser = zerocopy_parser())]
    zerocopy: Option<ZeroCopy>,
    #[command(flatten)]
    pub(crate) radius: RadiusLoadArgs,
    #[command(flatten)]
    pub(crate) ntp: NtpLoadArgs,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a percentage from 0 to 100")),
    }
}

/// Why a run completed nothing. A run that sent nothing while its schedule came due did not
/// ask the server at all: its generator thread was not on a CPU in time (a busy host, or a
/// `--cpus` shared with other work), which is not the server's fault.
fn nothing_completed(sent: u64, lost: u64, unsent: u64) -> String {
    if sent == 0 && unsent > 0 {
        format!(
            "no transaction completed: 0 sent and {unsent} unsent: the generator did not get a CPU in \
             time to send on schedule (check the load average and --cpus), so the server was not asked"
        )
    } else {
        format!(
            "no transaction completed ({sent} sent, {lost} lost): is a server answering at the target?"
        )
    }
}

/// The run's verdict: nothing completed, or more lost than `--max-loss`, fails (exit 1).
fn verdict(r: &LoadReport, max_loss: Option<f64>) -> Result<()> {
    if r.completed == 0 {
        anyhow::bail!("{}", nothing_completed(r.sent, r.lost, r.unsent));
    }
    let lost = if r.sent > 0 {
        100.0 * r.lost as f64 / r.sent as f64
    } else {
        0.0
    };
    match max_loss {
        Some(m) if lost > m => anyhow::bail!("lost {lost:.3}% of requests, above --max-loss {m}%"),
        _ => Ok(()),
    }
}

fn resolve(target: &str) -> Result<SocketAddr> {
    if let Ok(a) = target.parse() {
        return Ok(a);
    }
    target
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| {
            Usage(format!(
                "--target '{target}' is not an address:port (examples: 127.0.0.1:9000, [::1]:9000)"
            ))
            .into()
        })
}

/// Checks that `--server-pid` names a process whose CPU time can be read.
fn check_server_pid(pid: u32) -> Result<()> {
    cputime::seconds(pid, Scope::Process)
        .map(|_| ())
        .map_err(|e| Usage(format!("--server-pid {pid}: {e}")).into())
}

/// The workload of a run.
enum Requests {
    Echo(EchoWorkload),
    Dns(DnsWorkload),
    Radius(RadiusWorkload),
    Ntp(Box<NtpWorkload>),
}

/// Runs `firehose load`.
pub fn run(a: LoadArgs) -> Result<()> {
    let target = resolve(&a.target)?;
    let mut json = a.json.open()?;
    let cpus = match &a.cpus {
        None | Some(Cpus::None) => None,
        Some(Cpus::List(l)) => Some(l.to_vec()),
        Some(Cpus::Auto) => {
            let allowed = firehose_sys::cpu::allowed_cpus()?;
            if allowed.len() < a.threads {
                return Err(Usage(format!(
                    "--cpus auto needs a CPU per thread: {} threads but {} allowed CPUs ({}); lower --threads or use --cpus none",
                    a.threads,
                    allowed.len(),
                    CpuSet::from(&allowed)
                ))
                .into());
            }
            Some(allowed)
        }
    };
    let cfg = LoadConfig {
        target,
        flows: a.flows,
        window: a.window.unwrap_or(if a.rate.is_some() { 0 } else { 1 }),
        rate: a.rate,
        threads: a.threads,
        cpus: cpus.clone(),
        length: match a.requests {
            Some(n) => Length::Requests(n as u64),
            None => Length::Duration(a.duration),
        },
        warmup: a.warmup,
        timeout: a.timeout,
        batch: a.batch,
        spin: a.spin,
        gso: !a.no_gso,
        per_wake: a.per_wake,
        tx_stamps: a.stamps,
        arrivals: a.arrivals.clone().unwrap_or(Arrivals::Uniform),
    };
    if a.arrivals.is_some() && a.rate.is_none() {
        return Err(Usage(
            "--arrivals shapes an open loop: give --rate too (closed loop sends as answers come)"
                .into(),
        )
        .into());
    }
    if matches!(a.arrivals, Some(Arrivals::Burst(_))) && a.per_wake.is_some() {
        return Err(Usage("--arrivals burst:N sends N per wake-up; drop --per-wake".into()).into());
    }
    if a.per_wake.is_some() && a.rate.is_none() {
        return Err(Usage(
            "--per-wake paces an open loop: give --rate too (closed loop sends as answers come)"
                .into(),
        )
        .into());
    }
    let radius = radius_workload(&a, target)?;
    let ntp = ntp_workload(&a)?;
    let workload = match (a.proto, &a.queries) {
        (Proto::Ntp, Some(_)) => {
            return Err(Usage("--queries applies only to --proto dns".into()).into())
        }
        (Proto::Ntp, None) => match ntp {
            Some(w) => Requests::Ntp(Box::new(w)),
            None => unreachable!("ntp_workload returns one for --proto ntp"),
        },
        (Proto::Radius, Some(_)) => {
            return Err(Usage("--queries applies only to --proto dns".into()).into())
        }
        (Proto::Radius, None) => match radius {
            Some(w) => Requests::Radius(w),
            None => unreachable!("radius_workload returns one for --proto radius"),
        },
        (Proto::Echo, None) => Requests::Echo(EchoWorkload::new(a.size).map_err(load_error)?),
        (Proto::Echo, Some(_)) => {
            return Err(Usage("--queries applies only to --proto dns".into()).into())
        }
        (Proto::Dns, Some(q)) => {
            Requests::Dns(DnsWorkload::load(q, None).map_err(|e| Usage(e.to_string()))?)
        }
        (Proto::Dns, None) => {
            return Err(
                Usage("--proto dns needs --queries FILE (lines of \"NAME TYPE\")".into()).into(),
            )
        }
    };
    if let Some(pid) = a.server_pid {
        check_server_pid(pid)?;
    }
    if a.hdr_log.is_some() && a.interval.is_zero() {
        return Err(Usage(
            "--hdr-log writes one histogram per --interval; give an --interval above 0".into(),
        )
        .into());
    }
    // A DNS query from a query file stays far below 512 bytes.
    let max_payload = match &workload {
        Requests::Echo(_) => a.size,
        Requests::Dns(_) | Requests::Radius(_) | Requests::Ntp(_) => 512,
    };
    let LoadOn { flows, settings } = a.io.load_on(&a, &cfg, max_payload)?;
    let pacing = firehose_load::pacing(&cfg);
    let config_doc = LoadSettings {
        target: target.to_string(),
        proto: a.proto.name().into(),
        mode: if a.rate.is_some() { "open" } else { "closed" }.into(),
        flows: a.flows,
        window: cfg.window,
        rate: a.rate,
        threads: a.threads,
        cpus,
        size: (a.proto == Proto::Echo).then_some(a.size),
        queries: a.queries.as_ref().map(|q| q.display().to_string()),
        timeout_s: a.timeout.as_secs_f64(),
        warmup_s: a.warmup.as_secs_f64(),
        batch: a.batch,
        per_wake: pacing.as_ref().map(|p| p.per_wake as usize),
        wake_period_us: pacing.as_ref().map(|p| p.ahead_ns as f64 / 1e3),
        spin: a.spin,
        gso: !a.no_gso && a.io.gso,
        stamps: a.stamps,
        arrivals: a.rate.map(|_| cfg.arrivals.name()),
        io: a.io.name.into(),
        xdp: settings,
    };
    let loss_watch = crate::drops::watch_loss(a.no_drops, "load");
    let mut report = match workload {
        Requests::Echo(w) => drive(&a, &cfg, flows, |_| w.clone())?,
        // Each thread starts at its own place in the file.
        Requests::Dns(w) => drive(&a, &cfg, flows, |i| w.clone().starting_at(i * 7919))?,
        Requests::Radius(w) => drive(&a, &cfg, flows, |i| {
            let mut w = w.clone().starting_at(i * 7919);
            w.reseed(i as u64);
            w
        })?,
        Requests::Ntp(w) => drive(&a, &cfg, flows, |i| {
            let mut w = (*w).clone();
            w.reseed(i as u64);
            w
        })?,
    };
    if let Some(p) = report.parts.as_mut() {
        p.hardware = firehose_load::decompose::hardware_stamps(&cfg.target);
    }
    let pids: Vec<u32> = a.server_pid.into_iter().collect();
    let attribution = crate::drops::attribute(loss_watch, &[target.port()], &pids, "load");
    print_summary(&config_doc.target, &config_doc.mode, a.server_pid, &report);
    if let Some(at) = &attribution {
        crate::drops::print_attribution(&format!("lost {}", report.lost), at);
    }
    let lost = verdict(&report, a.max_loss);
    json.write(&LoadRun {
        report,
        config: config_doc,
        loss_attribution: attribution,
        environment: Environment::capture(),
    })?;
    lost
}

pub(crate) fn load_error(e: SetupError) -> anyhow::Error {
    crate::refusal::setup_error(e, None)
}

/// The socket path's own flags' refusal under another path.
pub(crate) fn socket_only_flags(a: &LoadArgs) -> Option<String> {
    [(a.no_gso, "--no-gso"), (a.stamps, "--stamps")]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, flag)| format!("{flag} applies only to --io socket"))
}

/// The AF_XDP flags' refusal under another path.
pub(crate) fn xdp_only_flags(a: &LoadArgs) -> Option<String> {
    [
        (a.iface.is_some(), "--iface"),
        (a.xdp_mode.is_some(), "--xdp-mode"),
        (a.zerocopy.is_some(), "--zerocopy"),
    ]
    .into_iter()
    .find(|(given, _)| *given)
    .map(|(_, flag)| format!("{flag} applies only to --io xdp"))
}

impl LoadArgs {
    /// The io_uring flags' refusal under another path.
    pub(crate) fn uring_flags(&self) -> Option<String> {
        self.uring.refusal()
    }
}

/// `load --io uring`: each thread's flows on its own ring; a refusal is bad usage with the
/// fix.
pub(crate) fn uring_flows(
    a: &LoadArgs,
    cfg: &LoadConfig,
    max_payload: usize,
) -> Result<Vec<firehose_load::uring::UringFlows>> {
    firehose_load::uring::open(cfg, a.uring.ring(), max_payload).map_err(load_error)
}

/// `load --io xdp`: checks the interface, attaches the program and opens the rings
/// (printing what the kernel granted).
pub(crate) fn xdp_flows(
    a: &LoadArgs,
    cfg: &LoadConfig,
    max_payload: usize,
) -> Result<(XdpIo, BTreeMap<String, String>)> {
    let Some(iface) = a.iface.clone() else {
        return Err(Usage(
            "--io xdp needs --iface IFACE (the interface on the target's link)".into(),
        )
        .into());
    };
    firehose_load::validate(cfg).map_err(load_error)?;
    let x = XdpLoadConfig {
        iface,
        mode: a.xdp_mode.unwrap_or(ModeChoice::Auto),
        zerocopy: a.zerocopy.unwrap_or(ZeroCopy::Auto),
        max_payload,
    };
    let (io, applied) = firehose_load::xdp::open(cfg, &x).map_err(load_error)?;
    if !a.quiet {
        let kv: Vec<String> = applied
            .settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        say!("firehose load: af_xdp {}", kv.join(" "));
        for n in &applied.notes {
            say!("  note: {n}");
        }
    }
    Ok((io, applied.settings))
}

/// Sleeps until `at` (`--start-at`), unless `stop` is raised first.
fn wait_until(at: SystemTime, stop: &AtomicBool, quiet: bool) -> Result<()> {
    if let Ok(left) = at.duration_since(SystemTime::now()) {
        if !quiet {
            say!(
                "firehose load: starting at {:.3} (in {:.1} s)",
                at.duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64(),
                left.as_secs_f64()
            );
        }
    }
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if stop.load(Ordering::Relaxed) {
            anyhow::bail!("interrupted while waiting for --start-at");
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
    Ok(())
}

/// Starts the generator threads on `flows` (one entry each), prints interval lines, and
/// summarises.
fn drive<W: Workload + 'static>(
    a: &LoadArgs,
    cfg: &LoadConfig,
    flows: Vec<Box<dyn FlowIo>>,
    make: impl Fn(usize) -> W,
) -> Result<LoadReport> {
    let code_namer = make(0);
    let stop = crate::supervise::stop_on_signals()?;
    let mut hdr_file = match &a.hdr_log {
        Some(p) => Some(
            HdrLogFile::create(p).map_err(|e| Usage(format!("--hdr-log {}: {e}", p.display())))?,
        ),
        None => None,
    };
    if let Some(at) = a.start_at {
        firehose_load::validate(cfg).map_err(load_error)?;
        wait_until(at, &stop, a.quiet)?;
    }
    let run = firehose_load::start_with(cfg, make, flows).map_err(load_error)?;
    // This thread watches the generators: with --cpus it joins their CPUs rather than wake
    // on any other (the server's, on a shared host). The generators pin themselves first,
    // so their CPUs are checked and their errors are theirs.
    if let Some(cpus) = &cfg.cpus {
        let own = &cpus[..cfg.threads.min(cpus.len())];
        if let Err(e) = firehose_sys::cpu::confine_current_thread(own) {
            run.stop.store(true, Ordering::Relaxed);
            let _ = run.join();
            return Err(anyhow::anyhow!("{e}; the load stopped"));
        }
    }
    // The wall-clock time of the run's clock zero, to place it among other agents' runs.
    let started_unix = SystemTime::now() - run.started.elapsed();
    let writer = format!("firehose load {}", env!("CARGO_PKG_VERSION"));
    let mut hdr = match hdr_file.as_mut() {
        Some(f) => {
            let log = f
                .begin(started_unix, &writer)
                .context("writing --hdr-log")?;
            Some(HdrIntervals::new(log, a.interval, cfg))
        }
        None => None,
    };
    if !a.quiet {
        print_header(a, cfg);
    }
    let tty = std::io::stderr().is_terminal() && !a.quiet;
    let mut server = a.server_pid.map(ServerWindow::new);
    let mut intervals = Vec::new();
    let total_len = match cfg.length {
        Length::Duration(d) => Some(cfg.warmup + d),
        Length::Requests(_) => None,
    };
    let mut lines = IntervalLines::new(a.interval);
    // The generators end the run themselves (duration or request count); a signal tells
    // them to stop sending, and the loop waits while they count what is in flight.
    let mut sv = crate::supervise::supervisor(&stop, None, None);
    sv.drain = true;
    // Beside the generators, this thread wakes rarely, and exactly at the edges its
    // figures need (the interval lines' grid, the --hdr-log intervals' from the end of
    // the warm-up, the server window's two readings).
    sv.poll = firehose_sys::supervise::QUIET_POLL;
    if !a.interval.is_zero() {
        sv.wakes.push((a.interval, a.interval));
        if hdr.is_some() {
            sv.wakes.push((cfg.warmup, a.interval));
        }
    }
    if server.is_some() {
        sv.wakes.push((cfg.warmup, Duration::ZERO));
        if let Some(t) = total_len {
            sv.wakes.push((t, Duration::ZERO));
        }
    }
    let mut run = run;
    let ended = sv.run(
        run.started,
        |_| {
            let el = run.started.elapsed();
            let signalled = stop.load(Ordering::Relaxed);
            if signalled {
                run.stop.store(true, Ordering::Relaxed);
            }
            if let Some(s) = server.as_mut() {
                s.observe(
                    el >= cfg.warmup,
                    signalled || total_len.is_some_and(|t| el >= t),
                );
            }
            if let Some(h) = hdr.as_mut() {
                h.tick(el, &run.live).context("writing --hdr-log")?;
            }
            let last_t = lines.t;
            if let Some(iv) = lines.due(el, &run.live) {
                if !a.quiet {
                    print_interval(last_t, &iv, cfg.warmup, tty);
                }
                intervals.push(iv);
            } else if tty {
                let sent = || {
                    run.live
                        .iter()
                        .map(|l| l.sent.load(Ordering::Relaxed))
                        .sum::<u64>()
                };
                let left = total_len
                    .map(|t| format!("{:.0} s left", t.saturating_sub(el).as_secs_f64()))
                    .unwrap_or_else(|| format!("{} sent", sent()));
                eprint!("\r\x1b[K  {:.1} s, {left}", el.as_secs_f64());
                let _ = std::io::stderr().flush();
            }
            Ok::<_, anyhow::Error>(run.health())
        },
        |_| Ok(()),
    )?;
    if tty {
        eprint!("\r\x1b[K");
    }
    if let Ended::Failed(f) = ended {
        run.stop.store(true, Ordering::Relaxed);
        let _ = run.join();
        return Err(crate::supervise::failed("the load", f));
    }
    let server = server.and_then(ServerWindow::finish);
    let (live, started) = (run.live.clone(), run.started);
    let results = run
        .join()
        .map_err(|f| crate::supervise::failed("the load", f))?;
    if let Some(h) = hdr {
        h.finish(started.elapsed(), &live)
            .context("writing --hdr-log")?;
    }
    let start_unix = (started_unix + cfg.warmup)
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    summarize(
        &results,
        server,
        a.server_workers,
        intervals,
        start_unix,
        |c| code_namer.code_name(c),
    )
    .context("summarising the latency histogram")
}

fn parse_arrivals(s: &str) -> std::result::Result<Arrivals, String> {
    Arrivals::parse(s)
}

#[cfg(test)]
mod tests {
    use super::nothing_completed;

    #[test]
    fn a_run_that_never_sent_blames_the_generator_not_the_server() {
        let starved = nothing_completed(0, 0, 25_944);
        assert!(starved.contains("25944 unsent"), "{starved}");
        assert!(starved.contains("did not get a CPU"), "{starved}");
        assert!(!starved.contains("is a server answering"), "{starved}");
        let silent = nothing_completed(1_000, 1_000, 0);
        assert!(silent.contains("is a server answering"), "{silent}");
    }
}
