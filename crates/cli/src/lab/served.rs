//! `firehose lab compare --proto radius|ntp`: our server against the protocol's peers, like
//! for like (the work is in `firehose_lab::studies::served`, the protocols in
//! `studies::{radius,ntp}`). Here: which flags apply, defaults, and the outputs.

use super::run::{lab_err, run_study, StudyRun};
use super::CompareArgs;
use crate::args::{whole_rate, Usage};
use anyhow::Result;
use firehose_lab::studies::dns::parse_names;
use firehose_lab::studies::served::{Served, ServedCompare};
use firehose_lab::topology::Kind;

/// Runs the comparison of `proto`, prints the table, writes JSON and (with --report) the
/// pages; `size` says why `--size` does not apply.
pub(super) fn compare<P: Served>(c: CompareArgs, proto: P, size: &str) -> Result<()> {
    let spec = proto.spec();
    c.refuse_for_served(spec.proto, size)?;
    let r = &c.run;
    let names: Vec<&str> = spec.servers.iter().map(|k| k.name()).collect();
    let servers = parse_names(
        "--servers",
        c.servers.as_deref().unwrap_or(&names.join(",")),
        |s| spec.servers.iter().find(|k| k.name() == s).cloned(),
        &names.join(", "),
    )
    .map_err(lab_err)?;
    if let Some(g) = c.generators.as_deref().filter(|g| *g != "firehose") {
        return Err(Usage(format!(
            "--generators {g}: the {} comparison has one generator, firehose (firehose load --proto {})",
            spec.title, spec.proto
        ))
        .into());
    }
    let who = format!("the {} generator runs", spec.title);
    let placement = c.one_client_cpu(&who)?;
    let mut study = ServedCompare::new(proto);
    study.servers = servers;
    study.workers = r
        .workers
        .clone()
        .unwrap_or_else(|| vec![placement.server_cpus.len()]);
    study.duration = r.duration;
    study.rate = r.rate.map(|x| whole_rate("--rate", x)).transpose()?;
    study.timeout = r.timeout;
    study.flows = r.flows.unwrap_or(study.flows);
    study.window = r.window.unwrap_or(study.window);
    study.topology = r.topology.unwrap_or(Kind::Loopback);
    study.queues = r.queues;
    study.ios =
        c.io.as_deref()
            .map(|l| l.split(',').map(|s| s.trim().to_string()).collect());
    let guess_s = r.duration.as_secs_f64() + 1.0;
    let run = StudyRun {
        bin: c.firehose_bin()?,
        ..r.study_run(placement, guess_s)
    };
    run_study(&mut study, run)
}
