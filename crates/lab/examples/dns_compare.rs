//! Runs the DNS comparison until the lead wires it into `firehose lab compare`:
//! `cargo run --release -p firehose-lab --example dns_compare -- --firehose target/release/firehose
//!  [--duration 5] [--reps 3] [--workers 1,2] [--server-cpus 0] [--client-cpus 1] [--rate N]
//!  [--names 10000] [--outstanding 100] [--no-syscalls] [--servers firehose,knotd,nsd]
//!  [--drivers dnsperf,firehose]`

use firehose_lab::dns_compare::{run, DnsCompareOptions, Driver, ServerKind};
use std::time::Duration;

fn list(v: &str) -> Result<Vec<usize>, String> {
    v.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("'{x}' is not a number"))
        })
        .collect()
}

fn parse(args: &[String]) -> Result<DnsCompareOptions, String> {
    let mut o = DnsCompareOptions::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--no-syscalls" {
            o.syscalls = false;
            continue;
        }
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || {
            v.parse::<f64>()
                .map_err(|_| format!("{flag} {v}: not a number"))
        };
        match flag.as_str() {
            "--firehose" => o.firehose = v.into(),
            "--duration" => o.duration = Duration::from_secs_f64(num()?),
            "--reps" => o.repetitions = num()? as usize,
            "--workers" => o.workers = list(v)?,
            "--server-cpus" => o.server_cpus = list(v)?,
            "--client-cpus" => o.client_cpus = list(v)?,
            "--rate" => o.rate = Some(num()? as u64),
            "--names" => o.names = num()? as usize,
            "--outstanding" => o.outstanding = num()? as usize,
            "--servers" => {
                o.servers = v
                    .split(',')
                    .map(|s| match s {
                        "firehose" => Ok(ServerKind::Firehose),
                        "knotd" => Ok(ServerKind::Knot),
                        "nsd" => Ok(ServerKind::Nsd),
                        _ => Err(format!("unknown server '{s}' (firehose, knotd, nsd)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--drivers" => {
                o.drivers = v
                    .split(',')
                    .map(|s| match s {
                        "dnsperf" => Ok(Driver::Dnsperf),
                        "firehose" => Ok(Driver::Firehose),
                        _ => Err(format!("unknown driver '{s}' (dnsperf, firehose)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = parse(&args).unwrap_or_else(|e| {
        eprintln!("dns_compare: {e}");
        std::process::exit(2)
    });
    match run(&opts) {
        Ok(r) => print!("{}", r.render_table()),
        Err(e) => {
            eprintln!("dns_compare: {e}");
            std::process::exit(2)
        }
    }
}
