//! Where receive and transmit work runs: queue IRQ affinity, irqbalance, NET_RX softirq
//! spread, RPS and XPS masks.

use super::facts::{Facts, Iface, Queue};
use super::plan::{Kind, Phase, Step, Target};
use super::{per_iface, Row, Status};
use crate::procfs::softirqs;
use crate::text;
use firehose_sys::cpu::CpuSet;

/// CPUs local to the NIC's NUMA node, or every online CPU when it does not say.
pub(super) fn local_cpus(facts: &Facts, i: &Iface) -> CpuSet {
    let online = facts.online();
    i.local_cpulist
        .as_ref()
        .ok()
        .and_then(|t| CpuSet::parse_list(t).ok())
        .map(|l| l.intersection(&online).copied().collect::<CpuSet>())
        .filter(|l| !l.is_empty())
        .unwrap_or(online)
}

/// Splits `cpus` over `n` queues round-robin: queue q gets cpus k with k % n == q; a queue
/// left without a CPU (more queues than CPUs) shares one.
fn spread(cpus: &CpuSet, n: usize) -> Vec<CpuSet> {
    let list: Vec<usize> = cpus.iter().copied().collect();
    (0..n)
        .map(|q| {
            let mut s: CpuSet = list.iter().skip(q).step_by(n.max(1)).copied().collect();
            if s.is_empty() && !list.is_empty() {
                s.insert(list[q % list.len()]);
            }
            s
        })
        .collect()
}

const WHY_AFFINITY: &str = "each queue's IRQ should run on its own NIC-local CPU, as the driver's affinity_hint says (NTT talk: irqbalance put all on node 0)";

pub(super) fn affinity(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "irq-affinity", WHY_AFFINITY, |i, row| {
        let row = row.from("/proc/interrupts, /proc/irq/N/{smp_affinity_list,affinity_hint,effective_affinity_list}");
        if i.irqs.is_empty() {
            return row.na(if i.has_device {
                "no queue interrupts found for the device's MSI vectors"
            } else {
                "software device: no interrupts"
            });
        }
        let local = local_cpus(facts, i);
        let mut problems = Vec::new();
        let mut landing = CpuSet::new();
        let mut steps = Vec::new();
        let targets = spread(&local, i.irqs.len());
        for (k, irq) in i.irqs.iter().enumerate() {
            let Some(aff) = irq
                .affinity_list
                .as_ref()
                .ok()
                .and_then(|t| CpuSet::parse_list(t).ok())
            else {
                return row.na(format!("IRQ {}: cannot read smp_affinity_list", irq.irq));
            };
            let eff = irq
                .effective_list
                .as_ref()
                .ok()
                .and_then(|t| CpuSet::parse_list(t).ok())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| aff.clone());
            landing.extend(eff.iter().copied());
            let hint = irq
                .affinity_hint
                .as_ref()
                .ok()
                .and_then(|t| CpuSet::from_mask_hex(t).ok())
                .filter(|s| !s.is_empty());
            if let Some(h) = &hint {
                if *h != aff {
                    problems.push(format!(
                        "IRQ {} ({}) on {} but hint {}",
                        irq.irq, irq.name, aff, h
                    ));
                }
            } else if !eff.is_subset(&local) {
                problems.push(format!(
                    "IRQ {} ({}) on {} outside NIC-local CPUs {}",
                    irq.irq, irq.name, eff, local
                ));
            }
            let want = hint.unwrap_or_else(|| targets[k].clone());
            if want != aff {
                steps.push(
                    Step::set(
                        "irq-affinity",
                        Phase::IrqAffinity,
                        Target::file(
                            format!("/proc/irq/{}/smp_affinity_list", irq.irq),
                            Kind::CpuList,
                        ),
                        want.to_string(),
                    )
                    .on(&i.name),
                );
            }
        }
        let fair = i.irqs.len().min(local.len());
        if landing.len() < fair {
            problems.push(format!(
                "{} queue IRQs land on only {} CPU(s)",
                i.irqs.len(),
                landing.len()
            ));
        }
        let value = format!("{} queue IRQs on CPUs {}", i.irqs.len(), landing);
        if problems.is_empty() {
            row.status(Status::Ok, value)
        } else {
            row.status(Status::Warn, format!("{value}; {}", problems.join("; ")))
                .steps(steps)
        }
    })
}

const WHY_IRQBALANCE: &str = "irqbalance rewrites IRQ affinity every 10 s, undoing manual placement; the NTT talk needed '-h exact' to honor hints";

pub(super) fn irqbalance(facts: &Facts) -> Vec<Row> {
    let row = Row::new("irqbalance", "host", WHY_IRQBALANCE)
        .from("/proc/*/comm, /etc/default/irqbalance, /etc/sysconfig/irqbalance");
    let procs = match &facts.processes {
        Ok(p) => p,
        Err(e) => return vec![row.na(e.to_string())],
    };
    let Some(p) = procs.iter().find(|p| p.comm == "irqbalance") else {
        return vec![row.status(Status::Ok, "not running")];
    };
    let config: Vec<text::IrqbalanceConfig> =
        ["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"]
            .iter()
            .filter_map(|f| facts.file(f).ok())
            .map(text::parse_irqbalance_config)
            .collect();
    let args = format!(
        "{} {}",
        p.cmdline,
        config
            .iter()
            .map(|c| c.args.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let banned: CpuSet = config
        .iter()
        .flat_map(|c| c.banned_cpus.iter().copied())
        .collect();
    let exact = args.contains("-h exact") || args.contains("--hintpolicy=exact");
    let oneshot = args.contains("--oneshot") || args.split_whitespace().any(|a| a == "-o");
    let mut value = format!("running (pid {}): {}", p.pid, args.trim());
    if !banned.is_empty() {
        value.push_str(&format!("; banned CPUs {}", banned));
    }
    if oneshot || exact {
        return vec![row.status(Status::Ok, value)];
    }
    let step = Step::set(
        "irqbalance",
        Phase::Irqbalance,
        Target::Service {
            name: "irqbalance".into(),
        },
        "inactive",
    );
    vec![row.status(Status::Warn, value).steps(vec![step])]
}

const WHY_SOFTIRQ: &str = "NET_RX softirqs on one CPU cap the host at one core's packet rate (NTT talk: softirq only on node 0)";

pub(super) fn softirq_spread(facts: &Facts) -> Vec<Row> {
    let row = Row::new("softirq-spread", "host", WHY_SOFTIRQ).from("/proc/softirqs NET_RX");
    let parse = |t: Result<&str, crate::fs::FsError>| -> Result<Vec<(usize, u64)>, String> {
        let t = t.map_err(|e| e.to_string())?;
        let s = softirqs::parse(t).map_err(|e| e.to_string())?;
        let r = s.row("NET_RX").ok_or("no NET_RX row")?;
        Ok(s.cpus.iter().copied().zip(r.iter().copied()).collect())
    };
    let (counts, window) = match &facts.sample {
        Some(s) => {
            let get = |m: &std::collections::BTreeMap<String, super::facts::Text>| {
                parse(match m.get("/proc/softirqs") {
                    Some(Ok(t)) => Ok(t.as_str()),
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(crate::fs::FsError {
                        path: "/proc/softirqs".into(),
                        errno: None,
                        message: "not sampled".into(),
                    }),
                })
            };
            match (get(&s.before), get(&s.after)) {
                (Ok(a), Ok(b)) => (
                    Ok(a.iter()
                        .zip(&b)
                        .map(|((c, x), (_, y))| (*c, y.saturating_sub(*x)))
                        .collect()),
                    format!("over {:.1} s", s.seconds),
                ),
                (Err(e), _) | (_, Err(e)) => (Err(e), String::new()),
            }
        }
        None => (
            parse(facts.file("/proc/softirqs")),
            "since boot".to_string(),
        ),
    };
    let counts: Vec<(usize, u64)> = match counts {
        Ok(c) => c,
        Err(e) => return vec![row.na(e)],
    };
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    if counts.len() < 2 {
        return vec![row.na("one CPU: nothing to spread")];
    }
    if total < 1000 {
        return vec![row.na(format!(
            "{total} NET_RX softirqs {window}: too little traffic to judge"
        ))];
    }
    let mut shares: Vec<(usize, f64)> = counts
        .iter()
        .map(|(c, n)| (*c, *n as f64 * 100.0 / total as f64))
        .collect();
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    let busy = shares.iter().filter(|(_, s)| *s >= 5.0).count();
    let top: Vec<String> = shares
        .iter()
        .take(4)
        .map(|(c, s)| format!("cpu{c} {s:.0}%"))
        .collect();
    let value = format!(
        "{total} NET_RX {window}: {} ({busy} of {} CPUs above 5%)",
        top.join(" "),
        counts.len()
    );
    if shares[0].1 > 50.0 && busy * 2 < counts.len() {
        vec![row
            .status(Status::Warn, value)
            .fix("spread queues: see the rps and irq-affinity rows")]
    } else {
        vec![row.status(Status::Ok, value)]
    }
}

/// Reads every queue's mask; None (with the error) if one cannot be read.
fn masks(queues: &[Queue]) -> Result<Vec<CpuSet>, String> {
    queues
        .iter()
        .map(|q| match &q.mask {
            Ok(t) => CpuSet::from_mask_hex(t).map_err(|e| format!("{}: {e}", q.name)),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

const WHY_RPS: &str = "with fewer receiving queues than CPUs, RPS hashes flows to more CPUs in software (NTT talk: RPS for queues RSS cannot reach)";

pub(super) fn rps(facts: &Facts) -> Vec<Row> {
    let ncpu = facts.online().len();
    let rfs = facts
        .file("/proc/sys/net/core/rps_sock_flow_entries")
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|_| "n/a".into());
    per_iface(facts, "rps", WHY_RPS, |i, row| {
        let row = row.from(format!("/sys/class/net/{}/queues/rx-*/rps_cpus", i.name));
        if i.rx.is_empty() {
            return row.na("no rx queues in sysfs");
        }
        let sets = match masks(&i.rx) {
            Ok(s) => s,
            Err(e) => return row.na(e),
        };
        // Queues that receive: those in the RSS table, or only the first when the NIC has
        // no indirection table to spread with.
        let receiving: Vec<usize> = match &i.rss {
            Ok(t) if !t.is_empty() => (0..i.rx.len())
                .filter(|q| t.contains(&(*q as u32)))
                .collect(),
            _ => vec![0],
        };
        let with_rps = sets.iter().filter(|s| !s.is_empty()).count();
        let value = format!(
            "{} of {} rx queues receive (RSS) for {ncpu} CPUs; RPS set on {with_rps}; rps_sock_flow_entries {rfs}",
            receiving.len(),
            i.rx.len()
        );
        if receiving.len() >= ncpu || with_rps > 0 {
            return row.status(Status::Ok, value);
        }
        let local = local_cpus(facts, i);
        let plan = spread(&local, receiving.len());
        let steps = receiving
            .iter()
            .zip(plan)
            .map(|(q, set)| {
                Step::set(
                    "rps",
                    Phase::Steering,
                    Target::file(
                        format!(
                            "/sys/class/net/{}/queues/{}/rps_cpus",
                            i.name, i.rx[*q].name
                        ),
                        Kind::Mask,
                    ),
                    set.to_mask_hex(),
                )
                .on(&i.name)
            })
            .collect();
        row.status(Status::Warn, value).steps(steps)
    })
}

const WHY_XPS: &str = "XPS gives each CPU its own tx queue and qdisc lock; unset on a multi-queue NIC cost 5x (NTT talk: 5.05M -> 1.09M tps)";

pub(super) fn xps(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "xps", WHY_XPS, |i, row| {
        let row = row.from(format!("/sys/class/net/{}/queues/tx-*/xps_cpus", i.name));
        if i.tx.len() < 2 {
            return row.status(
                Status::Ok,
                format!("{} tx queue: nothing to choose", i.tx.len()),
            );
        }
        let sets = match masks(&i.tx) {
            Ok(s) => s,
            Err(e) => return row.na(e),
        };
        let unset = sets.iter().filter(|s| s.is_empty()).count();
        // What matters is that every CPU has its own queue to send on; queues beyond the
        // CPU count may stay without a mask.
        let online = facts.online();
        let covered: CpuSet = sets.iter().flatten().copied().collect();
        let missing: CpuSet = online.difference(&covered).copied().collect();
        let mut value = format!(
            "{} of {} tx queues have an XPS mask",
            i.tx.len() - unset,
            i.tx.len()
        );
        if missing.is_empty() {
            return row.status(Status::Ok, format!("{value}; every CPU has a queue"));
        }
        value.push_str(&format!("; CPUs {} have no queue", missing));
        let plan = spread(&facts.online(), i.tx.len());
        let steps =
            i.tx.iter()
                .zip(plan)
                .zip(&sets)
                .filter(|((_, want), have)| *have != want)
                .map(|((q, want), _)| {
                    Step::set(
                        "xps",
                        Phase::Steering,
                        Target::file(
                            format!("/sys/class/net/{}/queues/{}/xps_cpus", i.name, q.name),
                            Kind::Mask,
                        ),
                        want.to_mask_hex(),
                    )
                    .on(&i.name)
                })
                .collect();
        let status = if unset == i.tx.len() {
            Status::Bad
        } else {
            Status::Warn
        };
        row.status(status, value).steps(steps)
    })
}
