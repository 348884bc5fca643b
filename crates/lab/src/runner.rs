//! One measured run (a trial): start a server on the server CPUs, start a generator on the
//! client CPUs, sample /proc at both edges of the measured window, stop both, and turn what
//! they wrote and what /proc saw into a [`Trial`].

use crate::metrics::{self, Inputs, Metrics};
use crate::peers::perf::SyscallCounter;
use crate::peers::sockperf;
use crate::proc::{self, Proc};
use crate::sample::{port_bound, thread_cpus, HostSample, ThreadCpu, Watch, Window};
use crate::server::ServerKind;
use crate::topology::{KnobState, Side, Topology};
use crate::{LabError, LabResult};
use firehose_engine::StatsDocument;
use firehose_load::LoadReport;
use firehose_sys::cpu::CpuSet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
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

/// The threads of both sides and the CPUs they were last seen on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlacementSeen {
    pub server: Vec<ThreadCpu>,
    pub client: Vec<ThreadCpu>,
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
    pub latency_us: Latency,
    #[serde(flatten)]
    pub metrics: Metrics,
    pub window: Window,
    pub knobs: Option<KnobState>,
    /// Where each server and client thread last ran, read at the end of the window.
    pub placement_seen: PlacementSeen,
    /// What the server wrote with --json-file (firehose only).
    pub server_stats: Option<StatsDocument>,
    /// What the generator reported (load's JSON, or sockperf's parsed summary).
    pub generator_report: Value,
}

/// What the generator counted over its window.
struct Counted {
    tps: f64,
    completed: u64,
    lost: u64,
    latency_us: Latency,
    report: Value,
}

impl From<&firehose_load::report::LatencyUs> for Latency {
    fn from(l: &firehose_load::report::LatencyUs) -> Latency {
        Latency {
            min: Some(l.min),
            p50: Some(l.p50),
            p90: Some(l.p90),
            p99: Some(l.p99),
            p999: Some(l.p999),
            p9999: Some(l.p9999),
            max: Some(l.max),
            mean: Some(l.mean),
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

fn read_text(path: &Path) -> LabResult<String> {
    std::fs::read_to_string(path).map_err(|e| LabError::io(path.display(), e))
}

/// Reads what `firehose load --json-file` wrote: the typed report, and the whole document.
pub fn read_load_report(path: &Path) -> LabResult<(LoadReport, Value)> {
    let bad = |e: serde_json::Error| {
        LabError::Run(format!(
            "{}: not a firehose load report: {e}",
            path.display()
        ))
    };
    let v: Value = serde_json::from_str(&read_text(path)?).map_err(bad)?;
    Ok((LoadReport::deserialize(&v).map_err(bad)?, v))
}

/// Reads what `firehose serve --json-file` wrote.
pub fn read_stats(path: &Path) -> LabResult<StatsDocument> {
    StatsDocument::parse(&read_text(path)?).map_err(|e| {
        LabError::Run(format!(
            "{}: not a firehose serve stats document: {e}",
            path.display()
        ))
    })
}

impl Runner<'_> {
    fn target(&self) -> String {
        format!("{}:{}", self.topo.server_addr(), self.port)
    }

    fn server_command(&self, kind: &ServerKind, stats: &Path) -> LabResult<Command> {
        let cpus = &self.placement.server_cpus;
        let bin = self.bin.to_string_lossy().into_owned();
        Ok(match kind {
            ServerKind::Firehose { flags } => {
                let mut c = self.topo.command(Side::Server, cpus, &bin);
                c.args(["serve", "--proto", "echo", "--listen", &self.target()]);
                c.arg("--json-file").arg(stats);
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
            dns => {
                return Err(LabError::Usage(format!(
                    "{} is a DNS server: compare it with lab compare --proto dns",
                    dns.name()
                )))
            }
        })
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
                c.arg("--json-file").arg(json);
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

    /// Starts the server and waits until its socket is bound.
    fn start_server(
        &self,
        config: &str,
        tag: &str,
        kind: &ServerKind,
        stats: &Path,
    ) -> LabResult<(Proc, String)> {
        let cmd = self.server_command(kind, stats)?;
        let line = proc::argv(&cmd);
        let mut srv = Proc::spawn(cmd, &format!("{tag}-server"), &self.workdir)?;
        let ready_by = Instant::now() + Duration::from_secs(10);
        while !port_bound(srv.pid(), self.port) {
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
            proc::sleep_until(Instant::now() + Duration::from_millis(20), Some(self.stop))?;
        }
        Ok((srv, line))
    }

    /// When the generator's window starts counting. load measures from its own start,
    /// after --warmup. A sockperf client sends a few datagrams, idles about two seconds,
    /// prints "Starting test", then warms up for 0.4 s inside its run time.
    fn window_start(
        &self,
        generator: Generator,
        cli: &mut Proc,
        config: &str,
        server: (u32, Option<u64>),
    ) -> LabResult<Instant> {
        match generator {
            // A busy host may take long to exec it: the window starts when the server's
            // namespace sees its first datagram, not when it was spawned, or a short window
            // can close before it sends (then within 10 s as before).
            Generator::Firehose => {
                let (pid, before) = server;
                let by = Instant::now() + Duration::from_secs(10);
                while before.is_some() && udp_in_datagrams(pid) == before && Instant::now() < by {
                    if cli.exited().is_some() {
                        break;
                    }
                    proc::sleep_until(Instant::now() + Duration::from_millis(2), Some(self.stop))?;
                }
                Ok(Instant::now())
            }
            Generator::Sockperf => {
                let by = Instant::now() + Duration::from_secs(15);
                cli.wait_for_output("Starting test", by, Some(self.stop))
                    .map_err(|e| match e {
                        LabError::Run(m) => LabError::Run(format!("{config}: {m}")),
                        other => other,
                    })?;
                Ok(Instant::now() + Duration::from_millis(sockperf::WARMUP_MS))
            }
        }
    }

    /// Waits for the generator to finish after its window.
    fn wait_generator(&self, cli: &mut Proc, config: &str) -> LabResult<()> {
        let grace = Duration::from_millis(self.load.timeout_ms) + Duration::from_secs(15);
        let Some(status) = cli.wait_until(Instant::now() + grace, Some(self.stop))? else {
            return Err(LabError::Run(format!(
                "{config}: the generator did not finish {} s after its window",
                grace.as_secs()
            )));
        };
        if !status.success() {
            return Err(LabError::Run(format!(
                "{config}: generator failed ({status}): {}",
                cli.stderr_tail()
            )));
        }
        Ok(())
    }

    /// What the generator counted: load's JSON, or sockperf's printed summary.
    fn counted(
        &self,
        generator: Generator,
        cli: &Proc,
        load_path: &Path,
        config: &str,
    ) -> LabResult<Counted> {
        match generator {
            Generator::Firehose => {
                let (r, report) = read_load_report(load_path)?;
                Ok(Counted {
                    tps: r.tps,
                    completed: r.completed,
                    lost: r.lost,
                    latency_us: Latency::from(&r.latency_us),
                    report,
                })
            }
            Generator::Sockperf => {
                let r = sockperf::parse_client(&cli.stdout()).map_err(|e| {
                    LabError::Run(format!("{config}: reading sockperf's output: {e}"))
                })?;
                Ok(Counted {
                    tps: r.tps(),
                    completed: r.received,
                    lost: r.dropped,
                    latency_us: r.latency(),
                    report: serde_json::to_value(&r).unwrap_or(Value::Null),
                })
            }
        }
    }

    /// Runs one trial: start the server, then the generator; sample /proc at both edges
    /// of the window; stop both; compute the figures. `knobs` is the read-back state the
    /// caller set before it.
    pub fn trial(
        &self,
        config: &str,
        repetition: usize,
        server: &ServerKind,
        generator: Generator,
        knobs: Option<KnobState>,
    ) -> LabResult<Trial> {
        proc::check(Some(self.stop))?;
        // Compare's names hold a '/' ("tuned/sockperf"): not in a file name.
        let tag = format!("{}-r{repetition}", config.replace('/', "-"));
        let stats_path = self.workdir.join(format!("{tag}-server.json"));
        let load_path = self.workdir.join(format!("{tag}-load.json"));
        let _ = std::fs::remove_file(&stats_path);
        let _ = std::fs::remove_file(&load_path);

        let (mut srv, server_command) = self.start_server(config, &tag, server, &stats_path)?;
        let ccmd = self.client_command(generator, srv.pid(), &load_path);
        let client_command = proc::argv(&ccmd);
        let seen = udp_in_datagrams(srv.pid());
        let mut cli = Proc::spawn(ccmd, &format!("{tag}-client"), &self.workdir)?;
        let t0 = self.window_start(generator, &mut cli, config, (srv.pid(), seen))?;
        let watch = Watch {
            server_pid: srv.pid(),
            client_pid: cli.pid(),
            port: self.port,
            separate_ns: self.topo.netns(Side::Server).is_some(),
        };
        let warm = Duration::from_secs(self.load.warmup_s);
        let dur = Duration::from_secs(self.load.duration_s);
        proc::sleep_until(t0 + warm, Some(self.stop))?;
        let before = HostSample::take(&watch)?;
        let perf = match server {
            ServerKind::Firehose { .. } => None,
            _ => SyscallCounter::start(&[srv.pid()], dur, &self.workdir, &tag),
        };
        proc::sleep_until(t0 + warm + dur, Some(self.stop))?;
        let after = HostSample::take(&watch)?;
        let placement_seen = PlacementSeen {
            server: thread_cpus(watch.server_pid),
            client: thread_cpus(watch.client_pid),
        };
        self.wait_generator(&mut cli, config)?;
        let perf = perf.and_then(SyscallCounter::finish);
        srv.stop("INT", Duration::from_secs(5));

        let counted = self.counted(generator, &cli, &load_path, config)?;
        let server_stats = match server {
            ServerKind::Firehose { .. } => Some(read_stats(&stats_path)?),
            _ => None,
        };
        let inputs = Inputs {
            tps: counted.tps,
            size: self.load.size,
            server_cpus: self.placement.server_cpus.len(),
            client_cpus: self.placement.client_cpus.len(),
            engine_syscalls_per_packet: server_stats.as_ref().and_then(|s| s.syscalls_per_packet),
            perf,
        };
        let (window, metrics) = metrics::of_samples(&before, &after, &inputs);
        Ok(Trial {
            config: config.to_string(),
            repetition,
            generator,
            server_command,
            client_command,
            server_pid: watch.server_pid,
            tps: counted.tps,
            completed: counted.completed,
            lost: counted.lost,
            latency_us: counted.latency_us,
            metrics,
            window,
            knobs,
            placement_seen,
            server_stats,
            generator_report: counted.report,
        })
    }
}

/// Udp InDatagrams of the namespace `pid` runs in, `None` if unreadable.
fn udp_in_datagrams(pid: u32) -> Option<u64> {
    firehose_host::procfs::read(
        &format!("/proc/{pid}/net/snmp"),
        firehose_host::procfs::snmp::parse_udp,
    )
    .ok()
    .map(|u| u.in_datagrams)
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
    fn reports_read_back_through_the_writers_types() {
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let p = dir.join("load.json");
        std::fs::write(&p, "{\"tps\": 1}").unwrap();
        let e = read_load_report(&p).unwrap_err().to_string();
        assert!(e.contains("not a firehose load report"), "{e}");
        std::fs::write(&p, "not json").unwrap();
        assert!(read_stats(&p).is_err());
    }
}
