//! `firehose lab compare --io socket,xdp,uring`: the kernel socket path against AF_XDP (and
//! io_uring) on the veth
//! topology (the work is in `firehose_lab::xdp_compare`). Here: which flags apply, defaults,
//! and the outputs.

use super::{lab_err, placement, stop_flag, CompareArgs};
use crate::args::Usage;
use anyhow::{Context, Result};
use firehose_lab::env::Environment;
use firehose_lab::topology::{self, Kind};
use firehose_lab::workdir::WorkDir;
use firehose_lab::xdp_compare::{self, XdpCompareOptions, IOS};
use serde::Serialize;
use std::time::Duration;

#[derive(Serialize)]
struct Doc {
    environment: Environment,
    load_average: String,
    server_cpu: usize,
    client_cpu: usize,
    repetitions: usize,
    duration_s: u64,
    rows: Vec<xdp_compare::Row>,
    table: String,
}

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
        (r.report.is_some(), "--report"),
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
    let allowed = firehose_sys::cpu::allowed_cpus()?;
    let p = placement(r, &allowed)?;
    // Configs, zone and result files; removed however the run ends.
    let workdir = WorkDir::new("compare-io").map_err(lab_err)?;
    let secs = |d: Duration| d.as_secs().max(u64::from(!d.is_zero()));
    let o = XdpCompareOptions {
        bin: std::env::current_exe().context("locating the firehose binary")?,
        ios,
        repetitions: r.repetitions,
        duration_s: secs(r.duration).max(2),
        warmup_s: r.warmup.map_or(1, secs),
        size: r.size.unwrap_or(100),
        server_cpu: p.server_cpus[0],
        client_cpu: p.client_cpus[0],
        flows: r.flows.unwrap_or(64),
        window: r.window.unwrap_or(8),
        workdir: workdir.to_path_buf(),
        dns_names: dns.then(|| c.names.unwrap_or(10_000)),
    };
    let mut json = r.json.open()?;
    let stop = stop_flag()?;
    let load_average = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    say!(
        "lab compare --io {}: veth, server on CPU {}, client on CPU {}, {} repetition(s) of {} s; load average {}",
        o.ios.join(","),
        o.server_cpu,
        o.client_cpu,
        o.repetitions,
        o.duration_s,
        load_average.trim()
    );
    let rows = xdp_compare::run(&o, &topology::run_id(None), &stop).map_err(lab_err)?;
    drop(workdir);
    let table = xdp_compare::table(&rows);
    println!("{table}");
    let doc = Doc {
        environment: Environment::capture(),
        load_average: load_average.trim().to_string(),
        server_cpu: o.server_cpu,
        client_cpu: o.client_cpu,
        repetitions: o.repetitions,
        duration_s: o.duration_s,
        rows,
        table,
    };
    json.write(&doc)?;
    if let Some(p) = json.path() {
        println!("results: {}", p.display());
    }
    Ok(())
}
