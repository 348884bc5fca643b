//! `firehose lab`: test hosts, measured runs, the NTT ladder and peer comparisons
//! in one command, with a report. The work is in the `firehose-lab` crate; this module
//! parses arguments, handles Ctrl-C/SIGTERM, prints progress on a terminal and the table.

mod dns;
mod xdp;

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, parse_rate,
    whole_millis, whole_rate, whole_secs, Cpus, Usage,
};
use crate::serve::Proto;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use firehose_lab::experiment::{self, Cell, Progress};
use firehose_lab::report::{self, LabReport, Skipped};
use firehose_lab::runner::{self, LoadSpec, Placement, Runner};
use firehose_lab::topology::{self, Kind, Topology};
use firehose_lab::{cmd, compare, env::Environment, ladder, plain_echo::PlainEcho, LabError};
use std::io::{IsTerminal, Write};
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
    /// Run servers and generators under the same load, interleaved; ratios (--proto dns: vs Knot, NSD).
    Compare(CompareArgs),
    /// Remove namespaces, veths and temporary logs left by lab runs whose process is gone.
    Down(DownArgs),
    /// The NTT talk's baseline server: one UDP socket, N threads, recvfrom/sendto echo.
    #[command(hide = true)]
    PlainEcho(PlainEchoArgs),
}

/// What every measured run needs.
#[derive(Debug, Args)]
struct RunArgs {
    /// Test host: the host's loopback, or two namespaces joined by a veth pair (root)
    /// [default: loopback].
    #[arg(long, value_parser = |s: &str| s.parse::<Kind>())]
    topology: Option<Kind>,
    /// Queues per veth end [default: number of CPUs].
    #[arg(long, value_parser = parse_positive)]
    queues: Option<usize>,
    /// Runs of each configuration, interleaved (A B A B ...).
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// Measured time per run, e.g. 5, 10s (whole seconds, except with --proto dns).
    #[arg(long, value_name = "DURATION", default_value = "5", value_parser = parse_duration)]
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
    /// Server workers [default: one per server CPU]. With `compare --proto dns`, a list of
    /// counts to try, e.g. 1,2 [default: 1 and the number of server CPUs].
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
    /// Write the results as JSON here [default: firehose-lab-<ladder|compare|compare-dns>.json].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write report.md, report.html (SVG charts) and the run logs into this directory
    /// (with `compare --proto dns`: report.md).
    #[arg(long)]
    report: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Steps, in ladder order (each includes those above it):\n  \
  shared, reuseport, steer, pin, batch, busy-poll, pmtu-do  (the application's)\n  \
  rps, xps, gro-off, rp-filter-off  (OS knobs; only on --topology veth)"
)]
struct LadderArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Comma-separated subset of steps [default: all this topology allows].
    #[arg(long)]
    steps: Option<String>,
}

#[derive(Debug, Args)]
#[command(after_help = "--proto echo (default):\n\
Servers: naive, reuseport, steered, tuned, latency (firehose serve \
profiles), plain (the lab's one-socket echo), sockperf (sockperf sr).\n\
Generators: firehose (firehose load), sockperf (sockperf ping-pong, one request in flight).\n\
Everything runs open loop at --rate (default 10000/s) from one flow, so generators and\n\
servers are compared at the same rate: CPU per transaction and latency.\n\n\
--proto dns:\n\
Servers: firehose (serve --proto dns --profile tuned), knotd, nsd, over one generated zone.\n\
Generators: dnsperf, firehose (firehose load --proto dns), one thread on the client CPU,\n\
--window queries outstanding (default 100); closed loop, or open loop at --rate.\n\
Applies: --repetitions --duration --server-cpus --client-cpus (one) --workers (a list)\n\
--window --rate --json --report --names --query-count --no-syscalls.")]
struct CompareArgs {
    #[command(flatten)]
    run: RunArgs,
    /// What the servers speak.
    #[arg(long, value_enum, default_value = "echo")]
    proto: Proto,
    /// Servers to compare [default: echo naive,tuned,plain,sockperf; dns firehose,knotd,nsd].
    #[arg(long)]
    servers: Option<String>,
    /// Generators to drive them with [default: echo firehose,sockperf; dns dnsperf,firehose].
    #[arg(long)]
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
    /// Compare I/O paths on veth instead: socket, xdp or socket,xdp (echo saturation with
    /// both generators, busy-polled ping-pong; root).
    #[arg(long, value_name = "PATHS")]
    io: Option<String>,
}

#[derive(Debug, Args)]
struct DownArgs {
    /// Also remove those of runs still in progress.
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Args)]
struct PlainEchoArgs {
    /// Address and port to listen on.
    #[arg(long)]
    listen: String,
    /// Threads sharing the one socket.
    #[arg(long, default_value = "1", value_parser = parse_positive)]
    threads: usize,
}

impl RunArgs {
    fn topology(&self) -> Kind {
        self.topology.unwrap_or(Kind::Loopback)
    }
}

/// Turns a lab error into the binary's: usage errors exit 2.
fn lab_err(e: LabError) -> anyhow::Error {
    match e {
        LabError::Usage(m) => Usage(m).into(),
        other => other.into(),
    }
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
        LabCommand::Down(d) => down_cmd(d),
        LabCommand::PlainEcho(p) => plain_echo_cmd(p),
    }
}

fn down_cmd(d: DownArgs) -> Result<()> {
    if !firehose_sys::cpu::is_root() {
        return Err(Usage("lab down needs root to delete network namespaces".into()).into());
    }
    let mut removed = topology::down(d.all).map_err(lab_err)?;
    removed.extend(runner::remove_stale_workdirs(d.all));
    if removed.is_empty() {
        println!("firehose lab down: nothing left over");
    }
    for r in removed {
        println!("firehose lab down: removed {r}");
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

/// Settings shared by ladder and compare once defaults are filled in.
struct Setup {
    topo: Topology,
    placement: Placement,
    workers: usize,
    load: LoadSpec,
    workdir: PathBuf,
    /// Temporary work directory to delete at the end (no --report).
    temp: bool,
}

/// The server and client CPUs: as given, or the allowed CPUs split in two halves.
fn placement(r: &RunArgs, allowed: &[usize]) -> Result<Placement> {
    let s = side_cpus("--server-cpus", &r.server_cpus)?;
    let c = side_cpus("--client-cpus", &r.client_cpus)?;
    Ok(match (s, c) {
        (None, None) => Placement::split(allowed).map_err(lab_err)?,
        (s, c) => {
            let split = Placement::split(allowed).ok();
            let server = match s {
                Some(s) => s,
                None => split
                    .as_ref()
                    .map(|p| p.server_cpus.clone())
                    .unwrap_or_default(),
            };
            let client = match c {
                Some(c) => c,
                None => allowed
                    .iter()
                    .copied()
                    .filter(|x| !server.contains(x))
                    .collect(),
            };
            if server.is_empty() || client.is_empty() {
                return Err(Usage(
                    "give both --server-cpus and --client-cpus: one side has no CPU left".into(),
                )
                .into());
            }
            Placement::new(server, client, allowed).map_err(lab_err)?
        }
    })
}

/// Fills in defaults, checks the arguments, then builds the test host. `pins` names what
/// pins one worker per server CPU in this run, if anything does.
fn setup(
    r: &RunArgs,
    default_flows: usize,
    default_window: Option<usize>,
    default_rate: Option<usize>,
    pins: Option<&str>,
) -> Result<Setup> {
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let placement = placement(r, &allowed)?;
    let workers =
        match r.workers.as_deref() {
            None => placement.server_cpus.len(),
            Some([w]) => *w,
            Some(_) => return Err(Usage(
                "--workers takes one count here; a list of counts is for lab compare --proto dns"
                    .into(),
            )
            .into()),
        };
    if let Some(what) = pins {
        if workers > placement.server_cpus.len() {
            return Err(Usage(format!(
                "--workers {workers} is more than the {} server CPU(s), but {what} one worker per CPU: give more --server-cpus or fewer --workers",
                placement.server_cpus.len()
            ))
            .into());
        }
    }
    let threads = r.threads.unwrap_or(placement.client_cpus.len());
    let size = r.size.unwrap_or(100);
    let flows = r.flows.unwrap_or(default_flows.max(threads));
    if flows < threads {
        return Err(Usage(format!(
            "--flows {flows} is fewer than --threads {threads}: each thread needs a flow"
        ))
        .into());
    }
    let load = LoadSpec {
        flows,
        window: r.window.or(default_window),
        rate: match r.rate {
            Some(x) => Some(whole_rate("--rate", x)?),
            None => default_rate.map(|x| x as u64),
        },
        threads,
        size,
        duration_s: whole_secs("--duration", r.duration)?,
        warmup_s: match r.warmup {
            Some(w) => whole_secs("--warmup", w)?,
            None => 1,
        },
        timeout_ms: match r.timeout {
            Some(t) => whole_millis("--timeout", t)?,
            None => 200,
        },
    };
    if size < 20 {
        return Err(Usage(format!(
            "--size {}: echo requests carry a 20-byte header; use 20 or more",
            size
        ))
        .into());
    }
    if r.queues.is_some() && r.topology() == Kind::Loopback {
        return Err(Usage(
            "--queues sets the veth pair's queues: use it with --topology veth".into(),
        )
        .into());
    }
    let (workdir, temp) = match &r.report {
        Some(d) => (d.join("runs"), false),
        None => (runner::temp_workdir(std::process::id()), true),
    };
    let topo = match r.topology() {
        Kind::Loopback => Topology::loopback(),
        Kind::Veth => {
            let q = r.queues.unwrap_or(allowed.len());
            Topology::veth(&topology::run_id(None), q).map_err(lab_err)?
        }
    };
    // Last, so that a refused argument leaves nothing behind.
    std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
    Ok(Setup {
        topo,
        placement,
        workers,
        load,
        workdir,
        temp,
    })
}

fn progress_printer() -> impl FnMut(&Progress) {
    let tty = std::io::stderr().is_terminal();
    move |p: &Progress| {
        if tty {
            eprint!(
                "\r\x1b[Kfirehose lab: run {} of {}: {} (repetition {} of {}), about {:.0} s left",
                p.done + 1,
                p.total,
                p.cell,
                p.repetition,
                p.repetitions,
                p.seconds_left
            );
            let _ = std::io::stderr().flush();
        }
    }
}

fn finish_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K");
    }
}

/// What to run, what was left out and why, and notes for the report.
struct Plan {
    cells: Vec<Cell>,
    skipped: Vec<Skipped>,
    notes: Vec<String>,
}

/// A flag set by SIGINT and SIGTERM, installed before any test host exists so that no
/// signal can leave one behind.
fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    Ok(stop)
}

/// Runs the cells, tears down, writes JSON and report, prints the table.
fn execute(
    kind: &str,
    r: &RunArgs,
    stop: Arc<AtomicBool>,
    mut s: Setup,
    Plan {
        cells,
        skipped,
        notes,
    }: Plan,
    make_rows: impl Fn(&[Cell], &[runner::Trial]) -> (Vec<report::Row>, Vec<report::Ratio>),
) -> Result<()> {
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let environment = Environment::capture();
    let port = match r.topology() {
        Kind::Loopback => runner::free_loopback_port().map_err(lab_err)?,
        Kind::Veth => runner::VETH_PORT,
    };
    let bin = std::env::current_exe().context("locating the firehose binary")?;
    let result = {
        let runner = Runner {
            bin,
            topo: &s.topo,
            placement: s.placement.clone(),
            load: s.load.clone(),
            workdir: s.workdir.clone(),
            stop: &stop,
            port,
        };
        let mut progress = progress_printer();
        let res = experiment::run(&runner, &s.topo, &cells, r.repetitions, &mut progress);
        finish_progress();
        res
    };
    // Tear the test host down before anything else, whatever happened.
    let teardown = s.topo.teardown();
    let interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
    let trials = match result {
        Ok(t) => t,
        Err(_) if interrupted => {
            if s.temp {
                let _ = std::fs::remove_dir_all(&s.workdir);
            }
            teardown
                .map_err(lab_err)
                .context("interrupted; removing the test host")?;
            anyhow::bail!("interrupted: stopped the run and removed its test host")
        }
        Err(e) => {
            return Err(lab_err(e))
                .with_context(|| format!("lab {kind} failed (logs in {})", s.workdir.display()))
        }
    };
    teardown
        .map_err(lab_err)
        .context("removing the test host")?;
    let (rows, ratios) = make_rows(&cells, &trials);
    let rep = LabReport {
        kind: kind.into(),
        started_unix,
        topology: r.topology().name().into(),
        queues: s.topo.queues(),
        workers: s.workers,
        repetitions: r.repetitions,
        placement: s.placement.clone(),
        load: s.load.clone(),
        environment,
        rows,
        skipped,
        ratios,
        notes,
        trials,
    };
    let json = r
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("firehose-lab-{kind}.json")));
    rep.write_json(&json).map_err(lab_err)?;
    print!("{}", report::table::render(&rep));
    println!("results: {}", json.display());
    if let Some(dir) = &r.report {
        rep.write_dir(dir).map_err(lab_err)?;
        println!("report: {}", dir.join("report.html").display());
    }
    if s.temp {
        let _ = std::fs::remove_dir_all(&s.workdir);
    }
    Ok(())
}

fn ladder_cmd(l: LadderArgs) -> Result<()> {
    let (steps, skipped) = ladder::select(l.steps.as_deref(), l.run.topology()).map_err(lab_err)?;
    let pin_at = ladder::STEPS.iter().position(|x| x.name == "pin");
    let pins = steps
        .iter()
        .any(|st| ladder::STEPS.iter().position(|x| x == st) >= pin_at)
        .then_some("the pin step pins");
    let stop = stop_flag()?;
    let s = setup(&l.run, 16, Some(4), None, pins)?;
    let veth = l.run.topology() == Kind::Veth;
    let cells: Vec<Cell> = steps
        .iter()
        .map(|st| Cell {
            name: st.name.into(),
            describe: match ladder::talk_figure(st.name) {
                Some(t) => format!("{} (the talk: {t})", st.describe),
                None => st.describe.into(),
            },
            server: ladder::server_for(st, s.workers),
            generator: runner::Generator::Firehose,
            knobs: veth.then(|| ladder::knobs_for(st)),
        })
        .collect();
    execute(
        "ladder",
        &l.run,
        stop,
        s,
        Plan {
            cells,
            skipped,
            notes: Vec::new(),
        },
        |cells, trials| {
            let mut rows = report::rows(cells, trials);
            for i in 1..rows.len() {
                let prev = rows[i - 1].clone();
                rows[i].compare_with(&prev);
            }
            (rows, Vec::new())
        },
    )
}

fn compare_cmd(c: CompareArgs) -> Result<()> {
    if let Some(io) = c.io.clone() {
        return xdp::compare(c, &io);
    }
    if c.proto == Proto::Dns {
        return dns::compare(c);
    }
    for (given, flag) in [
        (c.names.is_some(), "--names"),
        (c.query_count.is_some(), "--query-count"),
        (c.no_syscalls, "--no-syscalls"),
    ] {
        if given {
            return Err(Usage(format!("{flag} applies only to lab compare --proto dns")).into());
        }
    }
    let servers = c.servers.as_deref().unwrap_or("naive,tuned,plain,sockperf");
    let generators = c.generators.as_deref().unwrap_or("firehose,sockperf");
    let sockperf = cmd::installed("sockperf");
    // Validate names before building anything.
    compare::plan(servers, generators, 1, sockperf).map_err(lab_err)?;
    let pins = servers
        .split(',')
        .any(|x| matches!(x.trim(), "steered" | "tuned" | "latency"))
        .then_some("the steered, tuned and latency profiles pin");
    let stop = stop_flag()?;
    let s = setup(&c.run, 1, None, Some(10_000), pins)?;
    let (cells, skipped) =
        compare::plan(servers, generators, s.workers, sockperf).map_err(lab_err)?;
    if cells.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        return Err(Usage(format!(
            "nothing to compare, every configuration was skipped ({})",
            why.join("; ")
        ))
        .into());
    }
    let mut notes = vec![
        "sockperf ping-pong sends at --mps (= --rate) and keeps one request in flight; firehose load runs open loop at the same rate".to_string(),
    ];
    if !cmd::installed("perf") {
        notes.push(format!(
            "peer servers' syscalls/txn are unknown without perf ({})",
            cmd::install_hint("perf")
        ));
    }
    execute(
        "compare",
        &c.run,
        stop,
        s,
        Plan {
            cells,
            skipped,
            notes,
        },
        |cells, trials| {
            let mut rows = report::rows(cells, trials);
            for g in [runner::Generator::Firehose, runner::Generator::Sockperf] {
                let base = rows
                    .iter()
                    .find(|r| r.generator == g && r.name.starts_with("plain/"))
                    .or_else(|| rows.iter().find(|r| r.generator == g))
                    .cloned();
                if let Some(base) = base {
                    for r in rows
                        .iter_mut()
                        .filter(|r| r.generator == g && r.name != base.name)
                    {
                        // Open loop: all reach the rate, so judge the cost.
                        r.compare_cost_with(&base);
                    }
                }
            }
            let ratios = compare::ratios(&rows);
            (rows, ratios)
        },
    )
}
