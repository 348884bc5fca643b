//! `lab compare --proto radius`: `firehose serve --proto radius` against FreeRADIUS, like
//! for like on loopback: the same generated clients.conf and users file, the same server
//! CPUs (FreeRADIUS's thread pool sized to the worker count), the same generator (`firehose
//! load --proto radius`, PAP, a Message-Authenticator on every request, every 4th user
//! rejected by `Auth-Type := Reject`) pinned to the client CPU, interleaved repetitions.
//!
//! A cell is a (server, workers); the server is started once per repetition (its group) and
//! the generator runs against it. The server's CPU is the delta of utime+stime over its
//! process tree across the generator's run, the host's its busy time (/proc/stat: wall x
//! CPUs - idle).

mod report;

pub use report::RadiusRow;

use crate::cputime::{self, Scope};
use crate::loss::LossAttribution;
use crate::peers::firehose;
use crate::peers::radius_server::{wait_answering, RadiusServer};
use crate::proc::Proc;
use crate::report::Page;
use crate::sample::SocketLoss;
use crate::server::{ServerKind, RADIUS_SERVERS};
use crate::study::{Lab, Outcome, Plan, Ran, Skipped, Study};
use crate::topology::{run_id, Kind, Side, Topology, VETH_CLIENT_ADDR};
use crate::{LabError, LabResult};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The shared secret of the generated clients.conf (loopback only).
pub const SECRET: &str = "firehose-lab";

/// What to compare and how.
pub struct RadiusCompare {
    pub servers: Vec<ServerKind>,
    /// Worker counts to try for every server (firehose's workers, FreeRADIUS's pool).
    pub workers: Vec<usize>,
    pub duration: Duration,
    /// Users in the generated users file.
    pub users: usize,
    /// The generator's sockets and requests outstanding on each (RADIUS ids are 8 bits:
    /// `flows x window` <= 256).
    pub flows: usize,
    pub window: usize,
    /// Offered load in requests/s; `None` is closed loop at saturation.
    pub rate: Option<u64>,
    /// How long the generator waits for an answer before counting it lost.
    pub timeout: Option<Duration>,
    /// Loopback (one namespace), or veth: each server in the server namespace, the
    /// generator in the client namespace, requests crossing the veth pair.
    pub topology: Kind,
    /// Set in `plan`: the clients.conf and users files.
    files: Option<(PathBuf, PathBuf)>,
    /// The server of the group entered last, and its address.
    server: Option<(Proc, SocketAddr)>,
    /// Server starts so far (each gets its own directory).
    starts: usize,
}

impl Default for RadiusCompare {
    fn default() -> Self {
        RadiusCompare {
            servers: RADIUS_SERVERS.to_vec(),
            workers: vec![1],
            duration: Duration::from_secs(5),
            users: 1000,
            flows: 4,
            window: 32,
            rate: None,
            timeout: None,
            topology: Kind::Loopback,
            files: None,
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
    /// Responses that failed validation, by reason (authenticator, verdict, code).
    pub invalid: BTreeMap<String, u64>,
    /// Responses by code (Access-Accept, Access-Reject).
    pub codes: BTreeMap<String, u64>,
    pub p50_us: f64,
    pub p99_us: f64,
    /// CPU seconds over the generator's run: the server's process tree, the whole host's
    /// busy time, and the generator's own (to its exit).
    pub server_s: f64,
    pub host_s: f64,
    pub client_s: f64,
    pub wall_s: f64,
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
pub type Trial = super::served::PerRequest<Measured>;

impl super::served::Costs for Measured {
    fn completed(&self) -> u64 {
        self.completed
    }
    fn seconds(&self) -> (f64, f64, f64, f64) {
        (self.server_s, self.host_s, self.client_s, self.wall_s)
    }
}

/// A clients.conf with one client, the generator's address (this host's loopback, or the
/// client end of the veth pair), that must sign every Access-Request with a
/// Message-Authenticator (both servers' BlastRADIUS defence).
pub fn clients_conf(client: IpAddr) -> String {
    format!(
        "client lab {{\n\tipaddr = {client}\n\tsecret = {SECRET}\n\trequire_message_authenticator = yes\n}}\n"
    )
}

/// A users file of `n` users (`userI`, password `pwI`) with two reply attributes each;
/// every 4th is rejected by `Auth-Type := Reject` with a Reply-Message.
pub fn users_file(n: usize) -> String {
    let mut u = String::new();
    for i in 0..n {
        if i % 4 == 3 {
            let _ = writeln!(
                u,
                "user{i}\tCleartext-Password := \"pw{i}\", Auth-Type := Reject\n\tReply-Message = \"account disabled\"\n"
            );
        } else {
            let _ = writeln!(
                u,
                "user{i}\tCleartext-Password := \"pw{i}\"\n\tReply-Message = \"Hello, user{i}\",\n\tSession-Timeout = 3600\n"
            );
        }
    }
    u
}

impl RadiusCompare {
    fn check(&self, lab: &Lab<'_>) -> LabResult<()> {
        let usage = |m: String| Err(LabError::Usage(m));
        let (server_cpus, client_cpus) = (&lab.placement.server_cpus, &lab.placement.client_cpus);
        if self.servers.is_empty() || self.workers.is_empty() {
            return usage("name at least one server and one worker count".into());
        }
        if let Some(k) = self.servers.iter().find(|k| !RADIUS_SERVERS.contains(k)) {
            return usage(format!(
                "{} is not a RADIUS server (use firehose or freeradius)",
                k.name()
            ));
        }
        if self.duration.is_zero() || self.users == 0 || self.flows == 0 || self.window == 0 {
            return usage("duration, users, flows and window must be positive".into());
        }
        if self.flows * self.window > 256 {
            return usage(format!(
                "{} flows x window {} = {} requests outstanding: RADIUS ids are 8 bits, so at most 256 from the one generator thread",
                self.flows,
                self.window,
                self.flows * self.window
            ));
        }
        if client_cpus.is_empty() || server_cpus.is_empty() {
            return usage("give at least one server CPU and one client CPU".into());
        }
        Ok(())
    }

    /// The generator's arguments after `load --target ADDR`.
    fn load_args(&self, clients: &std::path::Path, users: &std::path::Path) -> Vec<String> {
        let g = Generator {
            flows: self.flows,
            window: self.window,
            duration: self.duration,
            rate: self.rate,
            timeout: self.timeout,
        };
        g.args(clients, users)
    }
}

/// What the one generator thread is asked to do.
struct Generator {
    flows: usize,
    window: usize,
    duration: Duration,
    rate: Option<u64>,
    timeout: Option<Duration>,
}

impl Generator {
    /// `load --proto radius` on the generated files, one thread.
    fn args(&self, clients: &std::path::Path, users: &std::path::Path) -> Vec<String> {
        let mut a: Vec<String> = [
            "--proto",
            "radius",
            "--radius-users",
            &users.display().to_string(),
            "--radius-clients",
            &clients.display().to_string(),
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
}

impl RadiusCompare {
    /// On veth the lab's own process cannot reach the server namespace: the server is
    /// ready once a short `firehose load` from the client namespace gets a validated answer
    /// (within `within`); `Ok(Err(why))` quotes the server's and the probe's stderr.
    fn wait_answering_across(
        &self,
        lab: &Lab<'_>,
        server: &mut Proc,
        listen: SocketAddr,
        within: Duration,
    ) -> LabResult<Result<(), String>> {
        let (clients, users) = self.files.clone().expect("planned");
        let json = lab.workdir.join("probe.json");
        // One request at a time, briefly; no drop watch (it takes a second to attach).
        let mut args = Generator {
            flows: 1,
            window: 1,
            duration: Duration::from_millis(200),
            rate: None,
            timeout: Some(Duration::from_millis(100)),
        }
        .args(&clients, &users);
        args.push("--no-drops".into());
        let argv = firehose::load(lab, &listen.to_string(), &args, &json, None);
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let by = Instant::now() + within;
        let mut last: String;
        loop {
            if let Some(st) = server.exited() {
                return Ok(Err(format!(
                    "{} exited ({st}) before answering: {}",
                    server.name(),
                    server.stderr_tail()
                )));
            }
            let _ = std::fs::remove_file(&json);
            match lab.run_to_end(Side::Client, &cpus, &argv, "radius-probe", within) {
                Ok(_) => match firehose::read_load(&json) {
                    Ok((r, _)) if r.completed > 0 => return Ok(Ok(())),
                    Ok((r, _)) => last = format!("{} requests, none answered", r.sent),
                    Err(e) => last = e.to_string(),
                },
                Err(LabError::Interrupted) => return Err(LabError::Interrupted),
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= by {
                return Ok(Err(format!(
                    "{} did not answer the generator across the veth pair on {listen} within {:.0} s ({last}): {}",
                    server.name(),
                    within.as_secs_f64(),
                    server.stderr_tail()
                )));
            }
            lab.check()?;
        }
    }
}

impl Study for RadiusCompare {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Trial;
    type Row = RadiusRow;

    fn name(&self) -> String {
        "compare --proto radius".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        self.check(lab)?;
        let client_ip = match self.topology {
            Kind::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Kind::Veth => {
                lab.topo = Topology::veth(&run_id(None), 1)?;
                IpAddr::V4(VETH_CLIENT_ADDR)
            }
        };
        let clients = lab.workdir.join("clients.conf");
        std::fs::write(&clients, clients_conf(client_ip))
            .map_err(|e| LabError::io(clients.display(), e))?;
        let users = lab.workdir.join("users");
        std::fs::write(&users, users_file(self.users))
            .map_err(|e| LabError::io(users.display(), e))?;
        self.files = Some((clients, users));
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
        let mut notes = vec![format!(
            "both servers read the same generated clients.conf (one client, {client_ip}, Message-Authenticator required) and users file ({} users, every 4th rejected by Auth-Type); FreeRADIUS runs its files, pap and chap modules only, reject_delay 0, its thread pool fixed at the worker count, confined to the same CPUs",
            self.users
        )];
        if self.topology == Kind::Veth {
            notes.push(format!(
                "topology veth: each server listens on {} in the server namespace, the generator sends from {client_ip} in the client namespace",
                lab.topo.server_addr()
            ));
        }
        Plan::compare(cells, skipped, notes)
    }

    fn cell_name(&self, c: &Cell) -> String {
        format!("{} {}", c.server.name(), c.server.config(c.workers))
    }

    fn group(&self, c: &Cell) -> Option<String> {
        Some(self.cell_name(c))
    }

    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        let (clients, users) = self.files.clone().expect("planned");
        let port = crate::proc::free_port()?;
        self.starts += 1;
        let dir = lab
            .workdir
            .join(format!("{}-{}-{}", c.server.name(), c.workers, self.starts));
        std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display(), e))?;
        let listen = SocketAddr::new(lab.topo.server_addr(), port);
        let argv = RadiusServer {
            kind: &c.server,
            firehose: &lab.bin,
            workers: c.workers,
            dir: &dir,
            listen,
            clients: &clients,
            users: &users,
        }
        .argv()?;
        let cpus = lab.placement.server_cpus[..c.workers].to_vec();
        let tag = format!("{}-{}-server", c.server.name(), self.starts);
        let mut p = lab.spawn(Side::Server, &cpus, &argv, &tag)?;
        let within = Duration::from_secs(15);
        match lab.topo.kind() {
            Kind::Loopback => wait_answering(lab, &mut p, listen, SECRET.as_bytes(), within)?,
            Kind::Veth => self.wait_answering_across(lab, &mut p, listen, within)?,
        }
        .map_err(LabError::Run)?;
        self.server = Some((p, listen));
        Ok(None)
    }

    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        self.server = None;
        Ok(())
    }

    fn trial(&mut self, lab: &mut Lab<'_>, _c: &Cell, _rep: usize) -> LabResult<Outcome<Measured>> {
        let (server, listen) = self.server.as_ref().expect("entered");
        let (pid, listen) = (server.pid(), *listen);
        let (clients, users) = self.files.clone().expect("planned");
        let json = lab.workdir.join("load.json");
        let _ = std::fs::remove_file(&json);
        let argv = firehose::load(
            lab,
            &listen.to_string(),
            &self.load_args(&clients, &users),
            &json,
            None,
        );
        let loss_before = SocketLoss::read(pid, listen.port())?;
        let host_before = cputime::StatReading::now()?;
        let server_before = cputime::seconds(pid, Scope::Tree)?;
        let cpus = lab.placement.client_cpus[..1].to_vec();
        let within = self.duration + Duration::from_secs(30);
        let done = lab.run_to_end(Side::Client, &cpus, &argv, "firehose-load", within)?;
        let server_s = (cputime::seconds(pid, Scope::Tree)? - server_before).max(0.0);
        let host_s = crate::sample::host_cpu_since(&host_before)?;
        let loss = SocketLoss::read(pid, listen.port())?.since(&loss_before);
        let (r, doc) = firehose::read_load(&json)?;
        Ok(Outcome::Done(Measured {
            loss: LossAttribution::from_document("load", r.lost, &doc),
            rps: r.tps,
            completed: r.completed,
            lost: r.lost,
            unsent: r.unsent,
            invalid: r.invalid,
            codes: r.codes,
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
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

    fn loss<'t>(&self, t: &'t Trial) -> Option<&'t LossAttribution> {
        t.measured.loss.as_ref()
    }

    fn rows(&self, ran: &Ran<Cell, Trial>) -> Vec<RadiusRow> {
        ran.cells
            .iter()
            .filter_map(|c| report::row_of(&c.cell, &c.trials))
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Trial>, rows: &[RadiusRow]) -> Page {
        report::page(self, ran, rows)
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Trial>,
        rows: &[RadiusRow],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("rate".into(), serde_json::json!(self.rate));
        m.insert("flows".into(), self.flows.into());
        m.insert("window".into(), self.window.into());
        m.insert("users".into(), self.users.into());
        m.insert("topology".into(), self.topology.name().into());
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

    fn measured(completed: u64, server_s: f64, host_s: f64, client_s: f64) -> Measured {
        Measured {
            rps: completed as f64 / 2.0,
            completed,
            lost: 0,
            unsent: 0,
            invalid: BTreeMap::new(),
            codes: BTreeMap::new(),
            p50_us: 50.0,
            p99_us: 90.0,
            server_s,
            host_s,
            client_s,
            wall_s: 2.0,
            server_drops: 0,
            rcvbuf_errors: 0,
            loss: None,
        }
    }

    #[test]
    fn figures_per_request_and_utilisation() {
        let s = RadiusCompare::default();
        let c = Cell {
            server: ServerKind::FreeRadius,
            workers: 1,
        };
        let t = s.metrics(&c, measured(200_000, 2.0, 3.0, 1.0));
        assert_eq!(t.server_cpu_us_per_req, Some(10.0));
        assert_eq!(t.host_cpu_us_per_req, Some(15.0));
        assert_eq!(t.client_cpu_us_per_req, Some(5.0));
        assert_eq!((t.server_util, t.client_util), (1.0, 0.5));
        let none = s.metrics(&c, measured(0, 2.0, 3.0, 1.0));
        assert_eq!(
            none.server_cpu_us_per_req, None,
            "no request, no cost per request"
        );
    }

    #[test]
    fn generated_files_reject_every_fourth_user() {
        let u = users_file(8);
        assert_eq!(u.matches("Auth-Type := Reject").count(), 2);
        assert!(u.starts_with("user0\tCleartext-Password := \"pw0\"\n\tReply-Message"));
        assert!(u.contains("user3\tCleartext-Password := \"pw3\", Auth-Type := Reject\n"));
        assert!(clients_conf(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .contains("require_message_authenticator = yes"));
        let a = RadiusCompare {
            rate: Some(5000),
            ..RadiusCompare::default()
        }
        .load_args(std::path::Path::new("/c"), std::path::Path::new("/u"));
        assert_eq!(a[..4], ["--proto", "radius", "--radius-users", "/u"]);
        assert!(a.ends_with(&["--rate".to_string(), "5000".to_string()]));
    }
}
