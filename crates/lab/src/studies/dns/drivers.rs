//! The load drivers: dnsperf and `firehose load --proto dns`, pinned to the client CPU. A
//! driver's CPU time is the growth of this process's reaped-children time across reaping
//! it: exact to its exit, and the same for both drivers.

use crate::loss::LossAttribution;
use crate::peers::dnsperf::{self, Dnsperf, TcpLoad};
use crate::peers::firehose;
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use firehose_load::LoadReport;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

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
    /// Seconds it sent queries (dnsperf's run time, firehose load's measured window):
    /// the server works only then, so its utilisation is over this.
    pub load_s: f64,
    /// The driver's CPUs busy over that window: firehose load's thread from its own
    /// report; dnsperf's whole CPU (start-up included) over its run time.
    pub client_util: f64,
    /// Where `firehose load`'s lost queries went (as root; dnsperf: none). Listed once in
    /// the document, under `loss_attribution`.
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
}

/// How a driver is run.
pub struct DriverPlan<'a> {
    pub driver: Driver,
    pub port: u16,
    pub queries: &'a Path,
    pub duration: Duration,
    /// Queries outstanding (dnsperf -q; firehose --window).
    pub outstanding: usize,
    /// Offered load in queries/s; `None` runs closed loop at saturation.
    pub rate: Option<u64>,
    /// Over TCP instead of UDP (dnsperf only).
    pub tcp: Option<TcpLoad>,
    /// Where `firehose load` writes its JSON.
    pub json: &'a Path,
}

/// The command line of a driver (placed on the client CPU by the lab).
pub fn command_line(lab: &Lab<'_>, p: &DriverPlan<'_>) -> Vec<String> {
    let secs = p.duration.as_secs_f64();
    match p.driver {
        Driver::Dnsperf => Dnsperf {
            server: "127.0.0.1",
            port: p.port,
            queries: p.queries,
            seconds: secs,
            outstanding: p.outstanding,
            rate: p.rate,
            tcp: p.tcp,
            timeout_s: None,
        }
        .argv(),
        Driver::Firehose => {
            let mut a: Vec<String> = [
                "--proto",
                "dns",
                "--queries",
                &p.queries.display().to_string(),
                "--duration",
                &format!("{secs}"),
                "--window",
                &p.outstanding.to_string(),
            ]
            .map(String::from)
            .to_vec();
            if let Some(r) = p.rate {
                // In open loop the generator reserves ids for twice a timeout's worth of
                // requests; DNS ids are 16 bits, so the timeout shrinks as the rate grows.
                let ms = (30_000_000 / r.max(1)).clamp(1, 1000);
                a.extend([
                    "--rate".into(),
                    r.to_string(),
                    "--timeout".into(),
                    format!("{ms}ms"),
                ]);
            }
            firehose::load(lab, &format!("127.0.0.1:{}", p.port), &a, p.json, None)
        }
    }
}

/// Runs a driver to completion (30 s after its duration at most).
pub fn run(lab: &Lab<'_>, p: &DriverPlan<'_>) -> LabResult<DriverResult> {
    let args = command_line(lab, p);
    let name = match p.driver {
        Driver::Dnsperf => "dnsperf",
        Driver::Firehose => "firehose-load",
    };
    let cpus = lab.placement.client_cpus[..1].to_vec();
    let within = p.duration + Duration::from_secs(30);
    let done = lab.run_to_end(Side::Client, &cpus, &args, name, within)?;
    let mut r = match p.driver {
        Driver::Dnsperf => {
            let text = done.proc.stdout();
            let s = dnsperf::parse(&text)
                .ok_or_else(|| LabError::Run(format!("unexpected dnsperf output:\n{text}")))?;
            let load_s = s.run_s.unwrap_or(p.duration.as_secs_f64());
            DriverResult {
                qps: s.qps,
                completed: s.completed,
                lost: s.lost,
                mean_us: s.mean_us,
                codes: s.codes,
                load_s,
                client_util: super::super::served::utilisation(done.cpu_s, load_s),
                ..DriverResult::default()
            }
        }
        Driver::Firehose => {
            let (report, doc) = firehose::read_load(p.json)?;
            DriverResult {
                loss: LossAttribution::from_document("load", report.lost, &doc),
                ..DriverResult::from(&report)
            }
        }
    };
    r.client_cpu_s = done.cpu_s;
    r.wall_s = done.wall_s;
    Ok(r)
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
            load_s: r.duration_s,
            client_util: r.client_cpu_util,
            ..DriverResult::default()
        }
    }
}
