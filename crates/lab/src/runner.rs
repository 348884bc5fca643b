//! One measured run (a trial): start a server on the server CPUs, start a generator on the
//! client CPUs, sample /proc at both edges of the measured window, stop both, and turn what
//! they wrote and what /proc saw into a [`Trial`].

use crate::cmd;
use crate::sample::{port_bound, thread_cpus, HostSample, ThreadCpu, Watch, Window};
use crate::sockperf;
use crate::topology::{KnobState, Side, Topology};
use crate::{LabError, LabResult};
use firehose_sys::cpu::CpuSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Port the server listens on inside the server namespace.
pub const VETH_PORT: u16 = 7777;

/// Where each side runs. The two sets are disjoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
}

impl Placement {
    /// Checks an explicit placement against the CPUs this process may use.
    pub fn new(server: Vec<usize>, client: Vec<usize>, allowed: &[usize]) -> LabResult<Self> {
        if let Some(c) = server.iter().find(|c| client.contains(c)) {
            return Err(LabError::Usage(format!(
                "CPU {c} is in both --server-cpus and --client-cpus: give each side its own CPUs"
            )));
        }
        if let Some(c) = server.iter().chain(&client).find(|c| !allowed.contains(c)) {
            return Err(LabError::Usage(format!(
                "CPU {c} is not available here (allowed: {}): pick CPUs from that list",
                CpuSet::from(allowed)
            )));
        }
        Ok(Placement {
            server_cpus: server,
            client_cpus: client,
        })
    }

    /// The default: the first half of the allowed CPUs for the server (at least one), the
    /// rest for the client. On 2 CPUs: server on the first, client on the second.
    pub fn split(allowed: &[usize]) -> LabResult<Self> {
        if allowed.len() < 2 {
            return Err(LabError::Usage(format!(
                "the lab needs at least 2 CPUs to keep server and client apart; this process may use {}",
                CpuSet::from(allowed)
            )));
        }
        let half = allowed.len() / 2;
        Ok(Placement {
            server_cpus: allowed[..half].to_vec(),
            client_cpus: allowed[half..].to_vec(),
        })
    }
}

/// The generator's workload, the same for every server of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSpec {
    pub flows: usize,
    /// Requests in flight per flow; `None` leaves load's default (1 in closed loop, no cap
    /// but the timeout in open loop).
    pub window: Option<usize>,
    /// Requests per second (open loop); `None` is closed loop.
    pub rate: Option<u64>,
    pub threads: usize,
    pub size: usize,
    pub duration_s: u64,
    pub warmup_s: u64,
    pub timeout_ms: u64,
}

/// A server under test.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ServerKind {
    /// `firehose serve --proto echo` with these extra flags.
    Firehose { flags: Vec<String> },
    /// The lab's one-socket echo server (`firehose lab plain-echo`), the NTT talk's baseline.
    PlainEcho { threads: usize },
    /// `sockperf sr`.
    Sockperf,
}

/// Who generates the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// `firehose load`.
    Firehose,
    /// `sockperf ping-pong` at the spec's rate.
    Sockperf,
}

/// Latency figures in microseconds (absent when the generator does not report one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub p9999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

/// The fields of `firehose load --json` the lab uses; the whole file is kept as well.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct LoadJson {
    tps: f64,
    completed: u64,
    lost: u64,
    latency_us: Latency,
}

/// The threads of both sides and the CPUs they were last seen on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlacementSeen {
    pub server: Vec<ThreadCpu>,
    pub client: Vec<ThreadCpu>,
}

/// Kernel-side losses over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Drops {
    /// The server sockets' own drop counters (/proc/<pid>/net/udp).
    pub socket: u64,
    pub udp_in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
    pub no_ports: u64,
    pub softnet_dropped: u64,
    pub time_squeeze: u64,
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub config: String,
    pub repetition: usize,
    pub generator: Generator,
    pub server_command: String,
    pub client_command: String,
    pub server_pid: u32,
    pub tps: f64,
    pub completed: u64,
    pub lost: u64,
    /// The talk's arithmetic: one direction on the wire, payload + 46 bytes of headers +
    /// 20 bytes of preamble and gap.
    pub mbps: f64,
    pub latency_us: Latency,
    pub server_cpu_us_per_txn: Option<f64>,
    pub client_cpu_us_per_txn: Option<f64>,
    /// Server CPU time over the window / (window x server CPUs).
    pub server_cpu_util: f64,
    pub client_cpu_util: Option<f64>,
    pub syscalls_per_txn: Option<f64>,
    /// "engine" (the server's counters), "perf" (raw_syscalls:sys_enter) or "unknown".
    pub syscalls_source: String,
    pub client_bound: bool,
    pub drops: Drops,
    pub window: Window,
    pub knobs: Option<KnobState>,
    /// Where each server and client thread last ran, read at the end of the window.
    pub placement_seen: PlacementSeen,
    /// What the server wrote with --stats-json (firehose only).
    pub server_stats: Option<Value>,
    /// What the generator reported (load's JSON, or sockperf's parsed summary).
    pub generator_report: Value,
}

/// Wire Mbps of `tps` transactions of `size`-byte payloads, one direction (the talk's sums).
pub fn wire_mbps(tps: f64, size: usize) -> f64 {
    tps * (size as f64 + 66.0) * 8.0 / 1e6
}

/// Client saturated while the server was not: the result says nothing about the server.
pub fn is_client_bound(client_util: Option<f64>, server_util: f64) -> bool {
    client_util.is_some_and(|c| c >= 0.95) && server_util < 0.9
}

/// A child process that is killed if still running when dropped.
struct Proc {
    child: Child,
    name: String,
    stderr: PathBuf,
}

impl Proc {
    fn spawn(mut cmd: Command, name: &str, dir: &Path) -> LabResult<Proc> {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let open = |p: &Path| File::create(p).map_err(|e| LabError::io(p.display(), e));
        cmd.stdin(Stdio::null())
            .stdout(open(&out)?)
            .stderr(open(&err)?);
        let child = cmd
            .spawn()
            .map_err(|e| LabError::Run(format!("cannot start {name} ({cmd:?}): {e}")))?;
        Ok(Proc {
            child,
            name: name.to_string(),
            stderr: err,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The end of what the process wrote to stderr, for error messages.
    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for exit until `deadline`; `None` when still running.
    fn wait_until(&mut self, deadline: Instant) -> Option<std::process::ExitStatus> {
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGINT, then SIGKILL if it has not exited within `grace`.
    fn stop(&mut self, grace: Duration) -> LabResult<std::process::ExitStatus> {
        if let Some(s) = self.exited() {
            return Ok(s);
        }
        cmd::signal(self.pid(), "INT")?;
        if let Some(s) = self.wait_until(Instant::now() + grace) {
            return Ok(s);
        }
        let _ = self.child.kill();
        self.child
            .wait()
            .map_err(|e| LabError::Run(format!("waiting for {}: {e}", self.name)))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs trials on one topology with one placement and one workload.
pub struct Runner<'a> {
    /// The `firehose` binary.
    pub bin: PathBuf,
    pub topo: &'a Topology,
    pub placement: Placement,
    pub load: LoadSpec,
    /// Where logs and result files of each trial go.
    pub workdir: PathBuf,
    pub stop: &'a AtomicBool,
    pub port: u16,
}

/// Where a run without `--report` keeps its logs: a directory named after its pid.
pub fn temp_workdir(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("fh-lab-{pid}"))
}

/// Removes the temporary log directories of runs whose process is gone (all with `all`);
/// a SIGKILLed run cannot remove its own. Returns what it removed.
pub fn remove_stale_workdirs(all: bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("fh-lab-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if (all || !cmd::process_alive(pid)) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(format!("logs {}", e.path().display()));
        }
    }
    removed
}

/// A free UDP port on 127.0.0.1 for the loopback topology.
pub fn free_loopback_port() -> LabResult<u16> {
    let s = std::net::UdpSocket::bind("127.0.0.1:0")
        .map_err(|e| LabError::io("bind 127.0.0.1:0", e))?;
    Ok(s.local_addr()
        .map_err(|e| LabError::io("getsockname", e))?
        .port())
}

fn argv(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn read_json(path: &Path) -> LabResult<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| LabError::io(path.display(), e))?;
    serde_json::from_str(&text)
        .map_err(|e| LabError::Run(format!("{}: not valid JSON: {e}", path.display())))
}

impl Runner<'_> {
    fn check_stop(&self) -> LabResult<()> {
        if self.stop.load(Ordering::Relaxed) {
            Err(LabError::Interrupted)
        } else {
            Ok(())
        }
    }

    fn sleep_until(&self, deadline: Instant) -> LabResult<()> {
        loop {
            self.check_stop()?;
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
        }
    }

    fn target(&self) -> String {
        format!("{}:{}", self.topo.server_addr(), self.port)
    }

    fn server_command(&self, kind: &ServerKind, stats: &Path) -> Command {
        let cpus = &self.placement.server_cpus;
        let bin = self.bin.to_string_lossy().into_owned();
        match kind {
            ServerKind::Firehose { flags } => {
                let mut c = self.topo.command(Side::Server, cpus, &bin);
                c.args(["serve", "--proto", "echo", "--listen", &self.target()]);
                c.arg("--stats-json").arg(stats);
                c.args(flags);
                c
            }
            ServerKind::PlainEcho { threads } => {
                let mut c = self.topo.command(Side::Server, cpus, &bin);
                c.args(["lab", "plain-echo", "--listen", &self.target()]);
                c.args(["--threads", &threads.to_string()]);
                c
            }
            ServerKind::Sockperf => {
                let mut c = self.topo.command(Side::Server, cpus, "sockperf");
                let ip = self.topo.server_addr().to_string();
                c.args(["sr", "-i", &ip, "-p", &self.port.to_string()]);
                c
            }
        }
    }

    fn client_command(&self, generator: Generator, server_pid: u32, json: &Path) -> Command {
        let cpus = &self.placement.client_cpus;
        let l = &self.load;
        match generator {
            Generator::Firehose => {
                let bin = self.bin.to_string_lossy().into_owned();
                let mut c = self.topo.command(Side::Client, cpus, &bin);
                c.args(["load", "--target", &self.target()]);
                c.args(["--flows", &l.flows.to_string()]);
                if let Some(w) = l.window {
                    c.args(["--window", &w.to_string()]);
                }
                if let Some(r) = l.rate {
                    c.args(["--rate", &r.to_string()]);
                }
                c.args([
                    "--threads",
                    &l.threads.to_string(),
                    "--cpus",
                    &CpuSet::from(cpus).to_string(),
                ]);
                c.args(["--duration", &l.duration_s.to_string()]);
                c.args(["--warmup", &l.warmup_s.to_string()]);
                c.args(["--size", &l.size.to_string()]);
                c.args(["--timeout", &format!("{}ms", l.timeout_ms)]);
                c.arg("--json").arg(json);
                c.args(["--server-pid", &server_pid.to_string(), "--quiet"]);
                c
            }
            Generator::Sockperf => {
                let mut c = self.topo.command(Side::Client, cpus, "sockperf");
                let ip = self.topo.server_addr().to_string();
                c.args(["ping-pong", "-i", &ip, "-p", &self.port.to_string()]);
                c.args(["-m", &l.size.to_string(), "--full-rtt"]);
                // sockperf warms up on its own (0.4 s) before our warm-up and window start;
                // the extra seconds keep it sending until our window has closed.
                c.args(["-t", &(l.warmup_s + l.duration_s + 2).to_string()]);
                match l.rate {
                    Some(r) => c.arg(format!("--mps={r}")),
                    None => c.arg("--mps=max"),
                };
                c
            }
        }
    }

    /// When a sockperf client's test (not its warm-up pings) begins: it sends a few
    /// datagrams, idles about two seconds, prints "Starting test", then warms up for 0.4 s
    /// inside its run time. The window must not start before that.
    fn sockperf_started(&self, cli: &mut Proc, config: &str, tag: &str) -> LabResult<Instant> {
        let out = self.workdir.join(format!("{tag}-client.out"));
        let by = Instant::now() + Duration::from_secs(15);
        loop {
            self.check_stop()?;
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if text.contains("Starting test") {
                return Ok(Instant::now() + Duration::from_millis(sockperf::WARMUP_MS));
            }
            if let Some(st) = cli.exited() {
                return Err(LabError::Run(format!(
                    "{config}: sockperf exited ({st}) before starting its test: {}",
                    cli.stderr_tail()
                )));
            }
            if Instant::now() > by {
                return Err(LabError::Run(format!(
                    "{config}: sockperf did not start its test within 15 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs one trial. `knobs` is the read-back state the caller set before it.
    pub fn trial(
        &self,
        config: &str,
        repetition: usize,
        server: &ServerKind,
        generator: Generator,
        knobs: Option<KnobState>,
    ) -> LabResult<Trial> {
        self.check_stop()?;
        // Compare's names hold a '/' ("tuned/sockperf"): not in a file name.
        let tag = format!("{}-r{repetition}", config.replace('/', "-"));
        let stats_path = self.workdir.join(format!("{tag}-server.json"));
        let load_path = self.workdir.join(format!("{tag}-load.json"));
        let _ = std::fs::remove_file(&stats_path);
        let _ = std::fs::remove_file(&load_path);

        let scmd = self.server_command(server, &stats_path);
        let server_command = argv(&scmd);
        let mut srv = Proc::spawn(scmd, &format!("{tag}-server"), &self.workdir)?;
        let ready_by = Instant::now() + Duration::from_secs(10);
        while !port_bound(srv.pid(), self.port) {
            self.check_stop()?;
            if let Some(st) = srv.exited() {
                return Err(LabError::Run(format!(
                    "{config}: server exited ({st}) before listening: {}",
                    srv.stderr_tail()
                )));
            }
            if Instant::now() > ready_by {
                return Err(LabError::Run(format!(
                    "{config}: server did not bind port {} within 10 s: {}",
                    self.port,
                    srv.stderr_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }

        let ccmd = self.client_command(generator, srv.pid(), &load_path);
        let client_command = argv(&ccmd);
        let mut cli = Proc::spawn(ccmd, &format!("{tag}-client"), &self.workdir)?;
        let t0 = match generator {
            // load measures from its own start, after --warmup.
            Generator::Firehose => Instant::now(),
            Generator::Sockperf => self.sockperf_started(&mut cli, config, &tag)?,
        };
        let watch = Watch {
            server_pid: srv.pid(),
            client_pid: cli.pid(),
            port: self.port,
            separate_ns: self.topo.netns(Side::Server).is_some(),
        };
        let warm = Duration::from_secs(self.load.warmup_s);
        let dur = Duration::from_secs(self.load.duration_s);
        self.sleep_until(t0 + warm)?;
        let before = HostSample::take(&watch)?;
        let perf = if matches!(server, ServerKind::Firehose { .. }) {
            None
        } else {
            start_perf(srv.pid(), self.load.duration_s, &self.workdir, &tag)
        };
        self.sleep_until(t0 + warm + dur)?;
        let after = HostSample::take(&watch)?;
        let window = Window::between(&before, &after);
        let placement_seen = PlacementSeen {
            server: thread_cpus(watch.server_pid),
            client: thread_cpus(watch.client_pid),
        };

        let grace = Duration::from_millis(self.load.timeout_ms) + Duration::from_secs(15);
        let deadline = Instant::now() + grace;
        let status = loop {
            self.check_stop()?;
            if let Some(s) = cli.exited() {
                break s;
            }
            if Instant::now() > deadline {
                return Err(LabError::Run(format!(
                    "{config}: the generator did not finish {} s after its window",
                    grace.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !status.success() {
            return Err(LabError::Run(format!(
                "{config}: generator failed ({status}): {}",
                cli.stderr_tail()
            )));
        }
        let syscalls_perf = perf.map(|p| p.finish());
        srv.stop(Duration::from_secs(5))?;

        let (tps, completed, lost, latency_us, generator_report) = match generator {
            Generator::Firehose => {
                let v = read_json(&load_path)?;
                let l: LoadJson = serde_json::from_value(v.clone()).map_err(|e| {
                    LabError::Run(format!("{}: unexpected shape: {e}", load_path.display()))
                })?;
                (l.tps, l.completed, l.lost, l.latency_us, v)
            }
            Generator::Sockperf => {
                let out = self.workdir.join(format!("{tag}-client.out"));
                let text =
                    std::fs::read_to_string(&out).map_err(|e| LabError::io(out.display(), e))?;
                let r = sockperf::parse_client(&text).map_err(|e| {
                    LabError::Run(format!("{config}: reading sockperf's output: {e}"))
                })?;
                let v = serde_json::to_value(&r).unwrap_or(Value::Null);
                (r.tps(), r.received, r.dropped, r.latency(), v)
            }
        };
        let server_stats = match server {
            ServerKind::Firehose { .. } => Some(read_json(&stats_path)?),
            _ => None,
        };
        let txns = tps * window.seconds;
        // No CPU time seen at all is "unknown", never a cost of zero.
        let per_txn = |cpu_s: f64| (txns > 0.0 && cpu_s > 0.0).then(|| cpu_s * 1e6 / txns);
        let server_cpu_util = window.server_cpu_s
            / window.seconds.max(1e-9)
            / self.placement.server_cpus.len() as f64;
        let client_cpu_util = window
            .client_cpu_s
            .map(|c| c / window.seconds.max(1e-9) / self.placement.client_cpus.len() as f64);
        let (syscalls_per_txn, syscalls_source) = match (&server_stats, syscalls_perf) {
            (Some(s), _) => (engine_syscalls_per_txn(s), "engine".to_string()),
            (None, Some(Some(n))) if txns > 0.0 => (Some(n as f64 / txns), "perf".to_string()),
            _ => (None, "unknown".to_string()),
        };
        let u = &window.udp_server;
        let drops = Drops {
            socket: window.socket_drops,
            udp_in_errors: u.in_errors,
            rcvbuf_errors: u.rcvbuf_errors,
            sndbuf_errors: u.sndbuf_errors,
            no_ports: u.no_ports,
            softnet_dropped: window.softnet_dropped(),
            time_squeeze: window.time_squeeze(),
        };
        Ok(Trial {
            config: config.to_string(),
            repetition,
            generator,
            server_command,
            client_command,
            server_pid: watch.server_pid,
            tps,
            completed,
            lost,
            mbps: wire_mbps(tps, self.load.size),
            latency_us,
            server_cpu_us_per_txn: per_txn(window.server_cpu_s),
            client_cpu_us_per_txn: window.client_cpu_s.and_then(per_txn),
            server_cpu_util,
            client_cpu_util,
            syscalls_per_txn,
            syscalls_source,
            client_bound: is_client_bound(client_cpu_util, server_cpu_util),
            drops,
            window,
            knobs,
            placement_seen,
            server_stats,
            generator_report,
        })
    }
}

/// Syscalls per request from `serve --stats-json` totals (over the server's whole run).
pub fn engine_syscalls_per_txn(stats: &Value) -> Option<f64> {
    let t = stats.get("totals")?;
    let sys = t.get("syscalls")?.as_f64()?;
    let pkts = t.get("packets_in")?.as_f64()?;
    (pkts > 0.0).then(|| sys / pkts)
}

/// A `perf stat` counting a peer server's syscalls over the window.
struct PerfCount {
    proc: Proc,
    out: PathBuf,
}

/// Starts counting raw_syscalls:sys_enter of `pid` for `secs`; `None` without perf.
fn start_perf(pid: u32, secs: u64, dir: &Path, tag: &str) -> Option<PerfCount> {
    if !cmd::installed("perf") {
        return None;
    }
    let out = dir.join(format!("{tag}-perf.csv"));
    let mut c = Command::new("perf");
    c.args([
        "stat",
        "-x,",
        "-e",
        "raw_syscalls:sys_enter",
        "-p",
        &pid.to_string(),
        "-o",
    ]);
    c.arg(&out);
    c.args(["--", "sleep", &secs.to_string()]);
    let proc = Proc::spawn(c, &format!("{tag}-perf"), dir).ok()?;
    Some(PerfCount { proc, out })
}

impl PerfCount {
    /// The count, or `None` when perf could not count (no tracepoint access, ...).
    fn finish(mut self) -> Option<u64> {
        let ok = self
            .proc
            .wait_until(Instant::now() + Duration::from_secs(10))?;
        if !ok.success() {
            return None;
        }
        parse_perf_count(&std::fs::read_to_string(&self.out).ok()?)
    }
}

/// The count of `perf stat -x,` output's event line (`12345,,raw_syscalls:sys_enter,...`).
pub fn parse_perf_count(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_rules() {
        let p = Placement::split(&[0, 1]).unwrap();
        assert_eq!((p.server_cpus, p.client_cpus), (vec![0], vec![1]));
        let p = Placement::split(&[0, 1, 2, 3, 4]).unwrap();
        assert_eq!((p.server_cpus, p.client_cpus), (vec![0, 1], vec![2, 3, 4]));
        assert!(Placement::split(&[0])
            .unwrap_err()
            .to_string()
            .contains("at least 2"));
        let e = Placement::new(vec![0, 1], vec![1], &[0, 1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU 1 is in both"), "{e}");
        let e = Placement::new(vec![0], vec![7], &[0, 1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("CPU 7 is not available"), "{e}");
    }

    #[test]
    fn talk_arithmetic_for_mbps() {
        // The talk: 270,000 tps of 100-byte payloads is about 360 Mbps.
        let m = wire_mbps(270_000.0, 100);
        assert!((m - 358.56).abs() < 0.01, "{m}");
    }

    #[test]
    fn client_bound_rule() {
        assert!(is_client_bound(Some(0.99), 0.5));
        assert!(!is_client_bound(Some(0.99), 0.95));
        assert!(!is_client_bound(Some(0.5), 0.5));
        assert!(!is_client_bound(None, 0.1));
    }

    #[test]
    fn perf_csv_and_engine_counters() {
        let csv = "# started on Sun\n\n123456,,raw_syscalls:sys_enter,404277485,100.00,,\n";
        assert_eq!(parse_perf_count(csv), Some(123456));
        assert_eq!(
            parse_perf_count("<not supported>,,raw_syscalls:sys_enter,0,0,,\n"),
            None
        );
        let stats = serde_json::json!({"totals": {"syscalls": 300, "packets_in": 200}});
        assert_eq!(engine_syscalls_per_txn(&stats), Some(1.5));
        assert_eq!(engine_syscalls_per_txn(&serde_json::json!({})), None);
    }
}
