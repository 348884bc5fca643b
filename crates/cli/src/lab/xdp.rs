//! `firehose lab compare --io socket,xdp,uring`: the kernel socket path against AF_XDP (and
//! io_uring) on the veth
//! topology (the work is in `firehose_lab::studies::io`). Here: which flags apply, defaults,
//! and the outputs.

use super::run::run_study;
use super::CompareArgs;
use crate::args::Usage;
use anyhow::Result;
use firehose_lab::studies::io::{IoCompare, IOS};
use firehose_lab::study::Placement;
use firehose_lab::topology::Kind;
use std::time::Duration;

/// Runs the socket/AF_XDP comparison.
pub fn compare(c: CompareArgs, io: &str) -> Result<()> {
    let r = &c.run;
    let dns = c.proto == crate::serve::Proto::Dns;
    let mut ios = Vec::new();
    for name in io.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !IOS.contains(&name) {
            return Err(Usage(format!(
                "--io {name}: use socket, xdp, uring or a list such as socket,xdp,uring"
            ))
            .into());
        }
        ios.push(name.to_string());
    }
    if ios.is_empty() {
        return Err(Usage("--io names no path (socket, xdp, uring)".into()).into());
    }
    if r.topology == Some(Kind::Loopback) {
        return Err(Usage(
            "--io xdp compares on the veth topology only (AF_XDP needs a real link)".into(),
        )
        .into());
    }
    let given = [
        (c.servers.is_some(), "--servers"),
        (c.generators.is_some(), "--generators"),
        (r.rate.is_some(), "--rate"),
        (r.threads.is_some(), "--threads"),
        (r.workers.is_some(), "--workers"),
        (r.queues.is_some(), "--queues"),
        (r.timeout.is_some(), "--timeout"),
        (c.query_count.is_some(), "--query-count"),
        (c.no_syscalls, "--no-syscalls"),
        (
            c.names.is_some() && !dns,
            "--names (it applies to --proto dns)",
        ),
    ];
    if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
        return Err(Usage(format!(
            "{flag} does not apply to lab compare --io (its cells are fixed: see --help)"
        ))
        .into());
    }
    let p = r.placement()?;
    let secs = |d: Duration| d.as_secs().max(u64::from(!d.is_zero()));
    let mut study = IoCompare::new(ios, dns.then(|| c.names.unwrap_or(10_000)));
    study.duration_s = secs(r.duration).max(2);
    study.warmup_s = r.warmup.map_or(1, secs);
    study.size = r.size.unwrap_or(100);
    study.flows = r.flows.unwrap_or(64);
    study.window = r.window.unwrap_or(8);
    let guess_s = (study.duration_s + study.warmup_s + 2) as f64;
    let placement = Placement {
        server_cpus: p.server_cpus[..1].to_vec(),
        client_cpus: p.client_cpus[..1].to_vec(),
    };
    run_study(&mut study, r.study_run(placement, guess_s))
}
