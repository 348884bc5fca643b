//! Gathering: every file and ethtool answer the checks look at, read once at the edge. The
//! checks are pure functions over [`Facts`], so a test can gather from a fake tree (a
//! [`HostFs`] rooted at a sample directory and a fake [`Nic`]).

use crate::fs::{FsError, HostFs};
use crate::nic::{Channels, Feature, Napi, Nic, NicError};
use crate::procfs::socket_owners::{owners_in, Owner};
use crate::procfs::udp_sockets;
use crate::text;
use firehose_sys::clock::KernelClock;
use firehose_sys::cpu::CpuSet;
use std::collections::BTreeMap;
use std::time::Duration;

/// A file's text or why it could not be read.
pub type Text = Result<String, FsError>;

/// Host-wide files the checks read, besides the per-interface and per-CPU ones.
pub const HOST_FILES: &[&str] = &[
    "/proc/cmdline",
    "/proc/interrupts",
    "/proc/modules",
    "/proc/net/ip_tables_names",
    "/proc/softirqs",
    "/proc/stat",
    "/proc/uptime",
    "/proc/net/snmp",
    "/proc/net/softnet_stat",
    "/proc/net/udp",
    "/proc/net/udp6",
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/net/core/rmem_max",
    "/proc/sys/net/core/rmem_default",
    "/proc/sys/net/core/wmem_max",
    "/proc/sys/net/core/wmem_default",
    "/proc/sys/net/core/netdev_max_backlog",
    "/proc/sys/net/core/netdev_budget",
    "/proc/sys/net/core/netdev_budget_usecs",
    "/proc/sys/net/core/busy_poll",
    "/proc/sys/net/core/busy_read",
    "/proc/sys/net/core/rps_sock_flow_entries",
    "/proc/sys/net/ipv4/udp_mem",
    "/proc/sys/net/ipv4/tcp_rmem",
    "/proc/sys/net/ipv4/tcp_wmem",
    "/proc/sys/net/core/optmem_max",
    "/proc/sys/net/ipv4/conf/all/rp_filter",
    "/proc/sys/net/ipv4/conf/all/accept_local",
    "/proc/sys/net/netfilter/nf_conntrack_count",
    "/proc/sys/net/netfilter/nf_conntrack_max",
    "/sys/fs/selinux/enforce",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/isolated",
    "/sys/devices/system/cpu/nohz_full",
    "/sys/devices/system/cpu/smt/active",
    "/etc/default/irqbalance",
    "/etc/sysconfig/irqbalance",
    "/etc/audit/audit.rules",
];

/// One receive or transmit queue of an interface.
#[derive(Debug, Clone)]
pub struct Queue {
    /// `rx-0`, `tx-3`.
    pub name: String,
    /// rps_cpus of an rx queue or xps_cpus of a tx queue.
    pub mask: Text,
}

/// One interrupt of a NIC and where it may run.
#[derive(Debug, Clone)]
pub struct Irq {
    pub irq: u32,
    /// The action name from /proc/interrupts.
    pub name: String,
    pub affinity_list: Text,
    pub affinity_hint: Text,
    pub effective_list: Text,
}

/// What was read about one network interface.
#[derive(Debug, Clone)]
pub struct Iface {
    pub name: String,
    /// True when /sys/class/net/NAME/device exists (a NIC rather than a software device).
    pub has_device: bool,
    pub driver: Option<String>,
    pub numa_node: Text,
    pub local_cpulist: Text,
    pub rx: Vec<Queue>,
    pub tx: Vec<Queue>,
    pub channels: Result<Channels, NicError>,
    pub rss: Result<Vec<u32>, NicError>,
    pub udp4_hash: Result<u64, NicError>,
    pub gro: Result<bool, NicError>,
    pub gso: Result<bool, NicError>,
    /// Its NAPI instances and their busy-polling settings (netdev netlink).
    pub napis: Result<Vec<Napi>, NicError>,
    /// The NIC's queue interrupts (its MSI vectors minus config/event ones).
    pub irqs: Vec<Irq>,
    pub rp_filter: Text,
    pub accept_local: Text,
}

/// One CPU's frequency governor, SMT siblings and idle states.
#[derive(Debug, Clone)]
pub struct Cpu {
    pub id: usize,
    pub governor: Text,
    pub siblings: Text,
    /// (state dir, name, exit latency in us, disabled) for each cpuidle state.
    pub idle_states: Vec<(String, String, u64, bool)>,
}

/// A running process the checks care about (irqbalance, auditd).
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    /// Arguments, NUL separators turned into spaces.
    pub cmdline: String,
}

/// A kernel thread (a child of kthreadd) as /proc shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelThread {
    pub pid: u32,
    /// /proc/<pid>/stat.
    pub stat: String,
    /// /proc/<pid>/status (for Cpus_allowed_list).
    pub status: String,
}

/// The counter files at both ends of a `--sample` window.
#[derive(Debug, Clone)]
pub struct Sample {
    pub seconds: f64,
    /// /proc/stat's unit (USER_HZ) on the sampled host.
    pub ticks_per_s: u64,
    pub before: BTreeMap<String, Text>,
    pub after: BTreeMap<String, Text>,
    /// /proc/net/udp and udp6 texts read every 100 ms during the window (queue occupancy).
    pub polls: Vec<(Text, Text)>,
}

/// Everything the checks look at.
#[derive(Debug, Clone)]
pub struct Facts {
    pub files: BTreeMap<String, Text>,
    pub ifaces: Vec<Iface>,
    pub cpus: Vec<Cpu>,
    pub processes: Result<Vec<Process>, FsError>,
    /// /etc/audit/rules.d/*.rules texts.
    pub audit_rules: Vec<(String, Text)>,
    pub sample: Option<Sample>,
    /// `--port`: the UDP port a server listens on.
    pub port: Option<u16>,
    /// The kernel's drops by reason over the sample window, as `firehose drops` counts them
    /// (skb:kfree_skb); the cli attaches the watch around the sample (this crate only
    /// judges): `None` when not watched, `Err` with the reason the kernel refused it.
    pub drop_reasons: Option<Result<DropReasons, String>>,
    /// The kernel clock (adjtimex), or why it could not be read; `None` when gathered
    /// from a tree other than the running host's.
    pub clock: Option<Result<KernelClock, String>>,
    /// Who holds the UDP sockets on the NTP port and on `--port`, by socket inode.
    pub udp_owners: BTreeMap<u64, Owner>,
    /// The kernel threads and what /proc says of each.
    pub kernel_threads: Result<Vec<KernelThread>, FsError>,
    /// /proc's clock-tick unit (USER_HZ) on this host.
    pub ticks_per_s: u64,
    /// The CPUs the `--port` (and NTP) sockets' owners pin threads to (a thread allowed on
    /// one CPU only, as `serve --cpus` places workers); empty when none is pinned.
    pub server_cpus: CpuSet,
}

/// What the drop watch saw over the sample window.
#[derive(Debug, Clone, PartialEq)]
pub struct DropReasons {
    /// `bpf` or `perf`.
    pub via: String,
    /// Drops at `--port` (or anywhere on the host without it).
    pub total: u64,
    /// `137 NO_SOCKET at __udp4_lib_rcv, port 9101`, busiest first.
    pub lines: Vec<String>,
}

impl Facts {
    /// Facts with nothing read, for a check's unit tests to fill in.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Facts {
            files: BTreeMap::new(),
            ifaces: Vec::new(),
            cpus: Vec::new(),
            processes: Ok(Vec::new()),
            audit_rules: Vec::new(),
            sample: None,
            port: None,
            drop_reasons: None,
            clock: None,
            udp_owners: BTreeMap::new(),
            kernel_threads: Ok(Vec::new()),
            ticks_per_s: 100,
            server_cpus: CpuSet::new(),
        }
    }

    /// The text of a host file gathered from [`HOST_FILES`].
    pub fn file(&self, path: &str) -> Result<&str, FsError> {
        match self.files.get(path) {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(FsError {
                path: path.to_string(),
                errno: None,
                message: "not gathered".into(),
            }),
        }
    }

    /// The online CPUs (from /sys, else the CPU lines of /proc/stat).
    pub fn online(&self) -> CpuSet {
        if let Some(set) = self
            .file("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|t| CpuSet::parse_list(t).ok())
        {
            return set;
        }
        self.file("/proc/stat")
            .ok()
            .and_then(|t| crate::procfs::stat::parse(t).ok())
            .map(|s| s.cpus.iter().map(|(c, _)| *c).collect())
            .unwrap_or_default()
    }
}

/// What to gather.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Interfaces to audit; empty means every interface with a device (a NIC).
    pub ifaces: Vec<String>,
    pub port: Option<u16>,
    /// Length of the live sample, if any.
    pub sample: Option<Duration>,
}

/// Files whose deltas the live checks compare.
pub const SAMPLED: &[&str] = &[
    "/proc/stat",
    "/proc/softirqs",
    "/proc/net/softnet_stat",
    "/proc/net/snmp",
    "/proc/net/udp",
    "/proc/net/udp6",
];

/// Reads everything the checks need. Never fails: what cannot be read is kept as an error.
pub fn gather(fs: &HostFs, nic: &dyn Nic, scope: &Scope) -> Facts {
    let sample = scope.sample.map(|d| take_sample(fs, d));
    let files: BTreeMap<String, Text> = HOST_FILES
        .iter()
        .map(|p| (p.to_string(), fs.read(p)))
        .collect();
    let interrupts = files
        .get("/proc/interrupts")
        .and_then(|t| t.as_ref().ok())
        .map(|t| text::parse_interrupts(t))
        .unwrap_or_default();
    let names = if scope.ifaces.is_empty() {
        fs.list("/sys/class/net")
            .unwrap_or_default()
            .into_iter()
            .filter(|n| fs.exists(&format!("/sys/class/net/{n}/device")))
            .collect()
    } else {
        scope.ifaces.clone()
    };
    let ifaces = names
        .iter()
        .map(|n| gather_iface(fs, nic, n, &interrupts))
        .collect();
    let cpus = gather_cpus(fs);
    let audit_rules = fs
        .list("/etc/audit/rules.d")
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.ends_with(".rules"))
        .map(|n| {
            let p = format!("/etc/audit/rules.d/{n}");
            let t = fs.read(&p);
            (p, t)
        })
        .collect();
    let clock = fs
        .is_live()
        .then(|| KernelClock::read().map_err(|e| e.to_string()));
    let udp_owners = gather_udp_owners(fs, &files, scope.port);
    let server_cpus = pinned_cpus(fs, udp_owners.values().map(|o| o.pid));
    Facts {
        files,
        ifaces,
        cpus,
        processes: gather_processes(fs),
        audit_rules,
        sample,
        port: scope.port,
        drop_reasons: None,
        clock,
        udp_owners,
        kernel_threads: gather_kernel_threads(fs),
        ticks_per_s: firehose_sys::cpu::clock_ticks_per_sec(),
        server_cpus,
    }
}

/// Every kernel thread: kthreadd (pid 2) and its children.
fn gather_kernel_threads(fs: &HostFs) -> Result<Vec<KernelThread>, FsError> {
    let mut out = Vec::new();
    for pid in pids(fs)? {
        let Ok(stat) = fs.read(&format!("/proc/{pid}/stat")) else {
            continue;
        };
        let kernel = pid == 2 || crate::procfs::pidstat::parse(&stat).is_ok_and(|s| s.ppid == 2);
        if !kernel {
            continue;
        }
        let Ok(status) = fs.read(&format!("/proc/{pid}/status")) else {
            continue;
        };
        out.push(KernelThread { pid, stat, status });
    }
    Ok(out)
}

/// The CPUs that threads of `pids` are pinned to, each a thread allowed on one CPU.
fn pinned_cpus(fs: &HostFs, pids: impl Iterator<Item = u32>) -> CpuSet {
    let mut set = CpuSet::new();
    for pid in pids {
        for tid in fs.list(&format!("/proc/{pid}/task")).unwrap_or_default() {
            let Ok(status) = fs.read(&format!("/proc/{pid}/task/{tid}/status")) else {
                continue;
            };
            let allowed = super::kthreads::allowed_cpus(&status).ok();
            if let Some(a) = allowed.filter(|a| a.len() == 1) {
                set.extend(a.iter().copied());
            }
        }
    }
    set
}

/// The UDP port NTP servers listen on.
pub const NTP_PORT: u16 = 123;

/// The owners of the UDP sockets bound to the NTP port or to `port`.
fn gather_udp_owners(
    fs: &HostFs,
    files: &BTreeMap<String, Text>,
    port: Option<u16>,
) -> BTreeMap<u64, Owner> {
    let inodes = ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|p| files.get(*p)?.as_ref().ok())
        .filter_map(|t| udp_sockets::parse(t).ok())
        .flatten()
        .filter(|s| s.local.port() == NTP_PORT || Some(s.local.port()) == port)
        .map(|s| s.inode)
        .collect();
    owners_in(fs, &inodes)
}

fn take_sample(fs: &HostFs, d: Duration) -> Sample {
    let read_all = || -> BTreeMap<String, Text> {
        SAMPLED
            .iter()
            .map(|p| (p.to_string(), fs.read(p)))
            .collect()
    };
    let start = std::time::Instant::now();
    let before = read_all();
    let mut polls = Vec::new();
    let tick = Duration::from_millis(100);
    while start.elapsed() + tick < d {
        std::thread::sleep(tick);
        polls.push((fs.read("/proc/net/udp"), fs.read("/proc/net/udp6")));
    }
    std::thread::sleep(d.saturating_sub(start.elapsed()));
    let after = read_all();
    Sample {
        seconds: start.elapsed().as_secs_f64(),
        ticks_per_s: firehose_sys::cpu::clock_ticks_per_sec(),
        before,
        after,
        polls,
    }
}

/// Interrupt names that are not queues (virtio config, mlx async/event, admin queues; the
/// vector named exactly like the interface is the link-status one).
fn is_queue_irq(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ![
        "config", "async", "event", "-cmd", "ctrl", "admin", "-lsc", "-other",
    ]
    .iter()
    .any(|w| n.contains(w))
}

fn gather_iface(fs: &HostFs, nic: &dyn Nic, name: &str, interrupts: &[text::IrqLine]) -> Iface {
    let base = format!("/sys/class/net/{name}");
    let queues = |prefix: &str, file: &str| -> Vec<Queue> {
        fs.list(&format!("{base}/queues"))
            .unwrap_or_default()
            .into_iter()
            .filter(|q| q.starts_with(prefix))
            .map(|q| Queue {
                mask: fs.read(&format!("{base}/queues/{q}/{file}")),
                name: q,
            })
            .collect()
    };
    // MSI vectors are on the PCI function: the device itself, or its parent for virtio.
    let msi = [
        format!("{base}/device/msi_irqs"),
        format!("{base}/device/../msi_irqs"),
    ]
    .into_iter()
    .find_map(|d| fs.list(&d).ok())
    .unwrap_or_default();
    // A virtio PCI function can carry several virtio devices; keep the vectors named after
    // this one (virtio2-input.0 for device virtio2) when names say so.
    let dev_name = fs.link_name(&format!("{base}/device")).ok();
    let irqs = msi
        .iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter_map(|irq| interrupts.iter().find(|l| l.irq == irq))
        .filter(|l| is_queue_irq(&l.name) && l.name != name)
        .filter(|l| match &dev_name {
            Some(d) if d.starts_with("virtio") => l.name.starts_with(&format!("{d}-")),
            _ => true,
        })
        .map(|l| {
            let p = format!("/proc/irq/{}", l.irq);
            Irq {
                irq: l.irq,
                name: l.name.clone(),
                affinity_list: fs.read(&format!("{p}/smp_affinity_list")),
                affinity_hint: fs.read(&format!("{p}/affinity_hint")),
                effective_list: fs.read(&format!("{p}/effective_affinity_list")),
            }
        })
        .collect();
    let conf = format!("/proc/sys/net/ipv4/conf/{}", name.replace('.', "/"));
    Iface {
        name: name.to_string(),
        has_device: fs.exists(&format!("{base}/device")),
        driver: fs.link_name(&format!("{base}/device/driver")).ok(),
        numa_node: device_file(fs, &base, "numa_node"),
        local_cpulist: device_file(fs, &base, "local_cpulist"),
        rx: queues("rx-", "rps_cpus"),
        tx: queues("tx-", "xps_cpus"),
        channels: nic.channels(name),
        rss: nic.rss_table(name),
        udp4_hash: nic.udp4_hash(name),
        gro: nic.feature(name, Feature::Gro),
        gso: nic.feature(name, Feature::Gso),
        napis: nic.napis(name),
        irqs,
        rp_filter: fs.read(&format!("{conf}/rp_filter")),
        accept_local: fs.read(&format!("{conf}/accept_local")),
    }
}

/// A device attribute, from the device or (virtio) from the PCI function above it.
fn device_file(fs: &HostFs, base: &str, file: &str) -> Text {
    fs.read(&format!("{base}/device/{file}"))
        .or_else(|_| fs.read(&format!("{base}/device/../{file}")))
        .map_err(|_| FsError {
            path: format!("{base}/device/{file}"),
            errno: Some(2),
            message: "No such file or directory (ENOENT)".into(),
        })
}

fn gather_cpus(fs: &HostFs) -> Vec<Cpu> {
    let online = fs
        .read("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| CpuSet::parse_list(&t).ok())
        .unwrap_or_default();
    online
        .into_iter()
        .map(|id| {
            let base = format!("/sys/devices/system/cpu/cpu{id}");
            let idle_states = fs
                .list(&format!("{base}/cpuidle"))
                .unwrap_or_default()
                .into_iter()
                .filter(|s| s.starts_with("state"))
                .filter_map(|s| {
                    let d = format!("{base}/cpuidle/{s}");
                    let name = fs.value(&format!("{d}/name")).ok()?;
                    let latency = fs.number(&format!("{d}/latency")).ok()?;
                    let disabled = fs.number(&format!("{d}/disable")).is_ok_and(|v| v != 0);
                    Some((s, name, latency, disabled))
                })
                .collect();
            Cpu {
                id,
                governor: fs.read(&format!("{base}/cpufreq/scaling_governor")),
                siblings: fs.read(&format!("{base}/topology/thread_siblings_list")),
                idle_states,
            }
        })
        .collect()
}

/// The process ids listed in /proc.
fn pids(fs: &HostFs) -> Result<Vec<u32>, FsError> {
    Ok(fs
        .list("/proc")?
        .iter()
        .filter_map(|e| e.parse().ok())
        .collect())
}

fn gather_processes(fs: &HostFs) -> Result<Vec<Process>, FsError> {
    let mut out = Vec::new();
    for pid in pids(fs)? {
        let Ok(comm) = fs.value(&format!("/proc/{pid}/comm")) else {
            continue;
        };
        if comm != "irqbalance" && comm != "auditd" {
            continue;
        }
        let cmdline = fs
            .read(&format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ")
            .trim()
            .to_string();
        out.push(Process { pid, comm, cmdline });
    }
    Ok(out)
}
