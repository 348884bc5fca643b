//! The load drivers: dnsperf and `firehose load --proto dns`, pinned with taskset. A
//! driver's CPU time is the growth of this process's reaped-children time across reaping
//! it: exact to its exit, and the same for both drivers.

use crate::cputime::{self, Scope};
use crate::proc::{self, Proc};
use crate::LabError;
use firehose_load::LoadReport;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The load generators compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    Dnsperf,
    /// `firehose load --proto dns`.
    Firehose,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::Dnsperf => "dnsperf",
            Driver::Firehose => "firehose load",
        }
    }

    /// By the name the command line uses: `dnsperf` or `firehose`.
    pub fn from_name(s: &str) -> Option<Driver> {
        match s {
            "dnsperf" => Some(Driver::Dnsperf),
            "firehose" => Some(Driver::Firehose),
            _ => None,
        }
    }
}

/// What one driver run reported.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DriverResult {
    pub qps: f64,
    pub completed: u64,
    pub lost: u64,
    /// Percentiles in microseconds; dnsperf reports only the mean.
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: Option<f64>,
    pub codes: BTreeMap<String, u64>,
    /// CPU the driver used, over its whole run.
    pub client_cpu_s: f64,
    pub wall_s: f64,
}

/// DNS over TCP (dnsperf only): this many connections, each closed after
/// `queries_per_conn` queries (never, if `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TcpLoad {
    pub connections: usize,
    pub queries_per_conn: Option<u32>,
}

/// How a driver is run.
pub struct DriverPlan<'a> {
    pub driver: Driver,
    pub cpus: &'a [usize],
    pub port: u16,
    pub queries: &'a Path,
    pub duration: Duration,
    /// Queries outstanding (dnsperf -q; firehose --window).
    pub outstanding: usize,
    /// Offered load in queries/s; `None` runs closed loop at saturation.
    pub rate: Option<u64>,
    /// Over TCP instead of UDP.
    pub tcp: Option<TcpLoad>,
    pub firehose: &'a Path,
    /// Where `firehose load` writes its JSON.
    pub json: &'a Path,
    /// Where the driver's output goes.
    pub logs: &'a Path,
}

/// The command line of a driver (without the taskset wrapper).
pub fn command_line(p: &DriverPlan<'_>) -> Vec<String> {
    let secs = format!("{}", p.duration.as_secs_f64());
    let mut v: Vec<String> = match p.driver {
        Driver::Dnsperf => vec![
            "dnsperf".into(),
            "-s".into(),
            "127.0.0.1".into(),
            "-p".into(),
            p.port.to_string(),
            "-d".into(),
            p.queries.display().to_string(),
            "-l".into(),
            secs,
            "-q".into(),
            p.outstanding.to_string(),
            "-c".into(),
            p.tcp.map_or(1, |t| t.connections).to_string(),
            "-T".into(),
            "1".into(),
        ],
        Driver::Firehose => vec![
            p.firehose.display().to_string(),
            "load".into(),
            "--proto".into(),
            "dns".into(),
            "--queries".into(),
            p.queries.display().to_string(),
            "--target".into(),
            format!("127.0.0.1:{}", p.port),
            "--duration".into(),
            secs,
            "--window".into(),
            p.outstanding.to_string(),
            "--quiet".into(),
            "--json-file".into(),
            p.json.display().to_string(),
        ],
    };
    if let Some(t) = p.tcp {
        v.extend(["-m".into(), "tcp".into()]);
        if let Some(n) = t.queries_per_conn {
            v.extend(["-O".into(), format!("num-queries-per-conn={n}")]);
        }
    }
    if let Some(r) = p.rate {
        match p.driver {
            Driver::Dnsperf => v.extend(["-Q".into(), r.to_string()]),
            Driver::Firehose => {
                // In open loop the generator reserves ids for twice a timeout's worth of
                // requests; DNS ids are 16 bits, so the timeout shrinks as the rate grows.
                let ms = (30_000_000 / r.max(1)).clamp(1, 1000);
                v.extend([
                    "--rate".into(),
                    r.to_string(),
                    "--timeout".into(),
                    format!("{ms}ms"),
                ]);
            }
        }
    }
    v
}

/// Runs a driver to completion (or until `stop` is set).
pub fn run(p: &DriverPlan<'_>, stop: Option<&AtomicBool>) -> Result<DriverResult, LabError> {
    let args = command_line(p);
    let mut cmd = proc::pinned(p.cpus, &args[0]);
    cmd.args(&args[1..]);
    let me = std::process::id();
    let cpu_before = cputime::seconds(me, Scope::Reaped)?;
    let started = Instant::now();
    let name = match p.driver {
        Driver::Dnsperf => "dnsperf",
        Driver::Firehose => "firehose-load",
    };
    let mut child = Proc::spawn(cmd, name, p.logs)?;
    let by = started + p.duration + Duration::from_secs(30);
    let Some(status) = child.wait_until(by, stop)? else {
        return Err(LabError::Run(format!(
            "{} did not finish within 30 s after its {:.1} s",
            args.join(" "),
            p.duration.as_secs_f64()
        )));
    };
    let wall_s = started.elapsed().as_secs_f64();
    let client_cpu_s = (cputime::seconds(me, Scope::Reaped)? - cpu_before).max(0.0);
    if !status.success() {
        if p.driver == Driver::Dnsperf && status.code() == Some(127) {
            return Err(LabError::Command(
                "dnsperf is not installed (apt-get install dnsperf)".into(),
            ));
        }
        return Err(LabError::Run(format!(
            "{} exited with {status}: {}",
            args.join(" "),
            child.stderr_tail()
        )));
    }
    let mut r = match p.driver {
        Driver::Dnsperf => {
            let text = child.stdout();
            parse_dnsperf(&text)
                .ok_or_else(|| LabError::Run(format!("unexpected dnsperf output:\n{text}")))?
        }
        Driver::Firehose => DriverResult::from(&crate::runner::read_load_report(p.json)?.0),
    };
    r.client_cpu_s = client_cpu_s;
    r.wall_s = wall_s;
    Ok(r)
}

/// Reads dnsperf's "Statistics" block.
pub fn parse_dnsperf(text: &str) -> Option<DriverResult> {
    let field = |label: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(str::trim)
    };
    let first_num = |s: &str| s.split_whitespace().next()?.parse::<f64>().ok();
    let completed = first_num(field("Queries completed:")?)? as u64;
    let lost = first_num(field("Queries lost:")?)? as u64;
    let qps = first_num(field("Queries per second:")?)?;
    let mean_us = field("Average Latency (s):")
        .and_then(first_num)
        .map(|s| s * 1e6);
    let mut codes = BTreeMap::new();
    if let Some(list) = field("Response codes:") {
        for item in list.split(',') {
            let mut it = item.split_whitespace();
            if let (Some(name), Some(n)) = (it.next(), it.next().and_then(|n| n.parse().ok())) {
                codes.insert(name.to_string(), n);
            }
        }
    }
    Some(DriverResult {
        qps,
        completed,
        lost,
        mean_us,
        codes,
        ..DriverResult::default()
    })
}

impl From<&LoadReport> for DriverResult {
    /// The figures of `firehose load --json`.
    fn from(r: &LoadReport) -> DriverResult {
        DriverResult {
            qps: r.tps,
            completed: r.completed,
            lost: r.lost,
            p50_us: Some(r.latency_us.p50),
            p99_us: Some(r.latency_us.p99),
            mean_us: Some(r.latency_us.mean),
            codes: r.codes.clone(),
            ..DriverResult::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/samples")
            .join(name);
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn reads_dnsperf_statistics() {
        let r = parse_dnsperf(&sample("dnsperf_2.10.txt")).unwrap();
        assert_eq!(r.completed, 193833);
        assert_eq!(r.lost, 0);
        assert!((r.qps - 193817.688403).abs() < 1e-6);
        assert_eq!(r.mean_us, Some(75.0));
        assert_eq!(r.codes["NOERROR"], 145375);
        assert_eq!(r.codes["NXDOMAIN"], 48458);
        assert_eq!(r.p99_us, None);
        assert!(parse_dnsperf("no statistics here").is_none());
    }

    #[test]
    fn reads_what_firehose_load_writes() {
        // A report as `firehose load --json` writes it: LoadReport's keys and its config.
        let mut r =
            firehose_load::summarize(&[], None, None, Vec::new(), 0.0, |c| c.to_string()).unwrap();
        r.tps = 94376.4;
        r.completed = 471882;
        r.lost = 2;
        r.latency_us.p50 = 39.583;
        r.latency_us.p99 = 95.679;
        r.latency_us.mean = 41.5;
        r.codes = BTreeMap::from([("NOERROR".into(), 353911), ("NXDOMAIN".into(), 117971)]);
        let mut doc = serde_json::to_value(&r).unwrap();
        doc["config"] = serde_json::json!({"proto": "dns", "window": 100});
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let path = dir.join("load.json");
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let (back, _) = crate::runner::read_load_report(&path).unwrap();
        let d = DriverResult::from(&back);
        assert_eq!((d.completed, d.lost), (471882, 2));
        assert_eq!(d.qps, 94376.4);
        assert_eq!(
            (d.p50_us, d.p99_us, d.mean_us),
            (Some(39.583), Some(95.679), Some(41.5))
        );
        assert_eq!(d.codes["NXDOMAIN"], 117971);
    }

    #[test]
    fn rate_and_tcp_go_to_each_drivers_own_flags() {
        let mut p = DriverPlan {
            driver: Driver::Dnsperf,
            cpus: &[1],
            port: 53,
            queries: Path::new("q"),
            duration: Duration::from_secs(5),
            outstanding: 100,
            rate: Some(50_000),
            tcp: None,
            firehose: Path::new("/bin/firehose"),
            json: Path::new("o.json"),
            logs: Path::new("/tmp"),
        };
        let l = command_line(&p).join(" ");
        assert!(
            l.starts_with("dnsperf -s 127.0.0.1 -p 53 -d q -l 5 -q 100"),
            "{l}"
        );
        assert!(l.ends_with("-Q 50000"));
        p.driver = Driver::Firehose;
        let l = command_line(&p).join(" ");
        assert!(
            l.contains(
                "load --proto dns --queries q --target 127.0.0.1:53 --duration 5 --window 100"
            ),
            "{l}"
        );
        assert!(l.ends_with("--rate 50000 --timeout 600ms"), "{l}");
        // Over TCP, dnsperf gets its mode, the connections and the reconnect option.
        (p.driver, p.rate, p.outstanding) = (Driver::Dnsperf, None, 512);
        p.tcp = Some(TcpLoad {
            connections: 8,
            queries_per_conn: Some(1),
        });
        let l = command_line(&p).join(" ");
        assert!(
            l.ends_with("-q 512 -c 8 -T 1 -m tcp -O num-queries-per-conn=1"),
            "{l}"
        );
    }
}
