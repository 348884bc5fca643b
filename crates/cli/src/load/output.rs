//! What `firehose load` prints while it runs and at the end: the header, a line per
//! interval, and the summary (also used by `firehose report merge`).

use super::LoadArgs;
use crate::args::thousands;
use firehose_load::decompose::Parts;
use firehose_load::pace::{Arrivals, Pace, WAKE_BUDGET_NS};
use firehose_load::report::Interval;
use firehose_load::{LoadConfig, LoadReport};
use std::time::Duration;

/// The line of the interval that ended at `iv.t` and began at `from`.
pub(super) fn print_interval(from: f64, iv: &Interval, warmup: Duration, tty: bool) {
    if tty {
        eprint!("\r\x1b[K");
    }
    say!(
        "[{:6.1}-{:6.1}s] tps {:>12}  lost {:>8}  stray {:>6}{}",
        from,
        iv.t,
        thousands(iv.tps),
        iv.lost,
        iv.stray,
        if from < warmup.as_secs_f64() {
            "  (warm-up)"
        } else {
            ""
        }
    );
}

pub(super) fn print_header(a: &LoadArgs, cfg: &LoadConfig) {
    say!(
        "firehose load: {} {}, {} flow(s) x {}, {} thread(s){}, {}{}",
        cfg.target,
        match cfg.rate {
            Some(r) => format!(
                "open loop at {} tps ({} arrivals{})",
                thousands(r),
                cfg.arrivals.name(),
                if cfg.spin { ", spinning" } else { "" }
            ),
            None => "closed loop".into(),
        },
        cfg.flows,
        match cfg.window {
            0 => "no window cap".to_string(),
            w => format!("window {w}"),
        },
        cfg.threads,
        cfg.cpus
            .as_ref()
            .map(|c| format!(" on CPUs {:?}", &c[..cfg.threads]))
            .unwrap_or_default(),
        match (&a.queries, a.proto) {
            (Some(q), _) => format!("queries from {}", q.display()),
            (None, super::Proto::Echo) => format!("{}-byte requests", a.size),
            (None, p) => format!("{} requests", p.name()),
        },
        if cfg.warmup.is_zero() {
            String::new()
        } else {
            format!(", warm-up {:.1} s", cfg.warmup.as_secs_f64())
        }
    );
    if let Some(p) = firehose_load::pacing(cfg) {
        say!("{}", pacing_line(&p, cfg));
    }
}

/// How an open loop that sleeps between wake-ups delivers its schedule, and why.
fn pacing_line(p: &Pace, cfg: &LoadConfig) -> String {
    let why = match (&cfg.arrivals, cfg.per_wake) {
        (Arrivals::Burst(n), _) => format!("--arrivals burst:{n}"),
        (_, Some(n)) => format!("--per-wake {n}"),
        (_, None) => format!(
            "the CPU budget: at most one wake-up per {} µs per thread; --per-wake N or --spin for another",
            WAKE_BUDGET_NS / 1000
        ),
    };
    format!(
        "pacing: {} request{} per wake-up, sent back to back, a wake-up every {:.0} µs per thread ({why})",
        p.per_wake,
        if p.per_wake == 1 { "" } else { "s" },
        p.ahead_ns as f64 / 1e3
    )
}

/// Prints a load report (one agent's or several merged) as `firehose load` does.
pub fn print_summary(target: &str, mode: &str, server_pid: Option<u32>, r: &LoadReport) {
    let pct = |n: u64| {
        if r.sent > 0 {
            100.0 * n as f64 / r.sent as f64
        } else {
            0.0
        }
    };
    say!(
        "summary: {} {} loop, {:.2} s measured",
        target,
        mode,
        r.duration_s
    );
    say!("  tps         {}", thousands(r.tps));
    say!(
        "  completed   {}   sent {}   lost {} ({:.3}%)   stray {}   dup {}   unsent {}",
        r.completed,
        r.sent,
        r.lost,
        pct(r.lost),
        r.stray,
        r.dup,
        r.unsent
    );
    let l = &r.latency_us;
    say!(
        "  latency us  min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
        l.min, l.p50, l.p90, l.p99, l.p999, l.p9999, l.max
    );
    if let Some(p) = &r.parts {
        print_parts(p);
    }
    if let Some(c) = r.client_cpu_us_per_txn {
        say!(
            "  client CPU  {:.3} us/txn, busiest thread {:.0}% of a CPU, {:.3} syscalls/txn, sends by {}, preempted {} times, {:.0} us waiting to run",
            c,
            r.client_cpu_util * 100.0,
            r.client_syscalls_per_txn.unwrap_or(0.0),
            r.send_path,
            r.threads.iter().map(|t| t.preempted).sum::<u64>(),
            r.threads.iter().map(|t| t.run_delay_us).sum::<f64>()
        );
    }
    if let Some(w) = &r.wake_ups {
        let l = &w.late_us;
        say!(
            "  wake-ups    {} from sleep, late by p50 {:.1}  p99 {:.1}  max {:.1} us (the timer's precision)",
            w.count, l.p50, l.p99, l.max
        );
    }
    if let Some(e) = &r.gso_error {
        say!("  note: the kernel refused UDP GSO ({e}); requests went by sendmmsg");
    }
    if let (Some(s), Some(u)) = (r.server_cpu_us_per_txn, r.server_cpu_util) {
        say!(
            "  server CPU  {:.3} us/txn, {:.0}% of a CPU (pid {})",
            s,
            u * 100.0,
            server_pid.unwrap_or(0)
        );
    }
    if r.codes.len() > 1 || r.codes.keys().any(|k| k != "ok") {
        let codes: Vec<String> = r.codes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        say!("  codes       {}", codes.join(", "));
    }
    // Nothing measured (every answer invalid) prints nothing rather than zeros.
    for (name, m) in r
        .measures
        .iter()
        .filter(|(_, m)| m.min != 0.0 || m.max != 0.0)
    {
        say!(
            "  {name:<11} us  min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            m.min, m.p50, m.p90, m.p99, m.p999, m.max, m.mean
        );
    }
    if !r.invalid.is_empty() {
        let bad: Vec<String> = r.invalid.iter().map(|(k, v)| format!("{k} {v}")).collect();
        say!(
            "  invalid     {} (responses failing the protocol's checks; their requests count lost)",
            bad.join(", ")
        );
    }
    if r.send_errors > 0 {
        say!(
            "  send errors {} (kernel refused; counted lost at their timeout)",
            r.send_errors
        );
    }
    if r.client_bound {
        say!("  CLIENT-BOUND: the generator was saturated while the server was not; this measures the client");
    } else if r.client_saturated && r.server_cpu_util.is_none() {
        say!("  note: the generator was saturated; pass --server-pid to tell whether the result is client-bound");
    }
}

/// The parts of latency (`--stamps`): one line per part, then how many were stamped.
fn print_parts(p: &Parts) {
    for (name, l) in [
        ("rtt", &p.rtt_us),
        ("send_lag", &p.send_lag_us),
        ("recv_lag", &p.recv_lag_us),
    ] {
        say!(
            "  {:<11} min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
            format!("{name} us"),
            l.min, l.p50, l.p90, l.p99, l.p999, l.p9999, l.max
        );
    }
    let g = &p.departure_gaps_us;
    say!(
        "  departures  gap us  min {:.2}  p10 {:.2}  p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.1}  mean {:.2}  cv {:.2}  (per thread)",
        g.min, g.p10, g.p50, g.p90, g.p99, g.max, g.mean, g.cv
    );
    let total = p.stamped + p.unstamped + p.misordered;
    say!(
        "  stamps      {} of {} transactions ({}); hardware stamps {}",
        p.stamped,
        total,
        p.stamps,
        p.hardware
    );
    if p.unstamped + p.misordered + p.unmatched > 0 {
        say!(
            "  note: {} transaction(s) without a stamp, {} with arrival before departure, {} stamp(s) matching no request",
            p.unstamped,
            p.misordered,
            p.unmatched
        );
    }
}
