//! CPU layout and power: SMT siblings and busy CPUs, NUMA locality, governor, C-states,
//! isolated CPUs.

use super::facts::Facts;
use super::irq::local_cpus;
use super::plan::{Kind, Phase, Step, Target};
use super::{per_iface, Row, Status};
use crate::cputime::cpu_split;
use crate::procfs::stat;
use crate::text;
use firehose_sys::cpu::CpuSet;

/// CPUs busier than 50% over the sample window, with their busy percent (wall time less
/// idle and steal: [`cpu_split`]).
fn busy_cpus(facts: &Facts) -> Option<Vec<(usize, f64)>> {
    let s = facts.sample.as_ref()?;
    let get = |m: &std::collections::BTreeMap<String, super::facts::Text>| {
        m.get("/proc/stat")?
            .as_ref()
            .ok()
            .and_then(|t| stat::parse(t).ok())
    };
    let (a, b) = (get(&s.before)?, get(&s.after)?);
    let wall = std::time::Duration::from_secs_f64(s.seconds.max(0.0));
    Some(
        b.cpus
            .iter()
            .filter_map(|(c, _)| {
                let busy = cpu_split(&a, &b, *c, wall, s.ticks_per_s)?.busy();
                (busy >= 50.0).then_some((*c, busy))
            })
            .collect(),
    )
}

fn busy_text(busy: &[(usize, f64)]) -> String {
    if busy.is_empty() {
        return "no CPU above 50% busy".into();
    }
    let list: Vec<String> = busy
        .iter()
        .map(|(c, b)| format!("cpu{c} {b:.0}%"))
        .collect();
    format!("busy: {}", list.join(" "))
}

const WHY_SMT: &str = "hyperthread siblings share a core: busy siblings halve each other while other cores idle (NTT talk: HT on + RPS over all threads gave 7.01M tps)";

pub(super) fn smt(facts: &Facts) -> Vec<Row> {
    let row = Row::new("smt", "host", WHY_SMT)
        .from("/sys/devices/system/cpu/cpu*/topology/thread_siblings_list, /proc/stat");
    let mut cores: Vec<CpuSet> = Vec::new();
    for c in &facts.cpus {
        if let Some(s) = c
            .siblings
            .as_ref()
            .ok()
            .and_then(|t| CpuSet::parse_list(t).ok())
        {
            if !cores.contains(&s) {
                cores.push(s);
            }
        }
    }
    if cores.is_empty() {
        return vec![row.na("no topology/thread_siblings_list")];
    }
    let threads = cores.iter().map(|c| c.len()).max().unwrap_or(1);
    let mut value = if threads > 1 {
        let ex: Vec<String> = cores.iter().take(3).map(CpuSet::to_string).collect();
        format!(
            "SMT on: {} cores x {threads} threads (siblings {} ...)",
            cores.len(),
            ex.join(" ")
        )
    } else {
        format!("SMT off: {} cores, 1 thread each", cores.len())
    };
    let Some(busy) = busy_cpus(facts) else {
        value.push_str("; --sample shows busy CPUs");
        return vec![row.status(Status::Ok, value)];
    };
    value.push_str(&format!("; {}", busy_text(&busy)));
    let busy_set: CpuSet = busy.iter().map(|(c, _)| *c).collect();
    let shared: Vec<&CpuSet> = cores
        .iter()
        .filter(|c| c.intersection(&busy_set).count() > 1)
        .collect();
    let idle_cores = cores.iter().filter(|c| c.is_disjoint(&busy_set)).count();
    if !shared.is_empty() && idle_cores > 0 {
        let s: Vec<String> = shared.iter().map(|c| c.to_string()).collect();
        return vec![row
            .status(
                Status::Warn,
                format!(
                    "{value}; busy siblings share cores {} while {idle_cores} cores idle",
                    s.join(" ")
                ),
            )
            .fix("pin workers to one thread per core first (firehose serve --cpus ...)")];
    }
    vec![row.status(Status::Ok, value)]
}

const WHY_NUMA: &str = "packets, IRQs and the server should stay on the NIC's NUMA node; remote memory crosses the interconnect (NFV sheet: NUMA and PCI affinity)";

pub(super) fn numa(facts: &Facts) -> Vec<Row> {
    let busy = busy_cpus(facts);
    per_iface(facts, "numa", WHY_NUMA, |i, row| {
        let row = row.from(format!(
            "/sys/class/net/{}/device/{{numa_node,local_cpulist}}",
            i.name
        ));
        let node = match &i.numa_node {
            Ok(t) => t.trim().to_string(),
            Err(e) => return row.na(format!("{e}: no NUMA information for this device")),
        };
        if node == "-1" {
            return row.na("numa_node -1: the platform reports no NUMA locality");
        }
        let local = local_cpus(facts, i);
        let online = facts.online();
        let value = format!("node {node}, local CPUs {}", local);
        if local == online {
            return row.status(Status::Ok, format!("{value} (all online CPUs)"));
        }
        match &busy {
            Some(b) => {
                let remote: Vec<String> = b
                    .iter()
                    .filter(|(c, _)| !local.contains(c))
                    .map(|(c, _)| c.to_string())
                    .collect();
                if remote.is_empty() {
                    row.status(Status::Ok, format!("{value}; {}", busy_text(b)))
                } else {
                    row.status(
                        Status::Warn,
                        format!(
                            "{value}; busy CPUs {} are on another node",
                            remote.join(",")
                        ),
                    )
                    .fix(format!(
                        "run the server on CPUs {} (taskset -c / firehose serve --cpus)",
                        local
                    ))
                }
            }
            None => row.status(
                Status::Ok,
                format!("{value}; pin the server there (--sample checks busy CPUs)"),
            ),
        }
    })
}

const WHY_GOVERNOR: &str = "a power-saving governor ramps the clock up only after packets arrive, adding wake latency (NFV sheet: set 'performance')";

pub(super) fn governor(facts: &Facts) -> Vec<Row> {
    let row = Row::new("governor", "host", WHY_GOVERNOR)
        .from("/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor");
    let read: Vec<(usize, String)> = facts
        .cpus
        .iter()
        .filter_map(|c| Some((c.id, c.governor.as_ref().ok()?.trim().to_string())))
        .collect();
    if read.is_empty() {
        return vec![row.na("no cpufreq scaling_governor (VM or no frequency driver)")];
    }
    let slow: Vec<&(usize, String)> = read.iter().filter(|(_, g)| g != "performance").collect();
    let mut kinds: Vec<&str> = read.iter().map(|(_, g)| g.as_str()).collect();
    kinds.dedup();
    let value = format!("{} on {} CPUs", kinds.join(","), read.len());
    if slow.is_empty() {
        return vec![row.status(Status::Ok, value)];
    }
    let steps = slow
        .iter()
        .map(|(c, _)| {
            Step::set(
                "governor",
                Phase::Cpu,
                Target::file(
                    format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
                    Kind::Text,
                ),
                "performance",
            )
        })
        .collect();
    vec![row.status(Status::Warn, value).steps(steps)]
}

/// Idle states with an exit latency above this (us) are "deep".
const DEEP_US: u64 = 10;

const WHY_CSTATES: &str = "waking from a deep C-state takes tens of microseconds per packet burst (NFV sheet: disable C3/C6 for latency)";

pub(super) fn cstates(facts: &Facts) -> Vec<Row> {
    let row = Row::new("cstates", "host", WHY_CSTATES)
        .from("/sys/devices/system/cpu/cpu*/cpuidle/state*/{name,latency,disable}");
    if facts.cpus.iter().all(|c| c.idle_states.is_empty()) {
        return vec![row.na("no cpuidle states (no idle driver)")];
    }
    let mut steps = Vec::new();
    let mut names = Vec::new();
    for c in &facts.cpus {
        for (dir, name, lat, disabled) in &c.idle_states {
            if *lat > DEEP_US && !disabled {
                if !names.contains(&format!("{name} ({lat} us)")) {
                    names.push(format!("{name} ({lat} us)"));
                }
                steps.push(Step::set(
                    "cstates",
                    Phase::Cpu,
                    Target::file(
                        format!("/sys/devices/system/cpu/cpu{}/cpuidle/{dir}/disable", c.id),
                        Kind::Text,
                    ),
                    "1",
                ));
            }
        }
    }
    let all: Vec<String> = facts.cpus[0]
        .idle_states
        .iter()
        .map(|(_, n, l, d)| format!("{n}:{l}us{}", if *d { ":off" } else { "" }))
        .collect();
    if steps.is_empty() {
        return vec![row.status(
            Status::Ok,
            format!(
                "no enabled state above {DEEP_US} us (cpu0: {})",
                all.join(" ")
            ),
        )];
    }
    vec![row
        .status(
            Status::Warn,
            format!("deep states enabled: {}", names.join(", ")),
        )
        .steps(steps)]
}

const WHY_ISOLATION: &str = "isolcpus/nohz_full keep the scheduler and timer ticks off packet CPUs; NIC IRQs must then stay off them too (NFV sheet)";

pub(super) fn isolation(facts: &Facts) -> Vec<Row> {
    let row = Row::new("isolation", "host", WHY_ISOLATION)
        .from("/proc/cmdline, /sys/devices/system/cpu/{isolated,nohz_full}");
    let list = |p: &str, key: &str| -> CpuSet {
        facts
            .file(p)
            .ok()
            .and_then(|t| CpuSet::parse_list(t).ok())
            .filter(|s| !s.is_empty())
            .or_else(|| {
                let cmd = facts.file("/proc/cmdline").ok()?;
                let v = text::cmdline_value(cmd, key)?;
                // isolcpus may carry flags first: isolcpus=domain,managed_irq,2-5
                let cpus: Vec<&str> = v
                    .split(',')
                    .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
                    .collect();
                CpuSet::parse_list(&cpus.join(",")).ok()
            })
            .unwrap_or_default()
    };
    let iso = list("/sys/devices/system/cpu/isolated", "isolcpus");
    let nohz = list("/sys/devices/system/cpu/nohz_full", "nohz_full");
    let value = format!(
        "isolated: {}; nohz_full: {}",
        if iso.is_empty() {
            "none".into()
        } else {
            iso.to_string()
        },
        if nohz.is_empty() {
            "none".into()
        } else {
            nohz.to_string()
        }
    );
    let mut on_isolated = Vec::new();
    for i in &facts.ifaces {
        for irq in &i.irqs {
            let eff = irq
                .effective_list
                .as_ref()
                .ok()
                .and_then(|t| CpuSet::parse_list(t).ok())
                .unwrap_or_default();
            if !eff.is_disjoint(&iso) {
                on_isolated.push(format!("IRQ {} ({})", irq.irq, irq.name));
            }
        }
    }
    if on_isolated.is_empty() {
        vec![row.status(Status::Ok, value)]
    } else {
        vec![row
            .status(
                Status::Warn,
                format!("{value}; {} run on isolated CPUs", on_isolated.join(", ")),
            )
            .fix("move them: see the irq-affinity row (ban isolated CPUs in irqbalance)")]
    }
}
