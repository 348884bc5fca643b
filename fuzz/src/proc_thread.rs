//! What firehose reads of a thread in /proc: `firehose doctor kthreads` a kernel thread's
//! /proc/PID/stat (the command in parentheses, which may hold spaces and parentheses; utime
//! and stime), its /proc/PID/status (Cpus_allowed_list) and /proc/uptime; `load` its
//! generator threads' /proc/thread-self/schedstat (the run delay).
//!
//! Input: the four texts, separated by NUL bytes (stat, status, uptime, schedstat). What
//! must hold: no panic; a thread read has a share of a CPU that is a finite number, at least
//! 0, and its allowed CPUs are the ones its Cpus_allowed_list line names; a run delay is
//! read exactly when the schedstat's second field is a count of ns, and is that count.

use firehose_host::doctor::kthreads;
use firehose_sys::cpu::parse_run_delay;
use std::time::Duration;

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(4, '\0');
    let (stat, status, uptime, schedstat) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let wait_ns = schedstat.split_whitespace().nth(1).map(str::parse::<u64>);
    assert_eq!(
        parse_run_delay(schedstat),
        wait_ns.and_then(Result::ok).map(Duration::from_nanos),
        "schedstat {schedstat:?}"
    );
    let Ok(b) = kthreads::parse(7, stat, status, uptime, 100) else {
        return;
    };
    assert!(
        b.share_pct.is_finite() && b.share_pct >= 0.0,
        "share {}",
        b.share_pct
    );
    assert_eq!(kthreads::allowed_cpus(status).ok(), Some(b.allowed));
}

pub fn seeds() -> Vec<Vec<u8>> {
    let kdamond = [
        include_str!("../../crates/host/tests/samples/hosts/bigbox/proc/77/stat"),
        include_str!("../../crates/host/tests/samples/hosts/bigbox/proc/77/status"),
        include_str!("../../crates/host/tests/samples/hosts/bigbox/proc/uptime"),
    ];
    vec![
        // With a generator thread's schedstat, captured on the same host.
        format!("{}\0{}", kdamond.join("\0"), "4186395151 1849113 95\n").into_bytes(),
        "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 3000 0 0 20 0 1 0 40\x00Cpus_allowed_list:\t1\n\x001491.50 1132.34\n".as_bytes().to_vec(),
        "41 (a) b) (c) I 2 0 0 0 -1 0 0 0 0 0 18446744073709551615 18446744073709551615 0 0 20 0 1 0 40\x00Cpus_allowed_list:\t0-3,8\n\x000.01 0\n".as_bytes().to_vec(),
    ]
}
