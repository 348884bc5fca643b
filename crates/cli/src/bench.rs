//! `firehose bench`: the engine benchmark (`make bench`, and `make demo` in short form).
//!
//! On loopback, server confined to one CPU and client pinned to another, it climbs the
//! profiles and measures each the same way, interleaved (A B C A B C ...): max tps in
//! closed loop, server and client CPU per transaction, server syscalls per transaction,
//! latency at a fixed open-loop rate; then unloaded ping-pong RTT against sockperf's own
//! server and client as like-for-like pairs (both blocking, both spinning; see
//! [`pingpong`]). It prints figures; it never passes or fails.

mod pingpong;

use crate::args::{parse_cpu_list, parse_duration, parse_positive, parse_rate, thousands, Usage};
use anyhow::{bail, Context, Result};
use clap::Args;
use firehose_engine::StatsDocument;
use firehose_lab::proc::{self, Proc};
use firehose_lab::runner;
use firehose_lab::stats::Summary;
use firehose_load::LoadReport;
use firehose_sys::cpu::CpuSet;
use pingpong::PingPong;
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `firehose bench`.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:\n  \
  firehose bench --repetitions 1 --duration 2          (what make demo runs)\n  \
  firehose bench --profiles naive,tuned --server-cpus 0 --client-cpus 1 -J > bench.json")]
pub struct BenchArgs {
    /// Measured time per run, e.g. 3, 2.5s (each run also warms up for 1 s).
    #[arg(short = 't', long, value_name = "DURATION", default_value = "3", value_parser = parse_duration)]
    duration: Duration,
    /// Repetitions of every measurement, interleaved across profiles.
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// CPUs the server process is confined to (its one worker runs on one of them).
    #[arg(long, value_name = "CPULIST", default_value = "0", value_parser = parse_cpu_list)]
    server_cpus: CpuSet,
    /// CPUs of the client: its one generator thread runs on the first.
    #[arg(long, value_name = "CPULIST", default_value = "1", value_parser = parse_cpu_list)]
    client_cpus: CpuSet,
    /// Open-loop rate for the latency column, e.g. 50000, 50k.
    #[arg(long, value_name = "RATE", default_value = "50k", value_parser = parse_rate)]
    rate: f64,
    /// Profiles to measure, comma-separated, of: naive, reuseport, steered, tuned, latency
    /// [default: all in ladder order].
    #[arg(long, value_name = "PROFILES", value_delimiter = ',')]
    profiles: Vec<String>,
    /// Skip the ping-pong comparison with sockperf.
    #[arg(long)]
    no_pingpong: bool,
    #[command(flatten)]
    json: crate::meta::JsonArgs,
}

const PROFILES: [&str; 5] = ["naive", "reuseport", "steered", "tuned", "latency"];

/// What every measurement of a run shares: the arguments, the firehose binary, the
/// directory for logs and result files, and the stop flag (SIGINT/SIGTERM).
struct Bench<'a> {
    a: &'a BenchArgs,
    exe: PathBuf,
    dir: PathBuf,
    stop: Arc<AtomicBool>,
}

/// A `firehose serve` under test and the address it listens on.
struct Serve {
    proc: Proc,
    addr: String,
    stats: PathBuf,
}

impl Serve {
    /// SIGTERM, then what it wrote with --stats-json.
    fn finish(mut self) -> Result<StatsDocument> {
        self.proc.stop("TERM", Duration::from_secs(10));
        Ok(runner::read_stats(&self.stats)?)
    }
}

impl Bench<'_> {
    fn stop(&self) -> Option<&AtomicBool> {
        Some(&self.stop)
    }

    /// `firehose serve` with one worker of `profile`, confined to the server CPU.
    fn start_serve(&self, profile: &str, tag: &str) -> Result<Serve> {
        let stats = self.dir.join(format!("{tag}-stats.json"));
        let mut cmd = proc::pinned(&self.a.server_cpus.to_vec(), &self.exe);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--workers", "1"]);
        cmd.args(["--profile", profile, "--json-file"]).arg(&stats);
        let mut p = Proc::spawn(cmd, &format!("{tag}-serve"), &self.dir)?;
        let by = Instant::now() + Duration::from_secs(10);
        let out = p.wait_for_output("\n", by, self.stop())?;
        let first = out.lines().next().unwrap_or_default();
        let addr = first
            .strip_prefix("firehose serve: listening on ")
            .with_context(|| format!("serve did not start: {first:?}"))?
            .to_string();
        Ok(Serve {
            proc: p,
            addr,
            stats,
        })
    }

    /// `firehose load` against `srv` with `extra` flags, to completion.
    fn run_load(&self, srv: &Serve, extra: &[String], tag: &str) -> Result<LoadReport> {
        let json = self.dir.join(format!("{tag}-load.json"));
        let mut cmd = Command::new(&self.exe);
        cmd.args([
            "load",
            "--target",
            &srv.addr,
            "--quiet",
            "--server-workers",
            "1",
        ]);
        cmd.args(["--server-pid", &srv.proc.pid().to_string()]);
        cmd.arg("--json-file").arg(&json).args(extra);
        let mut p = Proc::spawn(cmd, &format!("{tag}-load"), &self.dir)?;
        let by = Instant::now() + self.a.duration + Duration::from_secs(60);
        match p.wait_until(by, self.stop())? {
            Some(s) if s.success() => Ok(runner::read_load_report(&json)?.0),
            Some(_) => bail!("load failed: {}", p.stderr_tail()),
            None => bail!("load did not finish within a minute of its duration"),
        }
    }

    /// The common load flags: warm-up, duration and the client CPU.
    fn load_flags(&self, warmup: &str, flags: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        v.extend(
            [
                "--warmup",
                warmup,
                "--duration",
                &format!("{}", self.a.duration.as_secs_f64()),
                "--cpus",
                &self.a.client_cpus.to_string(),
            ]
            .map(String::from),
        );
        v
    }

    fn measure_profile(&self, profile: &str, rep: usize) -> Result<ProfileRun> {
        // Max tps: closed loop with enough requests in flight to fill batches.
        let tag = format!("{profile}-{rep}-max");
        let srv = self.start_serve(profile, &tag)?;
        let flags = ["--flows", "4", "--window", "32", "--batch", "64"];
        let load = self.run_load(&srv, &self.load_flags("1", &flags), &tag)?;
        let stats = srv.finish()?;
        // Latency at a fixed rate, open loop.
        let tag = format!("{profile}-{rep}-rate");
        let srv = self.start_serve(profile, &tag)?;
        let rate_s = format!("{}", self.a.rate);
        let flags = ["--rate", rate_s.as_str(), "--flows", "4"];
        let rate = self.run_load(&srv, &self.load_flags("1", &flags), &tag)?;
        srv.finish()?;
        Ok(ProfileRun {
            profile: profile.into(),
            repetition: rep,
            max_tps: load.tps,
            lost: load.lost as f64,
            server_cpu_us_per_txn: load.server_cpu_us_per_txn,
            client_cpu_us_per_txn: load.client_cpu_us_per_txn,
            server_syscalls_per_txn: stats.syscalls_per_packet,
            client_bound: load.client_bound,
            rate_p50_us: Some(rate.latency_us.p50),
            rate_p99_us: Some(rate.latency_us.p99),
            rate_tps: rate.tps,
        })
    }
}

/// One profile, one repetition.
#[derive(Debug, Clone, Serialize, Default)]
struct ProfileRun {
    profile: String,
    repetition: usize,
    max_tps: f64,
    lost: f64,
    server_cpu_us_per_txn: Option<f64>,
    client_cpu_us_per_txn: Option<f64>,
    server_syscalls_per_txn: Option<f64>,
    client_bound: bool,
    rate_p50_us: Option<f64>,
    rate_p99_us: Option<f64>,
    rate_tps: f64,
}

#[derive(Serialize)]
struct Env {
    kernel: String,
    cpu_model: String,
    nproc: usize,
    server_cpus: Vec<usize>,
    client_cpus: Vec<usize>,
}

#[derive(Serialize)]
struct BenchDoc {
    env: Env,
    duration_s: f64,
    repetitions: usize,
    rate: f64,
    profiles: Vec<ProfileRun>,
    pingpong: Vec<PingPong>,
}

fn env(a: &BenchArgs) -> Env {
    let e = firehose_lab::env::Environment::capture();
    Env {
        kernel: e.kernel,
        cpu_model: e.cpu_model,
        nproc: e.nproc,
        server_cpus: a.server_cpus.to_vec(),
        client_cpus: a.client_cpus.to_vec(),
    }
}

fn fmt_mmm(v: &[f64], digits: usize, big: bool) -> String {
    match Summary::of(v.iter().copied()).map(|x| (x.median, x.min, x.max)) {
        None => "unknown".into(),
        Some((m, lo, hi)) if big => {
            format!("{} ({}-{})", thousands(m), thousands(lo), thousands(hi))
        }
        Some((m, lo, hi)) => format!("{m:.digits$} ({lo:.digits$}-{hi:.digits$})"),
    }
}

/// Runs `firehose bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    let mut json = a.json.open()?;
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let (server, client) = (a.server_cpus.to_vec(), a.client_cpus.to_vec());
    for c in server.iter().chain(&client) {
        if !allowed.contains(c) {
            return Err(Usage(format!(
                "CPU {c} is not available (allowed: {}); choose --server-cpus/--client-cpus",
                CpuSet::from(&allowed)
            ))
            .into());
        }
    }
    if server.iter().any(|c| client.contains(c)) {
        return Err(Usage(
            "--server-cpus and --client-cpus must not overlap: the rules of measurement pin them apart"
                .into(),
        )
        .into());
    }
    let profiles: Vec<String> = if a.profiles.is_empty() {
        PROFILES.iter().map(|s| s.to_string()).collect()
    } else {
        for p in &a.profiles {
            if !PROFILES.contains(&p.as_str()) {
                return Err(Usage(format!(
                    "unknown profile '{p}' (valid: {})",
                    PROFILES.join(", ")
                ))
                .into());
            }
        }
        a.profiles.clone()
    };
    let have_sockperf = firehose_lab::cmd::installed("sockperf");
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let dir = firehose_lab::workdir::WorkDir::new("bench")?;
    let bench = Bench {
        a: &a,
        exe: std::env::current_exe().context("finding the firehose executable")?,
        dir: dir.to_path_buf(),
        stop,
    };
    let e = env(&a);
    say!(
        "firehose bench: kernel {}, {}, {} CPUs; server on CPUs {}, client on CPU {}; {} x {:.0} s per cell, interleaved",
        e.kernel, e.cpu_model, e.nproc, a.server_cpus, client[0], a.repetitions, a.duration.as_secs_f64()
    );
    let measured = measure_all(&bench, &profiles, have_sockperf);
    // The logs and result files go, whatever happened; the children went with their Procs.
    drop(dir);
    let (runs, pp) = measured?;
    print_tables(&a, &profiles, &runs, &pp, have_sockperf);
    json.write(&BenchDoc {
        env: e,
        duration_s: a.duration.as_secs_f64(),
        repetitions: a.repetitions,
        rate: a.rate,
        profiles: runs,
        pingpong: pp,
    })?;
    Ok(())
}

/// Every cell, interleaved: all profiles, then ping-pong, once per repetition.
fn measure_all(
    bench: &Bench<'_>,
    profiles: &[String],
    sockperf: bool,
) -> Result<(Vec<ProfileRun>, Vec<PingPong>)> {
    let a = bench.a;
    let mut runs = Vec::new();
    let mut pp = Vec::new();
    let total = a.repetitions * (profiles.len() + usize::from(!a.no_pingpong));
    let mut step = 0;
    for rep in 1..=a.repetitions {
        for p in profiles {
            step += 1;
            eprintln!("  [{step}/{total}] {p}, repetition {rep}");
            runs.push(bench.measure_profile(p, rep)?);
        }
        if !a.no_pingpong {
            step += 1;
            eprintln!("  [{step}/{total}] ping-pong, repetition {rep}");
            pp.extend(bench.measure_pingpong(rep, sockperf)?);
        }
    }
    Ok((runs, pp))
}

fn col(runs: &[ProfileRun], p: &str, get: impl Fn(&ProfileRun) -> Option<f64>) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.profile == p)
        .filter_map(get)
        .collect()
}

fn print_tables(
    a: &BenchArgs,
    profiles: &[String],
    runs: &[ProfileRun],
    pp: &[PingPong],
    sockperf: bool,
) {
    say!("");
    say!(
        "{:<10} {:>28} {:>19} {:>19} {:>18} {:>16} {:>16}",
        "profile",
        "max tps median (min-max)",
        "server us/txn",
        "client us/txn",
        "syscalls/txn",
        "p50 us @rate",
        "p99 us @rate"
    );
    for p in profiles {
        let bound = runs
            .iter()
            .filter(|r| &r.profile == p)
            .any(|r| r.client_bound);
        say!(
            "{:<10} {:>28} {:>19} {:>19} {:>18} {:>16} {:>16}{}",
            p,
            fmt_mmm(&col(runs, p, |r| Some(r.max_tps)), 0, true),
            fmt_mmm(&col(runs, p, |r| r.server_cpu_us_per_txn), 2, false),
            fmt_mmm(&col(runs, p, |r| r.client_cpu_us_per_txn), 2, false),
            fmt_mmm(&col(runs, p, |r| r.server_syscalls_per_txn), 3, false),
            fmt_mmm(&col(runs, p, |r| r.rate_p50_us), 1, false),
            fmt_mmm(&col(runs, p, |r| r.rate_p99_us), 1, false),
            if bound { "  client-bound" } else { "" }
        );
    }
    say!(
        "(latency columns: open loop at {} tps, 4 flows)",
        thousands(a.rate)
    );
    pingpong::print_table(pp, sockperf);
    print_targets(runs, pp, sockperf, a.no_pingpong);
}

fn print_targets(runs: &[ProfileRun], pp: &[PingPong], sockperf: bool, no_pingpong: bool) {
    let med = |v: Vec<f64>| Summary::of(v).map(|m| m.median);
    let naive = med(col(runs, "naive", |r| Some(r.max_tps)));
    let tuned = med(col(runs, "tuned", |r| Some(r.max_tps)));
    let tuned_sys = med(col(runs, "tuned", |r| r.server_syscalls_per_txn));
    let tuned_srv = med(col(runs, "tuned", |r| r.server_cpu_us_per_txn));
    let tuned_cli = med(col(runs, "tuned", |r| r.client_cpu_us_per_txn));
    say!("");
    say!("targets:");
    // A figure only when it was measured: an unmeasured target says so, never "0.00x".
    let show = |name: &str, ok: Option<bool>, detail: String| {
        let mark = match ok {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        say!("  {name:<52} {mark:<13} {detail}");
    };
    show(
        "tuned max tps >= naive max tps",
        tuned.zip(naive).map(|(t, n)| t >= n),
        tuned
            .zip(naive)
            .map(|(t, n)| format!("{:.2}x", t / n))
            .unwrap_or_default(),
    );
    show(
        "tuned syscalls/txn <= 0.1",
        tuned_sys.map(|s| s <= 0.1),
        tuned_sys.map(|s| format!("{s:.3}")).unwrap_or_default(),
    );
    show(
        "load CPU/txn <= tuned server CPU/txn",
        tuned_cli.zip(tuned_srv).map(|(c, s)| c <= s),
        tuned_cli
            .zip(tuned_srv)
            .map(|(c, s)| format!("client {c:.2} us vs server {s:.2} us"))
            .unwrap_or_default(),
    );
    for (name, ok, detail) in pingpong::targets(pp, sockperf, no_pingpong) {
        show(&name, ok, detail);
    }
}
