//! Shows why host CPU is not read from /proc/stat's busy ticks: a paced load that works
//! right after each scheduler tick and sleeps before the next one is never charged, one that
//! straddles the tick is charged the whole tick. Pinned to one CPU, it does `work` µs of its
//! own CPU time once per `period` µs, `phase` µs after a multiple of the period on
//! CLOCK_MONOTONIC (the kernel's ticks are aligned to multiples of the tick length there),
//! for `secs` seconds, then prints, for that CPU and for all CPUs, the busy ticks' delta
//! (user+nice+system+irq+softirq), the idle-based figure (wall x CPUs - idle - iowait -
//! steal: `firehose_host::cputime::busy_s`) and the process's own CPU clock, and the two
//! /proc/stat readings (the captured pairs of cputime's unit tests come from here).
//!
//! `cargo run --release -p firehose-host --example tick_aliasing -- CPU PHASE_US WORK_US
//! PERIOD_US SECS`, e.g. `-- 1 100 300 4000 3` (after the tick at HZ=250) and `-- 1 3850
//! 300 4000 3` (straddling it). Figures mean something only when that CPU is otherwise idle.

use firehose_host::cputime::busy_s;
use firehose_host::procfs::stat::{self, CpuTimes};
use firehose_sys::cpu;
use std::time::Duration;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse().unwrap_or_else(|_| {
                eprintln!("usage: tick_aliasing CPU PHASE_US WORK_US PERIOD_US SECS (integers)");
                std::process::exit(2)
            })
        })
        .collect();
    let [cpu_id, phase, work, period, secs] = args[..] else {
        eprintln!("usage: tick_aliasing CPU PHASE_US WORK_US PERIOD_US SECS");
        std::process::exit(2)
    };
    if phase >= period || work >= period {
        eprintln!("PHASE_US and WORK_US must be below PERIOD_US");
        std::process::exit(2)
    }
    cpu::pin_current_thread(cpu_id as usize).expect("pin");
    cpu::set_timer_slack_ns(1).expect("timer slack");
    let read = || std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let (period, phase, work) = (
        Duration::from_micros(period),
        Duration::from_micros(phase),
        Duration::from_micros(work),
    );
    let now = || cpu::monotonic_time().expect("CLOCK_MONOTONIC");
    let (text_a, t_a, p_a) = (read(), now(), cpu::process_cpu_time().unwrap());
    let end = t_a + Duration::from_secs(secs);
    let mut late = 0u32;
    loop {
        let t = now();
        let k = t.as_nanos() / period.as_nanos() + 1;
        let at = Duration::from_nanos((k * period.as_nanos()) as u64) + phase;
        if at >= end {
            break;
        }
        std::thread::sleep(at - t);
        let woke = now();
        if woke > at + (period - work) / 2 {
            late += 1;
        }
        let start = cpu::thread_cpu_time().unwrap();
        while cpu::thread_cpu_time().unwrap() - start < work {}
    }
    let (t_b, p_b, text_b) = (now(), cpu::process_cpu_time().unwrap(), read());
    let wall = (t_b - t_a).as_secs_f64();
    let (a, b) = (stat::parse(&text_a).unwrap(), stat::parse(&text_b).unwrap());
    let hz = cpu::clock_ticks_per_sec() as f64;
    let ticks = |x: &CpuTimes, y: &CpuTimes| {
        let busy = |t: &CpuTimes| t.user + t.nice + t.system + t.irq + t.softirq;
        (busy(y) - busy(x)) as f64 / hz
    };
    let one = |s: &stat::Stat| {
        s.cpus
            .iter()
            .find(|c| c.0 == cpu_id as usize)
            .map(|c| c.1.clone())
    };
    let (Some(one_a), Some(one_b)) = (one(&a), one(&b)) else {
        eprintln!("cpu {cpu_id} is not online");
        std::process::exit(2)
    };
    println!(
        "cpu {cpu_id}, {} µs of work {} µs after each {} µs boundary, {wall:.3} s wall, {late} late wake-ups",
        work.as_micros(),
        phase.as_micros(),
        period.as_micros()
    );
    println!("process CPU clock: {:.3} s", (p_b - p_a).as_secs_f64());
    let this = [cpu_id as usize];
    for (name, x, y, on) in [
        (format!("cpu{cpu_id}"), &one_a, &one_b, &this[..]),
        ("all CPUs".into(), &a.total, &b.total, &[][..]),
    ] {
        let precise = busy_s(&a, &b, t_b - t_a, hz as u64, on);
        println!(
            "{name:8} busy ticks: {:.3} s; wall x CPUs - idle - iowait - steal: {:.3} s",
            ticks(x, y),
            precise.unwrap_or(f64::NAN)
        );
    }
    let lines = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("cpu"))
            .collect::<Vec<_>>()
            .join("\\n")
    };
    println!("before: {}\nafter:  {}", lines(&text_a), lines(&text_b));
}
