//! CPU and power over a measured window: the host's /proc/stat split (usr, sys, softirq,
//! irq) on the CPUs the run used, the process's own user+system time, and package energy
//! from RAPL under /sys/class/powercap when it is readable. Power is never estimated.

use firehose_host::procfs::{self, stat::Stat};
use std::time::{Duration, Instant};

/// One reading at a point in time.
#[derive(Debug, Clone)]
pub struct Sample {
    at: Instant,
    stat: Option<Stat>,
    user: Duration,
    sys: Duration,
    energy: Option<Vec<Energy>>,
}

#[derive(Debug, Clone)]
struct Energy {
    domain: String,
    uj: u64,
    max_uj: u64,
}

/// Host CPU over the window, in cores (1.0 = one CPU fully busy).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostCpu {
    /// The CPUs summed; empty means all of them.
    pub cpus: Vec<usize>,
    pub usr: f64,
    pub sys: f64,
    pub softirq: f64,
    pub irq: f64,
    /// usr + sys + softirq + irq + steal.
    pub busy: f64,
}

/// The process's own CPU over the window.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub sys_s: f64,
    /// (user + sys) / wall time.
    pub cores: f64,
}

/// Package power over the window.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Power {
    /// Watts, or `None` when no RAPL domain was readable.
    pub watts: Option<f64>,
    /// Where the figure came from, or why it is unavailable.
    pub source: String,
}

const POWERCAP: &str = "/sys/class/powercap";

fn read_energy() -> Option<Vec<Energy>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(POWERCAP).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Package domains are intel-rapl:N (sub-domains intel-rapl:N:M are inside them).
        if !name.starts_with("intel-rapl:") || name.matches(':').count() != 1 {
            continue;
        }
        let read = |f: &str| -> Option<u64> {
            std::fs::read_to_string(e.path().join(f))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        if let (Some(uj), Some(max_uj)) = (read("energy_uj"), read("max_energy_range_uj")) {
            out.push(Energy {
                domain: name,
                uj,
                max_uj,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Takes a sample now.
pub fn sample() -> Sample {
    let (user, sys) = firehose_sys::cpu::process_rusage().unwrap_or_default();
    Sample {
        at: Instant::now(),
        stat: procfs::read("/proc/stat", procfs::stat::parse).ok(),
        user,
        sys,
        energy: read_energy(),
    }
}

impl Sample {
    /// Wall time from `self` to `later`.
    pub fn elapsed(&self, later: &Sample) -> f64 {
        later.at.duration_since(self.at).as_secs_f64()
    }
}

/// Host CPU between two samples, summed over `cpus` (all when empty).
pub fn host_cpu(a: &Sample, b: &Sample, cpus: &[usize]) -> Option<HostCpu> {
    let (sa, sb) = (a.stat.as_ref()?, b.stat.as_ref()?);
    Some(host_cpu_between(sa, sb, cpus))
}

/// The pure part of [`host_cpu`]: tick deltas turned into cores (busy ticks / wall ticks, where
/// wall is the delta of the summed ticks of one CPU).
pub fn host_cpu_between(a: &Stat, b: &Stat, cpus: &[usize]) -> HostCpu {
    let mut out = HostCpu {
        cpus: cpus.to_vec(),
        ..HostCpu::default()
    };
    let pick: Vec<(&procfs::stat::CpuTimes, &procfs::stat::CpuTimes)> = b
        .cpus
        .iter()
        .filter(|(id, _)| cpus.is_empty() || cpus.contains(id))
        .filter_map(|(id, tb)| a.cpus.iter().find(|(i, _)| i == id).map(|(_, ta)| (ta, tb)))
        .collect();
    // Wall time in ticks: the largest per-CPU total delta (every CPU's ticks advance with time).
    let total = |t: &procfs::stat::CpuTimes| {
        t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal
    };
    let wall = pick
        .iter()
        .map(|(ta, tb)| total(tb).saturating_sub(total(ta)))
        .max()
        .unwrap_or(0);
    if wall == 0 {
        return out;
    }
    let cores = |f: fn(&procfs::stat::CpuTimes) -> u64| {
        pick.iter()
            .map(|(ta, tb)| f(tb).saturating_sub(f(ta)))
            .sum::<u64>() as f64
            / wall as f64
    };
    out.usr = cores(|t| t.user + t.nice);
    out.sys = cores(|t| t.system);
    out.softirq = cores(|t| t.softirq);
    out.irq = cores(|t| t.irq);
    out.busy = out.usr + out.sys + out.softirq + out.irq + cores(|t| t.steal);
    out
}

/// The process's CPU between two samples.
pub fn process_cpu(a: &Sample, b: &Sample) -> ProcessCpu {
    let user_s = b.user.saturating_sub(a.user).as_secs_f64();
    let sys_s = b.sys.saturating_sub(a.sys).as_secs_f64();
    let wall = a.elapsed(b);
    ProcessCpu {
        user_s,
        sys_s,
        cores: if wall > 0.0 {
            (user_s + sys_s) / wall
        } else {
            0.0
        },
    }
}

/// Package power between two samples, or why it is unavailable.
pub fn power(a: &Sample, b: &Sample) -> Power {
    let (Some(ea), Some(eb)) = (&a.energy, &b.energy) else {
        return Power {
            watts: None,
            source: format!("unavailable: no readable RAPL energy_uj under {POWERCAP}"),
        };
    };
    let mut uj = 0u64;
    let mut names = Vec::new();
    for x in eb {
        if let Some(y) = ea.iter().find(|y| y.domain == x.domain) {
            // The counter wraps at max_energy_range_uj.
            uj += if x.uj >= y.uj {
                x.uj - y.uj
            } else {
                x.uj + x.max_uj - y.uj
            };
            names.push(x.domain.clone());
        }
    }
    let secs = a.elapsed(b);
    Power {
        watts: (secs > 0.0).then(|| uj as f64 / 1e6 / secs),
        source: format!("RAPL {}", names.join("+")),
    }
}

/// The talk's ROI: (Gbit/s)^2 per CPU core; `None` when no CPU was measured.
pub fn roi(gbps: f64, cores: f64) -> Option<f64> {
    (cores > 0.0).then(|| gbps * gbps / cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(rows: &[(usize, [u64; 8])]) -> Stat {
        let t = |v: [u64; 8]| procfs::stat::CpuTimes {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
        };
        Stat {
            total: t([0; 8]),
            cpus: rows.iter().map(|(i, v)| (*i, t(*v))).collect(),
        }
    }

    #[test]
    fn host_cpu_counts_cores_on_the_chosen_cpus() {
        let a = stat(&[(0, [0; 8]), (1, [0; 8])]);
        // CPU 0: 50 usr + 30 sys + 20 softirq of 100 ticks; CPU 1: 100 idle.
        let b = stat(&[
            (0, [50, 0, 30, 0, 0, 0, 20, 0]),
            (1, [0, 0, 0, 100, 0, 0, 0, 0]),
        ]);
        let all = host_cpu_between(&a, &b, &[]);
        assert!((all.busy - 1.0).abs() < 1e-9);
        assert!((all.softirq - 0.2).abs() < 1e-9);
        let one = host_cpu_between(&a, &b, &[1]);
        assert_eq!(one.busy, 0.0);
    }

    #[test]
    fn roi_squares_throughput() {
        assert_eq!(roi(10.0, 2.0), Some(50.0));
        assert_eq!(
            roi(5.0, 1.0),
            Some(25.0),
            "the talk: 10 Gbit/s on 2 CPUs beats 5 on 1"
        );
        assert_eq!(roi(5.0, 0.0), None);
    }
}
