//! `firehose lab zone-load`: how long DNS servers take to load one large zone and how much
//! memory they hold for it, measured side by side.
//!
//! The zone is generated (a reproducible mix of the record types a real zone holds:
//! A, AAAA, MX, TXT, CNAME, and delegations with glue) or given. Each server is started
//! pinned, timed from its start until it answers the apex SOA (the zone is loaded), and
//! its peak resident memory (VmHWM of /proc/PID/status) is read once it has settled.
//! The CPU time it used until its first answer is read too: on a busy host it varies
//! less than the wall time.
//! Servers are interleaved (A B A B ...) and each figure is a median with min-max.

use crate::dns_compare::peers::{self, ServerPlan};
use crate::proc;
use crate::server::ServerKind;
use crate::stats::Summary;
use crate::workdir::WorkDir;
use crate::LabError;
use firehose_host::procfs::{self, pidstatus};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Apex of the generated zone.
pub const APEX: &str = "big.example.";

/// What to measure.
#[derive(Debug, Clone)]
pub struct ZoneLoadOptions {
    pub firehose: PathBuf,
    pub servers: Vec<ServerKind>,
    /// Another firehose binary measured first, as `firehose-baseline` (before and
    /// after a change in one run).
    pub baseline: Option<PathBuf>,
    /// Size of the generated zone file in bytes (ignored with `zone`).
    pub size: u64,
    /// A zone file to load instead of a generated one, with its apex (trailing dot).
    pub zone: Option<(PathBuf, String)>,
    pub repetitions: usize,
    pub cpus: Vec<usize>,
    /// How long a server may take to answer its first query.
    pub ready_within: Duration,
    /// How long a server is left running after its first answer before memory is read
    /// (a server may go on allocating after it starts answering).
    pub settle: Duration,
    pub stop: Option<Arc<AtomicBool>>,
}

impl Default for ZoneLoadOptions {
    fn default() -> Self {
        ZoneLoadOptions {
            firehose: PathBuf::from("firehose"),
            servers: vec![ServerKind::FirehoseDns, ServerKind::Knot],
            baseline: None,
            size: 50 << 20,
            zone: None,
            repetitions: 3,
            cpus: vec![0],
            ready_within: Duration::from_secs(60),
            settle: Duration::from_secs(1),
            stop: None,
        }
    }
}

/// One server start.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LoadSample {
    /// From the start of the process until its first answer.
    pub ready_s: f64,
    /// CPU time (user + system, all threads) used until the first answer.
    pub cpu_s: f64,
    /// Peak and current resident memory, after settling.
    pub hwm_mib: f64,
    pub rss_mib: f64,
}

/// A server's figures over the repetitions.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerLoad {
    pub server: String,
    pub ready_s: Summary,
    pub cpu_s: Summary,
    pub hwm_mib: Summary,
    pub rss_mib: Summary,
    pub samples: Vec<LoadSample>,
}

/// The whole measurement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ZoneLoadReport {
    pub zone_bytes: u64,
    pub records: usize,
    pub repetitions: usize,
    pub cpus: Vec<usize>,
    pub servers: Vec<ServerLoad>,
}

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

/// Starts `kind`, times it until its first answer, then reads its memory.
fn measure_once(
    opts: &ZoneLoadOptions,
    kind: &ServerKind,
    firehose: &std::path::Path,
    zone: &std::path::Path,
    apex: &str,
    dir: PathBuf,
) -> Result<LoadSample, LabError> {
    let started = Instant::now();
    let mut server = peers::start(
        &ServerPlan {
            kind: kind.clone(),
            workers: opts.cpus.len(),
            cpus: &opts.cpus,
            port: proc::free_port()?,
            zone,
            apex,
            firehose,
            tcp: None,
            dir,
            ready_within: opts.ready_within,
        },
        opts.stop.as_deref(),
    )?;
    let ready_s = started.elapsed().as_secs_f64();
    let cpu_s = crate::cputime::seconds(server.pid(), crate::cputime::Scope::Tree)?;
    proc::sleep_until(Instant::now() + opts.settle, opts.stop.as_deref())?;
    let path = format!("/proc/{}/status", server.pid());
    let mem = procfs::read(&path, pidstatus::parse)?;
    server.stop("TERM", Duration::from_secs(5));
    Ok(LoadSample {
        ready_s,
        cpu_s,
        hwm_mib: mem.hwm_kib as f64 / 1024.0,
        rss_mib: mem.rss_kib as f64 / 1024.0,
    })
}

/// Generates (or takes) the zone and measures every server, interleaved.
pub fn run(opts: &ZoneLoadOptions) -> Result<ZoneLoadReport, LabError> {
    if opts.servers.is_empty() || opts.repetitions == 0 || opts.cpus.is_empty() {
        return Err(LabError::Usage(
            "zone-load needs at least one server, one repetition and one CPU".into(),
        ));
    }
    if let Some(k) = opts.servers.iter().find(|k| {
        !matches!(
            k,
            ServerKind::FirehoseDns | ServerKind::Knot | ServerKind::Nsd
        )
    }) {
        return Err(LabError::Usage(format!(
            "{} is not a DNS server (use firehose, knotd or nsd)",
            k.name()
        )));
    }
    let workdir = WorkDir::new("zone-load")?;
    let (zone, apex, records) = match &opts.zone {
        Some((p, apex)) => (p.clone(), apex.clone(), 0),
        None => {
            let (text, records) = generate_zone(opts.size);
            let p = workdir.join("big.zone");
            std::fs::write(&p, text).map_err(|e| LabError::io(p.display(), e))?;
            (p, APEX.to_string(), records)
        }
    };
    let zone_bytes = std::fs::metadata(&zone)
        .map_err(|e| LabError::io(zone.display(), e))?
        .len();
    // (name, kind, firehose binary) of each server measured.
    let baseline = opts
        .baseline
        .iter()
        .map(|b| ("firehose-baseline".to_string(), ServerKind::FirehoseDns, b));
    let runs: Vec<(String, ServerKind, &PathBuf)> = baseline
        .chain(
            opts.servers
                .iter()
                .map(|k| (k.name().to_string(), k.clone(), &opts.firehose)),
        )
        .collect();
    let mut samples: Vec<Vec<LoadSample>> = vec![Vec::new(); runs.len()];
    for rep in 0..opts.repetitions {
        for (si, (name, kind, bin)) in runs.iter().enumerate() {
            if opts
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
            {
                return Err(LabError::Interrupted);
            }
            let dir = workdir.join(format!("{name}-{rep}"));
            samples[si].push(measure_once(opts, kind, bin, &zone, &apex, dir)?);
        }
    }
    let summary = |v: &[LoadSample], f: fn(&LoadSample) -> f64| {
        Summary::of(v.iter().map(f)).expect("at least one repetition")
    };
    let servers = runs
        .into_iter()
        .zip(samples)
        .map(|((name, _, _), v)| ServerLoad {
            server: name,
            ready_s: summary(&v, |s| s.ready_s),
            cpu_s: summary(&v, |s| s.cpu_s),
            hwm_mib: summary(&v, |s| s.hwm_mib),
            rss_mib: summary(&v, |s| s.rss_mib),
            samples: v,
        })
        .collect();
    Ok(ZoneLoadReport {
        zone_bytes,
        records,
        repetitions: opts.repetitions,
        cpus: opts.cpus.clone(),
        servers,
    })
}

impl ZoneLoadReport {
    /// The table: per server, load time and memory, median (min-max), and the ratio to
    /// the first server.
    pub fn render_table(&self) -> String {
        let mut out = format!(
            "zone: {:.1} MB{}, {} repetitions, servers on CPUs {:?}\n",
            self.zone_bytes as f64 / 1e6,
            if self.records > 0 {
                format!(", {} records", self.records)
            } else {
                String::new()
            },
            self.repetitions,
            self.cpus
        );
        let _ = writeln!(
            out,
            "{:<17} {:>22} {:>22} {:>24} {:>24}",
            "server",
            "ready s (min-max)",
            "CPU s (min-max)",
            "peak RSS MiB (min-max)",
            "RSS after MiB"
        );
        let cell = |s: &Summary, digits: usize| {
            format!("{:.d$} ({:.d$}-{:.d$})", s.median, s.min, s.max, d = digits)
        };
        for s in &self.servers {
            let _ = writeln!(
                out,
                "{:<17} {:>22} {:>22} {:>24} {:>24}",
                s.server,
                cell(&s.ready_s, 2),
                cell(&s.cpu_s, 2),
                cell(&s.hwm_mib, 0),
                cell(&s.rss_mib, 0)
            );
        }
        if let [first, rest @ ..] = self.servers.as_slice() {
            for s in rest {
                let _ = writeln!(
                    out,
                    "{} / {}: load time x{:.2}, CPU x{:.2}, peak RSS x{:.2}",
                    first.server,
                    s.server,
                    first.ready_s.median / s.ready_s.median,
                    first.cpu_s.median / s.cpu_s.median,
                    first.hwm_mib.median / s.hwm_mib.median
                );
            }
        }
        out
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
}
