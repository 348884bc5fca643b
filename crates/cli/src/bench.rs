//! `firehose bench`: the engine benchmark (`make bench`, and `make demo` in short form).
//!
//! On loopback, server confined to one CPU and client pinned to another, it climbs the
//! profiles and measures each the same way, interleaved (A B C A B C ...): max tps in
//! closed loop, server and client CPU per transaction, server syscalls per transaction,
//! latency at a fixed open-loop rate; then unloaded ping-pong RTT side by side with
//! sockperf's own server and client. It prints figures; it never passes or fails.

use crate::args::{parse_cpu, parse_duration, parse_positive, parse_rate, thousands, Usage};
use anyhow::{bail, Context, Result};
use clap::Args;
use firehose_lab::stats::Summary;
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Arguments of `firehose bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Measured time per run, e.g. 3, 2.5s (each run also warms up for 1 s).
    #[arg(long, value_name = "DURATION", default_value = "3", value_parser = parse_duration)]
    duration: Duration,
    /// Repetitions of every measurement, interleaved across profiles.
    #[arg(long, default_value = "3", value_parser = parse_positive)]
    repetitions: usize,
    /// CPU for the server process (one).
    #[arg(long, value_name = "CPU", default_value = "0", value_parser = parse_cpu)]
    server_cpu: usize,
    /// CPU for the client (generator) thread (one).
    #[arg(long, value_name = "CPU", default_value = "1", value_parser = parse_cpu)]
    client_cpu: usize,
    /// Open-loop rate for the latency column, e.g. 50000, 50k.
    #[arg(long, value_name = "RATE", default_value = "50k", value_parser = parse_rate)]
    rate: f64,
    /// Profiles to measure, comma-separated [default: all in ladder order].
    #[arg(long, value_delimiter = ',')]
    profiles: Vec<String>,
    /// Skip the ping-pong comparison with sockperf.
    #[arg(long)]
    no_pingpong: bool,
    /// Write every repetition and the environment as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

const PROFILES: [&str; 5] = ["naive", "reuseport", "steered", "tuned", "latency"];

/// A `firehose serve` (or peer) child confined to one CPU; killed when dropped.
struct Proc {
    child: Child,
    addr: String,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait.
    fn stop(mut self) -> Result<()> {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .context("running kill")?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("finding the firehose executable")
}

fn start_serve(cpu: usize, profile: &str, stats: &Path) -> Result<Proc> {
    let mut child = Command::new("taskset")
        .args(["-c", &cpu.to_string()])
        .arg(exe()?)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--profile",
            profile,
        ])
        .arg("--stats-json")
        .arg(stats)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting firehose serve under taskset (util-linux)")?;
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().context("serve stdout")?);
    out.read_line(&mut first)?;
    // Keep reading, so the server never writes into a full or closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = first
        .trim()
        .strip_prefix("firehose serve: listening on ")
        .with_context(|| format!("serve did not start: {first:?}"))?
        .to_string();
    Ok(Proc { child, addr })
}

fn run_load(addr: &str, server_pid: u32, extra: &[String], json: &Path) -> Result<Value> {
    let out = Command::new(exe()?)
        .args(["load", "--target", addr, "--quiet", "--server-workers", "1"])
        .args(["--server-pid", &server_pid.to_string()])
        .arg("--json")
        .arg(json)
        .args(extra)
        .output()
        .context("running firehose load")?;
    if !out.status.success() {
        bail!(
            "load failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(json)?)?;
    Ok(v)
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_f64()
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

/// One ping-pong measurement.
#[derive(Debug, Clone, Serialize)]
struct PingPong {
    pair: String,
    repetition: usize,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
}

#[derive(Serialize)]
struct Env {
    kernel: String,
    cpu_model: String,
    nproc: usize,
    server_cpu: usize,
    client_cpu: usize,
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
        server_cpu: a.server_cpu,
        client_cpu: a.client_cpu,
    }
}

fn measure_profile(a: &BenchArgs, dir: &Path, profile: &str, rep: usize) -> Result<ProfileRun> {
    let secs = format!("{}", a.duration.as_secs_f64());
    let cpu = a.client_cpu.to_string();
    // Max tps: closed loop with enough requests in flight to fill batches.
    let stats = dir.join(format!("{profile}-{rep}-max.json"));
    let srv = start_serve(a.server_cpu, profile, &stats)?;
    let load = run_load(
        &srv.addr,
        srv.pid(),
        &[
            "--flows",
            "4",
            "--window",
            "32",
            "--batch",
            "64",
            "--warmup",
            "1",
            "--duration",
            &secs,
            "--cpus",
            &cpu,
        ]
        .map(String::from),
        &dir.join(format!("{profile}-{rep}-max-load.json")),
    )?;
    srv.stop()?;
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&stats)?)?;
    let syscalls = f(&s, &["totals", "syscalls"]).unwrap_or(0.0);
    let packets = f(&s, &["totals", "packets_out"]).unwrap_or(0.0);
    // Latency at a fixed rate, open loop.
    let stats2 = dir.join(format!("{profile}-{rep}-rate.json"));
    let srv = start_serve(a.server_cpu, profile, &stats2)?;
    let rate = run_load(
        &srv.addr,
        srv.pid(),
        &[
            "--rate".to_string(),
            format!("{}", a.rate),
            "--flows".into(),
            "4".into(),
            "--warmup".into(),
            "1".into(),
            "--duration".into(),
            secs.clone(),
            "--cpus".into(),
            cpu.clone(),
        ],
        &dir.join(format!("{profile}-{rep}-rate-load.json")),
    )?;
    srv.stop()?;
    Ok(ProfileRun {
        profile: profile.into(),
        repetition: rep,
        max_tps: f(&load, &["tps"]).unwrap_or(0.0),
        lost: f(&load, &["lost"]).unwrap_or(0.0),
        server_cpu_us_per_txn: f(&load, &["server_cpu_us_per_txn"]),
        client_cpu_us_per_txn: f(&load, &["client_cpu_us_per_txn"]),
        server_syscalls_per_txn: (packets > 0.0).then(|| syscalls / packets),
        client_bound: load
            .get("client_bound")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        rate_p50_us: f(&rate, &["latency_us", "p50"]),
        rate_p99_us: f(&rate, &["latency_us", "p99"]),
        rate_tps: f(&rate, &["tps"]).unwrap_or(0.0),
    })
}

fn start_sockperf_server(cpu: usize, port: u16) -> Result<Proc> {
    let child = Command::new("taskset")
        .args([
            "-c",
            &cpu.to_string(),
            "sockperf",
            "sr",
            "-i",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting sockperf sr")?;
    std::thread::sleep(Duration::from_millis(300));
    Ok(Proc {
        child,
        addr: format!("127.0.0.1:{port}"),
    })
}

fn sockperf_pp(a: &BenchArgs, addr: &str) -> Result<(f64, f64, f64)> {
    let (ip, port) = addr.rsplit_once(':').context("address")?;
    let out = Command::new("taskset")
        .args([
            "-c",
            &a.client_cpu.to_string(),
            "sockperf",
            "pp",
            "-i",
            ip,
            "-p",
            port,
            "-m",
            "100",
        ])
        .args([
            "-t",
            &format!("{}", a.duration.as_secs().max(1)),
            "--full-rtt",
        ])
        .output()
        .context("running sockperf pp")?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let r = firehose_lab::sockperf::parse_client(&text)
        .map_err(|e| anyhow::anyhow!("could not read sockperf's output ({e}): {}", text.trim()))?;
    let l = r.latency();
    match (l.p50, l.p99, l.mean) {
        (Some(p50), Some(p99), Some(mean)) => Ok((p50, p99, mean)),
        _ => bail!("sockperf printed no p50/p99/mean: {}", text.trim()),
    }
}

fn measure_pingpong(
    a: &BenchArgs,
    dir: &Path,
    rep: usize,
    sockperf: bool,
) -> Result<Vec<PingPong>> {
    let mut out = Vec::new();
    let secs = format!("{}", a.duration.as_secs_f64());
    let cpu = a.client_cpu.to_string();
    for (pair, spin) in [
        ("serve latency + load", false),
        ("serve latency + load --spin", true),
    ] {
        let stats = dir.join(format!("pp-{rep}-{spin}.json"));
        let srv = start_serve(a.server_cpu, "latency", &stats)?;
        let mut extra: Vec<String> = [
            "--flows",
            "1",
            "--window",
            "1",
            "--warmup",
            "0.5",
            "--duration",
            &secs,
            "--cpus",
            &cpu,
        ]
        .map(String::from)
        .to_vec();
        if spin {
            extra.push("--spin".into());
        }
        let v = run_load(
            &srv.addr,
            srv.pid(),
            &extra,
            &dir.join(format!("pp-{rep}-{spin}-load.json")),
        )?;
        srv.stop()?;
        out.push(PingPong {
            pair: pair.into(),
            repetition: rep,
            p50_us: f(&v, &["latency_us", "p50"]).unwrap_or(0.0),
            p99_us: f(&v, &["latency_us", "p99"]).unwrap_or(0.0),
            mean_us: f(&v, &["latency_us", "mean"]).unwrap_or(0.0),
        });
    }
    if sockperf {
        let srv = start_sockperf_server(
            a.server_cpu,
            firehose_lab::runner::free_loopback_port().map_err(|e| anyhow::anyhow!("{e}"))?,
        )?;
        let (p50, p99, mean) = sockperf_pp(a, &srv.addr)?;
        drop(srv);
        out.push(PingPong {
            pair: "sockperf sr + sockperf pp".into(),
            repetition: rep,
            p50_us: p50,
            p99_us: p99,
            mean_us: mean,
        });
        // sockperf's client cannot drive a plain echo server (it expects its server to
        // rewrite a header flag), so the pairs stay whole: our server with our client,
        // sockperf's server with sockperf's client.
    }
    Ok(out)
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
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    for c in [a.server_cpu, a.client_cpu] {
        if !allowed.contains(&c) {
            return Err(Usage(format!(
                "CPU {c} is not available (allowed: {allowed:?}); choose --server-cpu/--client-cpu"
            ))
            .into());
        }
    }
    if a.server_cpu == a.client_cpu {
        return Err(Usage(
            "--server-cpu and --client-cpu must differ: the rules of measurement pin them apart"
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
    let have_sockperf = Command::new("sockperf").arg("--version").output().is_ok();
    let dir = std::env::temp_dir().join(format!("firehose-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let e = env(&a);
    say!(
        "firehose bench: kernel {}, {}, {} CPUs; server on CPU {}, client on CPU {}; {} x {:.0} s per cell, interleaved",
        e.kernel, e.cpu_model, e.nproc, a.server_cpu, a.client_cpu, a.repetitions, a.duration.as_secs_f64()
    );
    let mut runs = Vec::new();
    let mut pp = Vec::new();
    let total = a.repetitions * (profiles.len() + usize::from(!a.no_pingpong));
    let mut step = 0;
    for rep in 1..=a.repetitions {
        for p in &profiles {
            step += 1;
            eprintln!("  [{step}/{total}] {p}, repetition {rep}");
            runs.push(measure_profile(&a, &dir, p, rep)?);
        }
        if !a.no_pingpong {
            step += 1;
            eprintln!("  [{step}/{total}] ping-pong, repetition {rep}");
            pp.extend(measure_pingpong(&a, &dir, rep, have_sockperf)?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    print_tables(&a, &profiles, &runs, &pp, have_sockperf);
    if let Some(path) = &a.json {
        let doc = BenchDoc {
            env: e,
            duration_s: a.duration.as_secs_f64(),
            repetitions: a.repetitions,
            rate: a.rate,
            profiles: runs,
            pingpong: pp,
        };
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
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
    if !pp.is_empty() {
        say!("");
        say!(
            "{:<30} {:>22} {:>22} {:>22}",
            "ping-pong RTT (1 flow)",
            "p50 us",
            "p99 us",
            "mean us"
        );
        let mut pairs: Vec<&str> = pp.iter().map(|x| x.pair.as_str()).collect();
        pairs.dedup();
        pairs.sort_unstable();
        pairs.dedup();
        for pair in pairs {
            let get = |g: fn(&PingPong) -> f64| {
                pp.iter()
                    .filter(|x| x.pair == pair)
                    .map(g)
                    .collect::<Vec<_>>()
            };
            say!(
                "{:<30} {:>22} {:>22} {:>22}",
                pair,
                fmt_mmm(&get(|x| x.p50_us), 1, false),
                fmt_mmm(&get(|x| x.p99_us), 1, false),
                fmt_mmm(&get(|x| x.mean_us), 1, false)
            );
        }
        if !sockperf {
            say!("(sockperf is not installed: `apt-get install sockperf` or `make peers` to compare)");
        }
    }
    print_targets(runs, pp);
}

fn print_targets(runs: &[ProfileRun], pp: &[PingPong]) {
    let med = |v: Vec<f64>| Summary::of(v).map(|m| m.median);
    let naive = med(col(runs, "naive", |r| Some(r.max_tps)));
    let tuned = med(col(runs, "tuned", |r| Some(r.max_tps)));
    let tuned_sys = med(col(runs, "tuned", |r| r.server_syscalls_per_txn));
    let tuned_srv = med(col(runs, "tuned", |r| r.server_cpu_us_per_txn));
    let tuned_cli = med(col(runs, "tuned", |r| r.client_cpu_us_per_txn));
    let ours = med(pp
        .iter()
        .filter(|x| x.pair == "serve latency + load")
        .map(|x| x.p50_us)
        .collect());
    let theirs = med(pp
        .iter()
        .filter(|x| x.pair == "sockperf sr + sockperf pp")
        .map(|x| x.p50_us)
        .collect());
    say!("");
    say!("targets:");
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
        format!(
            "{:.2}x",
            tuned.zip(naive).map(|(t, n)| t / n).unwrap_or(0.0)
        ),
    );
    show(
        "tuned syscalls/txn <= 0.1",
        tuned_sys.map(|s| s <= 0.1),
        format!("{:.3}", tuned_sys.unwrap_or(0.0)),
    );
    show(
        "load CPU/txn <= tuned server CPU/txn",
        tuned_cli.zip(tuned_srv).map(|(c, s)| c <= s),
        format!(
            "client {:.2} us vs server {:.2} us",
            tuned_cli.unwrap_or(0.0),
            tuned_srv.unwrap_or(0.0)
        ),
    );
    show(
        "ping-pong p50 <= 0.8x sockperf's",
        ours.zip(theirs).map(|(o, t)| o <= 0.8 * t),
        format!(
            "{:.2}x",
            ours.zip(theirs).map(|(o, t)| o / t).unwrap_or(0.0)
        ),
    );
}
