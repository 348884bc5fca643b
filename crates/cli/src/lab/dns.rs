//! `firehose lab compare --proto dns`: our responder against Knot DNS and NSD, each driven
//! by dnsperf and by `firehose load --proto dns` (the work is in
//! `firehose_lab::studies::dns`). Here: which flags apply, defaults, and the outputs.

use super::run::{lab_err, run_study, StudyRun};
use super::CompareArgs;
use crate::args::{whole_rate, Usage};
use anyhow::Result;
use firehose_lab::peers::dnsperf::TcpLoad;
use firehose_lab::server::ServerKind;
use firehose_lab::studies::dns::{parse_names, DnsCompare, Driver};
use firehose_lab::topology::Kind;

/// Why each flag of `lab compare --proto echo` means nothing for DNS.
const ECHO_ONLY: [&str; 7] = [
    "--topology veth: the DNS comparison runs on loopback only",
    "--queues: the DNS comparison runs on loopback, which has no queues to set",
    "--warmup: dnsperf has no warm-up, so neither driver gets one",
    "--threads: both DNS drivers run one thread on the client CPU",
    "--flows: both DNS drivers use one socket; --window sets the queries in flight",
    "--size: DNS requests are the queries of the generated query file",
    "--timeout: each DNS driver times out queries on its own terms",
];

/// Refuses, rather than ignores, the flags of [`ECHO_ONLY`] if given.
fn refuse_echo_flags(c: &CompareArgs) -> Result<()> {
    let r = &c.run;
    let given = [
        r.topology == Some(Kind::Veth),
        r.queues.is_some(),
        r.warmup.is_some(),
        r.threads.is_some(),
        r.flows.is_some(),
        r.size.is_some(),
        r.timeout.is_some(),
    ];
    match given.iter().zip(ECHO_ONLY).find(|(g, _)| **g) {
        Some((_, msg)) => Err(Usage(format!("{msg} (it applies to --proto echo)")).into()),
        None => Ok(()),
    }
}

/// Runs the DNS comparison, prints the table, writes JSON and (with --report) the pages.
pub(super) fn compare(c: CompareArgs) -> Result<()> {
    refuse_echo_flags(&c)?;
    let r = &c.run;
    let servers = parse_names(
        "--servers",
        c.servers.as_deref().unwrap_or("firehose,knotd,nsd"),
        ServerKind::dns_from_name,
        "firehose, knotd, nsd",
    )
    .map_err(lab_err)?;
    if c.queries_per_conn.is_some() && c.tcp_connections.is_none() {
        return Err(Usage("--queries-per-conn needs --tcp-connections N".into()).into());
    }
    let tcp = c.tcp_connections.map(|n| TcpLoad {
        connections: n,
        queries_per_conn: c.queries_per_conn.map(|q| q.min(u32::MAX as usize) as u32),
    });
    let drivers = parse_names(
        "--generators",
        // firehose load speaks DNS over UDP only.
        c.generators.as_deref().unwrap_or(if tcp.is_some() {
            "dnsperf"
        } else {
            "dnsperf,firehose"
        }),
        Driver::from_name,
        "dnsperf, firehose",
    )
    .map_err(lab_err)?;
    let placement = c.one_client_cpu("both DNS drivers run")?;
    let workers = r.workers.clone().unwrap_or_else(|| {
        let mut w = vec![1, placement.server_cpus.len()];
        w.dedup();
        w
    });
    let mut study = DnsCompare::default();
    study.servers = servers;
    study.drivers = drivers;
    study.workers = workers;
    study.duration = r.duration;
    study.names = c.names.unwrap_or(10_000);
    study.queries = c.query_count.unwrap_or(100_000);
    study.outstanding = r.window.unwrap_or(100);
    study.rate = r.rate.map(|x| whole_rate("--rate", x)).transpose()?;
    study.tcp = tcp;
    study.syscalls = !c.no_syscalls;
    let guess_s = r.duration.as_secs_f64() + 0.5;
    let run = StudyRun {
        bin: c.firehose_bin()?,
        ..r.study_run(placement, guess_s)
    };
    run_study(&mut study, run)
}
