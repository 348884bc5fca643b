//! `lab compare --io socket,xdp`: the kernel socket path against AF_XDP on the veth
//! topology, server on one CPU and generator on another, repetitions interleaved (every cell
//! once per repetition, in turn), medians with min-max.
//!
//! Cells, each a server command and a generator command:
//! - echo at saturation (closed loop, many flows): `serve --io socket --profile tuned` and
//!   `serve --io xdp --profile xdp`, both driven by `load --io xdp` (the cheapest generator,
//!   so the server is what saturates), and the socket server driven by `load --io socket`
//!   too (the two generators' CPU per transaction side by side);
//! - unloaded ping-pong (one flow, one request in flight), busy-polling both ends: the
//!   socket path (`--profile latency`, `load --spin`) and AF_XDP (`--profile xdp
//!   --busy-poll`, `load --io xdp --spin`).
//!
//! Per trial: tps and latency from load's JSON, server and client process CPU per
//! transaction (load's `--server-pid` and its own threads), and the headline, total host CPU
//! per transaction: busy time of every CPU in /proc/stat over the measured window, divided
//! by the transactions in it (on veth the receive softirq runs on the sender's CPU, so
//! process CPU alone flatters whoever receives). On a shared host that total also holds
//! everyone else's work: read it beside the load average the report records.

use crate::stats::Summary;
use crate::topology::{Side, Topology};
use crate::{LabError, LabResult};
use firehose_host::procfs::{self, stat};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The server paths `--io` names.
pub const IOS: &[&str] = &["socket", "xdp"];

/// What to run.
#[derive(Debug, Clone)]
pub struct XdpCompareOptions {
    /// The `firehose` binary.
    pub bin: PathBuf,
    /// Server paths to include ("socket", "xdp").
    pub ios: Vec<String>,
    pub repetitions: usize,
    pub duration_s: u64,
    pub warmup_s: u64,
    /// Echo payload bytes.
    pub size: usize,
    pub server_cpu: usize,
    pub client_cpu: usize,
    /// Flows and window of the saturation cells.
    pub flows: usize,
    pub window: usize,
    pub workdir: PathBuf,
}

/// One configuration: a server and the generator driving it.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// "echo" (saturation) or "rtt" (ping-pong).
    pub group: &'static str,
    pub name: String,
    pub server_args: Vec<String>,
    pub client_args: Vec<String>,
}

/// What one trial measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub tps: f64,
    pub completed: u64,
    pub lost: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub server_cpu_us_per_txn: Option<f64>,
    pub client_cpu_us_per_txn: Option<f64>,
    pub host_cpu_us_per_txn: Option<f64>,
    pub client_bound: bool,
}

/// A cell's trials and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cell: Cell,
    pub trials: Vec<Measured>,
    pub tps: Option<Summary>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    pub server_cpu_us_per_txn: Option<Summary>,
    pub client_cpu_us_per_txn: Option<Summary>,
    pub host_cpu_us_per_txn: Option<Summary>,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The cells for the asked server paths, on a topology whose devices are `sdev`/`cdev`.
pub fn cells(o: &XdpCompareOptions, sdev: &str, cdev: &str) -> Vec<Cell> {
    let load_xdp = s(&["--io", "xdp", "--iface", cdev]);
    let sat = |extra: &[String]| {
        let mut v = s(&[
            "--flows",
            &o.flows.to_string(),
            "--window",
            &o.window.to_string(),
            "--size",
            &o.size.to_string(),
        ]);
        v.extend_from_slice(extra);
        v
    };
    let rtt = |extra: &[String]| {
        let mut v = s(&["--flows", "1", "--window", "1", "--spin"]);
        v.extend(s(&["--size", &o.size.to_string()]));
        v.extend_from_slice(extra);
        v
    };
    let socket_srv = |profile: &str| s(&["--io", "socket", "--profile", profile, "--workers", "1"]);
    let xdp_srv = |extra: &[&str]| {
        let mut v = s(&["--io", "xdp", "--iface", sdev, "--profile", "xdp"]);
        v.extend(s(extra));
        v
    };
    let mut out = Vec::new();
    let want = |io: &str| o.ios.iter().any(|i| i == io);
    if want("socket") {
        out.push(Cell {
            group: "echo",
            name: "serve socket tuned <- load xdp".into(),
            server_args: socket_srv("tuned"),
            client_args: sat(&load_xdp),
        });
        out.push(Cell {
            group: "echo",
            name: "serve socket tuned <- load socket".into(),
            server_args: socket_srv("tuned"),
            client_args: sat(&[]),
        });
    }
    if want("xdp") {
        out.push(Cell {
            group: "echo",
            name: "serve xdp <- load xdp".into(),
            server_args: xdp_srv(&[]),
            client_args: sat(&load_xdp),
        });
    }
    if want("socket") {
        out.push(Cell {
            group: "rtt",
            name: "ping-pong socket (busy poll) <- load socket --spin".into(),
            server_args: socket_srv("latency"),
            client_args: rtt(&[]),
        });
    }
    if want("xdp") {
        out.push(Cell {
            group: "rtt",
            name: "ping-pong xdp (busy poll) <- load xdp --spin".into(),
            server_args: xdp_srv(&["--busy-poll", "50"]),
            client_args: rtt(&load_xdp),
        });
    }
    out
}

/// Busy and total jiffies of all CPUs together.
fn host_jiffies() -> LabResult<(u64, u64)> {
    let st = procfs::read("/proc/stat", stat::parse)?;
    let t = st.total;
    let busy = t.user + t.nice + t.system + t.irq + t.softirq + t.steal;
    Ok((busy, busy + t.idle + t.iowait))
}

/// A started server: its process and the thread draining its output.
struct Server {
    child: Child,
}

impl Server {
    fn start(
        topo: &Topology,
        o: &XdpCompareOptions,
        args: &[String],
        port: u16,
    ) -> LabResult<Server> {
        let mut c = topo.command(Side::Server, &[o.server_cpu], &o.bin.to_string_lossy());
        c.args([
            "serve",
            "--listen",
            &format!("{}:{port}", topo.server_addr()),
        ]);
        c.args(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| LabError::Command(format!("starting firehose serve: {e}")))?;
        let out = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // The socket table or the AF_XDP backend line ends the start-up printout.
                if !sent && (line.contains("backend af_xdp") || line.contains("socket 0:")) {
                    sent = tx.send(()).is_ok();
                }
            }
        });
        let mut srv = Server { child };
        if rx.recv_timeout(Duration::from_secs(15)).is_err() {
            let mut err = String::new();
            if let Some(mut e) = srv.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(LabError::Run(format!(
                "firehose serve {} did not start: {}",
                args.join(" "),
                err.trim()
            )));
        }
        Ok(srv)
    }

    fn stop(mut self) {
        let _ = crate::cmd::run("kill", &["-INT", &self.child.id().to_string()]);
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one trial of `cell`.
fn trial(
    topo: &Topology,
    o: &XdpCompareOptions,
    cell: &Cell,
    tag: &str,
    port: u16,
) -> LabResult<Measured> {
    let srv = Server::start(topo, o, &cell.server_args, port)?;
    let json = o.workdir.join(format!("{tag}.json"));
    let mut c = topo.command(Side::Client, &[o.client_cpu], &o.bin.to_string_lossy());
    c.args([
        "load",
        "--target",
        &format!("{}:{port}", topo.server_addr()),
    ]);
    c.args(&cell.client_args);
    c.args(["--duration", &o.duration_s.to_string()]);
    c.args([
        "--warmup",
        &o.warmup_s.to_string(),
        "--quiet",
        "--interval",
        "0",
    ]);
    c.args(["--server-pid", &srv.child.id().to_string(), "--json"]);
    c.arg(&json);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let child = c
        .spawn()
        .map_err(|e| LabError::Command(format!("starting firehose load: {e}")))?;
    // /proc/stat over the generator's measured window (after its warm-up and start-up).
    std::thread::sleep(Duration::from_secs(o.warmup_s) + Duration::from_millis(300));
    let (b0, _) = host_jiffies()?;
    let t0 = Instant::now();
    let measure = Duration::from_secs(o.duration_s).saturating_sub(Duration::from_millis(600));
    std::thread::sleep(measure);
    let (b1, _) = host_jiffies()?;
    let window = t0.elapsed().as_secs_f64();
    let out = child
        .wait_with_output()
        .map_err(|e| LabError::Command(format!("waiting for firehose load: {e}")))?;
    srv.stop();
    if !out.status.success() {
        return Err(LabError::Run(format!(
            "firehose load {} failed after {:.1} s: {}",
            cell.client_args.join(" "),
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = std::fs::read_to_string(&json).map_err(|e| LabError::io(json.display(), e))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| LabError::Run(format!("{}: {e}", json.display())))?;
    let f = |k: &str| doc[k].as_f64();
    let tps = f("tps").unwrap_or(0.0);
    let ticks = firehose_sys::cpu::clock_ticks_per_sec() as f64;
    let host_s = (b1.saturating_sub(b0)) as f64 / ticks;
    let txns = tps * window;
    Ok(Measured {
        tps,
        completed: doc["completed"].as_u64().unwrap_or(0),
        lost: doc["lost"].as_u64().unwrap_or(0),
        p50_us: doc["latency_us"]["p50"].as_f64().unwrap_or(f64::NAN),
        p99_us: doc["latency_us"]["p99"].as_f64().unwrap_or(f64::NAN),
        server_cpu_us_per_txn: f("server_cpu_us_per_txn"),
        client_cpu_us_per_txn: f("client_cpu_us_per_txn"),
        host_cpu_us_per_txn: (txns > 0.0 && host_s > 0.0).then(|| host_s * 1e6 / txns),
        client_bound: doc["client_bound"].as_bool().unwrap_or(false),
    })
}

/// Runs every cell `repetitions` times, interleaved, on a fresh veth topology `id`.
pub fn run(o: &XdpCompareOptions, id: &str, stop: &AtomicBool) -> LabResult<Vec<Row>> {
    if o.repetitions == 0 {
        return Err(LabError::Usage("--repetitions must be at least 1".into()));
    }
    let mut topo = Topology::veth(id, 1)?;
    let cells = cells(o, &topo.dev(Side::Server), &topo.dev(Side::Client));
    std::fs::create_dir_all(&o.workdir).map_err(|e| LabError::io(o.workdir.display(), e))?;
    let mut trials: Vec<Vec<Measured>> = vec![Vec::new(); cells.len()];
    let mut result = Ok(());
    'reps: for rep in 0..o.repetitions {
        for (i, cell) in cells.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                result = Err(LabError::Interrupted);
                break 'reps;
            }
            eprintln!(
                "lab compare --io: repetition {}/{}: {}",
                rep + 1,
                o.repetitions,
                cell.name
            );
            // A fresh port per trial: no late answer of the previous one can land in it.
            let port = 7200 + (rep * cells.len() + i) as u16;
            match trial(&topo, o, cell, &format!("xdp-{rep}-{i}"), port) {
                Ok(m) => trials[i].push(m),
                Err(e) => {
                    result = Err(e);
                    break 'reps;
                }
            }
        }
    }
    let torn = topo.teardown();
    result?;
    torn?;
    Ok(cells
        .into_iter()
        .zip(trials)
        .map(|(cell, t)| {
            let sum = |g: fn(&Measured) -> Option<f64>| Summary::of(t.iter().filter_map(g));
            Row {
                tps: sum(|m| Some(m.tps)),
                p50_us: sum(|m| Some(m.p50_us)),
                p99_us: sum(|m| Some(m.p99_us)),
                server_cpu_us_per_txn: sum(|m| m.server_cpu_us_per_txn),
                client_cpu_us_per_txn: sum(|m| m.client_cpu_us_per_txn),
                host_cpu_us_per_txn: sum(|m| m.host_cpu_us_per_txn),
                cell,
                trials: t,
            }
        })
        .collect())
}

fn fmt(s: &Option<Summary>, digits: usize) -> String {
    match s {
        Some(s) => format!("{:.d$} ({:.d$}-{:.d$})", s.median, s.min, s.max, d = digits),
        None => "-".into(),
    }
}

/// The table of results, a row per cell, then the ratios the comparison is about.
pub fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    t.push_str(
        "| cell | tps | host CPU us/txn | server CPU us/txn | client CPU us/txn | p50 us | p99 us |\n",
    );
    t.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        let bound = if r.trials.iter().any(|m| m.client_bound) {
            " (CLIENT-BOUND)"
        } else {
            ""
        };
        t.push_str(&format!(
            "| {}{bound} | {} | {} | {} | {} | {} | {} |\n",
            r.cell.name,
            fmt(&r.tps, 0),
            fmt(&r.host_cpu_us_per_txn, 3),
            fmt(&r.server_cpu_us_per_txn, 3),
            fmt(&r.client_cpu_us_per_txn, 3),
            fmt(&r.p50_us, 1),
            fmt(&r.p99_us, 1),
        ));
    }
    let find = |name: &str| rows.iter().find(|r| r.cell.name == name);
    let med = |s: &Option<Summary>| s.as_ref().map(|s| s.median);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    if let (Some(x), Some(k)) = (
        find("serve xdp <- load xdp"),
        find("serve socket tuned <- load xdp"),
    ) {
        t.push_str(&format!(
            "\nserver xdp / socket tuned (same generator): max tps {}, host CPU per txn {}, server CPU per txn {}\n",
            ratio(med(&x.tps), med(&k.tps)),
            ratio(med(&x.host_cpu_us_per_txn), med(&k.host_cpu_us_per_txn)),
            ratio(med(&x.server_cpu_us_per_txn), med(&k.server_cpu_us_per_txn)),
        ));
    }
    if let (Some(x), Some(k)) = (
        find("serve socket tuned <- load xdp"),
        find("serve socket tuned <- load socket"),
    ) {
        t.push_str(&format!(
            "generator xdp / socket (same server): client CPU per txn {}\n",
            ratio(med(&x.client_cpu_us_per_txn), med(&k.client_cpu_us_per_txn)),
        ));
    }
    t
}
