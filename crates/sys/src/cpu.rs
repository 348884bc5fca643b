//! CPU placement and CPU-time accounting for threads and processes.

mod set;

pub use set::{CpuSet, CpuSetError, MAX_CPU};

use crate::{cvt, SysError, SysResult};
use std::mem;
use std::time::Duration;

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> SysResult<()> {
    confine_current_thread(&[cpu])
}

/// Confines the calling thread to `cpus` (its affinity mask; threads it starts inherit it).
pub fn confine_current_thread(cpus: &[usize]) -> SysResult<()> {
    if let Some(c) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(crate::SysError {
            what: format!("sched_setaffinity(cpu {c})"),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only touch the local set, within
    // CPU_SETSIZE (checked above).
    let ret = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
    };
    cvt(ret, || {
        format!("sched_setaffinity(cpus {})", CpuSet::from(cpus))
    })
    .map(|_| ())
}

/// The CPUs the calling thread may run on (its affinity mask), ascending.
pub fn allowed_cpus() -> SysResult<Vec<usize>> {
    // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes into the local set.
    let set = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        let ret = libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set);
        cvt(ret, || "sched_getaffinity".into())?;
        set
    };
    // SAFETY: CPU_ISSET reads the local set within its bounds (CPU_SETSIZE).
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> SysResult<usize> {
    // SAFETY: sched_getcpu takes no arguments.
    let c = cvt(unsafe { libc::sched_getcpu() }, || "sched_getcpu".into())?;
    Ok(c as usize)
}

fn clock(id: libc::clockid_t, name: &str) -> SysResult<Duration> {
    // SAFETY: the kernel writes a timespec into the zeroed local.
    let ts = unsafe {
        let mut ts: libc::timespec = mem::zeroed();
        cvt(libc::clock_gettime(id, &mut ts), || {
            format!("clock_gettime({name})")
        })?;
        ts
    };
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// CLOCK_MONOTONIC as a duration since boot (suspend excluded): the clock the kernel's
/// idle accounting uses (ktime_get), so a wall time read here and the idle times of
/// /proc/stat are in the same time base, and tick boundaries are multiples of the tick.
pub fn monotonic_time() -> SysResult<Duration> {
    clock(libc::CLOCK_MONOTONIC, "CLOCK_MONOTONIC")
}

/// CPU time (user + system) consumed by the calling thread.
pub fn thread_cpu_time() -> SysResult<Duration> {
    clock(libc::CLOCK_THREAD_CPUTIME_ID, "CLOCK_THREAD_CPUTIME_ID")
}

/// How often the calling thread lost its CPU while it could still run (involuntary
/// context switches, getrusage RUSAGE_THREAD's ru_nivcsw): another task or a kernel thread
/// preempted it. A sleep or a blocking call is a voluntary switch and not counted.
pub fn thread_preemptions() -> SysResult<u64> {
    // SAFETY: rusage is plain data; all-zero is a valid value for the kernel to overwrite.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live, writable rusage.
    let ret = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    cvt(ret, || "getrusage(RUSAGE_THREAD)".into())?;
    Ok(u.ru_nivcsw as u64)
}

/// How long the calling thread has waited on a run queue, runnable but not running
/// (/proc/thread-self/schedstat's second field): the time other tasks and kernel threads
/// took from it. Preemptions count how often; this says for how long.
pub fn thread_run_delay() -> SysResult<Duration> {
    const PATH: &str = "/proc/thread-self/schedstat";
    let what = || format!("reading {PATH}");
    let text = std::fs::read_to_string(PATH).map_err(|source| SysError {
        what: what(),
        source,
    })?;
    parse_run_delay(&text).ok_or_else(|| SysError {
        what: what(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("no run delay in {text:?}"),
        ),
    })
}

/// The run delay (ns) of a schedstat line: `run_ns wait_ns timeslices`. Pure: the fuzz
/// target `proc_thread` feeds it.
pub fn parse_run_delay(text: &str) -> Option<Duration> {
    let ns = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// CPU time (user + system) consumed by the whole process, all threads.
pub fn process_cpu_time() -> SysResult<Duration> {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID, "CLOCK_PROCESS_CPUTIME_ID")
}

/// CPU time (user + system) of another process, all its threads, the exited ones included,
/// in nanoseconds: its process CPU clock (clock_getcpuclockid). Unlike summing per-thread
/// schedstat, it never goes backwards when a thread exits; unlike /proc/PID/stat it is not
/// counted in 10 ms ticks.
pub fn process_cpu_time_of(pid: u32) -> SysResult<Duration> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: the call writes one clockid_t into a live local.
    let err = unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut id) };
    if err != 0 {
        return Err(crate::SysError {
            what: format!("clock_getcpuclockid({pid})"),
            source: std::io::Error::from_raw_os_error(err),
        });
    }
    clock(id, "the process CPU clock")
}

/// User and system CPU time of the process, separately (getrusage).
pub fn process_rusage() -> SysResult<(Duration, Duration)> {
    // SAFETY: the kernel fills the zeroed local rusage.
    let ru = unsafe {
        let mut ru: libc::rusage = mem::zeroed();
        cvt(libc::getrusage(libc::RUSAGE_SELF, &mut ru), || {
            "getrusage".into()
        })?;
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok((tv(ru.ru_utime), tv(ru.ru_stime)))
}

/// Sets this thread's timer slack (PR_SET_TIMERSLACK) so short sleeps wake on time;
/// the default 50 µs slack would distort an open-loop send schedule.
pub fn set_timer_slack_ns(ns: u64) -> SysResult<()> {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a plain integer.
    let ret = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
    cvt(ret, || "prctl(PR_SET_TIMERSLACK)".into()).map(|_| ())
}

/// Number of clock ticks per second for /proc times (sysconf(_SC_CLK_TCK)).
pub fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf takes a plain integer.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// True when the process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_and_read_back() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let c = *cpus.last().unwrap();
        std::thread::spawn(move || {
            pin_current_thread(c).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![c]);
            assert_eq!(current_cpu().unwrap(), c);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn confine_sets_the_mask_and_refuses_a_cpu_past_the_set() {
        let cpus = allowed_cpus().unwrap();
        std::thread::spawn(move || {
            confine_current_thread(&cpus).unwrap();
            assert_eq!(allowed_cpus().unwrap(), cpus);
            let e = confine_current_thread(&[libc::CPU_SETSIZE as usize]).unwrap_err();
            assert_eq!(e.errno(), Some(libc::EINVAL));
            assert_eq!(allowed_cpus().unwrap(), cpus);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn run_delay_is_schedstat_second_field() {
        // Captured from a spinning generator thread (run ns, wait ns, slices).
        let line = "4186395151 1849113 95\n";
        assert_eq!(parse_run_delay(line), Some(Duration::from_nanos(1_849_113)));
        assert_eq!(parse_run_delay("4186395151\n"), None);
        assert_eq!(parse_run_delay("1 x 2\n"), None);
    }

    /// Two threads that both want one CPU: the one that waits for the other has the wait
    /// in its run delay.
    #[test]
    fn run_delay_counts_the_wait_for_a_shared_cpu() {
        let c = *allowed_cpus().unwrap().last().unwrap();
        let spin = move || {
            pin_current_thread(c).unwrap();
            let before = thread_run_delay().unwrap();
            let start = thread_cpu_time().unwrap();
            while thread_cpu_time().unwrap() - start < Duration::from_millis(40) {}
            thread_run_delay().unwrap() - before
        };
        let a = std::thread::spawn(spin);
        let b = std::thread::spawn(spin);
        let waited = a.join().unwrap() + b.join().unwrap();
        assert!(
            waited > Duration::ZERO,
            "neither thread waited for the other"
        );
    }

    #[test]
    fn cpu_time_advances() {
        let a = thread_cpu_time().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time().unwrap() > a);
    }
}
