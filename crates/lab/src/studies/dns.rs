//! `lab compare --proto dns`: our DNS responder against Knot DNS and NSD, each driven by
//! dnsperf and by `firehose load --proto dns`, in one run, interleaved, over the same
//! generated zone and query mix (75% existing names, 25% NXDOMAIN).
//!
//! A cell is a (server, workers, driver); the cells of one (server, workers) are a group:
//! the server is started once per repetition, pinned to the server CPUs, and every driver
//! runs against it in turn, pinned to the client CPU. The server's CPU is the delta of
//! utime+stime over its process tree across the driver's run; syscalls come from `perf
//! stat -e raw_syscalls:sys_enter` on the same processes when perf can count.

mod drivers;
mod report;

pub use drivers::{Driver, DriverResult};
pub use report::DnsRow;

use super::served;
use crate::cputime;
use crate::peers::dns_server::{self, wait_answering, DnsServer};
use crate::peers::dnsperf::TcpLoad;
use crate::peers::perf::{SyscallCount, SyscallCounter};
use crate::proc::Proc;
use crate::report::Page;
use crate::server::{ServerKind, DNS_SERVERS};
use crate::study::{Lab, Outcome, Plan, Ran, Skipped, Study};
use crate::{cmd, LabError, LabResult};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// What to compare and how.
pub struct DnsCompare {
    pub servers: Vec<ServerKind>,
    pub drivers: Vec<Driver>,
    /// Worker counts to try for every server (e.g. 1 and 2).
    pub workers: Vec<usize>,
    pub duration: Duration,
    /// Names in the generated zone.
    pub names: usize,
    /// Queries in the generated query file.
    pub queries: usize,
    /// Queries outstanding per driver.
    pub outstanding: usize,
    /// Offered load in queries/s for every run; `None` is closed loop at saturation.
    pub rate: Option<u64>,
    /// Queries over TCP (dnsperf only) instead of UDP.
    pub tcp: Option<TcpLoad>,
    /// Count server syscalls with perf (adds a little tracing cost to every server alike).
    pub syscalls: bool,
    /// Set in `plan`: the zone and query files.
    files: Option<(PathBuf, PathBuf)>,
    /// The server of the group entered last, and its port.
    server: Option<(Proc, u16)>,
    /// Server starts so far (each gets its own config directory).
    starts: usize,
}

impl Default for DnsCompare {
    fn default() -> Self {
        DnsCompare {
            servers: DNS_SERVERS.to_vec(),
            drivers: vec![Driver::Dnsperf, Driver::Firehose],
            workers: vec![1, 2],
            duration: Duration::from_secs(5),
            names: 10_000,
            queries: 100_000,
            outstanding: 100,
            rate: None,
            tcp: None,
            syscalls: true,
            files: None,
            server: None,
            starts: 0,
        }
    }
}

/// One (server, workers, driver).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    pub driver: Driver,
}

/// One driver run against a running server.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub result: DriverResult,
    /// Server CPU seconds over the driver's run (its whole process tree).
    pub server_s: f64,
    pub server_drops: u64,
    pub rcvbuf_errors: u64,
    #[serde(skip)]
    pub syscalls: Option<SyscallCount>,
    pub syscalls_per_query: Option<f64>,
}

/// Apex of the generated zone.
pub const APEX: &str = "bench.example.";

/// xorshift64*, so the query file is the same for every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    }
}

/// A zone of `names` hosts: every host has an A; every 4th an AAAA, every 10th MX and
/// TXT, every 20th is a CNAME to the one before. Returns the text and the (name, type)
/// pairs that exist.
pub fn generate_zone(names: usize) -> (String, Vec<(String, &'static str)>) {
    let mut z = format!(
        "$ORIGIN {APEX}\n$TTL 3600\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 192.0.2.53\n"
    );
    let mut exist = vec![(APEX.to_string(), "SOA"), (APEX.to_string(), "NS")];
    for i in 0..names {
        let name = format!("host{i}.{APEX}");
        if i % 20 == 19 {
            let _ = writeln!(z, "host{i} CNAME host{}", i - 1);
            exist.push((name, "A"));
            continue;
        }
        let _ = writeln!(
            z,
            "host{i} A 10.{}.{}.{}",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255
        );
        exist.push((name.clone(), "A"));
        if i % 4 == 0 {
            let _ = writeln!(z, "host{i} AAAA 2001:db8::{:x}", i & 0xffff);
            exist.push((name.clone(), "AAAA"));
        }
        if i % 10 == 0 {
            let _ = writeln!(z, "host{i} MX 10 ns1\nhost{i} TXT \"host {i}\"");
            exist.push((name.clone(), "MX"));
            exist.push((name, "TXT"));
        }
    }
    (z, exist)
}

/// `count` queries in dnsperf's format: 3 of 4 for existing (name, type), 1 of 4 for
/// names that do not exist (NXDOMAIN), shuffled deterministically.
pub fn generate_queries(exist: &[(String, &'static str)], count: usize) -> String {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut q = String::new();
    for i in 0..count {
        if i % 4 == 3 {
            let _ = writeln!(q, "nx{}.{APEX} A", rng.below(1 << 30));
        } else {
            let (name, t) = &exist[rng.below(exist.len())];
            let _ = writeln!(q, "{name} {t}");
        }
    }
    q
}

/// A comma-separated list of names, each read by `from_name`; an unknown name is a usage
/// error that lists the known ones.
pub fn parse_names<T>(
    flag: &str,
    list: &str,
    from_name: impl Fn(&str) -> Option<T>,
    known: &str,
) -> Result<Vec<T>, LabError> {
    list.split(',')
        .map(|n| {
            from_name(n.trim()).ok_or_else(|| {
                LabError::Usage(format!("{flag}: unknown name '{}' (use {known})", n.trim()))
            })
        })
        .collect()
}

impl DnsCompare {
    fn check(&self, lab: &Lab<'_>) -> LabResult<()> {
        let usage = |m: String| Err(LabError::Usage(m));
        let (server_cpus, client_cpus) = (&lab.placement.server_cpus, &lab.placement.client_cpus);
        if self.drivers.is_empty() {
            return usage("name at least one driver".into());
        }
        served::check_sides(lab, &self.servers, &self.workers)?;
        if let Some(k) = self.servers.iter().find(|k| !k.speaks_dns()) {
            return usage(format!(
                "{} is not a DNS server (use firehose, knotd or nsd)",
                k.name()
            ));
        }
        if self.duration.is_zero() || self.names == 0 || self.queries == 0 {
            return usage("duration, names and queries must be positive".into());
        }
        if let Some(c) = client_cpus.iter().find(|c| server_cpus.contains(c)) {
            return usage(format!(
                "CPU {c} is both a server and a client CPU; pin them apart"
            ));
        }
        if let Some(t) = self.tcp {
            if self.drivers.contains(&Driver::Firehose) {
                return usage(
                    "firehose load speaks DNS over UDP only; over TCP use the dnsperf generator"
                        .into(),
                );
            }
            if t.connections == 0 || t.connections > self.outstanding {
                return usage(format!(
                    "{} TCP connections for {} queries outstanding: use 1 to {} connections",
                    t.connections, self.outstanding, self.outstanding
                ));
            }
        }
        if self.outstanding == 0 || self.outstanding >= 65536 {
            return usage(format!(
                "{} queries outstanding: use 1..65535 (DNS ids are 16 bits)",
                self.outstanding
            ));
        }
        Ok(())
    }
}

impl Study for DnsCompare {
    type Cell = Cell;
    type Measured = Sample;
    type Trial = Sample;
    type Row = DnsRow;

    fn name(&self) -> String {
        "compare --proto dns".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        self.check(lab)?;
        let (zone_text, exist) = generate_zone(self.names);
        let zone = lab.workdir.join("bench.zone");
        std::fs::write(&zone, zone_text).map_err(|e| LabError::io(zone.display(), e))?;
        let queries = lab.workdir.join("queries.txt");
        std::fs::write(&queries, generate_queries(&exist, self.queries))
            .map_err(|e| LabError::io(queries.display(), e))?;
        self.files = Some((zone, queries));
        let mut skipped = Vec::new();
        let servers = crate::server::installed(&self.servers, &mut skipped);
        let mut drivers = self.drivers.clone();
        if drivers.contains(&Driver::Dnsperf) && !cmd::installed("dnsperf") {
            skipped.push(Skipped::not_installed("dnsperf"));
            drivers.retain(|d| *d != Driver::Dnsperf);
        }
        let mut cells = Vec::new();
        for kind in &servers {
            for &w in &self.workers {
                if !served::fits(lab, kind, w, &mut skipped) {
                    continue;
                }
                for &driver in &drivers {
                    cells.push(Cell {
                        server: kind.clone(),
                        workers: w,
                        driver,
                    });
                }
            }
        }
        Plan::compare(cells, skipped, Vec::new())
    }

    fn cell_name(&self, c: &Cell) -> String {
        format!(
            "{} {} / {}",
            c.server.name(),
            c.server.config(c.workers),
            c.driver.name()
        )
    }

    fn group(&self, c: &Cell) -> Option<String> {
        Some(format!("{} {}", c.server.name(), c.workers))
    }

    fn enter(&mut self, lab: &mut Lab<'_>, c: &Cell) -> LabResult<Option<String>> {
        let (zone, _) = self.files.clone().expect("planned");
        let port = crate::proc::free_port()?;
        self.starts += 1;
        let dir = served::server_dir(lab, &c.server, c.workers, self.starts)?;
        let argv = DnsServer {
            kind: &c.server,
            firehose: &lab.bin,
            workers: c.workers,
            dir: &dir,
            addr: "127.0.0.1",
            port,
            zone: &zone,
            apex: APEX,
            tcp_limit: self.tcp.map(|t| dns_server::tcp_limit(t.connections)),
            xdp_iface: None,
        }
        .argv()?;
        let cpus = lab.placement.server_cpus[..c.workers].to_vec();
        let tag = format!("{}-{}-server", c.server.name(), self.starts);
        let mut p = lab.spawn(crate::topology::Side::Server, &cpus, &argv, &tag)?;
        wait_answering(
            lab,
            &mut p,
            "127.0.0.1",
            port,
            APEX,
            Duration::from_secs(10),
        )?
        .map_err(LabError::Run)?;
        self.server = Some((p, port));
        Ok(None)
    }

    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        // Dropping the server stops its whole process group (NSD forks its servers).
        self.server = None;
        Ok(())
    }

    fn trial(&mut self, lab: &mut Lab<'_>, c: &Cell, _rep: usize) -> LabResult<Outcome<Sample>> {
        let (server, port) = self.server.as_ref().expect("entered");
        let (pid, port) = (server.pid(), *port);
        let (_, queries) = self.files.clone().expect("planned");
        let plan = drivers::DriverPlan {
            driver: c.driver,
            port,
            queries: &queries,
            duration: self.duration,
            outstanding: self.outstanding,
            rate: self.rate,
            tcp: self.tcp,
            json: &lab.workdir.join("load.json"),
        };
        let perf = if self.syscalls {
            let tree = cputime::process_tree(pid);
            SyscallCounter::start(&tree, self.duration, &lab.workdir, "server")
        } else {
            None
        };
        let busy = served::Busy::start(vec![pid], port)?;
        let result = drivers::run(lab, &plan)?;
        let spent = busy.finish()?;
        Ok(Outcome::Done(Sample {
            result,
            server_s: spent.server_s,
            server_drops: spent.server_drops,
            rcvbuf_errors: spent.rcvbuf_errors,
            syscalls: perf.and_then(SyscallCounter::finish),
            syscalls_per_query: None,
        }))
    }

    fn metrics(&self, _c: &Cell, mut s: Sample) -> Sample {
        s.syscalls_per_query = s.syscalls.and_then(|c| {
            let q = s.result.qps * c.seconds;
            (q > 0.0).then(|| c.syscalls as f64 / q)
        });
        s
    }

    fn rows(&self, ran: &Ran<Cell, Sample>) -> Vec<DnsRow> {
        ran.cells
            .iter()
            .filter_map(|c| report::row_of(&c.cell, &c.trials))
            .collect()
    }

    fn page(&self, ran: &Ran<Cell, Sample>, rows: &[DnsRow]) -> Page {
        report::page(self, ran, rows)
    }

    fn loss<'t>(&self, t: &'t Sample) -> Option<&'t crate::loss::LossAttribution> {
        t.result.loss.as_ref()
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Sample>,
        rows: &[DnsRow],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("duration_s".into(), self.duration.as_secs_f64().into());
        m.insert("rate".into(), serde_json::json!(self.rate));
        m.insert("tcp".into(), serde_json::json!(self.tcp));
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
    fn query_mix_is_three_existing_to_one_missing() {
        let (_, exist) = generate_zone(100);
        let q = generate_queries(&exist, 1000);
        let lines: Vec<&str> = q.lines().collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines.iter().filter(|l| l.starts_with("nx")).count(), 250);
        assert!(lines.iter().filter(|l| !l.starts_with("nx")).all(|l| {
            let (n, t) = l.split_once(' ').unwrap();
            exist.iter().any(|(en, et)| en == n && *et == t)
        }));
        assert_eq!(q, generate_queries(&exist, 1000), "deterministic");
    }
}
