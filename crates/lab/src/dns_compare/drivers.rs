//! The load drivers: dnsperf and `firehose load --proto dns`, pinned with taskset, with
//! their own CPU time read from the wrapping shell's cutime/cstime once they exit.

use crate::LabError;
use firehose_host::procfs::pidstat;
use firehose_sys::cpu::CpuSet;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
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
    pub firehose: &'a Path,
    /// Where `firehose load` writes its JSON.
    pub json: &'a Path,
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
            "1".into(),
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
            "--json".into(),
            p.json.display().to_string(),
        ],
    };
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

/// Runs a driver to completion.
pub fn run(p: &DriverPlan<'_>) -> Result<DriverResult, LabError> {
    let args = command_line(p);
    // The shell waits for the driver, then prints its own stat line, whose cutime and
    // cstime now hold the driver's CPU time.
    let script = "taskset -c \"$0\" \"$@\"; rc=$?; echo; echo FH-STAT; cat /proc/$$/stat; exit $rc";
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(CpuSet::from(p.cpus).to_string())
        .args(&args)
        .output()
        .map_err(|e| LabError::Run(format!("cannot run sh: {e}")))?;
    let wall_s = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (text, stat) = stdout.rsplit_once("FH-STAT\n").unwrap_or((&stdout, ""));
    if !out.status.success() {
        if p.driver == Driver::Dnsperf && out.status.code() == Some(127) {
            return Err(LabError::Command(
                "dnsperf is not installed (apt-get install dnsperf)".into(),
            ));
        }
        return Err(LabError::Run(format!(
            "{} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let ticks = pidstat::parse(stat.trim())
        .map(|s| s.cutime + s.cstime)
        .map_err(|e| LabError::Run(format!("no stat line after {}: {e}", p.driver.name())))?;
    let mut r = match p.driver {
        Driver::Dnsperf => parse_dnsperf(text)
            .ok_or_else(|| LabError::Run(format!("unexpected dnsperf output:\n{text}")))?,
        Driver::Firehose => {
            let json =
                std::fs::read_to_string(p.json).map_err(|e| LabError::io(p.json.display(), e))?;
            parse_firehose_json(&json).ok_or_else(|| {
                LabError::Run(format!(
                    "unexpected firehose load JSON in {}",
                    p.json.display()
                ))
            })?
        }
    };
    r.client_cpu_s = ticks as f64 / firehose_sys::cpu::clock_ticks_per_sec() as f64;
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

/// Reads the JSON summary of `firehose load`.
pub fn parse_firehose_json(text: &str) -> Option<DriverResult> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let lat = &v["latency_us"];
    let codes = v["codes"]
        .as_object()?
        .iter()
        .filter_map(|(k, n)| Some((k.clone(), n.as_u64()?)))
        .collect();
    Some(DriverResult {
        qps: v["tps"].as_f64()?,
        completed: v["completed"].as_u64()?,
        lost: v["lost"].as_u64()?,
        p50_us: lat["p50"].as_f64(),
        p99_us: lat["p99"].as_f64(),
        mean_us: lat["mean"].as_f64(),
        codes,
        ..DriverResult::default()
    })
}

/// The count of `perf stat -x, -e raw_syscalls:sys_enter` output; `None` when perf
/// could not count (not permitted, or the event is missing).
pub fn parse_perf_count(csv: &str) -> Option<u64> {
    csv.lines()
        .find(|l| l.contains("raw_syscalls:sys_enter"))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.trim().parse().ok())
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
    fn reads_firehose_load_json() {
        let r = parse_firehose_json(&sample("firehose_load_dns.json")).unwrap();
        assert_eq!(r.completed, 471882);
        assert_eq!(r.p50_us, Some(39.583));
        assert_eq!(r.p99_us, Some(95.679));
        assert_eq!(r.codes["NXDOMAIN"], 117971);
    }

    #[test]
    fn reads_perf_counts() {
        assert_eq!(
            parse_perf_count("175107652,,raw_syscalls:sys_enter,1424413,100.00,,\n"),
            Some(175107652)
        );
        assert_eq!(
            parse_perf_count("<not counted>,,raw_syscalls:sys_enter,0,0.00,,\n"),
            None
        );
        assert_eq!(
            parse_perf_count("event syntax error: 'raw_syscalls:sys_enter'"),
            None
        );
    }

    #[test]
    fn rate_goes_to_each_drivers_own_flag() {
        let mut p = DriverPlan {
            driver: Driver::Dnsperf,
            cpus: &[1],
            port: 53,
            queries: Path::new("q"),
            duration: Duration::from_secs(5),
            outstanding: 100,
            rate: Some(50_000),
            firehose: Path::new("/bin/firehose"),
            json: Path::new("o.json"),
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
    }
}
