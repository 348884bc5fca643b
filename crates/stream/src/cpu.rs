//! CPU and power over a measured window: the host's busy CPU on the CPUs the run used (wall
//! time less idle, `firehose_host::cputime::busy_s`) and its /proc/stat split (usr, sys,
//! softirq, irq: sampled at each tick), the process's own user+system time, and package energy
//! from RAPL under /sys/class/powercap when it is readable. Power is never estimated.

use firehose_host::cputime::{self, StatReading};
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

/// Host CPU over the window, in cores (1.0 = one CPU fully busy). `usr`, `sys`, `softirq`
/// and `irq` are /proc/stat's tick samples; `busy` is not (see the field).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostCpu {
    /// The CPUs summed; empty means all of them.
    pub cpus: Vec<usize>,
    pub usr: f64,
    pub sys: f64,
    pub softirq: f64,
    pub irq: f64,
    /// Wall time less idle, iowait and steal on those CPUs, over the wall time: measured
    /// from the idle times, which are exact, where the split above is sampled at each tick
    /// and may miss (or over-count) a load paced between ticks.
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
    let (at, stat) = match StatReading::now() {
        Ok(r) => (r.at, Some(r.stat)),
        Err(_) => (Instant::now(), None),
    };
    Sample {
        at,
        stat,
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

/// Host CPU between two samples, summed over `cpus` (all when empty); `None` without
/// /proc/stat or when a CPU counted went on- or offline.
pub fn host_cpu(a: &Sample, b: &Sample, cpus: &[usize]) -> Option<HostCpu> {
    let (sa, sb) = (a.stat.as_ref()?, b.stat.as_ref()?);
    let hz = firehose_sys::cpu::clock_ticks_per_sec();
    host_cpu_between(sa, sb, b.at.saturating_duration_since(a.at), hz, cpus)
}

/// The pure part of [`host_cpu`]: busy from the idle times over `wall`, the split from the
/// sampled ticks, both in cores.
pub fn host_cpu_between(
    a: &Stat,
    b: &Stat,
    wall: Duration,
    ticks_per_s: u64,
    cpus: &[usize],
) -> Option<HostCpu> {
    let secs = wall.as_secs_f64();
    let busy = cputime::busy_s(a, b, wall, ticks_per_s, cpus)?;
    let pick: Vec<(&procfs::stat::CpuTimes, &procfs::stat::CpuTimes)> = b
        .cpus
        .iter()
        .filter(|(id, _)| cpus.is_empty() || cpus.contains(id))
        .filter_map(|(id, tb)| a.cpus.iter().find(|(i, _)| i == id).map(|(_, ta)| (ta, tb)))
        .collect();
    let wall_ticks = secs * ticks_per_s.max(1) as f64;
    if wall_ticks <= 0.0 {
        return Some(HostCpu {
            cpus: cpus.to_vec(),
            ..HostCpu::default()
        });
    }
    let cores = |f: fn(&procfs::stat::CpuTimes) -> u64| {
        pick.iter()
            .map(|(ta, tb)| f(tb).saturating_sub(f(ta)))
            .sum::<u64>() as f64
            / wall_ticks
    };
    Some(HostCpu {
        cpus: cpus.to_vec(),
        usr: cores(|t| t.user + t.nice),
        sys: cores(|t| t.system),
        softirq: cores(|t| t.softirq),
        irq: cores(|t| t.irq),
        busy: busy / secs,
    })
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
        // The aggregate line is the sum of the CPUs' lines.
        let mut sum = [0; 8];
        for (_, v) in rows {
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
        }
        Stat {
            total: t(sum),
            cpus: rows.iter().map(|(i, v)| (*i, t(*v))).collect(),
        }
    }

    #[test]
    fn host_cpu_counts_cores_on_the_chosen_cpus() {
        let a = stat(&[(0, [0; 8]), (1, [0; 8])]);
        // One second at 100 ticks/s. CPU 0: never idle, its ticks sampled 50 usr + 30 sys
        // + 20 softirq; CPU 1: idle all along.
        let b = stat(&[
            (0, [50, 0, 30, 0, 0, 0, 20, 0]),
            (1, [0, 0, 0, 100, 0, 0, 0, 0]),
        ]);
        let s = Duration::from_secs(1);
        let all = host_cpu_between(&a, &b, s, 100, &[]).unwrap();
        assert!((all.busy - 1.0).abs() < 1e-9);
        assert!((all.softirq - 0.2).abs() < 1e-9);
        let one = host_cpu_between(&a, &b, s, 100, &[1]).unwrap();
        assert_eq!(one.busy, 0.0);
        // CPU 1 busy half the second between ticks: no tick saw it, its idle time did.
        let b = stat(&[
            (0, [50, 0, 30, 0, 0, 0, 20, 0]),
            (1, [0, 0, 0, 50, 0, 0, 0, 0]),
        ]);
        let one = host_cpu_between(&a, &b, s, 100, &[1]).unwrap();
        assert!((one.busy - 0.5).abs() < 1e-9, "{one:?}");
        assert_eq!(
            one.usr + one.sys + one.softirq + one.irq,
            0.0,
            "sampled: none"
        );
        assert!(host_cpu_between(&a, &b, s, 100, &[7]).is_none(), "no CPU 7");
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
