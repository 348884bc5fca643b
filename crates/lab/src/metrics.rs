//! The figures of one trial, computed from what was measured and nothing else: two /proc
//! samples (before and after the window), the generator's tps and the syscall counts. A
//! pure function, so every rule (per-transaction costs, client-bound, drops) is tested on
//! hand-built samples.

use crate::peers::perf::SyscallCount;
use crate::sample::{HostSample, Window};
use serde::{Deserialize, Serialize};

/// Latency figures in microseconds (absent when the generator does not report one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub p9999: Option<f64>,
    pub max: Option<f64>,
    pub mean: Option<f64>,
}

impl From<&firehose_load::report::LatencyUs> for Latency {
    fn from(l: &firehose_load::report::LatencyUs) -> Latency {
        Latency {
            min: Some(l.min),
            p50: Some(l.p50),
            p90: Some(l.p90),
            p99: Some(l.p99),
            p999: Some(l.p999),
            p9999: Some(l.p9999),
            max: Some(l.max),
            mean: Some(l.mean),
        }
    }
}

/// Kernel-side losses over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Drops {
    /// The server sockets' own drop counters (/proc/<pid>/net/udp).
    pub socket: u64,
    pub udp_in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
    pub no_ports: u64,
    pub softnet_dropped: u64,
    pub time_squeeze: u64,
}

/// What a trial measured besides the two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    /// Transactions per second, as the generator counted them.
    pub tps: f64,
    /// Request payload bytes.
    pub size: usize,
    pub server_cpus: usize,
    pub client_cpus: usize,
    /// Syscalls per packet from our server's own counters (`serve --json-file`).
    pub engine_syscalls_per_packet: Option<f64>,
    /// A peer server's syscalls, counted by perf.
    pub perf: Option<SyscallCount>,
}

/// The figures of a trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// The talk's arithmetic: one direction on the wire, payload + 46 bytes of headers +
    /// 20 bytes of preamble and gap.
    pub mbps: f64,
    pub server_cpu_us_per_txn: Option<f64>,
    pub client_cpu_us_per_txn: Option<f64>,
    /// Busy CPU time of the whole host (all CPUs: wall x CPUs - idle, /proc/stat) per
    /// transaction: the server, the generator and the kernel's work for both, wherever it ran.
    pub host_cpu_us_per_txn: Option<f64>,
    /// Server CPU time over the window / (window x server CPUs).
    pub server_cpu_util: f64,
    pub client_cpu_util: Option<f64>,
    pub syscalls_per_txn: Option<f64>,
    /// "engine" (the server's counters), "perf" (raw_syscalls:sys_enter) or "unknown".
    pub syscalls_source: String,
    pub client_bound: bool,
    pub drops: Drops,
}

/// Wire Mbps of `tps` transactions of `size`-byte payloads, one direction (the talk's sums).
pub fn wire_mbps(tps: f64, size: usize) -> f64 {
    tps * (size as f64 + 66.0) * 8.0 / 1e6
}

/// Client saturated while the server was not: the result says nothing about the server.
pub fn is_client_bound(client_util: Option<f64>, server_util: f64) -> bool {
    client_util.is_some_and(|c| c >= 0.95) && server_util < 0.9
}

/// The window between two samples and the trial's figures over it.
pub fn of_samples(before: &HostSample, after: &HostSample, inputs: &Inputs) -> (Window, Metrics) {
    let window = Window::between(before, after);
    let m = of_window(&window, inputs);
    (window, m)
}

/// The trial's figures over a window.
pub fn of_window(w: &Window, i: &Inputs) -> Metrics {
    let txns = i.tps * w.seconds;
    // No CPU time seen at all is "unknown", never a cost of zero.
    let per_txn = |cpu_s: f64| (txns > 0.0 && cpu_s > 0.0).then(|| cpu_s * 1e6 / txns);
    let secs = w.seconds.max(1e-9);
    let server_cpu_util = w.server_cpu_s / secs / i.server_cpus.max(1) as f64;
    let client_cpu_util = w
        .client_cpu_s
        .map(|c| c / secs / i.client_cpus.max(1) as f64);
    let (syscalls_per_txn, source) = match (i.engine_syscalls_per_packet, i.perf) {
        (Some(s), _) => (Some(s), "engine"),
        (None, Some(p)) if i.tps * p.seconds > 0.0 => {
            (Some(p.syscalls as f64 / (i.tps * p.seconds)), "perf")
        }
        _ => (None, "unknown"),
    };
    let u = &w.udp_server;
    Metrics {
        mbps: wire_mbps(i.tps, i.size),
        server_cpu_us_per_txn: per_txn(w.server_cpu_s),
        client_cpu_us_per_txn: w.client_cpu_s.and_then(per_txn),
        host_cpu_us_per_txn: w.host_cpu_s.and_then(per_txn),
        server_cpu_util,
        client_cpu_util,
        syscalls_per_txn,
        syscalls_source: source.to_string(),
        client_bound: is_client_bound(client_cpu_util, server_cpu_util),
        drops: Drops {
            socket: w.socket_drops,
            udp_in_errors: u.in_errors,
            rcvbuf_errors: u.rcvbuf_errors,
            sndbuf_errors: u.sndbuf_errors,
            no_ports: u.no_ports,
            softnet_dropped: w.softnet_dropped(),
            time_squeeze: w.time_squeeze(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_host::procfs::{snmp, softnet, stat};
    use std::time::{Duration, Instant};

    const SNET: &str = "00000010 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
    const SNET_DROPS: &str = "00000110 00000004 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";

    /// A sample at `at` s: /proc/stat with `busy` and `idle` ticks on two CPUs, the server
    /// and client at the given CPU seconds, `drops` everywhere a drop is counted.
    fn sample(
        at: f64,
        busy: u64,
        idle: u64,
        server_s: f64,
        client_s: f64,
        drops: u64,
    ) -> HostSample {
        // One fixed origin, so that two samples are exactly `at` apart.
        static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let t0 = *T0.get_or_init(Instant::now);
        let (b0, i0) = (busy / 2, idle / 2);
        let (b1, i1) = (busy - b0, idle - i0);
        let stat_text = format!(
            "cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {b0} 0 0 {i0} 0 0 0 0 0 0\ncpu1 {b1} 0 0 {i1} 0 0 0 0 0 0\n"
        );
        HostSample {
            at: t0 + Duration::from_secs_f64(at),
            stat: stat::parse(&stat_text).unwrap(),
            net_rx: vec![(0, 0)],
            softnet: softnet::parse(if drops > 0 { SNET_DROPS } else { SNET }).unwrap(),
            udp_server: snmp::UdpCounters {
                rcvbuf_errors: drops,
                in_errors: drops,
                ..Default::default()
            },
            udp_client: None,
            socket_drops: drops,
            server_cpu_s: server_s,
            client_cpu_s: Some(client_s),
            ticks_per_s: 100,
        }
    }

    fn inputs(tps: f64) -> Inputs {
        Inputs {
            tps,
            size: 100,
            server_cpus: 1,
            client_cpus: 1,
            engine_syscalls_per_packet: None,
            perf: None,
        }
    }

    #[test]
    fn costs_per_transaction_over_two_seconds() {
        // 2 s at 100,000 tps; server 1.2 s of CPU, client 1.0 s, host 3.0 s busy (4 CPU
        // seconds less 1 s idle).
        let a = sample(0.0, 1000, 1000, 10.0, 5.0, 0);
        let b = sample(2.0, 1300, 1100, 11.2, 6.0, 0);
        let (w, m) = of_samples(&a, &b, &inputs(100_000.0));
        assert_eq!(w.seconds, 2.0);
        let close = |x: Option<f64>, want: f64| (x.unwrap() - want).abs() < 1e-9;
        assert!(close(m.server_cpu_us_per_txn, 6.0), "{m:?}");
        assert!(close(m.client_cpu_us_per_txn, 5.0), "{m:?}");
        assert!(close(m.host_cpu_us_per_txn, 15.0), "{m:?}");
        assert!((m.server_cpu_util - 0.6).abs() < 1e-9);
        assert!((m.client_cpu_util.unwrap() - 0.5).abs() < 1e-9);
        assert!(!m.client_bound);
        assert_eq!(
            (m.syscalls_per_txn, m.syscalls_source.as_str()),
            (None, "unknown")
        );
        assert_eq!(m.drops, Drops::default());
        // The per-CPU split: cpu0 was busy 300 of 400 ticks.
        assert!((w.cpus[0].split.usr - 75.0).abs() < 1e-9);
        assert!((m.mbps - wire_mbps(100_000.0, 100)).abs() < 1e-9);
    }

    #[test]
    fn no_transactions_or_no_cpu_is_unknown_not_zero() {
        let a = sample(0.0, 1000, 1000, 10.0, 5.0, 0);
        let b = sample(1.0, 1000, 1100, 10.0, 5.5, 0);
        let m = of_window(&Window::between(&a, &b), &inputs(0.0));
        assert_eq!(m.server_cpu_us_per_txn, None);
        assert_eq!(m.host_cpu_us_per_txn, None);
        let m = of_window(&Window::between(&a, &b), &inputs(1000.0));
        assert_eq!(m.server_cpu_us_per_txn, None, "no server CPU seen");
        assert!(m.client_cpu_us_per_txn.is_some());
    }

    #[test]
    fn a_saturated_client_with_an_idle_server_is_client_bound() {
        let a = sample(0.0, 0, 0, 0.0, 0.0, 0);
        let b = sample(1.0, 150, 50, 0.5, 0.99, 0);
        let m = of_samples(&a, &b, &inputs(1000.0)).1;
        assert!(m.client_bound, "{m:?}");
        let b = sample(1.0, 200, 0, 0.95, 0.99, 0);
        assert!(!of_samples(&a, &b, &inputs(1000.0)).1.client_bound);
        assert!(is_client_bound(Some(0.99), 0.5));
        assert!(!is_client_bound(None, 0.1));
    }

    #[test]
    fn syscalls_come_from_the_engine_first_then_perf() {
        let a = sample(0.0, 0, 0, 0.0, 0.0, 0);
        let b = sample(1.0, 100, 100, 0.5, 0.5, 0);
        let mut i = inputs(1000.0);
        i.perf = Some(SyscallCount {
            syscalls: 4000,
            seconds: 2.0,
        });
        let m = of_samples(&a, &b, &i).1;
        assert_eq!(
            (m.syscalls_per_txn, m.syscalls_source.as_str()),
            (Some(2.0), "perf")
        );
        i.engine_syscalls_per_packet = Some(0.03);
        let m = of_samples(&a, &b, &i).1;
        assert_eq!(
            (m.syscalls_per_txn, m.syscalls_source.as_str()),
            (Some(0.03), "engine")
        );
    }

    #[test]
    fn drops_are_the_counter_differences() {
        let a = sample(0.0, 0, 0, 0.0, 0.0, 0);
        let b = sample(1.0, 100, 100, 0.5, 0.5, 7);
        let d = of_samples(&a, &b, &inputs(10.0)).1.drops;
        assert_eq!(
            d,
            Drops {
                socket: 7,
                udp_in_errors: 7,
                rcvbuf_errors: 7,
                sndbuf_errors: 0,
                no_ports: 0,
                softnet_dropped: 3,
                time_squeeze: 3,
            }
        );
    }

    #[test]
    fn talk_arithmetic_for_mbps() {
        // The talk: 270,000 tps of 100-byte payloads is about 360 Mbps.
        let m = wire_mbps(270_000.0, 100);
        assert!((m - 358.56).abs() < 0.01, "{m}");
    }
}
