//! `firehose lab compare --proto ntp`: `firehose serve --proto ntp` against chronyd, like
//! for like (the work is in `firehose_lab::studies::ntp`). Here: which flags apply,
//! defaults, and the outputs.

use super::run::{lab_err, run_study, StudyRun};
use super::CompareArgs;
use crate::args::{whole_rate, Usage};
use anyhow::Result;
use firehose_lab::server::ServerKind;
use firehose_lab::studies::dns::parse_names;
use firehose_lab::studies::ntp::NtpCompare;

/// Runs the NTP comparison, prints the table, writes JSON and (with --report) the pages.
pub(super) fn compare(c: CompareArgs) -> Result<()> {
    c.refuse_for_peer_compare("NTP", "ntp", "NTP requests are 48 bytes")?;
    let r = &c.run;
    let servers = parse_names(
        "--servers",
        c.servers.as_deref().unwrap_or("firehose,chronyd"),
        ServerKind::ntp_from_name,
        "firehose, chronyd",
    )
    .map_err(lab_err)?;
    if let Some(g) = c.generators.as_deref().filter(|g| *g != "firehose") {
        return Err(Usage(format!(
            "--generators {g}: the NTP comparison has one generator, firehose (firehose load --proto ntp)"
        ))
        .into());
    }
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let placement = c.one_client_cpu(&allowed, "the NTP generator runs")?;
    let mut study = NtpCompare::default();
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
    let guess_s = r.duration.as_secs_f64() + 1.0;
    let run = StudyRun {
        bin: c.firehose_bin()?,
        ..r.study_run(placement, guess_s)
    };
    run_study(&mut study, run)
}
