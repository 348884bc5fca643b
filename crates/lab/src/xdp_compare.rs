//! `lab compare --io socket,xdp,uring`: the kernel socket path against AF_XDP (and io_uring
//! on the same sockets) on the veth
//! topology, server on one CPU and generator on another, repetitions interleaved (every cell
//! once per repetition, in turn), medians with min-max.
//!
//! Cells, each a server command and a generator command:
//! - echo at saturation (closed loop, many flows): `serve --io socket --profile tuned` and
//!   `serve --io xdp --profile xdp`, both driven by `load --io xdp` (the cheapest generator,
//!   so the server is what saturates), and both driven by `load --io socket` too (the two
//!   generators' CPU per transaction side by side, against the same server);
//! - unloaded ping-pong (one flow, one request in flight), busy-polling both ends: the
//!   socket path (`--profile latency`, `load --spin`) and AF_XDP (`--profile xdp
//!   --busy-poll`, `load --io xdp --spin`);
//! - DNS at saturation over one generated zone: `serve --proto dns --io xdp` against Knot
//!   DNS in its XDP mode (`xdp: listen: IFACE@PORT`) and in its socket mode, under `load
//!   --proto dns --io xdp` and under dnsperf (kernel sockets) as a second driver. A knotd
//!   that cannot run its XDP mode is skipped with the reason.
//!
//! Per trial, with the lab's harness (two [`HostSample`]s around the measured window and
//! [`metrics::of_samples`]): tps and latency from the driver, server and client process CPU
//! per transaction, and the headline, total host CPU per transaction: busy time of every
//! CPU in /proc/stat over the window, divided by the transactions in it (on veth the receive softirq runs on the sender's CPU, so
//! process CPU alone flatters whoever receives). On a shared host that total also holds
//! everyone else's work: read it beside the load average the report records.

use crate::metrics::{self, Inputs};
use crate::sample::{HostSample, Watch};
use crate::stats::Summary;
use crate::topology::{Side, Topology};
use crate::{LabError, LabResult};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The server paths `--io` names.
pub const IOS: &[&str] = &["socket", "xdp", "uring"];

/// What to run.
#[derive(Debug, Clone)]
pub struct XdpCompareOptions {
    /// The `firehose` binary.
    pub bin: PathBuf,
    /// Server paths to include ("socket", "xdp", "uring").
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
    /// Add the DNS cells (zone of this many names).
    pub dns_names: Option<usize>,
}

/// A server of a cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ServerCmd {
    /// `firehose serve --listen ADDR:PORT` and these flags.
    Firehose(Vec<String>),
    /// knotd over the cell's zone, in its XDP mode on the server's veth or on sockets.
    Knot { xdp: bool },
}

/// What drives a cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Driver {
    /// `firehose load --target ADDR:PORT` and these flags.
    Load(Vec<String>),
    /// dnsperf over the query file, one thread, `outstanding` queries in flight.
    Dnsperf { outstanding: usize },
}

/// One configuration: a server and the generator driving it.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// "echo" (saturation), "rtt" (ping-pong) or "dns".
    pub group: &'static str,
    pub name: String,
    pub server: ServerCmd,
    pub driver: Driver,
}

/// The zone and query file of the DNS cells.
#[derive(Debug, Clone)]
pub struct DnsFiles {
    pub zone: PathBuf,
    pub queries: PathBuf,
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
    pub client_syscalls_per_txn: Option<f64>,
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
    /// Why the cell did not run.
    pub skipped: Option<String>,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The cells for the asked server paths, on a topology whose devices are `sdev`/`cdev`.
pub fn cells(o: &XdpCompareOptions, sdev: &str, cdev: &str, dns: Option<&DnsFiles>) -> Vec<Cell> {
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
        Driver::Load(v)
    };
    let rtt = |extra: &[String]| {
        let mut v = s(&["--flows", "1", "--window", "1", "--spin"]);
        v.extend(s(&["--size", &o.size.to_string()]));
        v.extend_from_slice(extra);
        Driver::Load(v)
    };
    let socket_srv = |profile: &str| {
        ServerCmd::Firehose(s(&[
            "--io",
            "socket",
            "--profile",
            profile,
            "--workers",
            "1",
        ]))
    };
    let xdp_srv = |extra: &[&str]| {
        let mut v = s(&["--io", "xdp", "--iface", sdev, "--profile", "xdp"]);
        v.extend(s(extra));
        ServerCmd::Firehose(v)
    };
    let uring_srv = |profile: &str| {
        ServerCmd::Firehose(s(&[
            "--io",
            "uring",
            "--profile",
            profile,
            "--workers",
            "1",
        ]))
    };
    let cell = |group, name: &str, server, driver| Cell {
        group,
        name: name.into(),
        server,
        driver,
    };
    let mut out = Vec::new();
    // With a zone, the DNS cells alone; otherwise echo and ping-pong for the asked paths.
    let want = |io: &str| dns.is_none() && o.ios.iter().any(|i| i == io);
    if want("socket") {
        out.push(cell(
            "echo",
            "serve socket tuned <- load xdp",
            socket_srv("tuned"),
            sat(&load_xdp),
        ));
        out.push(cell(
            "echo",
            "serve socket tuned <- load socket",
            socket_srv("tuned"),
            sat(&[]),
        ));
    }
    if want("xdp") {
        out.push(cell(
            "echo",
            "serve xdp <- load xdp",
            xdp_srv(&[]),
            sat(&load_xdp),
        ));
        out.push(cell(
            "echo",
            "serve xdp <- load socket",
            xdp_srv(&[]),
            sat(&[]),
        ));
    }
    if want("uring") {
        out.push(cell(
            "echo",
            "serve uring tuned <- load xdp",
            uring_srv("tuned"),
            sat(&load_xdp),
        ));
        out.push(cell(
            "echo",
            "serve uring tuned <- load socket",
            uring_srv("tuned"),
            sat(&[]),
        ));
    }
    if want("socket") {
        out.push(cell(
            "rtt",
            "ping-pong socket (busy poll) <- load socket --spin",
            socket_srv("latency"),
            rtt(&[]),
        ));
    }
    if want("xdp") {
        out.push(cell(
            "rtt",
            "ping-pong xdp (busy poll) <- load xdp --spin",
            xdp_srv(&["--busy-poll", "50"]),
            rtt(&load_xdp),
        ));
    }
    if want("uring") {
        out.push(cell(
            "rtt",
            "ping-pong uring (busy poll) <- load socket --spin",
            uring_srv("latency"),
            rtt(&[]),
        ));
    }
    if let Some(f) = dns {
        let zone = f.zone.to_string_lossy().into_owned();
        let queries = f.queries.to_string_lossy().into_owned();
        let dns_load = || {
            let mut v = s(&["--proto", "dns", "--queries", &queries]);
            v.extend(s(&[
                "--flows",
                &o.flows.to_string(),
                "--window",
                &o.window.to_string(),
            ]));
            v.extend_from_slice(&load_xdp);
            Driver::Load(v)
        };
        let dnsperf = Driver::Dnsperf {
            outstanding: o.flows * o.window,
        };
        let mut fh = s(&["--proto", "dns", "--zone", &zone]);
        fh.extend(s(&["--io", "xdp", "--iface", sdev, "--profile", "xdp"]));
        let servers = [
            ("firehose xdp", ServerCmd::Firehose(fh)),
            ("knot xdp", ServerCmd::Knot { xdp: true }),
            ("knot socket", ServerCmd::Knot { xdp: false }),
        ];
        for (name, srv) in &servers {
            out.push(cell(
                "dns",
                &format!("dns {name} <- load xdp"),
                srv.clone(),
                dns_load(),
            ));
        }
        for (name, srv) in servers {
            out.push(cell(
                "dns",
                &format!("dns {name} <- dnsperf"),
                srv,
                dnsperf.clone(),
            ));
        }
    }
    out
}

/// knotd's configuration: the zone, one UDP worker, and in XDP mode the server's veth.
fn knot_conf(
    dir: &std::path::Path,
    addr: &str,
    port: u16,
    xdp: Option<&str>,
    zone: &str,
) -> String {
    let d = dir.display();
    let xdp = xdp.map_or(String::new(), |dev| {
        format!("xdp:\n  listen: {dev}@{port}\n")
    });
    format!(
        "server:\n  rundir: \"{d}\"\n  listen: {addr}@{port}\n  udp-workers: 1\n  tcp-workers: 1\n  \
         background-workers: 1\n{xdp}\
         database:\n  storage: \"{d}\"\n\
         log:\n  - target: stderr\n    any: error\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
         zone:\n  - domain: {apex}\n    file: \"{zone}\"\n",
        apex = crate::dns_compare::APEX,
    )
}

/// A started server, killed on drop.
struct Server {
    child: Child,
}

/// Why a server did not start: knotd's XDP mode may be missing (the cell is skipped).
enum StartError {
    Refused(String),
    Lab(LabError),
}

impl Server {
    fn start(
        topo: &Topology,
        o: &XdpCompareOptions,
        cmd: &ServerCmd,
        port: u16,
        dns: Option<&DnsFiles>,
    ) -> Result<Server, StartError> {
        let addr = topo.server_addr().to_string();
        let mut c = match cmd {
            ServerCmd::Firehose(args) => {
                let mut c = topo.command(Side::Server, &[o.server_cpu], &o.bin.to_string_lossy());
                c.args(["serve", "--listen", &format!("{addr}:{port}")]);
                c.args(args);
                c
            }
            ServerCmd::Knot { xdp } => {
                let zone = dns
                    .map(|f| f.zone.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let dir = o.workdir.join(format!("knot-{port}"));
                std::fs::create_dir_all(&dir)
                    .map_err(|e| StartError::Lab(LabError::io(dir.display(), e)))?;
                let dev = topo.dev(Side::Server);
                let conf = dir.join("knot.conf");
                let text = knot_conf(&dir, &addr, port, xdp.then_some(dev.as_str()), &zone);
                std::fs::write(&conf, text)
                    .map_err(|e| StartError::Lab(LabError::io(conf.display(), e)))?;
                let mut c = topo.command(Side::Server, &[o.server_cpu], "knotd");
                c.arg("-c").arg(conf);
                c
            }
        };
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| StartError::Lab(LabError::Command(format!("starting {cmd:?}: {e}"))))?;
        let out = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // The socket table or the AF_XDP backend line ends serve's start-up printout.
                if !sent && (line.contains("backend af_xdp") || line.contains("socket 0:")) {
                    sent = tx.send(()).is_ok();
                }
            }
        });
        let mut srv = Server { child };
        let ready = match cmd {
            ServerCmd::Firehose(_) => rx.recv_timeout(Duration::from_secs(15)).is_ok(),
            // knotd prints nothing when all is well: give it time to load the zone (and
            // attach its program), then check that it is still running.
            ServerCmd::Knot { .. } => {
                std::thread::sleep(Duration::from_secs(2));
                matches!(srv.child.try_wait(), Ok(None))
            }
        };
        if !ready {
            let _ = srv.child.kill();
            let mut err = String::new();
            if let Some(mut e) = srv.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let msg = format!("{cmd:?} did not start: {}", err.trim());
            return Err(match cmd {
                ServerCmd::Knot { xdp: true } => StartError::Refused(msg),
                _ => StartError::Lab(LabError::Run(msg)),
            });
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

/// The driver's command line.
fn driver_command(
    topo: &Topology,
    o: &XdpCompareOptions,
    cell: &Cell,
    port: u16,
    server_pid: u32,
    json: &std::path::Path,
    dns: Option<&DnsFiles>,
) -> std::process::Command {
    let target = topo.server_addr().to_string();
    match &cell.driver {
        Driver::Load(args) => {
            let mut c = topo.command(Side::Client, &[o.client_cpu], &o.bin.to_string_lossy());
            c.args(["load", "--target", &format!("{target}:{port}")]);
            c.args(args);
            c.args(["--duration", &o.duration_s.to_string()]);
            c.args([
                "--warmup",
                &o.warmup_s.to_string(),
                "--quiet",
                "--interval",
                "0",
            ]);
            c.args(["--server-pid", &server_pid.to_string(), "--json-file"]);
            c.arg(json);
            c
        }
        Driver::Dnsperf { outstanding } => {
            let mut c = topo.command(Side::Client, &[o.client_cpu], "dnsperf");
            c.args(["-s", &target, "-p", &port.to_string(), "-d"]);
            c.arg(dns.map(|f| f.queries.clone()).unwrap_or_default());
            c.args([
                "-l",
                &(o.warmup_s + o.duration_s).to_string(),
                "-c",
                "1",
                "-T",
                "1",
            ]);
            c.args(["-q", &outstanding.to_string(), "-t", "1"]);
            c
        }
    }
}

/// Runs one trial of `cell`. `Ok(None)`: the server refused to start in a way that means
/// the cell cannot run here (knotd without XDP), with the reason in the error string.
fn trial(
    topo: &Topology,
    o: &XdpCompareOptions,
    cell: &Cell,
    tag: &str,
    port: u16,
    dns: Option<&DnsFiles>,
) -> LabResult<Result<Measured, String>> {
    let srv = match Server::start(topo, o, &cell.server, port, dns) {
        Ok(s) => s,
        Err(StartError::Refused(why)) => return Ok(Err(why)),
        Err(StartError::Lab(e)) => return Err(e),
    };
    let json = o.workdir.join(format!("{tag}.json"));
    let server_pid = srv.child.id();
    let mut c = driver_command(topo, o, cell, port, server_pid, &json, dns);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let child = c
        .spawn()
        .map_err(|e| LabError::Command(format!("starting the driver of {}: {e}", cell.name)))?;
    let watch = Watch {
        server_pid,
        client_pid: child.id(),
        port,
        separate_ns: true,
    };
    // The harness's samples (process CPU, /proc/stat, drops) around the driver's measured
    // window: after its warm-up and start-up, ending before it stops.
    std::thread::sleep(Duration::from_secs(o.warmup_s) + Duration::from_millis(300));
    let before = HostSample::take(&watch)?;
    let measure = Duration::from_secs(o.duration_s).saturating_sub(Duration::from_millis(600));
    std::thread::sleep(measure);
    let after = HostSample::take(&watch)?;
    let out = child
        .wait_with_output()
        .map_err(|e| LabError::Command(format!("waiting for the driver of {}: {e}", cell.name)))?;
    srv.stop();
    if cell.server == (ServerCmd::Knot { xdp: true }) {
        // knotd leaves its XDP program on the interface when it exits: the lab started it on
        // the lab's own veth, so the lab removes it before the next cell.
        let ns = topo.netns(Side::Server).unwrap_or_default();
        let dev = topo.dev(Side::Server);
        for mode in ["xdp", "xdpgeneric"] {
            let _ = crate::cmd::run("ip", &["-n", &ns, "link", "set", "dev", &dev, mode, "off"]);
        }
    }
    if !out.status.success() {
        return Err(LabError::Run(format!(
            "{}: the driver failed after {:.1} s: {}",
            cell.name,
            started.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let mut m = match &cell.driver {
        Driver::Load(_) => {
            let text =
                std::fs::read_to_string(&json).map_err(|e| LabError::io(json.display(), e))?;
            let doc: Value = serde_json::from_str(&text)
                .map_err(|e| LabError::Run(format!("{}: {e}", json.display())))?;
            Measured {
                tps: doc["tps"].as_f64().unwrap_or(0.0),
                completed: doc["completed"].as_u64().unwrap_or(0),
                lost: doc["lost"].as_u64().unwrap_or(0),
                p50_us: doc["latency_us"]["p50"].as_f64().unwrap_or(f64::NAN),
                p99_us: doc["latency_us"]["p99"].as_f64().unwrap_or(f64::NAN),
                server_cpu_us_per_txn: None,
                client_cpu_us_per_txn: None,
                client_syscalls_per_txn: doc["client_syscalls_per_txn"].as_f64(),
                host_cpu_us_per_txn: None,
                client_bound: doc["client_bound"].as_bool().unwrap_or(false),
            }
        }
        Driver::Dnsperf { .. } => {
            let text = String::from_utf8_lossy(&out.stdout);
            let r = crate::dns_compare::drivers::parse_dnsperf(&text).ok_or_else(|| {
                LabError::Run(format!(
                    "{}: no summary in dnsperf's output: {text}",
                    cell.name
                ))
            })?;
            Measured {
                tps: r.qps,
                completed: r.completed,
                lost: r.lost,
                p50_us: f64::NAN,
                p99_us: f64::NAN,
                server_cpu_us_per_txn: None,
                client_cpu_us_per_txn: None,
                client_syscalls_per_txn: None,
                host_cpu_us_per_txn: None,
                client_bound: false,
            }
        }
    };
    let (_, fig) = metrics::of_samples(
        &before,
        &after,
        &Inputs {
            tps: m.tps,
            size: o.size,
            server_cpus: 1,
            client_cpus: 1,
            engine_syscalls_per_packet: None,
            perf: None,
        },
    );
    m.server_cpu_us_per_txn = fig.server_cpu_us_per_txn;
    m.client_cpu_us_per_txn = fig.client_cpu_us_per_txn;
    m.host_cpu_us_per_txn = fig.host_cpu_us_per_txn;
    m.client_bound = fig.client_bound;
    Ok(Ok(m))
}

/// Writes the zone and query file of the DNS cells into the work directory.
fn dns_files(o: &XdpCompareOptions, names: usize) -> LabResult<DnsFiles> {
    let (zone_text, exist) = crate::dns_compare::generate_zone(names);
    let f = DnsFiles {
        zone: o.workdir.join("bench.zone"),
        queries: o.workdir.join("queries.txt"),
    };
    let queries = crate::dns_compare::generate_queries(&exist, 100_000);
    for (path, text) in [(&f.zone, zone_text), (&f.queries, queries)] {
        std::fs::write(path, text).map_err(|e| LabError::io(path.display(), e))?;
    }
    Ok(f)
}

/// Runs every cell `repetitions` times, interleaved, on a fresh veth topology `id`.
pub fn run(o: &XdpCompareOptions, id: &str, stop: &AtomicBool) -> LabResult<Vec<Row>> {
    if o.repetitions == 0 {
        return Err(LabError::Usage("--repetitions must be at least 1".into()));
    }
    std::fs::create_dir_all(&o.workdir).map_err(|e| LabError::io(o.workdir.display(), e))?;
    let dns = o.dns_names.map(|n| dns_files(o, n)).transpose()?;
    let mut topo = Topology::veth(id, 1)?;
    let cells = cells(
        o,
        &topo.dev(Side::Server),
        &topo.dev(Side::Client),
        dns.as_ref(),
    );
    let mut trials: Vec<Vec<Measured>> = vec![Vec::new(); cells.len()];
    let mut skipped: Vec<Option<String>> = vec![None; cells.len()];
    let mut result = Ok(());
    'reps: for rep in 0..o.repetitions {
        for (i, cell) in cells.iter().enumerate() {
            if stop.load(Ordering::Relaxed) {
                result = Err(LabError::Interrupted);
                break 'reps;
            }
            if skipped[i].is_some() {
                continue;
            }
            eprintln!(
                "lab compare --io: repetition {}/{}: {}",
                rep + 1,
                o.repetitions,
                cell.name
            );
            // A fresh port per trial: no late answer of the previous one can land in it.
            let port = 7200 + (rep * cells.len() + i) as u16;
            match trial(
                &topo,
                o,
                cell,
                &format!("xdp-{rep}-{i}"),
                port,
                dns.as_ref(),
            ) {
                Ok(Ok(m)) => trials[i].push(m),
                Ok(Err(why)) => {
                    eprintln!("  skipped: {why}");
                    skipped[i] = Some(format!(
                        "{why} (knotd needs its XDP mode: Knot DNS 3.x built with libxdp)"
                    ));
                }
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
        .zip(skipped)
        .map(|((cell, t), skipped)| {
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
                skipped,
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
        if let Some(why) = &r.skipped {
            t.push_str(&format!("| {} | skipped: {why} | | | | | |\n", r.cell.name));
            continue;
        }
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
    // (label, row, baseline row): throughput and cost of one server against another.
    let mut servers = vec![
        (
            "server xdp / socket tuned (same generator)".to_string(),
            "serve xdp <- load xdp".to_string(),
            "serve socket tuned <- load xdp".to_string(),
        ),
        (
            "server uring / socket tuned (same generator)".to_string(),
            "serve uring tuned <- load xdp".to_string(),
            "serve socket tuned <- load xdp".to_string(),
        ),
    ];
    for driver in ["load xdp", "dnsperf"] {
        for peer in ["knot xdp", "knot socket"] {
            servers.push((
                format!("dns firehose xdp / {peer} ({driver})"),
                format!("dns firehose xdp <- {driver}"),
                format!("dns {peer} <- {driver}"),
            ));
        }
    }
    t.push('\n');
    for (label, a, b) in &servers {
        if let (Some(x), Some(k)) = (find(a), find(b)) {
            t.push_str(&format!(
                "{label}: tps {}, host CPU per txn {}, server CPU per txn {}\n",
                ratio(med(&x.tps), med(&k.tps)),
                ratio(med(&x.host_cpu_us_per_txn), med(&k.host_cpu_us_per_txn)),
                ratio(med(&x.server_cpu_us_per_txn), med(&k.server_cpu_us_per_txn)),
            ));
        }
    }
    for server in ["serve xdp", "serve socket tuned"] {
        if let (Some(x), Some(k)) = (
            find(&format!("{server} <- load xdp")),
            find(&format!("{server} <- load socket")),
        ) {
            t.push_str(&format!(
                "generator xdp / socket ({server}): client CPU per txn {}\n",
                ratio(med(&x.client_cpu_us_per_txn), med(&k.client_cpu_us_per_txn)),
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests;
