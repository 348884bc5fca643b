//! Kernel threads that take a meaningful share of a CPU and may run where a server runs:
//! a thread such as kdamond (DAMON), kswapd, ksmd or khugepaged that runs for
//! milliseconds at a time preempts a server's busy worker for as long (session 8 found
//! kdamond.0 the main cause of the latency profile's worker's run-queue delay).

use super::facts::{Facts, KernelThread};
use super::{Row, Status};
use crate::procfs::{pidstat, ParseError};
use firehose_sys::cpu::CpuSet;

const WHY: &str = "a kernel thread that runs for ms at a time on a server's CPU preempts its worker for as long: on the 2-vCPU VM kdamond.0 (DAMON, 2.6 ms slices) was most of the latency profile's worker's run-queue delay, and moving it off the server's CPU cut rtt p99.9 5x (docs/benchmarks.md)";

/// A kernel thread's CPU share worth a row: 0.1% of one CPU, 1 ms in every second, which
/// a thread that runs in ms slices spends as whole preemptions.
pub const SHARE_PCT: f64 = 0.1;

/// One kernel thread's CPU use since boot and where it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    pub pid: u32,
    pub comm: String,
    /// utime + stime over the host's uptime, % of one CPU.
    pub share_pct: f64,
    /// Cpus_allowed_list.
    pub allowed: CpuSet,
}

/// Reads one kernel thread from its /proc/<pid>/stat and /proc/<pid>/status texts, with
/// /proc/uptime's and the clock-tick rate. Pure: the doctor's tests feed captured files.
pub fn parse(
    pid: u32,
    stat: &str,
    status: &str,
    uptime: &str,
    ticks_per_s: u64,
) -> Result<Busy, ParseError> {
    let s = pidstat::parse(stat)?;
    let up: f64 = uptime
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| *v > 0.0)
        .ok_or_else(|| ParseError::line("/proc/uptime", 1, "no uptime in seconds"))?;
    let allowed = allowed_cpus(status)?;
    // Saturating: the counters are the kernel's text, and two at u64::MAX (the fuzzer's
    // proc_thread input) overflowed the sum.
    let cpu_s = s.utime.saturating_add(s.stime) as f64 / ticks_per_s.max(1) as f64;
    Ok(Busy {
        pid,
        comm: s.comm,
        share_pct: 100.0 * cpu_s / up,
        allowed,
    })
}

/// The CPUs a task may run on, from its /proc/<pid>/status (or a thread's, under task/).
pub fn allowed_cpus(status: &str) -> Result<CpuSet, ParseError> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| ParseError::Missing {
            file: "/proc/<pid>/status",
            what: "no Cpus_allowed_list line".into(),
        })?;
    CpuSet::parse_list(list.trim())
        .map_err(|e| ParseError::line("/proc/<pid>/status", 1, e.to_string()))
}

/// Who decides where a kernel thread runs: the fix names it.
fn whose(comm: &str) -> &'static str {
    if comm.starts_with("kdamond") {
        "DAMON's monitor, started by whoever turned DAMON on (/sys/kernel/mm/damon; on a VM often its platform): the host owner's call"
    } else if comm.starts_with("kswapd") {
        "memory reclaim: it runs because the host is short of free memory; the host owner's call"
    } else {
        "a kernel thread: the host owner's call"
    }
}

pub(super) fn kthreads(facts: &Facts) -> Vec<Row> {
    let row = Row::new("kthreads", "host", WHY)
        .from("/proc/<pid>/stat (utime+stime) over /proc/uptime, /proc/<pid>/status (Cpus_allowed_list), for children of kthreadd");
    let threads = match &facts.kernel_threads {
        Ok(t) => t,
        Err(e) => return vec![row.na(e.to_string())],
    };
    let uptime = match facts.file("/proc/uptime") {
        Ok(t) => t,
        Err(e) => return vec![row.na(e.to_string())],
    };
    let online = facts.online();
    let mut busy: Vec<Busy> = threads
        .iter()
        .filter_map(|KernelThread { pid, stat, status }| {
            parse(*pid, stat, status, uptime, facts.ticks_per_s).ok()
        })
        .collect();
    busy.sort_by(|a, b| b.share_pct.total_cmp(&a.share_pct));
    // A thread bound to one CPU (ksoftirqd/N, kworker/N) does that CPU's own work and
    // cannot be moved; the others may run on any CPU of their list.
    let movable: Vec<&Busy> = busy
        .iter()
        .filter(|b| b.allowed.len() > 1 && b.share_pct >= SHARE_PCT)
        .collect();
    let server = &facts.server_cpus;
    let hits: Vec<&&Busy> = movable
        .iter()
        .filter(|b| server.is_empty() || !b.allowed.is_disjoint(server))
        .collect();
    let place = if server.is_empty() {
        "any CPU a server may be placed on".to_string()
    } else {
        format!("the --port server's CPUs {server}")
    };
    let Some(top) = hits.first() else {
        let busiest = busy
            .iter()
            .find(|b| b.allowed.len() > 1)
            .map(|b| format!("; busiest movable: {} {:.3}%", b.comm, b.share_pct))
            .unwrap_or_default();
        let value = if movable.is_empty() {
            format!("no movable kernel thread above {SHARE_PCT}% of a CPU since boot{busiest}")
        } else {
            format!(
                "{} above {SHARE_PCT}% of a CPU, none allowed on {place}",
                movable
                    .iter()
                    .map(|b| format!("{} {:.2}% on {}", b.comm, b.share_pct, b.allowed))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return vec![row.status(Status::Ok, value)];
    };
    let list: Vec<String> = hits
        .iter()
        .map(|b| {
            format!(
                "{} (pid {}) {:.2}% of a CPU, allowed on {}",
                b.comm, b.pid, b.share_pct, b.allowed
            )
        })
        .collect();
    let value = format!("{} since boot, may run on {place}", list.join("; "));
    // Pasteable when the server's CPUs are known and leave some CPU over.
    let away: CpuSet = online
        .iter()
        .filter(|c| !server.contains(c))
        .copied()
        .collect();
    let fix = if !server.is_empty() && !away.is_empty() {
        format!("taskset -pc {away} {} ({})", top.pid, whose(&top.comm))
    } else {
        format!(
            "taskset -pc CPUS {} with CPUS the ones no server or generator is placed on ({}; --port names the server, and the doctor then says which)",
            top.pid,
            whose(&top.comm)
        )
    };
    vec![row.status(Status::Warn, value).fix(fix)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fuzz/regressions/proc_thread: utime and stime both u64::MAX, and a command with
    /// spaces and parentheses, read as a finite share instead of an overflow.
    #[test]
    fn counters_at_their_limit_read_as_a_finite_share() {
        let stat = "41 (a) b) (c) I 2 0 0 0 -1 0 0 0 0 0 18446744073709551615 18446744073709551615 0 0 20 0 1 0 40";
        let b = parse(41, stat, "Cpus_allowed_list:\t0-3,8\n", "0.01 0\n", 100).unwrap();
        assert!(b.share_pct.is_finite() && b.share_pct > 0.0, "{b:?}");
        assert_eq!(b.comm, "a) b) (c");
        assert_eq!(b.allowed.len(), 5);
    }

    /// Captured on the 2-vCPU VM (kernel 6.18): kdamond.0 after 1,491 s of uptime, 861
    /// ticks of system time.
    const KDAMOND_STAT: &str = "77 (kdamond.0) I 2 0 0 0 -1 2129984 0 0 0 0 0 861 0 0 20 0 1 0 138 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    const KDAMOND_STATUS: &str = "Name:\tkdamond.0\nUmask:\t0000\nState:\tI (idle)\nTgid:\t77\nPid:\t77\nPPid:\t2\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n";
    const UPTIME: &str = "1491.50 1132.34\n";
    const KSOFTIRQD_STAT: &str = "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 3000 0 0 20 0 1 0 40 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    const KSOFTIRQD_STATUS: &str =
        "Name:\tksoftirqd/1\nPPid:\t2\nCpus_allowed:\t2\nCpus_allowed_list:\t1\n";
    const KWORKER_STAT: &str = "41 (kworker/u8:1-ev) I 2 0 0 0 -1 69238880 0 0 0 0 0 2 0 0 20 0 1 0 40 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    const KWORKER_STATUS: &str = "Name:\tkworker/u8:1-ev\nPPid:\t2\nCpus_allowed_list:\t0-1\n";

    #[test]
    fn a_captured_kdamond_is_its_ticks_over_uptime_with_its_cpu_list() {
        let b = parse(77, KDAMOND_STAT, KDAMOND_STATUS, UPTIME, 100).unwrap();
        assert_eq!(b.comm, "kdamond.0");
        assert!((b.share_pct - 100.0 * 8.61 / 1491.5).abs() < 1e-9, "{b:?}");
        assert_eq!(b.allowed.to_vec(), vec![0, 1]);
    }

    #[test]
    fn a_file_without_its_fields_is_an_error_not_a_zero() {
        assert!(parse(77, KDAMOND_STAT, "Name:\tkdamond.0\n", UPTIME, 100).is_err());
        assert!(parse(77, KDAMOND_STAT, KDAMOND_STATUS, "", 100).is_err());
        assert!(parse(77, "77 kdamond.0", KDAMOND_STATUS, UPTIME, 100).is_err());
    }

    fn facts(server: &[usize]) -> Facts {
        let mut f = Facts::for_tests();
        f.files
            .insert("/proc/uptime".into(), Ok(UPTIME.to_string()));
        f.files.insert(
            "/sys/devices/system/cpu/online".into(),
            Ok("0-1\n".to_string()),
        );
        f.ticks_per_s = 100;
        f.kernel_threads = Ok(vec![
            KernelThread {
                pid: 77,
                stat: KDAMOND_STAT.into(),
                status: KDAMOND_STATUS.into(),
            },
            KernelThread {
                pid: 22,
                stat: KSOFTIRQD_STAT.into(),
                status: KSOFTIRQD_STATUS.into(),
            },
            KernelThread {
                pid: 41,
                stat: KWORKER_STAT.into(),
                status: KWORKER_STATUS.into(),
            },
        ]);
        f.server_cpus = server.iter().copied().collect();
        f
    }

    #[test]
    fn kdamond_on_the_servers_cpu_warns_with_the_taskset_that_moves_it_away() {
        let rows = kthreads(&facts(&[0]));
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.status, Status::Warn, "{r:?}");
        assert!(
            r.value
                .starts_with("kdamond.0 (pid 77) 0.58% of a CPU, allowed on 0-1"),
            "{}",
            r.value
        );
        // ksoftirqd/1 is busier but bound to its CPU; the kworker is below the floor.
        assert!(
            !r.value.contains("ksoftirqd") && !r.value.contains("kworker"),
            "{}",
            r.value
        );
        let fix = r.fix.as_deref().unwrap();
        assert!(fix.starts_with("taskset -pc 1 77 (DAMON"), "{fix}");
        assert!(r.steps.is_empty(), "report only: no step to apply");
    }

    #[test]
    fn without_a_server_to_place_the_fix_names_the_cpus_to_choose() {
        let r = &kthreads(&facts(&[]))[0];
        assert_eq!(r.status, Status::Warn);
        assert!(
            r.value
                .ends_with("may run on any CPU a server may be placed on"),
            "{}",
            r.value
        );
        assert!(r.fix.as_deref().unwrap().starts_with("taskset -pc CPUS 77"));
    }

    #[test]
    fn a_thread_already_kept_off_the_servers_cpus_is_ok() {
        let mut f = facts(&[0]);
        if let Ok(t) = f.kernel_threads.as_mut() {
            t[0].status = KDAMOND_STATUS.replace("0-1", "1");
        }
        let r = &kthreads(&f)[0];
        // Bound to one CPU it no longer counts as movable; nothing else is above the floor.
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert!(
            r.value.starts_with("no movable kernel thread above 0.1%"),
            "{}",
            r.value
        );
    }

    #[test]
    fn without_proc_the_row_says_why() {
        let mut f = facts(&[0]);
        f.files.remove("/proc/uptime");
        assert_eq!(kthreads(&f)[0].status, Status::NotApplicable);
    }
}
