//! The environment recorded with every result: without it a figure cannot be compared.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Sysctls that change UDP transaction rates (the NTT talk's and the NFV sheet's).
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.core.netdev_max_backlog",
    "net.core.netdev_budget",
    "net.core.netdev_budget_usecs",
    "net.core.busy_poll",
    "net.core.busy_read",
    "net.core.rps_sock_flow_entries",
    "net.ipv4.conf.all.rp_filter",
    "net.ipv4.conf.all.accept_local",
    "net.ipv4.ip_no_pmtu_disc",
    "net.ipv4.udp_mem",
    "net.ipv4.udp_rmem_min",
    "kernel.numa_balancing",
];

/// Kernel modules whose mere presence costs per-packet work (the talk's iptables step).
pub const MODULES: &[&str] = &["ip_tables", "iptable_filter", "nf_tables", "nf_conntrack"];

/// Host facts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub kernel: String,
    pub cpu_model: String,
    pub nproc: usize,
    pub sysctls: BTreeMap<String, String>,
    /// Of [`MODULES`], the ones loaded.
    pub modules_loaded: Vec<String>,
    /// /proc/loadavg when the run started: other work on a shared host shows here.
    pub loadavg: String,
    pub firehose_version: String,
}

/// The first `model name` of /proc/cpuinfo (or `Hardware`/`cpu model` on other arches).
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        matches!(k.trim(), "model name" | "Hardware" | "cpu model").then(|| v.trim().to_string())
    })
}

/// Names of loaded modules (first column of /proc/modules) among `wanted`.
pub fn loaded_modules(proc_modules: &str, wanted: &[&str]) -> Vec<String> {
    proc_modules
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|m| wanted.contains(m))
        .map(str::to_string)
        .collect()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

impl Environment {
    /// The facts a one-line summary shows: kernel, cpu, nproc, loadavg.
    pub fn brief(&self) -> Vec<(&'static str, String)> {
        vec![
            ("kernel", self.kernel.clone()),
            ("cpu", self.cpu_model.clone()),
            ("nproc", self.nproc.to_string()),
            ("loadavg", self.loadavg.clone()),
        ]
    }

    /// Reads the host's facts; what cannot be read is recorded as "unknown".
    pub fn capture() -> Environment {
        let sysctls = SYSCTLS
            .iter()
            .map(|k| {
                let path = format!("/proc/sys/{}", k.replace('.', "/"));
                let v = read(&path)
                    .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                    .unwrap_or_else(|| "unknown".into());
                (k.to_string(), v)
            })
            .collect();
        Environment {
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            cpu_model: read("/proc/cpuinfo")
                .and_then(|t| cpu_model(&t))
                .unwrap_or_else(|| "unknown".into()),
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            sysctls,
            modules_loaded: read("/proc/modules")
                .map(|t| loaded_modules(&t, MODULES))
                .unwrap_or_default(),
            loadavg: read("/proc/loadavg").unwrap_or_else(|| "unknown".into()),
            firehose_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_and_modules() {
        let info = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2650 v3 @ 2.30GHz\n";
        assert_eq!(
            cpu_model(info).unwrap(),
            "Intel(R) Xeon(R) CPU E5-2650 v3 @ 2.30GHz"
        );
        assert_eq!(cpu_model("processor : 0\n"), None);
        let mods = "ip_tables 32768 1 iptable_filter, Live 0x0\nveth 40960 0 - Live 0x0\n";
        assert_eq!(loaded_modules(mods, MODULES), vec!["ip_tables".to_string()]);
    }

    #[test]
    fn capture_reads_this_host() {
        let e = Environment::capture();
        assert_ne!(e.kernel, "unknown");
        assert!(e.nproc >= 1);
        assert_eq!(e.sysctls.len(), SYSCTLS.len());
        assert_ne!(e.sysctls["net.core.rmem_max"], "unknown");
        assert_ne!(e.loadavg, "unknown");
    }
}
