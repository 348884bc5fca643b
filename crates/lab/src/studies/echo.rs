//! The echo trial `lab ladder` and `lab compare` share: start a server on the server CPUs
//! (ours, the lab's plain echo, or `sockperf sr`), start a generator on the client CPUs
//! (`firehose load` or `sockperf ping-pong`), sample the host at both edges of the measured
//! window, stop both, and read what they counted. The figures of a trial come from the two
//! samples and those counts ([`Echo::metrics`]).

pub mod report;

use crate::loss::LossAttribution;
use crate::metrics::{self, Inputs, Latency, Metrics};
use crate::peers::firehose;
use crate::peers::perf::{SyscallCount, SyscallCounter};
use crate::peers::sockperf;
use crate::proc::{self, Proc};
use crate::sample::{port_bound, thread_cpus, HostSample, ThreadCpu, Watch, Window};
use crate::server::ServerKind;
use crate::study::{Lab, Outcome, Placement};
use crate::topology::{self, Kind, KnobState, Knobs, Side, Topology};
use crate::{LabError, LabResult};
use firehose_engine::StatsDocument;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Port the server listens on inside the server namespace.
pub const VETH_PORT: u16 = 7777;

/// One configuration to measure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub name: String,
    pub describe: String,
    pub server: ServerKind,
    pub generator: Generator,
    /// OS knobs to set before each of its trials (veth only).
    pub knobs: Option<Knobs>,
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

/// The threads of both sides and the CPUs they were last seen on.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlacementSeen {
    pub server: Vec<ThreadCpu>,
    pub client: Vec<ThreadCpu>,
}

/// The figures of one trial.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
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
    /// Where load's lost requests went (as root; read from `generator_report`, so the
    /// document lists it once, under `loss_attribution`).
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
}

/// What the generator counted over its window.
pub struct Counted {
    pub tps: f64,
    pub completed: u64,
    pub lost: u64,
    pub latency_us: Latency,
    pub report: Value,
}

/// What one trial saw, before any arithmetic.
pub struct Measured {
    pub generator: Generator,
    pub commands: (String, String),
    pub server_pid: u32,
    pub before: HostSample,
    pub after: HostSample,
    pub counted: Counted,
    pub server_stats: Option<StatsDocument>,
    pub perf: Option<SyscallCount>,
    pub knobs: Option<KnobState>,
    pub placement_seen: PlacementSeen,
}

/// What a run was asked for; `None` takes the study's default.
#[derive(Debug, Clone, Default)]
pub struct EchoOptions {
    pub topology: Option<Kind>,
    pub queues: Option<usize>,
    pub duration_s: u64,
    pub warmup_s: Option<u64>,
    pub workers: Option<usize>,
    pub threads: Option<usize>,
    pub flows: Option<usize>,
    pub window: Option<usize>,
    pub rate: Option<u64>,
    pub size: Option<usize>,
    pub timeout_ms: Option<u64>,
}

/// Defaults that differ between ladder and compare.
pub struct Defaults {
    pub flows: usize,
    pub window: Option<usize>,
    pub rate: Option<u64>,
    /// What pins one worker per server CPU in this run, if anything does.
    pub pins: Option<&'static str>,
}

/// The echo setting of a run, its defaults filled in and checked.
#[derive(Debug, Clone)]
pub struct Echo {
    pub load: LoadSpec,
    pub workers: usize,
    pub kind: Kind,
    /// Queues per veth end.
    pub queues: usize,
    pub server_cpus: usize,
    pub client_cpus: usize,
    /// The server's port: a free one on loopback, [`VETH_PORT`] on veth; set by `build`.
    pub port: u16,
}

fn usage<T>(m: String) -> LabResult<T> {
    Err(LabError::Usage(m))
}

impl Echo {
    /// Fills in defaults and checks them, before anything is built.
    pub fn new(o: &EchoOptions, d: Defaults, placement: &Placement) -> LabResult<Echo> {
        let kind = o.topology.unwrap_or(Kind::Loopback);
        let workers = o.workers.unwrap_or(placement.server_cpus.len());
        if let Some(what) = d.pins {
            if workers > placement.server_cpus.len() {
                return usage(format!(
                    "--workers {workers} is more than the {} server CPU(s), but {what} one worker per CPU: give more --server-cpus or fewer --workers",
                    placement.server_cpus.len()
                ));
            }
        }
        let threads = o.threads.unwrap_or(placement.client_cpus.len());
        let size = o.size.unwrap_or(100);
        let flows = o.flows.unwrap_or(d.flows.max(threads));
        if flows < threads {
            return usage(format!(
                "--flows {flows} is fewer than --threads {threads}: each thread needs a flow"
            ));
        }
        if size < 20 {
            return usage(format!(
                "--size {size}: echo requests carry a 20-byte header; use 20 or more"
            ));
        }
        if o.queues.is_some() && kind == Kind::Loopback {
            return usage(
                "--queues sets the veth pair's queues: use it with --topology veth".into(),
            );
        }
        let allowed = firehose_sys::cpu::allowed_cpus().map_or(1, |c| c.len());
        Ok(Echo {
            load: LoadSpec {
                flows,
                window: o.window.or(d.window),
                rate: o.rate.or(d.rate),
                threads,
                size,
                duration_s: o.duration_s,
                warmup_s: o.warmup_s.unwrap_or(1),
                timeout_ms: o.timeout_ms.unwrap_or(200),
            },
            workers,
            kind,
            queues: o.queues.unwrap_or(allowed),
            server_cpus: placement.server_cpus.len(),
            client_cpus: placement.client_cpus.len(),
            port: 0,
        })
    }

    /// Builds the test host and picks the server's port.
    pub fn build(&mut self, lab: &mut Lab<'_>) -> LabResult<()> {
        match self.kind {
            Kind::Loopback => self.port = proc::free_port()?,
            Kind::Veth => {
                lab.topo = Topology::veth(&topology::run_id(None), self.queues)?;
                self.port = VETH_PORT;
            }
        }
        Ok(())
    }

    /// The document's fields about the echo setting.
    pub fn extra(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("topology".into(), self.kind.name().into());
        m.insert("queues".into(), self.queues.into());
        m.insert("workers".into(), self.workers.into());
        m.insert("load".into(), serde_json::json!(self.load));
        m
    }

    /// Seconds one trial takes, for the time left before the first one ends.
    pub fn guess_s(&self) -> f64 {
        (self.load.duration_s + self.load.warmup_s) as f64 + 1.0
    }

    fn target(&self, topo: &Topology) -> String {
        format!("{}:{}", topo.server_addr(), self.port)
    }

    fn server_argv(
        &self,
        lab: &Lab<'_>,
        kind: &ServerKind,
        stats: &Path,
    ) -> LabResult<Vec<String>> {
        let target = self.target(&lab.topo);
        Ok(match kind {
            ServerKind::Firehose { flags } => {
                let mut v = lab.firehose(&["serve", "--proto", "echo", "--listen", &target]);
                v.extend(["--json-file".into(), stats.display().to_string()]);
                v.extend(flags.iter().cloned());
                v
            }
            ServerKind::PlainEcho { threads } => {
                let t = threads.to_string();
                lab.firehose(&["lab", "plain-echo", "--listen", &target, "--threads", &t])
            }
            ServerKind::Sockperf => {
                sockperf::server(&lab.topo.server_addr().to_string(), self.port, &[])
            }
            other => {
                return Err(LabError::Usage(format!(
                "{} {} is not an echo server: compare it with lab compare --proto dns or radius",
                other.name(),
                other.config(1)
            )))
            }
        })
    }

    fn client_argv(
        &self,
        lab: &Lab<'_>,
        generator: Generator,
        server_pid: u32,
        json: &Path,
    ) -> Vec<String> {
        let l = &self.load;
        match generator {
            Generator::Firehose => {
                let cpus = firehose_sys::cpu::CpuSet::from(&lab.placement.client_cpus).to_string();
                let mut a: Vec<String> = vec!["--flows".into(), l.flows.to_string()];
                if let Some(w) = l.window {
                    a.extend(["--window".into(), w.to_string()]);
                }
                if let Some(r) = l.rate {
                    a.extend(["--rate".into(), r.to_string()]);
                }
                a.extend(
                    [
                        "--threads",
                        &l.threads.to_string(),
                        "--cpus",
                        &cpus,
                        "--duration",
                        &l.duration_s.to_string(),
                        "--warmup",
                        &l.warmup_s.to_string(),
                        "--size",
                        &l.size.to_string(),
                        "--timeout",
                        &format!("{}ms", l.timeout_ms),
                    ]
                    .map(String::from),
                );
                firehose::load(lab, &self.target(&lab.topo), &a, json, Some(server_pid))
            }
            // sockperf warms up on its own (0.4 s) before our warm-up and window start;
            // the extra seconds keep it sending until our window has closed.
            Generator::Sockperf => sockperf::ping_pong(
                &lab.topo.server_addr().to_string(),
                self.port,
                l.size,
                l.warmup_s + l.duration_s + 2,
                l.rate,
                &[],
            ),
        }
    }

    /// Starts the server and waits until its socket is bound.
    fn start_server(
        &self,
        lab: &Lab<'_>,
        cell: &Cell,
        tag: &str,
        stats: &Path,
    ) -> LabResult<(Proc, String)> {
        let argv = self.server_argv(lab, &cell.server, stats)?;
        let cpus = lab.placement.server_cpus.clone();
        let line = proc::argv(&lab.placed(Side::Server, &cpus, &argv));
        let mut srv = lab.spawn(Side::Server, &cpus, &argv, &format!("{tag}-server"))?;
        let ready_by = Instant::now() + Duration::from_secs(10);
        while !port_bound(srv.pid(), self.port) {
            if let Some(st) = srv.exited() {
                return Err(LabError::Run(format!(
                    "{}: server exited ({st}) before listening: {}",
                    cell.name,
                    srv.stderr_tail()
                )));
            }
            if Instant::now() > ready_by {
                return Err(LabError::Run(format!(
                    "{}: server did not bind port {} within 10 s: {}",
                    cell.name,
                    self.port,
                    srv.stderr_tail()
                )));
            }
            lab.sleep_until(Instant::now() + Duration::from_millis(20))?;
        }
        Ok((srv, line))
    }

    /// When the generator's window starts counting. load measures from its own start,
    /// after --warmup: the window starts when the server's namespace sees its first
    /// datagram (a busy host may take long to exec it), within 10 s. A sockperf client
    /// sends a few datagrams, idles about two seconds, prints "Starting test", then warms
    /// up for 0.4 s inside its run time.
    fn window_start(
        &self,
        lab: &Lab<'_>,
        generator: Generator,
        cli: &mut Proc,
        name: &str,
        server: (u32, Option<u64>),
    ) -> LabResult<Instant> {
        match generator {
            Generator::Firehose => {
                let (pid, before) = server;
                let by = Instant::now() + Duration::from_secs(10);
                while before.is_some() && udp_in_datagrams(pid) == before && Instant::now() < by {
                    if cli.exited().is_some() {
                        break;
                    }
                    lab.sleep_until(Instant::now() + Duration::from_millis(2))?;
                }
                Ok(Instant::now())
            }
            Generator::Sockperf => {
                let by = Instant::now() + Duration::from_secs(15);
                cli.wait_for_output("Starting test", by, Some(lab.stop))
                    .map_err(|e| match e {
                        LabError::Run(m) => LabError::Run(format!("{name}: {m}")),
                        other => other,
                    })?;
                Ok(Instant::now() + Duration::from_millis(sockperf::WARMUP_MS))
            }
        }
    }

    /// What the generator counted: load's JSON, or sockperf's printed summary.
    fn counted(
        &self,
        generator: Generator,
        cli: &Proc,
        json: &Path,
        name: &str,
    ) -> LabResult<Counted> {
        match generator {
            Generator::Firehose => {
                let (r, report) = firehose::read_load(json)?;
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
                    LabError::Run(format!("{name}: reading sockperf's output: {e}"))
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

    /// Runs one trial: set the cell's OS knobs, start the server, then the generator;
    /// sample the host at both edges of the window; stop both; read what they counted.
    pub fn trial(&self, lab: &Lab<'_>, cell: &Cell, rep: usize) -> LabResult<Outcome<Measured>> {
        lab.check()?;
        let knobs = match &cell.knobs {
            Some(k) => {
                lab.topo
                    .set_knobs(k, &lab.placement.server_cpus, &lab.placement.client_cpus)?
            }
            None => None,
        };
        // Compare's names hold a '/' ("tuned/sockperf"): not in a file name.
        let tag = format!("{}-r{rep}", cell.name.replace('/', "-"));
        let stats = lab.workdir.join(format!("{tag}-server.json"));
        let json = lab.workdir.join(format!("{tag}-load.json"));
        let _ = std::fs::remove_file(&stats);
        let _ = std::fs::remove_file(&json);
        let (mut srv, server_command) = self.start_server(lab, cell, &tag, &stats)?;
        let argv = self.client_argv(lab, cell.generator, srv.pid(), &json);
        let cpus = lab.placement.client_cpus.clone();
        let client_command = proc::argv(&lab.placed(Side::Client, &cpus, &argv));
        let seen = udp_in_datagrams(srv.pid());
        let mut cli = lab.spawn(Side::Client, &cpus, &argv, &format!("{tag}-client"))?;
        let t0 = self.window_start(lab, cell.generator, &mut cli, &cell.name, (srv.pid(), seen))?;
        let watch = Watch {
            server_pid: srv.pid(),
            client_pid: cli.pid(),
            port: self.port,
            separate_ns: lab.topo.netns(Side::Server).is_some(),
        };
        let warm = Duration::from_secs(self.load.warmup_s);
        let dur = Duration::from_secs(self.load.duration_s);
        lab.sleep_until(t0 + warm)?;
        let before = HostSample::take(&watch)?;
        let perf = match cell.server {
            ServerKind::Firehose { .. } => None,
            _ => SyscallCounter::start(&[srv.pid()], dur, &lab.workdir, &tag),
        };
        lab.sleep_until(t0 + warm + dur)?;
        let after = HostSample::take(&watch)?;
        let placement_seen = PlacementSeen {
            server: thread_cpus(watch.server_pid),
            client: thread_cpus(watch.client_pid),
        };
        let grace = Duration::from_millis(self.load.timeout_ms) + Duration::from_secs(15);
        let Some(status) = cli.wait_until(Instant::now() + grace, Some(lab.stop))? else {
            return Err(LabError::Run(format!(
                "{}: the generator did not finish {} s after its window",
                cell.name,
                grace.as_secs()
            )));
        };
        if !status.success() {
            return Err(LabError::Run(format!(
                "{}: generator failed ({status}): {}",
                cell.name,
                cli.stderr_tail()
            )));
        }
        let perf = perf.and_then(SyscallCounter::finish);
        srv.stop("INT", Duration::from_secs(5));
        let counted = self.counted(cell.generator, &cli, &json, &cell.name)?;
        let server_stats = match cell.server {
            ServerKind::Firehose { .. } => Some(firehose::read_stats(&stats)?),
            _ => None,
        };
        Ok(Outcome::Done(Measured {
            generator: cell.generator,
            commands: (server_command, client_command),
            server_pid: watch.server_pid,
            before,
            after,
            counted,
            server_stats,
            perf,
            knobs,
            placement_seen,
        }))
    }

    /// The figures of a trial from its two samples and what the generator counted.
    pub fn metrics(&self, m: Measured) -> Trial {
        let inputs = Inputs {
            tps: m.counted.tps,
            size: self.load.size,
            server_cpus: self.server_cpus,
            client_cpus: self.client_cpus,
            engine_syscalls_per_packet: m.server_stats.as_ref().and_then(|s| s.syscalls_per_packet),
            perf: m.perf,
        };
        let (window, metrics) = metrics::of_samples(&m.before, &m.after, &inputs);
        Trial {
            generator: m.generator,
            server_command: m.commands.0,
            client_command: m.commands.1,
            server_pid: m.server_pid,
            tps: m.counted.tps,
            completed: m.counted.completed,
            lost: m.counted.lost,
            latency_us: m.counted.latency_us,
            metrics,
            window,
            knobs: m.knobs,
            placement_seen: m.placement_seen,
            server_stats: m.server_stats,
            loss: match m.generator {
                Generator::Firehose => {
                    LossAttribution::from_document("load", m.counted.lost, &m.counted.report)
                }
                Generator::Sockperf => None,
            },
            generator_report: m.counted.report,
        }
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
