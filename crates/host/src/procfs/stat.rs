//! /proc/stat: CPU time per CPU in clock ticks, the source of the per-CPU usr/sys/irq/soft/idle
//! split (the NTT talk's `sar -P ALL`).

use super::{dec, ParseError};

const FILE: &str = "/proc/stat";

/// Cumulative CPU time in clock ticks (USER_HZ). `guest` is already counted in `user`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

/// The aggregate line and each online CPU (offline CPUs have no line, so ids may have gaps).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Stat {
    pub total: CpuTimes,
    pub cpus: Vec<(usize, CpuTimes)>,
}

/// Parses /proc/stat. Columns a kernel does not print (old kernels have only 4) read as 0.
pub fn parse(text: &str) -> Result<Stat, ParseError> {
    let mut total = None;
    let mut cpus = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let mut fields = line.split_whitespace();
        let Some(label) = fields.next() else { continue };
        let Some(id) = label.strip_prefix("cpu") else {
            continue;
        };
        let values: Vec<u64> = fields
            .take(8)
            .enumerate()
            .map(|(k, v)| dec(FILE, lineno, &format!("{label} column {}", k + 2), v))
            .collect::<Result<_, _>>()?;
        if values.len() < 4 {
            return Err(ParseError::line(
                FILE,
                lineno,
                format!("{label}: {} columns, need at least 4", values.len()),
            ));
        }
        let at = |k: usize| values.get(k).copied().unwrap_or(0);
        let times = CpuTimes {
            user: at(0),
            nice: at(1),
            system: at(2),
            idle: at(3),
            iowait: at(4),
            irq: at(5),
            softirq: at(6),
            steal: at(7),
        };
        if id.is_empty() {
            total = Some(times);
        } else {
            let cpu = id
                .parse()
                .map_err(|_| ParseError::line(FILE, lineno, format!("bad CPU label {label:?}")))?;
            cpus.push((cpu, times));
        }
    }
    let total = total.ok_or_else(|| ParseError::missing(FILE, "no aggregate \"cpu\" line"))?;
    Ok(Stat { total, cpus })
}

/// Percent split of the time between two samples. All fields are 0 when no time passed.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CpuSplit {
    /// user + nice
    pub usr: f64,
    pub sys: f64,
    pub irq: f64,
    pub soft: f64,
    /// idle + iowait
    pub idle: f64,
    pub steal: f64,
}

impl CpuSplit {
    /// Percent busy: neither idle (with iowait) nor stolen.
    pub fn busy(&self) -> f64 {
        (100.0 - self.idle - self.steal).max(0.0)
    }
}

/// Percent split of a delta between two samples (usr incl. nice, sys, irq, soft, idle incl.
/// iowait, steal), each column's share of the ticks counted. A counter that went backwards
/// (iowait can) counts as 0. With tick-based accounting the busy columns are sampled, so a
/// paced load skews this split; a CPU's busy time is `cputime::cpu_split`'s.
pub fn split(before: &CpuTimes, after: &CpuTimes) -> CpuSplit {
    let d = CpuTimes {
        user: after.user.saturating_sub(before.user),
        nice: after.nice.saturating_sub(before.nice),
        system: after.system.saturating_sub(before.system),
        idle: after.idle.saturating_sub(before.idle),
        iowait: after.iowait.saturating_sub(before.iowait),
        irq: after.irq.saturating_sub(before.irq),
        softirq: after.softirq.saturating_sub(before.softirq),
        steal: after.steal.saturating_sub(before.steal),
    };
    let total = d.total();
    let pct = |v: u64| {
        if total == 0 {
            0.0
        } else {
            v as f64 * 100.0 / total as f64
        }
    };
    CpuSplit {
        usr: pct(d.user + d.nice),
        sys: pct(d.system),
        irq: pct(d.irq),
        soft: pct(d.softirq),
        idle: pct(d.idle + d.iowait),
        steal: pct(d.steal),
    }
}
