//! Our DNS responder against Knot DNS and NSD, each driven by dnsperf and by
//! `firehose load --proto dns`, in one run, interleaved, over the same generated zone
//! and query mix (75% existing names, 25% NXDOMAIN).
//!
//! One repetition starts each (server, workers) in turn, pinned to the server CPUs, and
//! runs every driver against it pinned to the client CPUs. The server's CPU is the delta
//! of utime+stime over its process tree across the driver's run; syscalls come from
//! `perf stat -e raw_syscalls:sys_enter` on the same processes when perf can count.

pub mod drivers;
pub mod peers;
mod report;

pub use crate::server::ServerKind;
pub use drivers::{Driver, DriverResult, TcpLoad};

use crate::cputime::{self, Scope};
use crate::env::Environment;
use crate::perf::{SyscallCount, SyscallCounter};
use crate::server::DNS_SERVERS;
use crate::stats::Summary;
use crate::workdir::WorkDir;
use crate::LabError;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What to compare and how.
#[derive(Debug, Clone)]
pub struct DnsCompareOptions {
    /// The `firehose` binary (serves our responder and drives `load`).
    pub firehose: PathBuf,
    pub servers: Vec<ServerKind>,
    pub drivers: Vec<Driver>,
    /// Worker counts to try for every server (e.g. 1 and 2).
    pub workers: Vec<usize>,
    /// CPUs for servers; a server with N workers gets the first N.
    pub server_cpus: Vec<usize>,
    /// CPUs for drivers (the first one is used: both drivers run one thread).
    pub client_cpus: Vec<usize>,
    pub repetitions: usize,
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
    /// UDP (and TCP, for knotd) port on 127.0.0.1; 0 picks a free one per server start.
    pub port: u16,
    /// Set by SIGINT/SIGTERM: the run stops after the current driver, cleaning up.
    pub stop: Option<Arc<AtomicBool>>,
}

impl DnsCompareOptions {
    fn stopped(&self) -> bool {
        self.stop_flag().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn stop_flag(&self) -> Option<&AtomicBool> {
        self.stop.as_deref()
    }
}

impl Default for DnsCompareOptions {
    fn default() -> Self {
        DnsCompareOptions {
            firehose: PathBuf::from("firehose"),
            servers: DNS_SERVERS.to_vec(),
            drivers: vec![Driver::Dnsperf, Driver::Firehose],
            workers: vec![1, 2],
            server_cpus: vec![0],
            client_cpus: vec![1],
            repetitions: 3,
            duration: Duration::from_secs(5),
            names: 10_000,
            queries: 100_000,
            outstanding: 100,
            rate: None,
            tcp: None,
            syscalls: true,
            port: 0,
            stop: None,
        }
    }
}

/// One (server, config, driver) over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct DnsCompareRow {
    #[serde(serialize_with = "crate::server::serialize_key")]
    pub server: ServerKind,
    pub workers: usize,
    pub config: String,
    pub driver: Driver,
    pub qps: Summary,
    pub server_cpu_us_per_query: Option<f64>,
    pub client_cpu_us_per_query: Option<f64>,
    pub syscalls_per_query: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: Option<f64>,
    /// Lost queries summed over repetitions.
    pub lost: u64,
    /// Datagrams the server's sockets dropped (their /proc/net/udp drop counters), summed
    /// over repetitions: queries that never reached the server.
    pub server_drops: u64,
    /// Growth of the host's Udp RcvbufErrors (/proc/net/snmp) during the driver runs,
    /// summed: every full socket buffer on the host, the client's included.
    pub udp_rcvbuf_errors: u64,
    /// Median CPU use of the server (1.0 = one CPU busy) and of the driver.
    pub server_util: f64,
    pub client_util: f64,
    /// The driver was saturated while the server was not: says nothing about the server.
    pub client_bound: bool,
    /// "client", "server" or "neither": which side limited the rate.
    pub bound: &'static str,
}

/// The result of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct DnsCompareReport {
    pub rows: Vec<DnsCompareRow>,
    /// Configurations not run, with the reason.
    pub skipped: Vec<String>,
    pub environment: Environment,
    pub repetitions: usize,
    pub duration_s: f64,
    pub rate: Option<u64>,
    /// Over TCP, if not UDP.
    pub tcp: Option<TcpLoad>,
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
    /// Share of all CPU time the hypervisor gave to other guests during the run (steal,
    /// from /proc/stat); a large share makes every figure noisy.
    pub steal_pct: Option<f64>,
}

/// A busy side uses at least this share of its CPUs.
const SATURATED: f64 = 0.95;

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

/// One driver run against a running server: figures for one repetition.
struct Sample {
    result: DriverResult,
    server_s: f64,
    server_drops: u64,
    rcvbuf_errors: u64,
    syscalls: Option<SyscallCount>,
}

fn measure(
    server_pid: u32,
    plan: &drivers::DriverPlan<'_>,
    syscalls: bool,
    stop: Option<&AtomicBool>,
) -> Result<Sample, LabError> {
    let perf = if syscalls {
        let tree = cputime::process_tree(server_pid);
        SyscallCounter::start(&tree, plan.duration, plan.logs, "server")
    } else {
        None
    };
    let rcvbuf_errors = || {
        firehose_host::procfs::read(
            &format!("/proc/{server_pid}/net/snmp"),
            firehose_host::procfs::snmp::parse_udp,
        )
        .map(|u| u.rcvbuf_errors)
    };
    let drops_before = crate::sample::socket_drops(server_pid, plan.port)?;
    let rcvbuf_before = rcvbuf_errors()?;
    let before = cputime::seconds(server_pid, Scope::Tree)?;
    let result = drivers::run(plan, stop)?;
    let server_s = (cputime::seconds(server_pid, Scope::Tree)? - before).max(0.0);
    Ok(Sample {
        result,
        server_s,
        server_drops: crate::sample::socket_drops(server_pid, plan.port)?
            .saturating_sub(drops_before),
        rcvbuf_errors: rcvbuf_errors()?.saturating_sub(rcvbuf_before),
        syscalls: perf.and_then(SyscallCounter::finish),
    })
}

fn row_of(
    server: ServerKind,
    workers: usize,
    driver: Driver,
    samples: &[Sample],
) -> Option<DnsCompareRow> {
    let med = |f: &dyn Fn(&Sample) -> Option<f64>| {
        Summary::of(samples.iter().filter_map(f)).map(|s| s.median)
    };
    let qps = Summary::of(samples.iter().map(|s| s.result.qps))?;
    let per_query = |secs: f64, s: &Sample| {
        (s.result.completed > 0).then(|| secs * 1e6 / s.result.completed as f64)
    };
    let server_util = med(&|s| Some(s.server_s / s.result.wall_s)).unwrap_or(0.0);
    let client_util = med(&|s| Some(s.result.client_cpu_s / s.result.wall_s)).unwrap_or(0.0);
    let server_busy = server_util >= SATURATED * workers as f64;
    let client_busy = client_util >= SATURATED;
    Some(DnsCompareRow {
        config: server.config(workers),
        server,
        workers,
        driver,
        qps,
        server_cpu_us_per_query: med(&|s| per_query(s.server_s, s)),
        client_cpu_us_per_query: med(&|s| per_query(s.result.client_cpu_s, s)),
        syscalls_per_query: med(&|s| {
            let c = s.syscalls?;
            let q = s.result.qps * c.seconds;
            (q > 0.0).then(|| c.syscalls as f64 / q)
        }),
        p50_us: med(&|s| s.result.p50_us),
        p99_us: med(&|s| s.result.p99_us),
        mean_us: med(&|s| s.result.mean_us),
        lost: samples.iter().map(|s| s.result.lost).sum(),
        server_drops: samples.iter().map(|s| s.server_drops).sum(),
        udp_rcvbuf_errors: samples.iter().map(|s| s.rcvbuf_errors).sum(),
        server_util,
        client_util,
        client_bound: client_busy && !server_busy,
        bound: match (server_busy, client_busy) {
            (true, _) => "server",
            (false, true) => "client",
            (false, false) => "neither",
        },
    })
}

fn check(opts: &DnsCompareOptions) -> Result<(), LabError> {
    let usage = |m: String| Err(LabError::Usage(m));
    if opts.servers.is_empty() || opts.drivers.is_empty() || opts.workers.is_empty() {
        return usage("name at least one server, driver and worker count".into());
    }
    if let Some(k) = opts.servers.iter().find(|k| !k.speaks_dns()) {
        return usage(format!(
            "{} is not a DNS server (use firehose, knotd or nsd)",
            k.name()
        ));
    }
    if opts.repetitions == 0 || opts.duration.is_zero() || opts.names == 0 || opts.queries == 0 {
        return usage("repetitions, duration, names and queries must be positive".into());
    }
    if opts.client_cpus.is_empty() || opts.server_cpus.is_empty() {
        return usage("give at least one server CPU and one client CPU".into());
    }
    if let Some(c) = opts
        .client_cpus
        .iter()
        .find(|c| opts.server_cpus.contains(c))
    {
        return usage(format!(
            "CPU {c} is both a server and a client CPU; pin them apart"
        ));
    }
    if let Some(t) = opts.tcp {
        if opts.drivers.contains(&Driver::Firehose) {
            return usage(
                "firehose load speaks DNS over UDP only; over TCP use the dnsperf generator".into(),
            );
        }
        if t.connections == 0 || t.connections > opts.outstanding {
            return usage(format!(
                "{} TCP connections for {} queries outstanding: use 1 to {} connections",
                t.connections, opts.outstanding, opts.outstanding
            ));
        }
    }
    if opts.outstanding == 0 || opts.outstanding >= 65536 {
        return usage(format!(
            "{} queries outstanding: use 1..65535 (DNS ids are 16 bits)",
            opts.outstanding
        ));
    }
    Ok(())
}

/// Runs the comparison.
pub fn run(opts: &DnsCompareOptions) -> Result<DnsCompareReport, LabError> {
    check(opts)?;
    // The zone, queries and configs; removed when the run ends, however it ends.
    let workdir = WorkDir::new("dns-compare")?;
    let (zone_text, exist) = generate_zone(opts.names);
    let zone = workdir.join("bench.zone");
    std::fs::write(&zone, zone_text).map_err(|e| LabError::io(zone.display(), e))?;
    let queries = workdir.join("queries.txt");
    std::fs::write(&queries, generate_queries(&exist, opts.queries))
        .map_err(|e| LabError::io(queries.display(), e))?;
    let json = workdir.join("load.json");
    let cpu_times = || {
        firehose_host::procfs::read("/proc/stat", firehose_host::procfs::stat::parse)
            .ok()
            .map(|s| s.total)
    };
    let stat_before = cpu_times();

    let mut skipped = Vec::new();
    let mut missing = |prog: &str| {
        let gone = !crate::cmd::installed(prog);
        if gone {
            skipped.push(format!(
                "{prog}: not installed ({})",
                crate::cmd::install_hint(prog)
            ));
        }
        gone
    };
    let servers: Vec<ServerKind> = opts
        .servers
        .iter()
        .filter(|k| !k.program().is_some_and(|(prog, _)| missing(prog)))
        .cloned()
        .collect();
    let drivers: Vec<Driver> = opts
        .drivers
        .iter()
        .copied()
        .filter(|d| *d != Driver::Dnsperf || !missing("dnsperf"))
        .collect();
    let mut configs = Vec::new();
    for kind in &servers {
        for &w in &opts.workers {
            if w > opts.server_cpus.len() {
                skipped.push(format!(
                    "{} {}: needs {w} server CPUs apart from the client's, only {:?} given",
                    kind.name(),
                    kind.config(w),
                    opts.server_cpus
                ));
            } else {
                configs.push((kind.clone(), w));
            }
        }
    }
    let mut samples: Vec<Vec<Sample>> = (0..configs.len() * drivers.len())
        .map(|_| Vec::new())
        .collect();
    for rep in 0..opts.repetitions {
        for (ci, (kind, workers)) in configs.iter().enumerate() {
            let workers = *workers;
            let port = match opts.port {
                0 => crate::proc::free_port()?,
                p => p,
            };
            let server = peers::start(
                &peers::ServerPlan {
                    kind: kind.clone(),
                    workers,
                    cpus: &opts.server_cpus[..workers],
                    port,
                    zone: &zone,
                    apex: APEX,
                    firehose: &opts.firehose,
                    tcp: opts.tcp,
                    dir: workdir.join(format!("{}-{workers}-{rep}", kind.name())),
                    ready_within: Duration::from_secs(10),
                },
                opts.stop_flag(),
            )
            .map_err(|e| {
                if opts.stopped() {
                    LabError::Interrupted
                } else {
                    e
                }
            })?;
            for (di, &driver) in drivers.iter().enumerate() {
                if opts.stopped() {
                    return Err(LabError::Interrupted);
                }
                let plan = drivers::DriverPlan {
                    driver,
                    cpus: &opts.client_cpus[..1],
                    port,
                    queries: &queries,
                    duration: opts.duration,
                    outstanding: opts.outstanding,
                    rate: opts.rate,
                    tcp: opts.tcp,
                    firehose: &opts.firehose,
                    json: &json,
                    logs: &workdir,
                };
                let sample = measure(server.pid(), &plan, opts.syscalls, opts.stop_flag());
                if opts.stopped() {
                    return Err(LabError::Interrupted);
                }
                samples[ci * drivers.len() + di].push(sample?);
            }
            drop(server);
        }
    }
    let mut rows = Vec::new();
    for (ci, (kind, workers)) in configs.iter().enumerate() {
        for (di, &driver) in drivers.iter().enumerate() {
            rows.extend(row_of(
                kind.clone(),
                *workers,
                driver,
                &samples[ci * drivers.len() + di],
            ));
        }
    }
    let steal_pct = match (stat_before, cpu_times()) {
        (Some(a), Some(b)) => Some(firehose_host::procfs::stat::split(&a, &b).steal),
        _ => None,
    };
    Ok(DnsCompareReport {
        steal_pct,
        rows,
        skipped,
        environment: Environment::capture(),
        repetitions: opts.repetitions,
        duration_s: opts.duration.as_secs_f64(),
        rate: opts.rate,
        tcp: opts.tcp,
        server_cpus: opts.server_cpus.clone(),
        client_cpus: opts.client_cpus.clone(),
    })
}

/// A comma-separated list of names, each read by `from_name`; an unknown name is a usage
/// error that lists the known ones.
pub fn parse_names<T>(
    flag: &str,
    list: &str,
    from_name: fn(&str) -> Option<T>,
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

    #[test]
    fn usage_checks() {
        let mut o = DnsCompareOptions {
            client_cpus: vec![0],
            ..DnsCompareOptions::default()
        };
        assert!(matches!(run(&o), Err(LabError::Usage(_))));
        o.client_cpus = vec![1];
        o.outstanding = 70_000;
        assert!(matches!(run(&o), Err(LabError::Usage(_))));
    }
}
