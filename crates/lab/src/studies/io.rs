//! `lab compare --io socket,xdp,uring`: the kernel socket path against AF_XDP (and io_uring
//! on the same sockets) on the veth topology, server on one CPU and generator on another,
//! repetitions interleaved, medians with min-max.
//!
//! Cells, each a server and what drives it:
//! - echo at saturation (closed loop, many flows): `serve --io socket --profile tuned` and
//!   `serve --io xdp --profile xdp`, both driven by `load --io xdp` (the cheapest generator,
//!   so the server is what saturates), and both driven by `load --io socket` too (the two
//!   generators' CPU per transaction side by side, against the same server);
//! - unloaded ping-pong (one flow, one request in flight), busy-polling both ends: the
//!   socket path (`--profile latency`, `load --spin`) and AF_XDP (`--profile xdp
//!   --busy-poll`, `load --io xdp --spin`);
//! - DNS at saturation over one generated zone (`--proto dns`): `serve --proto dns --io
//!   xdp` against Knot DNS in its XDP mode (`xdp: listen: IFACE@PORT`) and in its socket
//!   mode, under `load --proto dns --io xdp` and under dnsperf (kernel sockets) as a second
//!   driver. A knotd that cannot run its XDP mode is not measured, with the reason.
//!
//! Per trial: two host samples around the measured window give server and client process
//! CPU per transaction and the headline, total host CPU per transaction: busy time of every
//! CPU over the window (wall time less /proc/stat idle: `cputime::busy_s`), divided by the transactions in it (on veth the receive
//! softirq runs on the sender's CPU, so process CPU alone flatters whoever receives). On a
//! shared host that total also holds everyone else's work: read it beside the load average.

use crate::loss::LossAttribution;
use crate::metrics::{self, Inputs};
use crate::peers::dns_server::{wait_answering, DnsServer};
use crate::peers::{dnsperf, firehose};
use crate::proc::Proc;
use crate::report::mmm;
use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::sample::{HostSample, Watch};
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::studies::dns::{generate_queries, generate_zone, APEX};
use crate::study::{Lab, Outcome, Plan, Ran, Study};
use crate::topology::{self, Side, Topology};
use crate::{LabError, LabResult};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The server paths `--io` names.
pub const IOS: &[&str] = &["socket", "xdp", "uring"];

/// What to run.
#[derive(Debug, Clone)]
pub struct IoCompare {
    /// Server paths to include ("socket", "xdp", "uring").
    pub ios: Vec<String>,
    pub duration_s: u64,
    pub warmup_s: u64,
    /// Echo payload bytes.
    pub size: usize,
    /// Flows and window of the saturation cells.
    pub flows: usize,
    pub window: usize,
    /// The DNS cells instead (a zone of this many names).
    pub dns_names: Option<usize>,
    /// Set in `plan`: the zone and query file of the DNS cells.
    files: Option<(PathBuf, PathBuf)>,
    /// The next trial's port: a fresh one per trial, so no late answer of the previous
    /// trial lands in it.
    next_port: u16,
}

impl IoCompare {
    pub fn new(ios: Vec<String>, dns_names: Option<usize>) -> IoCompare {
        IoCompare {
            ios,
            duration_s: 5,
            warmup_s: 1,
            size: 100,
            flows: 64,
            window: 8,
            dns_names,
            files: None,
            next_port: 7200,
        }
    }
}

/// A server of a cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ServerCmd {
    /// `firehose serve --listen ADDR:PORT` and these flags.
    Firehose(Vec<String>),
    /// A DNS server over the cell's zone; with `xdp`, over AF_XDP on the server's veth
    /// (firehose `--io xdp`, knotd's XDP mode).
    Dns { kind: ServerKind, xdp: bool },
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

/// What the driver counted.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    /// Where load's lost transactions went (as root; dnsperf: none).
    pub loss: Option<LossAttribution>,
    pub tps: f64,
    pub completed: u64,
    pub lost: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub client_syscalls_per_txn: Option<f64>,
}

/// What one trial saw.
pub struct Measured {
    pub counted: Counted,
    pub before: HostSample,
    pub after: HostSample,
}

/// The figures of one trial.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
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
    /// Listed once in the document, under `loss_attribution`.
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
}

/// A cell's trials and their medians.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cell: Cell,
    pub tps: Option<Summary>,
    pub p50_us: Option<Summary>,
    pub p99_us: Option<Summary>,
    pub server_cpu_us_per_txn: Option<Summary>,
    pub client_cpu_us_per_txn: Option<Summary>,
    pub host_cpu_us_per_txn: Option<Summary>,
    pub client_bound: bool,
    /// Why the cell did not run.
    pub skipped: Option<String>,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The cells for the asked server paths, on a topology whose devices are `sdev`/`cdev`.
pub fn cells(o: &IoCompare, sdev: &str, cdev: &str) -> Vec<Cell> {
    let load_xdp = s(&["--io", "xdp", "--iface", cdev]);
    let size = o.size.to_string();
    let sat = |extra: &[String]| {
        let f = o.flows.to_string();
        let w = o.window.to_string();
        let mut v = s(&["--flows", &f, "--window", &w, "--size", &size]);
        v.extend_from_slice(extra);
        Driver::Load(v)
    };
    let rtt = |extra: &[String]| {
        let mut v = s(&["--flows", "1", "--window", "1", "--spin", "--size", &size]);
        v.extend_from_slice(extra);
        Driver::Load(v)
    };
    let srv = |io: &str, profile: &str| {
        ServerCmd::Firehose(s(&["--io", io, "--profile", profile, "--workers", "1"]))
    };
    let xdp_srv = |extra: &[&str]| {
        let mut v = s(&["--io", "xdp", "--iface", sdev, "--profile", "xdp"]);
        v.extend(s(extra));
        ServerCmd::Firehose(v)
    };
    let cell = |group, name: &str, server, driver| Cell {
        group,
        name: name.into(),
        server,
        driver,
    };
    let mut out = Vec::new();
    if o.dns_names.is_some() {
        let dns_load = || {
            let f = o.flows.to_string();
            let w = o.window.to_string();
            let mut v = s(&["--proto", "dns", "--flows", &f, "--window", &w]);
            v.extend_from_slice(&load_xdp);
            Driver::Load(v)
        };
        let dnsperf = Driver::Dnsperf {
            outstanding: o.flows * o.window,
        };
        let servers = [
            ("firehose xdp", ServerKind::FirehoseDns, true),
            ("knot xdp", ServerKind::Knot, true),
            ("knot socket", ServerKind::Knot, false),
        ];
        for (driver, d) in [("load xdp", dns_load()), ("dnsperf", dnsperf)] {
            for (name, kind, xdp) in &servers {
                let server = ServerCmd::Dns {
                    kind: kind.clone(),
                    xdp: *xdp,
                };
                out.push(cell(
                    "dns",
                    &format!("dns {name} <- {driver}"),
                    server,
                    d.clone(),
                ));
            }
        }
        return out;
    }
    let want = |io: &str| o.ios.iter().any(|i| i == io);
    for (io, name, server) in [
        ("socket", "serve socket tuned", srv("socket", "tuned")),
        ("xdp", "serve xdp", xdp_srv(&[])),
        ("uring", "serve uring tuned", srv("uring", "tuned")),
    ] {
        if want(io) {
            let xdp = format!("{name} <- load xdp");
            out.push(cell("echo", &xdp, server.clone(), sat(&load_xdp)));
            out.push(cell(
                "echo",
                &format!("{name} <- load socket"),
                server,
                sat(&[]),
            ));
        }
    }
    for (io, name, server, driver) in [
        (
            "socket",
            "ping-pong socket (busy poll) <- load socket --spin",
            srv("socket", "latency"),
            rtt(&[]),
        ),
        (
            "xdp",
            "ping-pong xdp (busy poll) <- load xdp --spin",
            xdp_srv(&["--busy-poll", "50"]),
            rtt(&load_xdp),
        ),
        (
            "uring",
            "ping-pong uring (busy poll) <- load socket --spin",
            srv("uring", "latency"),
            rtt(&[]),
        ),
    ] {
        if want(io) {
            out.push(cell("rtt", name, server, driver));
        }
    }
    out
}

impl IoCompare {
    /// Starts the server of `cell` on `port`; `Ok(Err(why))` when a DNS peer cannot run
    /// here (knotd without its XDP mode).
    fn start_server(
        &self,
        lab: &Lab<'_>,
        cell: &Cell,
        port: u16,
        tag: &str,
    ) -> LabResult<Result<Proc, String>> {
        let addr = lab.topo.server_addr().to_string();
        let cpus = lab.placement.server_cpus[..1].to_vec();
        match &cell.server {
            ServerCmd::Firehose(flags) => {
                let mut args = s(&["--listen", &format!("{addr}:{port}")]);
                args.extend_from_slice(flags);
                Ok(Ok(
                    firehose::serve(lab, Side::Server, &cpus, &args, tag)?.proc
                ))
            }
            ServerCmd::Dns { kind, xdp } => {
                let (zone, _) = self.files.as_ref().expect("planned");
                let dir = lab.workdir.join(tag);
                std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display(), e))?;
                let dev = lab.topo.dev(Side::Server);
                let argv = DnsServer {
                    kind,
                    firehose: &lab.bin,
                    workers: 1,
                    dir: &dir,
                    addr: &addr,
                    port,
                    zone,
                    apex: APEX,
                    tcp_limit: None,
                    xdp_iface: xdp.then_some(dev.as_str()),
                }
                .argv()?;
                let mut p = lab.spawn(Side::Server, &cpus, &argv, tag)?;
                let within = Duration::from_secs(15);
                Ok(
                    match wait_answering(lab, &mut p, &addr, port, APEX, within)? {
                        Ok(()) => Ok(p),
                        Err(why) if *kind == ServerKind::Knot && *xdp => Err(format!(
                            "{why} (knotd needs its XDP mode: Knot DNS 3.x built with libxdp)"
                        )),
                        Err(why) => return Err(LabError::Run(why)),
                    },
                )
            }
        }
    }

    /// The driver's command line.
    fn driver(
        &self,
        lab: &Lab<'_>,
        cell: &Cell,
        port: u16,
        pid: u32,
        json: &std::path::Path,
    ) -> Vec<String> {
        let addr = lab.topo.server_addr().to_string();
        match &cell.driver {
            Driver::Load(args) => {
                let mut a = args.clone();
                if cell.group == "dns" {
                    let (_, queries) = self.files.as_ref().expect("planned");
                    a.extend(s(&["--queries", &queries.display().to_string()]));
                }
                let (d, w) = (self.duration_s.to_string(), self.warmup_s.to_string());
                a.extend(s(&["--duration", &d, "--warmup", &w, "--interval", "0"]));
                firehose::load(lab, &format!("{addr}:{port}"), &a, json, Some(pid))
            }
            Driver::Dnsperf { outstanding } => dnsperf::Dnsperf {
                server: &addr,
                port,
                queries: &self.files.as_ref().expect("planned").1,
                seconds: (self.warmup_s + self.duration_s) as f64,
                outstanding: *outstanding,
                rate: None,
                tcp: None,
                timeout_s: Some(1),
            }
            .argv(),
        }
    }
}

impl Study for IoCompare {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Figures;
    type Row = Row;

    fn name(&self) -> String {
        "compare --io".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        if let Some(n) = self.dns_names {
            let (zone_text, exist) = generate_zone(n);
            let zone = lab.workdir.join("bench.zone");
            let queries = lab.workdir.join("queries.txt");
            for (path, text) in [
                (&zone, zone_text),
                (&queries, generate_queries(&exist, 100_000)),
            ] {
                std::fs::write(path, text).map_err(|e| LabError::io(path.display(), e))?;
            }
            self.files = Some((zone, queries));
        }
        lab.topo = Topology::veth(&topology::run_id(None), 1)?;
        let cells = cells(
            self,
            &lab.topo.dev(Side::Server),
            &lab.topo.dev(Side::Client),
        );
        Ok(Plan::of(cells))
    }

    fn cell_name(&self, c: &Cell) -> String {
        c.name.clone()
    }

    fn trial(
        &mut self,
        lab: &mut Lab<'_>,
        cell: &Cell,
        rep: usize,
    ) -> LabResult<Outcome<Measured>> {
        self.next_port += 1;
        let port = self.next_port;
        let tag = format!("io-{rep}-{port}");
        let mut srv = match self.start_server(lab, cell, port, &tag)? {
            Ok(p) => p,
            Err(why) => return Ok(Outcome::Skip(why)),
        };
        let json = lab.workdir.join(format!("{tag}.json"));
        let argv = self.driver(lab, cell, port, srv.pid(), &json);
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let started = Instant::now();
        let mut drv = lab.spawn(Side::Client, &cpus, &argv, &format!("{tag}-driver"))?;
        let watch = Watch {
            server_pid: srv.pid(),
            client_pid: drv.pid(),
            port,
            separate_ns: true,
        };
        // The samples around the driver's measured window: after its warm-up and
        // start-up, ending before it stops.
        lab.sleep_until(started + Duration::from_secs(self.warmup_s) + Duration::from_millis(300))?;
        let before = HostSample::take(&watch)?;
        let window =
            Duration::from_secs(self.duration_s).saturating_sub(Duration::from_millis(600));
        lab.sleep_until(Instant::now() + window)?;
        let after = HostSample::take(&watch)?;
        let by = Instant::now() + Duration::from_secs(30);
        let status = drv.wait_until(by, Some(lab.stop))?;
        srv.stop("INT", Duration::from_secs(5));
        if cell.server
            == (ServerCmd::Dns {
                kind: ServerKind::Knot,
                xdp: true,
            })
        {
            // knotd leaves its XDP program on the interface when it exits: the lab started
            // it on the lab's own veth, so the lab removes it before the next cell.
            let dev = lab.topo.dev(Side::Server);
            for mode in ["xdp", "xdpgeneric"] {
                let _ = lab.topo.exec(
                    Side::Server,
                    &["ip", "link", "set", "dev", &dev, mode, "off"],
                );
            }
        }
        match status {
            Some(st) if st.success() => {}
            other => {
                return Err(LabError::Run(format!(
                    "{}: the driver failed ({}) after {:.1} s: {}",
                    cell.name,
                    other.map_or("still running".into(), |s| s.to_string()),
                    started.elapsed().as_secs_f64(),
                    drv.stderr_tail()
                )))
            }
        }
        let counted = match &cell.driver {
            Driver::Load(_) => {
                let (r, doc) = firehose::read_load(&json)?;
                Counted {
                    loss: LossAttribution::from_document("load", r.lost, &doc),
                    tps: r.tps,
                    completed: r.completed,
                    lost: r.lost,
                    p50_us: r.latency_us.p50,
                    p99_us: r.latency_us.p99,
                    client_syscalls_per_txn: r.client_syscalls_per_txn,
                }
            }
            Driver::Dnsperf { .. } => {
                let text = drv.stdout();
                let r = dnsperf::parse(&text).ok_or_else(|| {
                    LabError::Run(format!(
                        "{}: no summary in dnsperf's output: {text}",
                        cell.name
                    ))
                })?;
                Counted {
                    loss: None,
                    tps: r.qps,
                    completed: r.completed,
                    lost: r.lost,
                    p50_us: f64::NAN,
                    p99_us: f64::NAN,
                    client_syscalls_per_txn: None,
                }
            }
        };
        Ok(Outcome::Done(Measured {
            counted,
            before,
            after,
        }))
    }

    fn metrics(&self, _cell: &Cell, m: Measured) -> Figures {
        let c = m.counted;
        let (_, fig) = metrics::of_samples(
            &m.before,
            &m.after,
            &Inputs {
                tps: c.tps,
                size: self.size,
                server_cpus: 1,
                client_cpus: 1,
                engine_syscalls_per_packet: None,
                perf: None,
            },
        );
        Figures {
            tps: c.tps,
            completed: c.completed,
            lost: c.lost,
            p50_us: c.p50_us,
            p99_us: c.p99_us,
            server_cpu_us_per_txn: fig.server_cpu_us_per_txn,
            client_cpu_us_per_txn: fig.client_cpu_us_per_txn,
            client_syscalls_per_txn: c.client_syscalls_per_txn,
            host_cpu_us_per_txn: fig.host_cpu_us_per_txn,
            client_bound: fig.client_bound,
            loss: c.loss,
        }
    }

    fn loss<'t>(&self, t: &'t Figures) -> Option<&'t LossAttribution> {
        t.loss.as_ref()
    }

    fn rows(&self, ran: &Ran<Cell, Figures>) -> Vec<Row> {
        ran.cells
            .iter()
            .map(|c| {
                let t = &c.trials;
                let sum = |g: fn(&Figures) -> Option<f64>| Summary::of(t.iter().filter_map(g));
                Row {
                    cell: c.cell.clone(),
                    tps: sum(|m| Some(m.tps)),
                    p50_us: sum(|m| Some(m.p50_us)),
                    p99_us: sum(|m| Some(m.p99_us)),
                    server_cpu_us_per_txn: sum(|m| m.server_cpu_us_per_txn),
                    client_cpu_us_per_txn: sum(|m| m.client_cpu_us_per_txn),
                    host_cpu_us_per_txn: sum(|m| m.host_cpu_us_per_txn),
                    client_bound: t.iter().any(|m| m.client_bound),
                    skipped: c.skipped.clone(),
                }
            })
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Figures>, rows: &[Row]) -> Page {
        Page {
            title: format!("firehose lab compare --io {}", self.ios.join(",")),
            preamble: vec![
                format!(
                    "lab compare --io {}: veth, server on CPU {}, client on CPU {}, {} repetition(s) of {} s",
                    self.ios.join(","),
                    ran.placement.server_cpus[0],
                    ran.placement.client_cpus[0],
                    ran.repetitions,
                    self.duration_s
                ),
                ran.host_line(),
            ],
            blocks: vec![
                Block::Table(table(rows)),
                Block::List(List {
                    title: "Ratios".into(),
                    items: ratios(rows),
                    text: TextList::Lines {
                        heading: None,
                        prefix: String::new(),
                        blank_before: true,
                    },
                }),
            ],
        }
    }
}

fn fmt(s: &Option<Summary>, digits: usize) -> String {
    mmm(s, digits, "-")
}

/// The table of results, a row per cell; printed as Markdown on the terminal too.
pub fn table(rows: &[Row]) -> Table {
    let headers = [
        "cell",
        "tps",
        "host CPU us/txn",
        "server CPU us/txn",
        "client CPU us/txn",
        "p50 us",
        "p99 us",
    ];
    let mut dim = Vec::new();
    let cells = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if let Some(why) = &r.skipped {
                dim.push(i);
                let mut v = vec![r.cell.name.clone(), format!("skipped: {why}")];
                v.resize(headers.len(), String::new());
                return v;
            }
            let bound = if r.client_bound {
                " (CLIENT-BOUND)"
            } else {
                ""
            };
            vec![
                format!("{}{bound}", r.cell.name),
                fmt(&r.tps, 0),
                fmt(&r.host_cpu_us_per_txn, 3),
                fmt(&r.server_cpu_us_per_txn, 3),
                fmt(&r.client_cpu_us_per_txn, 3),
                fmt(&r.p50_us, 1),
                fmt(&r.p99_us, 1),
            ]
        })
        .collect();
    Table {
        title: None,
        columns: headers.iter().map(|h| Column::auto(h)).collect(),
        rows: cells,
        dim,
        text: TextTable::Markdown,
    }
}

/// The ratios the comparison is about: throughput and cost of one server against another
/// under the same generator, and of one generator against the other on the same server.
pub fn ratios(rows: &[Row]) -> Vec<String> {
    let find = |name: &str| rows.iter().find(|r| r.cell.name == name);
    let med = |s: &Option<Summary>| s.as_ref().map(|s| s.median);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
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
    let mut out = Vec::new();
    for (label, a, b) in &servers {
        if let (Some(x), Some(k)) = (find(a), find(b)) {
            out.push(format!(
                "{label}: tps {}, host CPU per txn {}, server CPU per txn {}",
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
            out.push(format!(
                "generator xdp / socket ({server}): client CPU per txn {}",
                ratio(med(&x.client_cpu_us_per_txn), med(&k.client_cpu_us_per_txn)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
