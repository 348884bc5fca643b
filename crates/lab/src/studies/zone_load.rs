//! `firehose lab zone-load`: how long DNS servers take to load one large zone and how much
//! memory they hold for it, measured side by side.
//!
//! The zone is generated (a reproducible mix of the record types a real zone holds: A,
//! AAAA, MX, TXT, CNAME, and delegations with glue) or given. Each server is started
//! pinned, timed from its start until it answers the apex SOA (the zone is loaded), and
//! its memory is its whole process tree's ([`crate::memory`]): the peak of the summed RSS,
//! sampled every 10 ms from its start until `--settle` after its first answer, and the
//! summed PSS then. The CPU time the tree used until its first answer is read too: on a
//! busy host it varies less than the wall time. Servers are interleaved (A B A B ...) and
//! each figure is a median with min-max.

use crate::cputime::{self, Scope};
use crate::memory::{self, Sampler, TreeMemory};
use crate::peers::dns_server::{wait_answering, DnsServer};
use crate::report::mmm;
use crate::report::page::{Align, Block, Column, List, Page, Table, TextList, TextTable};
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::study::{Lab, Outcome, Plan, Ran, Study};
use crate::topology::Side;
use crate::{LabError, LabResult};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Apex of the generated zone.
pub const APEX: &str = "big.example.";

/// How often the memory of a server's tree is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// What to measure.
#[derive(Debug, Clone)]
pub struct ZoneLoad {
    pub servers: Vec<ServerKind>,
    /// Another firehose binary measured first, as `firehose-baseline` (before and after a
    /// change in one run).
    pub baseline: Option<PathBuf>,
    /// Size of the generated zone file in bytes (ignored with `zone`).
    pub size: u64,
    /// A zone file to load instead of a generated one, with its apex (trailing dot).
    pub zone: Option<(PathBuf, String)>,
    /// How long a server may take to answer its first query.
    pub ready_within: Duration,
    /// How long a server runs after its first answer before its memory is read (a
    /// server may go on allocating after it starts answering).
    pub settle: Duration,
    /// Set in `plan`: the zone loaded, its apex, size and records (0 when given).
    loaded: Option<(PathBuf, String, u64, usize)>,
}

impl ZoneLoad {
    pub fn new(servers: Vec<ServerKind>) -> ZoneLoad {
        ZoneLoad {
            servers,
            baseline: None,
            size: 50 << 20,
            zone: None,
            ready_within: Duration::from_secs(60),
            settle: Duration::from_secs(1),
            loaded: None,
        }
    }
}

/// A server to start: its name in the table, its kind, the firehose binary for ours.
#[derive(Debug, Clone, Serialize)]
pub struct Server {
    pub name: String,
    pub kind: ServerKind,
    pub bin: Option<PathBuf>,
}

/// One server start, as measured.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub ready: Duration,
    pub cpu_s: f64,
    pub memory: TreeMemory,
    pub rss_after_kib: u64,
    pub pss_after_kib: Option<u64>,
}

/// One server start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoadSample {
    /// From the start of the process until its first answer.
    pub ready_s: f64,
    /// CPU time (user + system, every thread of the tree) used until the first answer.
    pub cpu_s: f64,
    /// The peak of the summed VmRSS of the server's process tree, sampled.
    pub peak_rss_mib: f64,
    /// The summed VmRSS and PSS of the tree after settling.
    pub rss_after_mib: f64,
    pub pss_after_mib: Option<f64>,
    /// The most processes the tree had.
    pub processes: usize,
    /// The started process's own peak (VmHWM): what a one-process view reads.
    pub root_hwm_mib: f64,
}

/// A server's figures over the repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct ServerLoad {
    pub server: String,
    pub ready_s: Option<Summary>,
    pub cpu_s: Option<Summary>,
    pub peak_rss_mib: Option<Summary>,
    pub pss_after_mib: Option<Summary>,
    pub processes: usize,
}

const MIB: f64 = 1024.0;

/// Deterministic octets for host `i`.
fn octets(i: usize) -> [usize; 3] {
    [(i >> 16) & 255, (i >> 8) & 255, i & 255]
}

/// A zone of about `size` bytes: per host an A; every 3rd an AAAA; every 8th two MX to
/// in-zone hosts and a TXT; every 16th a CNAME beside it; every 25th a delegation with
/// two NS and their glue. Returns the text and the number of records.
pub fn generate_zone(size: u64) -> (String, usize) {
    let mut z = format!(
        "$ORIGIN {APEX}\n$TTL 3600\n@ SOA ns1 hostmaster 2026112301 7200 3600 1209600 300\n\
         @ NS ns1\n@ NS ns2\nns1 A 192.0.2.1\nns2 A 192.0.2.2\n@ MX 10 mail\nmail A 192.0.2.25\n"
    );
    let mut records = 7;
    let mut i = 0usize;
    while (z.len() as u64) < size {
        let [a, b, c] = octets(i);
        let _ = writeln!(z, "host-{i} A 10.{a}.{b}.{c}");
        records += 1;
        if i.is_multiple_of(3) {
            let _ = writeln!(z, "host-{i} AAAA 2001:db8:{a:x}:{b:x}::{c:x}");
            records += 1;
        }
        if i.is_multiple_of(8) {
            let _ = writeln!(
                z,
                "host-{i} MX 10 host-{}\nhost-{i} MX 20 mail\nhost-{i} TXT \"v=spf1 ip4:10.{a}.{b}.{c} -all\"",
                i + 1
            );
            records += 3;
        }
        if i % 16 == 5 {
            let _ = writeln!(z, "www-{i} CNAME host-{i}");
            records += 1;
        }
        if i.is_multiple_of(25) {
            let _ = writeln!(
                z,
                "sub-{i} NS ns1.sub-{i}\nsub-{i} NS ns2.sub-{i}\n\
                 ns1.sub-{i} A 172.16.{b}.{c}\nns2.sub-{i} A 172.17.{b}.{c}"
            );
            records += 4;
        }
        i += 1;
    }
    (z, records)
}

impl Study for ZoneLoad {
    type Cell = Server;
    type Measured = Measured;
    type Trial = LoadSample;
    type Row = ServerLoad;

    fn name(&self) -> String {
        "zone-load".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Server>> {
        if self.servers.is_empty() || lab.placement.server_cpus.is_empty() {
            return Err(LabError::Usage(
                "zone-load needs at least one server and one CPU".into(),
            ));
        }
        if let Some(k) = self.servers.iter().find(|k| !k.speaks_dns()) {
            return Err(LabError::Usage(format!(
                "{} is not a DNS server (use firehose, knotd or nsd)",
                k.name()
            )));
        }
        let (zone, apex, records) = match &self.zone {
            Some((p, apex)) => (p.clone(), apex.clone(), 0),
            None => {
                let (text, records) = generate_zone(self.size);
                let p = lab.workdir.join("big.zone");
                std::fs::write(&p, text).map_err(|e| LabError::io(p.display(), e))?;
                (p, APEX.to_string(), records)
            }
        };
        let bytes = std::fs::metadata(&zone)
            .map_err(|e| LabError::io(zone.display(), e))?
            .len();
        self.loaded = Some((zone, apex, bytes, records));
        let baseline = self.baseline.iter().map(|b| Server {
            name: "firehose-baseline".into(),
            kind: ServerKind::FirehoseDns,
            bin: Some(b.clone()),
        });
        let servers = self.servers.iter().map(|k| Server {
            name: k.name().into(),
            kind: k.clone(),
            bin: (*k == ServerKind::FirehoseDns).then(|| lab.bin.clone()),
        });
        let mut plan = Plan::of(baseline.chain(servers).collect());
        let (cg, listed) = memory::cgroup2_memory();
        plan.notes.push(format!(
            "memory: the server's whole process tree: the peak of its summed VmRSS, sampled every \
             {} ms from its start until --settle after its first answer (a page shared by \
             several processes counts once per process), and the summed PSS after settling \
             (shared pages divided among their processes); cgroup v2 memory.peak: {}",
            SAMPLE_EVERY.as_millis(),
            if cg {
                "available here, not used".to_string()
            } else {
                format!("not available here (cgroup2 controllers: {listed})")
            }
        ));
        Ok(plan)
    }

    fn cell_name(&self, s: &Server) -> String {
        s.name.clone()
    }

    fn trial(&mut self, lab: &mut Lab<'_>, s: &Server, rep: usize) -> LabResult<Outcome<Measured>> {
        let (zone, apex, _, _) = self.loaded.clone().expect("planned");
        let dir = lab.workdir.join(format!("{}-{rep}", s.name));
        std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display(), e))?;
        let port = crate::proc::free_port()?;
        let bin = s.bin.clone().unwrap_or_else(|| lab.bin.clone());
        let cpus = lab.placement.server_cpus.clone();
        let argv = DnsServer {
            kind: &s.kind,
            firehose: &bin,
            workers: cpus.len(),
            dir: &dir,
            addr: "127.0.0.1",
            port,
            zone: &zone,
            apex: &apex,
            tcp_limit: None,
            xdp_iface: None,
        }
        .argv()?;
        let started = Instant::now();
        let mut server = lab.spawn(Side::Server, &cpus, &argv, &format!("{}-{rep}", s.name))?;
        let sampler = Sampler::start(server.pid(), SAMPLE_EVERY)?;
        let answered = wait_answering(
            lab,
            &mut server,
            "127.0.0.1",
            port,
            &apex,
            self.ready_within,
        )?;
        answered.map_err(LabError::Run)?;
        let ready = started.elapsed();
        let cpu_s = cputime::seconds(server.pid(), Scope::Tree)?;
        lab.sleep_until(Instant::now() + self.settle)?;
        let (rss_after_kib, _) = memory::tree_rss_kib(server.pid());
        let pss_after_kib = memory::tree_pss_kib(server.pid());
        let mem = sampler.finish();
        server.stop("TERM", Duration::from_secs(5));
        Ok(Outcome::Done(Measured {
            ready,
            cpu_s,
            memory: mem,
            rss_after_kib,
            pss_after_kib,
        }))
    }

    fn metrics(&self, _s: &Server, m: Measured) -> LoadSample {
        let mib = |kib: u64| kib as f64 / MIB;
        LoadSample {
            ready_s: m.ready.as_secs_f64(),
            cpu_s: m.cpu_s,
            // The sampler may have missed the last moments; the reading after settling
            // is a sample too.
            peak_rss_mib: mib(m.memory.peak_rss_kib.max(m.rss_after_kib)),
            rss_after_mib: mib(m.rss_after_kib),
            pss_after_mib: m.pss_after_kib.map(mib),
            processes: m.memory.processes,
            root_hwm_mib: mib(m.memory.root_hwm_kib),
        }
    }

    fn rows(&self, ran: &Ran<Server, LoadSample>) -> Vec<ServerLoad> {
        ran.cells
            .iter()
            .map(|c| {
                let sum =
                    |f: fn(&LoadSample) -> Option<f64>| Summary::of(c.trials.iter().filter_map(f));
                ServerLoad {
                    server: c.name.clone(),
                    ready_s: sum(|t| Some(t.ready_s)),
                    cpu_s: sum(|t| Some(t.cpu_s)),
                    peak_rss_mib: sum(|t| Some(t.peak_rss_mib)),
                    pss_after_mib: sum(|t| t.pss_after_mib),
                    processes: c.trials.iter().map(|t| t.processes).max().unwrap_or(0),
                }
            })
            .collect()
    }

    fn page(&self, ran: &Ran<Server, LoadSample>, rows: &[ServerLoad]) -> Page {
        let (_, _, bytes, records) = self.loaded.clone().unwrap_or_default();
        let mut preamble = vec![format!(
            "zone: {:.1} MB{}, {} repetitions, servers on CPUs {:?}",
            bytes as f64 / 1e6,
            if records > 0 {
                format!(", {records} records")
            } else {
                String::new()
            },
            ran.repetitions,
            ran.placement.server_cpus
        )];
        preamble.push(ran.host_line());
        let cell = |s: &Option<Summary>, digits: usize| mmm(s, digits, "-");
        let table = Table {
            title: None,
            columns: vec![
                Column::fixed("server", 17, Align::Left),
                Column::fixed("ready s (min-max)", 22, Align::Right),
                Column::fixed("CPU s (min-max)", 22, Align::Right),
                Column::fixed("peak RSS MiB (min-max)", 24, Align::Right),
                Column::fixed("PSS after MiB", 24, Align::Right),
                Column::fixed("processes", 9, Align::Right),
            ],
            rows: rows
                .iter()
                .map(|s| {
                    vec![
                        s.server.clone(),
                        cell(&s.ready_s, 2),
                        cell(&s.cpu_s, 2),
                        cell(&s.peak_rss_mib, 0),
                        cell(&s.pss_after_mib, 0),
                        s.processes.to_string(),
                    ]
                })
                .collect(),
            dim: Vec::new(),
            text: TextTable::Padded {
                gap: 1,
                blank_before: false,
            },
        };
        let med = |s: &Option<Summary>| s.map(|s| s.median);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("x{:.2}", a / b),
            _ => "-".into(),
        };
        let ratios = match rows {
            [first, rest @ ..] => rest
                .iter()
                .map(|s| {
                    format!(
                        "{} / {}: load time {}, CPU {}, peak RSS {}, PSS after {}",
                        first.server,
                        s.server,
                        ratio(med(&first.ready_s), med(&s.ready_s)),
                        ratio(med(&first.cpu_s), med(&s.cpu_s)),
                        ratio(med(&first.peak_rss_mib), med(&s.peak_rss_mib)),
                        ratio(med(&first.pss_after_mib), med(&s.pss_after_mib)),
                    )
                })
                .collect(),
            [] => Vec::new(),
        };
        Page {
            title: "firehose lab zone-load".into(),
            preamble,
            blocks: vec![
                Block::Table(table),
                Block::List(List {
                    title: "Ratios".into(),
                    items: ratios,
                    text: TextList::prefixed(""),
                }),
                Block::List(List {
                    title: "Notes".into(),
                    items: ran.notes.clone(),
                    text: TextList::prefixed("note: "),
                }),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_zone_has_the_mix_and_the_size() {
        let (z, records) = generate_zone(200_000);
        assert!(z.len() >= 200_000 && z.len() < 200_200, "{}", z.len());
        let lines = z.lines().filter(|l| !l.starts_with('$')).count();
        assert_eq!(lines, records);
        for t in [" A ", " AAAA ", " MX ", " TXT ", " CNAME ", " NS ", " SOA "] {
            assert!(z.contains(t), "no{t}record");
        }
        assert!(z.contains("sub-25 NS ns1.sub-25\n") && z.contains("ns1.sub-25 A "));
        // The same size gives the same zone.
        assert_eq!(generate_zone(200_000).0, z);
    }

    #[test]
    fn a_sample_is_in_mib_and_the_peak_holds_the_last_reading() {
        let z = ZoneLoad::new(vec![ServerKind::Nsd]);
        let s = Server {
            name: "nsd".into(),
            kind: ServerKind::Nsd,
            bin: None,
        };
        let t = z.metrics(
            &s,
            Measured {
                ready: Duration::from_millis(2500),
                cpu_s: 2.0,
                memory: TreeMemory {
                    peak_rss_kib: 150 << 10,
                    processes: 3,
                    root_hwm_kib: 11 << 10,
                    samples: 300,
                },
                rss_after_kib: 160 << 10,
                pss_after_kib: Some(100 << 10),
            },
        );
        assert_eq!(
            (t.ready_s, t.peak_rss_mib, t.pss_after_mib, t.root_hwm_mib),
            (2.5, 160.0, Some(100.0), 11.0)
        );
    }
}
