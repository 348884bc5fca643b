//! The served-protocol comparisons (`lab compare --proto radius`, `--proto ntp`): one study,
//! [`ServedCompare`], parameterised by a protocol ([`Served`]): its servers and how each
//! starts, what the generator is told, and the protocol's own figures and columns.
//! Everything else is here once: the plan of cells, the test host (loopback, or a veth pair
//! with the servers in the server namespace and the generator in the client namespace),
//! readiness, one trial, the figures per request, the rows, the bound, the ratios and the
//! page. `compare --proto dns` shares the pieces that fit its two drivers ([`fits`],
//! [`Busy`], [`bound`], [`server_dir`], [`check_sides`]).
//!
//! A cell is a (server, workers), and for our server an I/O path when the study compares
//! several (`--io socket,xdp,uring`, [`Served::ios`]: each path its own row beside the
//! peers); the server is started once per repetition (its group) and
//! the generator (`firehose load`, one thread on the client CPU) runs against it. The
//! server's CPU is the delta of utime+stime over its processes' trees across the
//! generator's run, the host's its busy time (/proc/stat: wall x CPUs - idle, docs/measurement.md); a side's utilisation is
//! over the time the generator offered load, when the server works.

mod report;

pub use report::{median, page, preamble, ratios, row_of, Row};

use crate::cputime::{self, Scope};
use crate::loss::LossAttribution;
use crate::peers::firehose;
use crate::proc::Proc;
use crate::report::Page;
use crate::sample::SocketLoss;
use crate::server::ServerKind;
use crate::study::{Lab, Outcome, Plan, Ran, Skipped, Study};
use crate::topology::{run_id, Kind, Side, Topology, VETH_CLIENT_ADDR};
use crate::{LabError, LabResult};
use firehose_load::LoadReport;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A busy side uses at least this share of its CPUs.
pub const SATURATED: f64 = 0.95;

/// Which side limited the rate: "server" when the server used (nearly) all of its
/// `workers` CPUs, else "client" when the generator used (nearly) its one, else "neither".
pub fn bound(server_util: f64, client_util: f64, workers: usize) -> &'static str {
    match (
        server_util >= SATURATED * workers as f64,
        client_util >= SATURATED,
    ) {
        (true, _) => "server",
        (false, true) => "client",
        (false, false) => "neither",
    }
}

/// CPUs busy (1.0 = one CPU) for `cpu_s` CPU seconds spent while the load ran `load_s`.
pub fn utilisation(cpu_s: f64, load_s: f64) -> f64 {
    if load_s > 0.0 {
        cpu_s / load_s
    } else {
        0.0
    }
}

/// The usage errors every comparison shares: no server or worker count, or no CPU on a side.
pub fn check_sides(lab: &Lab<'_>, servers: &[ServerKind], workers: &[usize]) -> LabResult<()> {
    if servers.is_empty() || workers.is_empty() {
        return Err(LabError::Usage(
            "name at least one server and one worker count".into(),
        ));
    }
    if lab.placement.client_cpus.is_empty() || lab.placement.server_cpus.is_empty() {
        return Err(LabError::Usage(
            "give at least one server CPU and one client CPU".into(),
        ));
    }
    Ok(())
}

/// True when `kind` with `workers` fits on the server CPUs; otherwise it goes to `skipped`.
pub fn fits(lab: &Lab<'_>, kind: &ServerKind, workers: usize, skipped: &mut Vec<Skipped>) -> bool {
    if workers <= lab.placement.server_cpus.len() {
        return true;
    }
    let name = format!("{} {}", kind.name(), kind.config(workers));
    skipped.push(Skipped::too_few_cpus(
        name,
        workers,
        &lab.placement.server_cpus,
    ));
    false
}

/// A directory of the run's own for server start `n` of `kind` with `workers`.
pub fn server_dir(
    lab: &Lab<'_>,
    kind: &ServerKind,
    workers: usize,
    n: usize,
) -> LabResult<PathBuf> {
    let dir = lab
        .workdir
        .join(format!("{}-{}-{}", kind.name(), workers, n));
    std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display(), e))?;
    Ok(dir)
}

/// What a server spent across one generator run: its processes' trees' CPU, the host's
/// busy time, and the drops of the sockets on its port.
pub struct Busy {
    pids: Vec<u32>,
    port: u16,
    loss: SocketLoss,
    host: cputime::StatReading,
    server_s: f64,
}

/// [`Busy`] at the end of the run.
pub struct Spent {
    pub server_s: f64,
    pub host_s: f64,
    pub server_drops: u64,
    pub rcvbuf_errors: u64,
}

impl Busy {
    /// Starts counting for the servers `pids` on `port`. They share the port and the
    /// network namespace: the first one's view of the host's Udp counters counts every
    /// socket on the port once.
    pub fn start(pids: Vec<u32>, port: u16) -> LabResult<Busy> {
        let loss = SocketLoss::read(pids[0], port)?;
        let host = cputime::StatReading::now()?;
        let server_s = tree_cpu(&pids)?;
        Ok(Busy {
            pids,
            port,
            loss,
            host,
            server_s,
        })
    }

    pub fn finish(self) -> LabResult<Spent> {
        let server_s = (tree_cpu(&self.pids)? - self.server_s).max(0.0);
        let host_s = crate::sample::host_cpu_since(&self.host)?;
        let loss = SocketLoss::read(self.pids[0], self.port)?.since(&self.loss);
        Ok(Spent {
            server_s,
            host_s,
            server_drops: loss.socket_drops,
            rcvbuf_errors: loss.rcvbuf_errors,
        })
    }
}

fn tree_cpu(pids: &[u32]) -> LabResult<f64> {
    let mut s = 0.0;
    for p in pids {
        s += cputime::seconds(*p, Scope::Tree)?;
    }
    Ok(s)
}

/// What the one generator thread is asked to do, before the protocol's own flags.
#[derive(Debug, Clone)]
pub struct Generator {
    pub flows: usize,
    pub window: usize,
    pub duration: Duration,
    pub rate: Option<u64>,
    pub timeout: Option<Duration>,
}

impl Generator {
    /// `load` arguments after `--target ADDR`: `proto` (the protocol's flags) first, one
    /// thread, no warm-up.
    pub fn args(&self, proto: Vec<String>) -> Vec<String> {
        let mut a = proto;
        a.extend(
            [
                "--threads",
                "1",
                "--flows",
                &self.flows.to_string(),
                "--window",
                &self.window.to_string(),
                "--duration",
                &format!("{}", self.duration.as_secs_f64()),
            ]
            .map(String::from),
        );
        if let Some(r) = self.rate {
            a.extend(["--rate".into(), r.to_string()]);
        }
        if let Some(t) = self.timeout {
            a.extend(["--timeout".into(), format!("{}ms", t.as_millis().max(1))]);
        }
        a
    }
}

/// How a protocol is named and compared.
pub struct Spec {
    /// The `--proto` value: "ntp".
    pub proto: &'static str,
    /// The preamble's first word: "NTP".
    pub title: &'static str,
    /// Every server of the protocol, ours first.
    pub servers: Vec<ServerKind>,
    /// What the generator sends, for the preamble.
    pub requests: &'static str,
    /// What an answered request is called: "response" ("responses/s", "server CPU per
    /// response"), and the rate as the ratios say it ("Access-Requests/s").
    pub unit: &'static str,
    pub rate: &'static str,
    /// The rate column's header.
    pub rate_column: &'static str,
    /// Widths of the server and config columns on the terminal.
    pub widths: (usize, usize),
    /// The peer the goal names and the goal: ours at least `x` times its rate and
    /// `x` times less server CPU per request, at saturation.
    pub goal: (ServerKind, f64),
    /// The latency the goal compares at the same offered load: its label in the ratios and
    /// its digits.
    pub latency: (&'static str, usize),
    /// Bits of the request ids the generator tells answers apart by (one table per
    /// generator thread): the most requests the one thread keeps outstanding is 2^ids.
    pub id_bits: u32,
}

/// What a server start needs.
pub struct Start<'a> {
    pub kind: &'a ServerKind,
    /// Our server's I/O path (`serve --io`), when the study compares paths.
    pub io: Option<&'a str>,
    /// The server namespace's veth device (veth only): what AF_XDP serves.
    pub iface: Option<String>,
    pub workers: usize,
    /// The server CPUs it is confined to (`workers` of them).
    pub cpus: &'a [usize],
    pub listen: SocketAddr,
    /// A directory of its own.
    pub dir: &'a std::path::Path,
    /// The log name of its process(es).
    pub tag: &'a str,
}

/// One served protocol: what differs between `compare --proto radius` and `--proto ntp`.
pub trait Served {
    /// The protocol's own figures of one generator run (NTP: hold time and offset).
    type Figures: Serialize + Clone + Debug;
    /// Those figures over a cell's repetitions.
    type RowFigures: Serialize + Clone + Debug;

    fn spec(&self) -> Spec;

    /// Our server's I/O paths the study can compare (`--io`), the default first.
    fn ios(&self) -> &'static [&'static str] {
        &["socket"]
    }

    /// Why our server cannot serve over path `io` on `topology`, if it cannot.
    fn io_cannot(&self, _io: &str, _topology: Kind) -> Option<String> {
        None
    }

    /// The note that says how our server runs on each of `ios` (its flags).
    fn io_note(&self, _ios: &[String]) -> Option<String> {
        None
    }

    /// Writes what every server reads (RADIUS: clients.conf and users) into the run's
    /// directory (its test host built), for a generator sending from `client` to
    /// `servers`; the notes of the run.
    fn prepare(
        &mut self,
        lab: &Lab<'_>,
        client: IpAddr,
        servers: &[ServerKind],
    ) -> LabResult<Vec<String>>;

    /// Why `kind` with `workers` cannot run on `topology`, if it cannot.
    fn cannot(&self, _kind: &ServerKind, _workers: usize, _topology: Kind) -> Option<String> {
        None
    }

    /// The port `kind` listens on when it cannot be told another (ntpd: 123).
    fn fixed_port(&self, _kind: &ServerKind) -> Option<u16> {
        None
    }

    /// Starts the server; it need not answer yet.
    fn start(&self, lab: &Lab<'_>, s: &Start<'_>) -> LabResult<Vec<Proc>>;

    /// True if the server at `addr` answers request `n` from this process within
    /// `timeout` (readiness on loopback).
    fn answers(&self, addr: SocketAddr, n: u64, timeout: Duration) -> bool;

    /// The generator's protocol flags (`--proto ntp`; RADIUS's files).
    fn load_args(&self) -> Vec<String>;

    /// The protocol's figures in the generator's report.
    fn figures(&self, r: &LoadReport) -> Self::Figures;

    /// Those over a cell's trials.
    fn row_figures(&self, trials: &[Trial<Self::Figures>]) -> Self::RowFigures;

    /// The protocol's columns (header, width, left-aligned), after p99, and a row's cells.
    fn columns(&self) -> Vec<(&'static str, usize, bool)>;
    fn cells(&self, f: &Self::RowFigures) -> Vec<String>;

    /// The latency the goal compares at the same offered load (NTP's hold-time p99), of a
    /// row (ours or a peer's).
    fn latency(&self, r: &Row<Self::RowFigures>) -> Option<f64>;

    /// The protocol's settings in the document.
    fn extra(&self, m: &mut serde_json::Map<String, serde_json::Value>);
}

/// What to compare and how.
pub struct ServedCompare<P> {
    pub proto: P,
    pub servers: Vec<ServerKind>,
    /// Worker counts to try for every server (firehose's workers, a peer's instances or
    /// threads).
    pub workers: Vec<usize>,
    pub duration: Duration,
    /// The generator's sockets and requests outstanding on each.
    pub flows: usize,
    pub window: usize,
    /// Offered load in requests/s; `None` is closed loop at saturation.
    pub rate: Option<u64>,
    /// How long the generator waits for an answer before counting it lost.
    pub timeout: Option<Duration>,
    /// Loopback (one namespace), or veth: each server in the server namespace, the
    /// generator in the client namespace, requests crossing the veth pair.
    pub topology: Kind,
    /// Queues per veth end (veth only) [default: one per allowed CPU; with `xdp` among
    /// `ios`, the most workers, so every flow reaches a queue with an AF_XDP socket].
    pub queues: Option<usize>,
    /// Our server's I/O paths, a row each (`None`: the default path, unlabelled).
    pub ios: Option<Vec<String>>,
    /// The server processes of the group entered last, and their address.
    server: Option<(Vec<Proc>, SocketAddr)>,
    /// Server starts so far (each gets its own directory).
    starts: usize,
    /// The veth pair's queues a side, once built (`None` on loopback).
    queues_used: Option<usize>,
}

impl<P: Served> ServedCompare<P> {
    /// Every server of `proto`, one worker, 5 s closed loop, 4 flows x window 32, loopback.
    pub fn new(proto: P) -> Self {
        ServedCompare {
            servers: proto.spec().servers,
            proto,
            workers: vec![1],
            duration: Duration::from_secs(5),
            flows: 4,
            window: 32,
            rate: None,
            timeout: None,
            topology: Kind::Loopback,
            queues: None,
            ios: None,
            server: None,
            starts: 0,
            queues_used: None,
        }
    }

    fn generator(&self) -> Generator {
        Generator {
            flows: self.flows,
            window: self.window,
            duration: self.duration,
            rate: self.rate,
            timeout: self.timeout,
        }
    }

    /// The generator's arguments after `load --target ADDR`.
    pub fn load_args(&self) -> Vec<String> {
        self.generator().args(self.proto.load_args())
    }

    fn check(&self, lab: &Lab<'_>) -> LabResult<()> {
        let usage = |m: String| Err(LabError::Usage(m));
        check_sides(lab, &self.servers, &self.workers)?;
        let spec = self.proto.spec();
        if let Some(k) = self.servers.iter().find(|k| !spec.servers.contains(k)) {
            let names: Vec<&str> = spec.servers.iter().map(ServerKind::name).collect();
            return usage(format!(
                "{} is not a {} server (use {})",
                k.name(),
                spec.title,
                names.join(", ")
            ));
        }
        if self.duration.is_zero() || self.flows == 0 || self.window == 0 {
            return usage("duration, flows and window must be positive".into());
        }
        let ids = 1usize << spec.id_bits;
        if self.flows.saturating_mul(self.window) > ids {
            return usage(format!(
                "{} flows x window {} = {} requests outstanding: {} ids are {} bits, so at most {ids} from the one generator thread",
                self.flows,
                self.window,
                self.flows.saturating_mul(self.window),
                spec.title,
                spec.id_bits
            ));
        }
        if self.queues.is_some() && self.topology == Kind::Loopback {
            return usage(
                "--queues sets the veth pair's queues: use it with --topology veth".into(),
            );
        }
        for io in self.ios.iter().flatten() {
            let known = self.proto.ios();
            if !known.contains(&io.as_str()) {
                return usage(format!(
                    "--io {io}: firehose's {} server compares over {}",
                    spec.title,
                    known.join(", ")
                ));
            }
            if let Some(why) = self.proto.io_cannot(io, self.topology) {
                return usage(format!("--io {io}: {why}"));
            }
        }
        if self.ios.as_ref().is_some_and(|v| v.is_empty()) {
            return usage("--io names no path".into());
        }
        Ok(())
    }

    /// The I/O paths of `kind`'s cells: ours each compared path, a peer none.
    fn ios_of(&self, kind: &ServerKind) -> Vec<Option<String>> {
        match &self.ios {
            Some(ios) if *kind == self.proto.spec().servers[0] => {
                ios.iter().cloned().map(Some).collect()
            }
            _ => vec![None],
        }
    }

    /// Waits until the server answers: on loopback a request from this process; on veth,
    /// where this process cannot reach the server namespace, a short `firehose load` from
    /// the client namespace that gets a validated answer. `Ok(Err(why))` quotes the
    /// server's stderr (and the probe's last failure).
    fn wait_answering(
        &self,
        lab: &Lab<'_>,
        procs: &mut [Proc],
        listen: SocketAddr,
        within: Duration,
    ) -> LabResult<Result<(), String>> {
        let json = lab.workdir.join("probe.json");
        // One request at a time, briefly; no drop watch (it takes a second to attach).
        let mut args = Generator {
            flows: 1,
            window: 1,
            duration: Duration::from_millis(200),
            rate: None,
            timeout: Some(Duration::from_millis(100)),
        }
        .args(self.proto.load_args());
        args.push("--no-drops".into());
        let argv = firehose::load(lab, &listen.to_string(), &args, &json, None);
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let by = Instant::now() + within;
        let mut last = String::from("no answer");
        let mut n = 0u64;
        loop {
            for p in procs.iter_mut() {
                if let Some(st) = p.exited() {
                    return Ok(Err(format!(
                        "{} exited ({st}) before answering: {}",
                        p.name(),
                        p.stderr_tail()
                    )));
                }
            }
            n += 1;
            let ready = match lab.topo.kind() {
                Kind::Loopback => self.proto.answers(listen, n, Duration::from_millis(50)),
                Kind::Veth => {
                    let _ = std::fs::remove_file(&json);
                    match lab.run_to_end(Side::Client, &cpus, &argv, "probe", within) {
                        Ok(_) => match firehose::read_load(&json) {
                            Ok((r, _)) if r.completed > 0 => true,
                            Ok((r, _)) => {
                                last = format!("{} requests, none answered", r.sent);
                                false
                            }
                            Err(e) => {
                                last = e.to_string();
                                false
                            }
                        },
                        Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                        Err(e) => {
                            last = e.to_string();
                            false
                        }
                    }
                }
            };
            if ready {
                return Ok(Ok(()));
            }
            if Instant::now() >= by {
                let how = match lab.topo.kind() {
                    Kind::Loopback => "a request".to_string(),
                    Kind::Veth => format!("the generator across the veth pair ({last})"),
                };
                return Ok(Err(format!(
                    "{} did not answer {how} on {listen} within {:.0} s: {}",
                    procs[0].name(),
                    within.as_secs_f64(),
                    procs[0].stderr_tail()
                )));
            }
            lab.check()?;
        }
    }
}

/// One (server, workers), and our server's I/O path when the study compares paths.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
}

impl Cell {
    /// The configuration as a row shows it: the worker count's, then the path.
    pub fn config(&self) -> String {
        let c = self.server.config(self.workers);
        match &self.io {
            Some(io) => format!("{c}, --io {io}"),
            None => c,
        }
    }
}

/// What one generator run against a running server saw.
#[derive(Debug, Clone, Serialize)]
pub struct Measured<F> {
    /// Completed (validated) requests per second, as the generator reports it.
    pub rps: f64,
    pub completed: u64,
    pub lost: u64,
    pub unsent: u64,
    /// Responses that failed validation, by reason.
    pub invalid: BTreeMap<String, u64>,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The protocol's own figures.
    #[serde(flatten)]
    pub proto: F,
    /// CPU seconds over the generator's run: the server's processes' trees, the whole
    /// host's busy time, and the generator's own (to its exit); the run's wall time.
    pub server_s: f64,
    pub host_s: f64,
    pub client_s: f64,
    pub wall_s: f64,
    /// Seconds the generator offered load (its measured window; it runs no warm-up). The
    /// server works only then, while `wall_s` also holds the generator's start-up and exit:
    /// the server's utilisation is its CPU over this.
    pub load_s: f64,
    /// The generator thread's CPU over that same window, as its report gives it (1.0 = one
    /// CPU busy): its utilisation.
    pub client_window_util: f64,
    /// Datagrams the server's sockets dropped (/proc/net/udp) during the run.
    pub server_drops: u64,
    /// Growth of the host's Udp RcvbufErrors during the run (the generator's sockets too).
    pub rcvbuf_errors: u64,
    /// Where the generator's lost requests went (as root); the document lists it once,
    /// under `loss_attribution`.
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
}

/// The figures of one trial: what was measured, and per request.
#[derive(Debug, Clone, Serialize)]
pub struct PerRequest<M> {
    #[serde(flatten)]
    pub measured: M,
    pub server_cpu_us_per_req: Option<f64>,
    pub host_cpu_us_per_req: Option<f64>,
    pub client_cpu_us_per_req: Option<f64>,
    /// CPUs busy (1.0 = one CPU): the server's and the generator's.
    pub server_util: f64,
    pub client_util: f64,
}

/// A served study's trial.
pub type Trial<F> = PerRequest<Measured<F>>;

/// `m`'s CPU per request (none without a completed request) and utilisation: each side's
/// CPU over the window the generator offered load in, so a server that used its whole CPU
/// while loaded reads 1.0 however long the generator took to start and exit.
pub fn per_request<F>(m: Measured<F>) -> Trial<F> {
    let n = m.completed;
    let per_req = |secs: f64| (n > 0).then(|| secs * 1e6 / n as f64);
    PerRequest {
        server_cpu_us_per_req: per_req(m.server_s),
        host_cpu_us_per_req: per_req(m.host_s),
        client_cpu_us_per_req: per_req(m.client_s),
        server_util: utilisation(m.server_s, m.load_s),
        client_util: m.client_window_util,
        measured: m,
    }
}

impl<P: Served> Study for ServedCompare<P> {
    type Cell = Cell;
    type Measured = Measured<P::Figures>;
    type Trial = Trial<P::Figures>;
    type Row = Row<P::RowFigures>;

    fn name(&self) -> String {
        format!("compare --proto {}", self.proto.spec().proto)
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        self.check(lab)?;
        let client_ip = match self.topology {
            Kind::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Kind::Veth => {
                // As every veth study: one queue a side per allowed CPU unless told.
                let xdp = self.ios.iter().flatten().any(|io| io == "xdp");
                let queues = self.queues.unwrap_or_else(|| match xdp {
                    // `serve --io xdp --workers N` serves queues 0..N-1.
                    true => self.workers.iter().copied().max().unwrap_or(1),
                    false => firehose_sys::cpu::allowed_cpus().map_or(1, |c| c.len()),
                });
                lab.topo = Topology::veth(&run_id(None), queues)?;
                self.queues_used = Some(queues);
                IpAddr::V4(VETH_CLIENT_ADDR)
            }
        };
        let mut skipped = Vec::new();
        let servers = crate::server::installed(&self.servers, &mut skipped);
        let mut notes = self.proto.prepare(lab, client_ip, &servers)?;
        let mut cells = Vec::new();
        for &w in &self.workers {
            for kind in &servers {
                if !fits(lab, kind, w, &mut skipped) {
                    continue;
                }
                if let Some(why) = self.proto.cannot(kind, w, self.topology) {
                    skipped.push(Skipped {
                        name: format!("{} {}", kind.name(), kind.config(w)),
                        reason: why,
                    });
                    continue;
                }
                for io in self.ios_of(kind) {
                    cells.push(Cell {
                        server: kind.clone(),
                        workers: w,
                        io,
                    });
                }
            }
        }
        if let Some(n) = self.ios.as_deref().and_then(|ios| self.proto.io_note(ios)) {
            notes.push(n);
        }
        if self.topology == Kind::Veth {
            notes.push(format!(
                "topology veth ({} queue(s) a side): each server listens on {} in the server namespace, the generator sends from {client_ip} in the client namespace",
                lab.topo.queues(),
                lab.topo.server_addr()
            ));
        }
        Plan::compare(cells, skipped, notes)
    }

    fn cell_name(&self, c: &Cell) -> String {
        format!("{} {}", c.server.name(), c.config())
    }

    fn group(&self, c: &Cell) -> Option<String> {
        Some(self.cell_name(c))
    }

    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        let port = match self.proto.fixed_port(&c.server) {
            Some(p) => p,
            None => crate::proc::free_port()?,
        };
        self.starts += 1;
        let dir = server_dir(lab, &c.server, c.workers, self.starts)?;
        let listen = SocketAddr::new(lab.topo.server_addr(), port);
        let cpus = lab.placement.server_cpus[..c.workers].to_vec();
        let tag = format!("{}-{}-server", c.server.name(), self.starts);
        let start = Start {
            kind: &c.server,
            io: c.io.as_deref(),
            iface: (lab.topo.kind() == Kind::Veth).then(|| lab.topo.dev(Side::Server)),
            workers: c.workers,
            cpus: &cpus,
            listen,
            dir: &dir,
            tag: &tag,
        };
        let mut procs = self.proto.start(lab, &start)?;
        self.wait_answering(lab, &mut procs, listen, Duration::from_secs(15))?
            .map_err(LabError::Run)?;
        self.server = Some((procs, listen));
        Ok(None)
    }

    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        // Dropping the processes stops their groups.
        self.server = None;
        Ok(())
    }

    fn trial(
        &mut self,
        lab: &mut Lab<'_>,
        _c: &Cell,
        _rep: usize,
    ) -> LabResult<Outcome<Self::Measured>> {
        let (procs, listen) = self.server.as_ref().expect("entered");
        let pids: Vec<u32> = procs.iter().map(Proc::pid).collect();
        let listen = *listen;
        let json = lab.workdir.join("load.json");
        let _ = std::fs::remove_file(&json);
        let argv = firehose::load(lab, &listen.to_string(), &self.load_args(), &json, None);
        let busy = Busy::start(pids, listen.port())?;
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let within = self.duration + Duration::from_secs(30);
        let done = lab.run_to_end(Side::Client, &cpus, &argv, "firehose-load", within)?;
        let spent = busy.finish()?;
        let (r, doc) = firehose::read_load(&json)?;
        Ok(Outcome::Done(Measured {
            loss: LossAttribution::from_document("load", r.lost, &doc),
            proto: self.proto.figures(&r),
            rps: r.tps,
            completed: r.completed,
            lost: r.lost,
            unsent: r.unsent,
            invalid: r.invalid.clone(),
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
            server_s: spent.server_s,
            host_s: spent.host_s,
            client_s: done.cpu_s,
            wall_s: done.wall_s,
            load_s: r.duration_s,
            client_window_util: r.client_cpu_util,
            server_drops: spent.server_drops,
            rcvbuf_errors: spent.rcvbuf_errors,
        }))
    }

    fn metrics(&self, _c: &Cell, m: Self::Measured) -> Self::Trial {
        per_request(m)
    }

    fn loss<'t>(&self, t: &'t Self::Trial) -> Option<&'t LossAttribution> {
        t.measured.loss.as_ref()
    }

    fn rows(&self, ran: &Ran<Cell, Self::Trial>) -> Vec<Self::Row> {
        ran.cells
            .iter()
            .filter_map(|c| row_of(&self.proto, &c.cell, &c.trials))
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Self::Trial>, rows: &[Self::Row]) -> Page {
        page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Self::Trial>,
        rows: &[Self::Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("rate".into(), serde_json::json!(self.rate));
        m.insert("flows".into(), self.flows.into());
        m.insert("window".into(), self.window.into());
        m.insert("topology".into(), self.topology.name().into());
        m.insert("queues".into(), serde_json::json!(self.queues_used));
        self.proto.extra(&mut m);
        m.insert("ratios".into(), serde_json::json!(ratios(self, rows)));
        m
    }
}
