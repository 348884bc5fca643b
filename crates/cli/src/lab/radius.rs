//! `firehose lab compare --proto radius`: `firehose serve --proto radius` against
//! FreeRADIUS, like for like, on loopback or veth (the work is in `firehose_lab::studies::radius`). Here: which
//! flags apply, defaults, and the outputs.

use super::run::{lab_err, run_study, StudyRun};
use super::CompareArgs;
use crate::args::{whole_rate, Usage};
use anyhow::Result;
use firehose_lab::server::ServerKind;
use firehose_lab::studies::dns::parse_names;
use firehose_lab::studies::radius::RadiusCompare;
use firehose_lab::topology::Kind;

/// Refuses, rather than ignores, the flags that mean nothing for RADIUS.
fn refuse_flags(c: &CompareArgs) -> Result<()> {
    let r = &c.run;
    let given = [
        (
            r.queues.is_some(),
            "--queues: the RADIUS comparison's veth pair has one queue a side",
        ),
        (
            r.warmup.is_some(),
            "--warmup: the servers' CPU is measured over the whole generator run, so there is none",
        ),
        (
            r.threads.is_some(),
            "--threads: the generator runs one thread on the client CPU",
        ),
        (
            r.size.is_some(),
            "--size: RADIUS requests are Access-Requests of the generated users",
        ),
        (c.names.is_some(), "--names applies to --proto dns"),
        (
            c.query_count.is_some(),
            "--query-count applies to --proto dns",
        ),
        (c.no_syscalls, "--no-syscalls applies to --proto dns"),
        (
            c.tcp_connections.is_some() || c.queries_per_conn.is_some(),
            "--tcp-connections and --queries-per-conn apply to --proto dns",
        ),
        (
            c.io.is_some(),
            "--io: the I/O path comparison is for --proto echo and dns",
        ),
    ];
    match given.iter().find(|(g, _)| *g) {
        Some((_, msg)) => Err(Usage(format!("{msg} (not for --proto radius)")).into()),
        None => Ok(()),
    }
}

/// Runs the RADIUS comparison, prints the table, writes JSON and (with --report) the pages.
pub(super) fn compare(c: CompareArgs) -> Result<()> {
    refuse_flags(&c)?;
    let r = &c.run;
    let servers = parse_names(
        "--servers",
        c.servers.as_deref().unwrap_or("firehose,freeradius"),
        ServerKind::radius_from_name,
        "firehose, freeradius",
    )
    .map_err(lab_err)?;
    if let Some(g) = c.generators.as_deref().filter(|g| *g != "firehose") {
        return Err(Usage(format!(
            "--generators {g}: the RADIUS comparison has one generator, firehose (firehose load --proto radius)"
        ))
        .into());
    }
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let placement = c.one_client_cpu(&allowed, "the RADIUS generator runs")?;
    let mut study = RadiusCompare::default();
    study.servers = servers;
    study.workers = r
        .workers
        .clone()
        .unwrap_or_else(|| vec![placement.server_cpus.len()]);
    study.duration = r.duration;
    study.rate = r.rate.map(|x| whole_rate("--rate", x)).transpose()?;
    study.timeout = r.timeout;
    study.flows = r.flows.unwrap_or(study.flows);
    study.topology = r.topology.unwrap_or(Kind::Loopback);
    study.window = r.window.unwrap_or(study.window);
    let guess_s = r.duration.as_secs_f64() + 1.0;
    let run = StudyRun {
        bin: c.firehose_bin()?,
        ..r.study_run(placement, guess_s)
    };
    run_study(&mut study, run)
}
