//! The instruments of the NTT talk and the NFV sheet, built in: snapshots of /proc taken at
//! both edges of a measured window, and their differences. /proc/stat, /proc/softirqs and
//! softnet_stat are host-wide; /proc/<pid>/net/* are read through the server's (and
//! client's) pid, so on the veth topology they show the counters of that process's
//! namespace and nothing else.

use crate::cputime::{self, Scope};
use crate::LabResult;
use firehose_host::cputime::{busy_s, cpu_split, StatReading};
use firehose_host::procfs::{self, pidstat, snmp, softirqs, softnet, stat, udp_sockets};
use serde::Serialize;
use std::time::Instant;

/// One snapshot.
#[derive(Debug, Clone)]
pub struct HostSample {
    pub at: Instant,
    pub stat: stat::Stat,
    /// NET_RX softirq count per CPU id.
    pub net_rx: Vec<(usize, u64)>,
    pub softnet: Vec<softnet::SoftnetRow>,
    pub udp_server: snmp::UdpCounters,
    /// The client namespace's UDP counters when it differs from the server's.
    pub udp_client: Option<snmp::UdpCounters>,
    /// Sum of the drop counters of the sockets bound to the server port.
    pub socket_drops: u64,
    /// CPU seconds used so far by the server and the client processes.
    pub server_cpu_s: f64,
    pub client_cpu_s: Option<f64>,
    /// USER_HZ, the unit of /proc/stat.
    pub ticks_per_s: u64,
}

/// What to watch.
#[derive(Debug, Clone, Copy)]
pub struct Watch {
    pub server_pid: u32,
    pub client_pid: u32,
    pub port: u16,
    /// Server and client are in different namespaces (veth).
    pub separate_ns: bool,
}

/// One thread and the CPU it last ran on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadCpu {
    pub tid: u32,
    pub comm: String,
    pub cpu: Option<usize>,
}

/// Where each thread of `pid` last ran (/proc/<pid>/task/<tid>/stat, field 39): the
/// placement as observed, not as asked for.
pub fn thread_cpus(pid: u32) -> Vec<ThreadCpu> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<ThreadCpu> = tasks
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(t.path().join("stat")).ok()?;
            let st = pidstat::parse(&text).ok()?;
            Some(ThreadCpu {
                tid,
                comm: st.comm,
                cpu: st.processor,
            })
        })
        .collect();
    out.sort_by_key(|t| t.tid);
    out
}

/// Drops of every socket bound to `port` in the namespace of `pid` (IPv4 and IPv6).
pub fn socket_drops(pid: u32, port: u16) -> LabResult<u64> {
    let mut total = 0;
    for file in ["udp", "udp6"] {
        let path = format!("/proc/{pid}/net/{file}");
        match procfs::read(&path, udp_sockets::parse) {
            Ok(rows) => total += drops_on_port(&rows, port),
            // A kernel without IPv6 has no udp6.
            Err(_) if file == "udp6" => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(total)
}

/// What the server's side lost over a window: the drops of its sockets at the port and
/// the Udp RcvbufErrors of its namespace (every full socket buffer there, a generator's on
/// the same host included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SocketLoss {
    pub socket_drops: u64,
    pub rcvbuf_errors: u64,
}

impl SocketLoss {
    /// The counters now, as `pid` sees them.
    pub fn read(pid: u32, port: u16) -> LabResult<SocketLoss> {
        Ok(SocketLoss {
            socket_drops: socket_drops(pid, port)?,
            rcvbuf_errors: procfs::read(&format!("/proc/{pid}/net/snmp"), snmp::parse_udp)?
                .rcvbuf_errors,
        })
    }

    /// The growth since `before`.
    pub fn since(&self, before: &SocketLoss) -> SocketLoss {
        SocketLoss {
            socket_drops: self.socket_drops.saturating_sub(before.socket_drops),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
        }
    }
}

/// Sum of drops of the rows bound to `port`.
pub fn drops_on_port(rows: &[udp_sockets::UdpSocketRow], port: u16) -> u64 {
    rows.iter()
        .filter(|r| r.local.port() == port)
        .map(|r| r.drops)
        .sum()
}

/// True once a socket of `pid`'s namespace is bound to `port` (the server is ready).
pub fn port_bound(pid: u32, port: u16) -> bool {
    sockets_on_port(pid, port) > 0
}

/// Sockets of `pid`'s namespace bound to `port` (IPv4 and IPv6): as many as the processes
/// or workers that share it with SO_REUSEPORT.
pub fn sockets_on_port(pid: u32, port: u16) -> usize {
    ["udp", "udp6"]
        .iter()
        .filter_map(|f| procfs::read(&format!("/proc/{pid}/net/{f}"), udp_sockets::parse).ok())
        .map(|rows| rows.iter().filter(|r| r.local.port() == port).count())
        .sum()
}

impl HostSample {
    /// Takes a snapshot now.
    pub fn take(w: &Watch) -> LabResult<HostSample> {
        // The processes first: a generator's threads end soon after the window closes,
        // and the sum over live threads loses a thread that has exited.
        let server_cpu_s = cputime::seconds(w.server_pid, Scope::Process)?;
        let client_cpu_s = cputime::seconds(w.client_pid, Scope::Process).ok();
        let sirq = procfs::read("/proc/softirqs", softirqs::parse)?;
        let net_rx = sirq
            .row("NET_RX")
            .map(|row| sirq.cpus.iter().copied().zip(row.iter().copied()).collect())
            .unwrap_or_default();
        let snmp_of = |pid: u32| procfs::read(&format!("/proc/{pid}/net/snmp"), snmp::parse_udp);
        let reading = StatReading::now()?;
        Ok(HostSample {
            // The time /proc/stat was read: host CPU is the wall time since the other edge
            // less the idle time in it.
            at: reading.at,
            stat: reading.stat,
            net_rx,
            softnet: procfs::read("/proc/net/softnet_stat", softnet::parse)?,
            udp_server: snmp_of(w.server_pid)?,
            udp_client: if w.separate_ns {
                snmp_of(w.client_pid).ok()
            } else {
                None
            },
            socket_drops: socket_drops(w.server_pid, w.port)?,
            server_cpu_s,
            client_cpu_s,
            ticks_per_s: firehose_sys::cpu::clock_ticks_per_sec().max(1),
        })
    }
}

/// Busy CPU seconds of the whole host from `before` to now ([`busy_s`]), for a study that
/// needs no other instrument; a CPU going on- or offline meanwhile fails the trial.
pub fn host_cpu_since(before: &StatReading) -> LabResult<f64> {
    before
        .busy_s_until(&StatReading::now()?)
        .ok_or_else(|| crate::LabError::Run("host CPU unknown: a CPU went on- or offline".into()))
}

/// One CPU over the window: percent split of the wall time (the NTT talk's `sar -u ALL -P
/// ALL`; busy from the idle clock, `cpu_split`) and NET_RX count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuRow {
    pub cpu: usize,
    #[serde(flatten)]
    pub split: stat::CpuSplit,
    pub net_rx: u64,
}

/// One CPU's softnet counters over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SoftnetDelta {
    pub cpu: usize,
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    pub received_rps: u64,
}

/// UDP counters of one namespace over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UdpDelta {
    pub in_datagrams: u64,
    pub out_datagrams: u64,
    pub no_ports: u64,
    pub in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
}

impl UdpDelta {
    fn between(a: &snmp::UdpCounters, b: &snmp::UdpCounters) -> UdpDelta {
        UdpDelta {
            in_datagrams: b.in_datagrams.saturating_sub(a.in_datagrams),
            out_datagrams: b.out_datagrams.saturating_sub(a.out_datagrams),
            no_ports: b.no_ports.saturating_sub(a.no_ports),
            in_errors: b.in_errors.saturating_sub(a.in_errors),
            rcvbuf_errors: b.rcvbuf_errors.saturating_sub(a.rcvbuf_errors),
            sndbuf_errors: b.sndbuf_errors.saturating_sub(a.sndbuf_errors),
        }
    }
}

/// Everything the instruments saw over one measured window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub seconds: f64,
    /// All CPUs together: the split of /proc/stat's columns, whose busy ones are sampled at
    /// each tick (a paced load can hide between ticks: read host CPU from `host_cpu_s`).
    pub all: stat::CpuSplit,
    /// CPU seconds the whole host spent busy (all CPUs: wall time x CPUs - idle - iowait -
    /// steal from /proc/stat, [`busy_s`]): the server, the generator, the kernel's packet
    /// work and everything else. `None` when a CPU went on- or offline in the window.
    pub host_cpu_s: Option<f64>,
    pub cpus: Vec<CpuRow>,
    pub softnet: Vec<SoftnetDelta>,
    pub udp_server: UdpDelta,
    pub udp_client: Option<UdpDelta>,
    pub socket_drops: u64,
    pub server_cpu_s: f64,
    pub client_cpu_s: Option<f64>,
}

impl Window {
    /// The differences between two snapshots.
    pub fn between(a: &HostSample, b: &HostSample) -> Window {
        let wall = b.at.saturating_duration_since(a.at);
        let cpus = b
            .stat
            .cpus
            .iter()
            .filter_map(|(cpu, _)| {
                let split = cpu_split(&a.stat, &b.stat, *cpu, wall, b.ticks_per_s)?;
                let rx = |v: &[(usize, u64)]| v.iter().find(|(c, _)| c == cpu).map(|x| x.1);
                let net_rx = match (rx(&a.net_rx), rx(&b.net_rx)) {
                    (Some(x), Some(y)) => y.saturating_sub(x),
                    _ => 0,
                };
                Some(CpuRow {
                    cpu: *cpu,
                    split,
                    net_rx,
                })
            })
            .collect();
        let softnet = b
            .softnet
            .iter()
            .filter_map(|after| {
                let before = a.softnet.iter().find(|r| r.cpu == after.cpu)?;
                Some(SoftnetDelta {
                    cpu: after.cpu,
                    processed: after.processed.wrapping_sub(before.processed) & 0xffff_ffff,
                    dropped: after.dropped.wrapping_sub(before.dropped) & 0xffff_ffff,
                    time_squeeze: after.time_squeeze.wrapping_sub(before.time_squeeze)
                        & 0xffff_ffff,
                    received_rps: after.received_rps.wrapping_sub(before.received_rps)
                        & 0xffff_ffff,
                })
            })
            .collect();
        Window {
            seconds: b.at.duration_since(a.at).as_secs_f64(),
            all: stat::split(&a.stat.total, &b.stat.total),
            host_cpu_s: busy_s(&a.stat, &b.stat, wall, b.ticks_per_s, &[]),
            cpus,
            softnet,
            udp_server: UdpDelta::between(&a.udp_server, &b.udp_server),
            udp_client: match (&a.udp_client, &b.udp_client) {
                (Some(x), Some(y)) => Some(UdpDelta::between(x, y)),
                _ => None,
            },
            socket_drops: b.socket_drops.saturating_sub(a.socket_drops),
            server_cpu_s: (b.server_cpu_s - a.server_cpu_s).max(0.0),
            // Less CPU time after than before: a thread ended between the readings and
            // took its time along, so the cost is unknown (never zero).
            client_cpu_s: match (a.client_cpu_s, b.client_cpu_s) {
                (Some(x), Some(y)) if y >= x => Some(y - x),
                _ => None,
            },
        }
    }

    /// Softnet backlog drops over all CPUs.
    pub fn softnet_dropped(&self) -> u64 {
        self.softnet.iter().map(|r| r.dropped).sum()
    }

    /// time_squeeze over all CPUs.
    pub fn time_squeeze(&self) -> u64 {
        self.softnet.iter().map(|r| r.time_squeeze).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const STAT_A: &str = "cpu  100 0 50 800 0 0 50 0 0 0\n\
                          cpu0 50 0 25 400 0 0 25 0 0 0\n\
                          cpu1 50 0 25 400 0 0 25 0 0 0\n";
    const STAT_B: &str = "cpu  200 0 150 800 0 0 250 0 0 0\n\
                          cpu0 50 0 100 400 0 0 150 0 0 0\n\
                          cpu1 150 0 50 400 0 0 75 0 0 0\n";
    const SNET_A: &str = "00000010 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
                          00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n";
    const SNET_B: &str = "00000110 00000003 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000005 00000000 00000000 00000000\n\
                          00000020 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001\n";

    fn udp(in_d: u64, rcvbuf: u64) -> snmp::UdpCounters {
        snmp::UdpCounters {
            in_datagrams: in_d,
            rcvbuf_errors: rcvbuf,
            ..Default::default()
        }
    }

    fn sample(at: Instant, stat_text: &str, snet: &str, rx: [u64; 2], ticks: u64) -> HostSample {
        HostSample {
            at,
            stat: stat::parse(stat_text).unwrap(),
            net_rx: vec![(0, rx[0]), (1, rx[1])],
            softnet: softnet::parse(snet).unwrap(),
            udp_server: udp(ticks * 10, ticks),
            udp_client: None,
            socket_drops: ticks / 2,
            server_cpu_s: ticks as f64 / 100.0,
            client_cpu_s: Some(ticks as f64 / 50.0),
            ticks_per_s: 100,
        }
    }

    #[test]
    fn window_is_the_difference_of_two_samples() {
        let t0 = Instant::now();
        let a = sample(t0, STAT_A, SNET_A, [5, 7], 100);
        let b = sample(t0 + Duration::from_secs(2), STAT_B, SNET_B, [105, 7], 300);
        let w = Window::between(&a, &b);
        assert_eq!(w.seconds, 2.0);
        // 2 s of 100 ticks: cpu0 +75 sys, +125 soft; cpu1 +100 usr, +25 sys, +50 soft, 175
        // ticks sampled and no idle time, so busy all along.
        let c0 = &w.cpus[0];
        assert_eq!((c0.cpu, c0.net_rx), (0, 100));
        assert!((c0.split.sys - 100.0 * 75.0 / 200.0).abs() < 1e-9, "{c0:?}");
        assert!(
            (c0.split.soft - 100.0 * 125.0 / 200.0).abs() < 1e-9,
            "{c0:?}"
        );
        let c1 = &w.cpus[1];
        assert!((c1.split.usr - 50.0).abs() < 1e-9, "{c1:?}");
        assert_eq!((c1.split.idle, c1.split.busy()), (0.0, 100.0), "{c1:?}");
        assert_eq!(c1.net_rx, 0);
        assert_eq!(w.softnet[0].processed, 0x100);
        assert_eq!(w.softnet_dropped(), 2);
        assert_eq!(w.time_squeeze(), 2);
        assert_eq!(w.softnet[0].received_rps, 5);
        assert_eq!(w.udp_server.in_datagrams, 2000);
        assert_eq!(w.udp_server.rcvbuf_errors, 200);
        assert_eq!(w.socket_drops, 100);
        assert_eq!(w.server_cpu_s, 2.0);
        assert_eq!(w.client_cpu_s, Some(4.0));
        // 2 s x 2 CPUs and no idle time: 4 CPU seconds busy.
        assert_eq!(w.host_cpu_s, Some(4.0));
        assert!(w.udp_client.is_none());
    }

    #[test]
    fn a_client_reading_that_went_backwards_is_unknown() {
        let t0 = Instant::now();
        let a = sample(t0, STAT_A, SNET_A, [0, 0], 300);
        let b = sample(t0 + Duration::from_secs(1), STAT_B, SNET_B, [0, 0], 100);
        assert_eq!(Window::between(&a, &b).client_cpu_s, None);
    }

    #[test]
    fn softnet_counters_wrap_at_32_bits() {
        let t0 = Instant::now();
        let wrap_a = "fffffff0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        let wrap_b = "00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        let a = sample(t0, STAT_A, wrap_a, [0, 0], 1);
        let b = sample(t0, STAT_A, wrap_b, [0, 0], 1);
        assert_eq!(Window::between(&a, &b).softnet[0].processed, 0x20);
    }

    #[test]
    fn drops_are_summed_over_the_port_only() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
  1: 0100007F:1E61 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1001 2 0000000000000000 7\n\
  2: 0100007F:1E61 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1002 2 0000000000000000 5\n\
  3: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1003 2 0000000000000000 100\n";
        let rows = udp_sockets::parse(text).unwrap();
        assert_eq!(drops_on_port(&rows, 7777), 12);
        assert_eq!(drops_on_port(&rows, 53), 100);
        assert_eq!(drops_on_port(&rows, 1), 0);
    }

    #[test]
    fn threads_of_this_process_are_seen_on_a_cpu() {
        let seen = thread_cpus(std::process::id());
        assert!(!seen.is_empty());
        assert!(seen.iter().all(|t| t.cpu.is_some()), "{seen:?}");
        assert!(thread_cpus(u32::MAX).is_empty());
    }

    #[test]
    fn live_sample_of_this_process() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        let me = std::process::id();
        assert!(port_bound(me, port));
        let w = Watch {
            server_pid: me,
            client_pid: me,
            port,
            separate_ns: false,
        };
        let s = HostSample::take(&w).unwrap();
        assert!(!s.stat.cpus.is_empty());
        assert!(!s.softnet.is_empty());
        assert_eq!(s.socket_drops, 0);
    }
}
