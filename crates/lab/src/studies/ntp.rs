//! `lab compare --proto ntp`: `firehose serve --proto ntp` against chronyd, like for like on
//! loopback: both serve this host's clock as a local stratum 10 server with no rate limit,
//! on the same server CPUs (firehose's workers, as many chronyd instances on one
//! SO_REUSEPORT port as chrony's documentation advises for several cores, one per CPU), and
//! the same generator (`firehose load --proto ntp`: client requests with random transmit
//! timestamps, every answer checked) pinned to the client CPU, interleaved repetitions.
//!
//! A cell is a (server, workers); the server is started once per repetition (its group) and
//! the generator runs against it. The server's CPU is the delta of utime+stime over its
//! processes' trees across the generator's run, the host's its busy time (/proc/stat: wall
//! x CPUs - idle). Besides rate and latency, each trial keeps what ntpperf looks at: the server's
//! hold time (transmit - receive) and the offset the client measures.

mod report;

pub use report::NtpRow;

use crate::cputime::{self, Scope};
use crate::peers::chronyd::{self, ChronydConf};
use crate::peers::firehose;
use crate::proc::Proc;
use crate::report::Page;
use crate::sample::SocketLoss;
use crate::server::{ServerKind, NTP_SERVERS};
use crate::study::{Lab, Outcome, Plan, Ran, Skipped, Study};
use crate::topology::Side;
use crate::{LabError, LabResult};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The stratum both servers claim (chronyd's `local stratum`, firehose's
/// `--ntp-local-stratum`): neither needs a synchronised host clock.
pub const STRATUM: u8 = 10;

/// What to compare and how.
pub struct NtpCompare {
    pub servers: Vec<ServerKind>,
    /// Worker counts to try for every server (firehose's workers, chronyd's instances).
    pub workers: Vec<usize>,
    pub duration: Duration,
    /// The generator's sockets and requests outstanding on each.
    pub flows: usize,
    pub window: usize,
    /// Offered load in requests/s; `None` is closed loop at saturation.
    pub rate: Option<u64>,
    /// How long the generator waits for an answer before counting it lost.
    pub timeout: Option<Duration>,
    /// The server processes of the group entered last, and their address.
    server: Option<(Vec<Proc>, SocketAddr)>,
    /// Server starts so far (each gets its own directory).
    starts: usize,
}

impl Default for NtpCompare {
    fn default() -> Self {
        NtpCompare {
            servers: NTP_SERVERS.to_vec(),
            workers: vec![1],
            duration: Duration::from_secs(5),
            flows: 4,
            window: 32,
            rate: None,
            timeout: None,
            server: None,
            starts: 0,
        }
    }
}

/// One (server, workers).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
}

/// What one generator run against a running server saw.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Completed (validated) requests per second, as the generator reports it.
    pub rps: f64,
    pub completed: u64,
    pub lost: u64,
    pub unsent: u64,
    /// Responses that failed validation, by reason (origin, mode, KoD, unsynchronised...).
    pub invalid: BTreeMap<String, u64>,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The server's hold time (its transmit - receive timestamps) and the offset the
    /// client computes, µs, over the measured window; `None` with no valid answer.
    pub hold_p50_us: Option<f64>,
    pub hold_p99_us: Option<f64>,
    pub offset_p50_us: Option<f64>,
    pub offset_p99_us: Option<f64>,
    /// CPU seconds over the generator's run: the server's processes' trees, the whole
    /// host's busy time, and the generator's own (to its exit).
    pub server_s: f64,
    pub host_s: f64,
    pub client_s: f64,
    pub wall_s: f64,
    /// Datagrams the server's sockets dropped (/proc/net/udp) during the run.
    pub server_drops: u64,
    /// Growth of the host's Udp RcvbufErrors during the run (the generator's sockets too).
    pub rcvbuf_errors: u64,
}

/// The figures of one trial: what was measured, and per request.
pub type Trial = super::served::PerRequest<Measured>;

impl super::served::Costs for Measured {
    fn completed(&self) -> u64 {
        self.completed
    }
    fn seconds(&self) -> (f64, f64, f64, f64) {
        (self.server_s, self.host_s, self.client_s, self.wall_s)
    }
}

impl NtpCompare {
    fn check(&self, lab: &Lab<'_>) -> LabResult<()> {
        let usage = |m: String| Err(LabError::Usage(m));
        let (server_cpus, client_cpus) = (&lab.placement.server_cpus, &lab.placement.client_cpus);
        if self.servers.is_empty() || self.workers.is_empty() {
            return usage("name at least one server and one worker count".into());
        }
        if let Some(k) = self.servers.iter().find(|k| !NTP_SERVERS.contains(k)) {
            return usage(format!(
                "{} is not an NTP server (use firehose or chronyd)",
                k.name()
            ));
        }
        if self.duration.is_zero() || self.flows == 0 || self.window == 0 {
            return usage("duration, flows and window must be positive".into());
        }
        if client_cpus.is_empty() || server_cpus.is_empty() {
            return usage("give at least one server CPU and one client CPU".into());
        }
        Ok(())
    }

    /// The generator's arguments after `load --target ADDR`.
    fn load_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "--proto",
            "ntp",
            "--threads",
            "1",
            "--flows",
            &self.flows.to_string(),
            "--window",
            &self.window.to_string(),
            "--duration",
            &format!("{}", self.duration.as_secs_f64()),
        ]
        .map(String::from)
        .to_vec();
        if let Some(r) = self.rate {
            a.extend(["--rate".into(), r.to_string()]);
        }
        if let Some(t) = self.timeout {
            a.extend(["--timeout".into(), format!("{}ms", t.as_millis().max(1))]);
        }
        a
    }

    /// Starts firehose on `cpus` and waits until it answers a client request.
    fn start_firehose(
        &self,
        lab: &Lab<'_>,
        cpus: &[usize],
        listen: SocketAddr,
        tag: &str,
    ) -> LabResult<Proc> {
        let w = cpus.len().to_string();
        let stratum = STRATUM.to_string();
        let listen_s = listen.to_string();
        let argv = lab.firehose(&[
            "serve",
            "--proto",
            "ntp",
            "--ntp-local-stratum",
            &stratum,
            "--listen",
            &listen_s,
            "--workers",
            &w,
            "--cpus",
            "auto",
        ]);
        let mut p = lab.spawn(Side::Server, cpus, &argv, tag)?;
        let by = Instant::now() + Duration::from_secs(15);
        let mut transmit = 1u64 << 62;
        loop {
            if let Some(st) = p.exited() {
                return Err(LabError::Run(format!(
                    "{} exited ({st}) before answering: {}",
                    p.name(),
                    p.stderr_tail()
                )));
            }
            transmit += 1;
            if chronyd::answers(listen, transmit, Duration::from_millis(50)) {
                return Ok(p);
            }
            if Instant::now() >= by {
                return Err(LabError::Run(format!(
                    "{} did not answer on {listen} within 15 s: {}",
                    p.name(),
                    p.stderr_tail()
                )));
            }
            lab.check()?;
        }
    }
}

impl Study for NtpCompare {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Trial;
    type Row = NtpRow;

    fn name(&self) -> String {
        "compare --proto ntp".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        self.check(lab)?;
        let mut skipped = Vec::new();
        let servers = crate::server::installed(&self.servers, &mut skipped);
        let n_cpus = lab.placement.server_cpus.len();
        let mut cells = Vec::new();
        for &w in &self.workers {
            for kind in &servers {
                if w > n_cpus {
                    let name = format!("{} {}", kind.name(), kind.config(w));
                    skipped.push(Skipped::too_few_cpus(name, w, &lab.placement.server_cpus));
                    continue;
                }
                cells.push(Cell {
                    server: kind.clone(),
                    workers: w,
                });
            }
        }
        let notes = vec![format!(
            "both serve this host's clock at local stratum {STRATUM} with no rate limit (chronyd: `local stratum {STRATUM}`, `noclientlog`, no `ratelimit`, -x so it never touches the clock; firehose: --ntp-local-stratum {STRATUM}); chronyd runs one instance per worker on one SO_REUSEPORT port, each pinned to one of the same server CPUs firehose's workers use"
        )];
        Plan::compare(cells, skipped, notes)
    }

    fn cell_name(&self, c: &Cell) -> String {
        format!("{} {}", c.server.name(), c.server.config(c.workers))
    }

    fn group(&self, c: &Cell) -> Option<String> {
        Some(self.cell_name(c))
    }

    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        let port = crate::proc::free_port()?;
        self.starts += 1;
        let listen: SocketAddr = ([127, 0, 0, 1], port).into();
        let cpus = lab.placement.server_cpus[..c.workers].to_vec();
        let tag = format!("{}-{}-server", c.server.name(), self.starts);
        let procs = match c.server {
            ServerKind::Chronyd => {
                let dir = lab.workdir.join(format!("chronyd-{}", self.starts));
                std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display(), e))?;
                let conf = ChronydConf {
                    listen,
                    allow: "127.0.0.1",
                    stratum: STRATUM,
                };
                chronyd::start(
                    lab,
                    Side::Server,
                    &cpus,
                    &dir,
                    &conf,
                    c.workers,
                    Duration::from_secs(15),
                )?
            }
            _ => vec![self.start_firehose(lab, &cpus, listen, &tag)?],
        };
        self.server = Some((procs, listen));
        Ok(None)
    }

    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        self.server = None;
        Ok(())
    }

    fn trial(&mut self, lab: &mut Lab<'_>, _c: &Cell, _rep: usize) -> LabResult<Outcome<Measured>> {
        let (procs, listen) = self.server.as_ref().expect("entered");
        let pids: Vec<u32> = procs.iter().map(Proc::pid).collect();
        let listen = *listen;
        let json = lab.workdir.join("load.json");
        let _ = std::fs::remove_file(&json);
        let argv = firehose::load(lab, &listen.to_string(), &self.load_args(), &json, None);
        let server_cpu = |pids: &[u32]| -> LabResult<f64> {
            let mut s = 0.0;
            for p in pids {
                s += cputime::seconds(*p, Scope::Tree)?;
            }
            Ok(s)
        };
        // The instances share the port and the network namespace: one reads the host's
        // Udp counters, every socket on the port is counted once.
        let loss_before = SocketLoss::read(pids[0], listen.port())?;
        let host_before = cputime::StatReading::now()?;
        let server_before = server_cpu(&pids)?;
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let within = self.duration + Duration::from_secs(30);
        let done = lab.run_to_end(Side::Client, &cpus, &argv, "firehose-load", within)?;
        let server_s = (server_cpu(&pids)? - server_before).max(0.0);
        let host_s = crate::sample::host_cpu_since(&host_before)?;
        let loss = SocketLoss::read(pids[0], listen.port())?.since(&loss_before);
        let (r, _) = firehose::read_load(&json)?;
        let m = |name: &str, f: fn(&firehose_load::report::LatencyUs) -> f64| {
            r.measures.get(name).filter(|_| r.completed > 0).map(f)
        };
        Ok(Outcome::Done(Measured {
            rps: r.tps,
            completed: r.completed,
            lost: r.lost,
            unsent: r.unsent,
            invalid: r.invalid.clone(),
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
            hold_p50_us: m("hold", |l| l.p50),
            hold_p99_us: m("hold", |l| l.p99),
            offset_p50_us: m("offset", |l| l.p50),
            offset_p99_us: m("offset", |l| l.p99),
            server_s,
            host_s,
            client_s: done.cpu_s,
            wall_s: done.wall_s,
            server_drops: loss.socket_drops,
            rcvbuf_errors: loss.rcvbuf_errors,
        }))
    }

    fn metrics(&self, _c: &Cell, m: Measured) -> Trial {
        super::served::per_request(m)
    }

    fn rows(&self, ran: &Ran<Cell, Trial>) -> Vec<NtpRow> {
        ran.cells
            .iter()
            .filter_map(|c| report::row_of(&c.cell, &c.trials))
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Trial>, rows: &[NtpRow]) -> Page {
        report::page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Trial>,
        rows: &[NtpRow],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("rate".into(), serde_json::json!(self.rate));
        m.insert("flows".into(), self.flows.into());
        m.insert("window".into(), self.window.into());
        m.insert("stratum".into(), STRATUM.into());
        m.insert(
            "ratios".into(),
            serde_json::json!(report::ratios(self, rows)),
        );
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_told_the_same_for_every_server() {
        let a = NtpCompare {
            rate: Some(5000),
            timeout: Some(Duration::from_millis(200)),
            ..NtpCompare::default()
        }
        .load_args();
        assert_eq!(a[..4], ["--proto", "ntp", "--threads", "1"]);
        assert!(a.windows(2).any(|w| w == ["--rate", "5000"]), "{a:?}");
        assert!(a.ends_with(&["--timeout".to_string(), "200ms".to_string()]));
        let closed = NtpCompare::default().load_args();
        assert!(!closed.contains(&"--rate".to_string()));
    }
}
