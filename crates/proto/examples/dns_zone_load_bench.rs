//! Cost of loading a zone, phase by phase: reading the file, parsing it into records
//! (with the zone checks), and building every answer; then the process's peak memory.
//! `cargo run --release -p firehose-proto --example dns_zone_load_bench -- ZONE [ROUNDS]`
//! The whole start of a server, and peers beside it, is `firehose lab zone-load`; this is
//! for profiling (`perf record`) and for seeing which phase a change moved.
//! `ROUNDS` may be `--compare`: the zone is then loaded once by the fast reader and once
//! by NLnet Labs' scanner alone, and the two zones compared (exit 1 if they differ).

use firehose_proto::dns::{build, zone};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: dns_zone_load_bench ZONE [ROUNDS | --compare]");
        std::process::exit(2)
    };
    let rounds = args.next();
    let fail = |e: &dyn std::fmt::Display| -> ! {
        eprintln!("dns_zone_load_bench: {e}");
        std::process::exit(2)
    };
    if rounds.as_deref() == Some("--compare") {
        let text = zone::read_zone_text(&path, u64::MAX).unwrap_or_else(|e| fail(&e));
        let name = path.display().to_string();
        let fast = zone::read_fast(&text);
        let a = zone::parse_zone(&text, &name).unwrap_or_else(|e| fail(&e));
        let b = zone::parse_zone_with_domain(&text, &name).unwrap_or_else(|e| fail(&e));
        let same = a == b;
        println!(
            "{} records; read by the fast reader: {fast}; the same zone as domain's scanner reads: {same}",
            a.records.len()
        );
        std::process::exit(if same { 0 } else { 1 });
    }
    let rounds: usize = rounds.and_then(|r| r.parse().ok()).unwrap_or(1);
    // CPU time of this thread: on a shared host it varies far less than the wall time.
    let cpu = || firehose_sys::cpu::thread_cpu_time().map_or(0.0, |d| d.as_secs_f64());
    let now = || (Instant::now(), cpu());
    let since = |(t, c): (Instant, f64)| (t.elapsed().as_secs_f64(), cpu() - c);
    for round in 0..rounds {
        let t = now();
        let text = zone::read_zone_text(&path, u64::MAX).unwrap_or_else(|e| fail(&e));
        let read = since(t);
        let t = now();
        let zd = zone::parse_zone(&text, &path.display().to_string()).unwrap_or_else(|e| fail(&e));
        drop(text);
        let parse = since(t);
        let records = zd.records.len();
        let t = now();
        let set = build::build(&[Arc::new(zd)]).unwrap_or_else(|e| fail(&e));
        let built = since(t);
        println!(
            "round {round}: {records} records, CPU (wall) s: read {:.3} ({:.3}), parse {:.3} ({:.3}), \
             build {:.3} ({:.3}), total {:.3} ({:.3})",
            read.1,
            read.0,
            parse.1,
            parse.0,
            built.1,
            built.0,
            read.1 + parse.1 + built.1,
            read.0 + parse.0 + built.0
        );
        drop(set);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in status
        .lines()
        .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
    {
        println!("{line}");
    }
}
