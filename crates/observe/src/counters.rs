//! The host's loss counters beside the drop tracepoint: softnet backlog drops and squeezes
//! per CPU, the UDP counters of /proc/net/snmp and snmp6, each NIC's loss counters (sysfs
//! statistics and the driver's per-queue ones), and the AF_XDP sockets' ring statistics.
//! Read twice and subtracted: only what changed over the window is reported.

use firehose_host::nic_stats::{self, SYSFS_LOSS};
use firehose_host::procfs::snmp::{self, UdpCounters};
use firehose_host::procfs::softnet::{self, SoftnetRow};
use firehose_sys::xsk_diag::{self, XskInfo, XskStats};
use std::collections::BTreeMap;

/// One reading of every counter.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub softnet: Vec<SoftnetRow>,
    pub udp: UdpCounters,
    pub udp6: UdpCounters,
    /// (interface, counter) -> value, for loss counters only.
    pub nic: BTreeMap<(String, String), u64>,
    pub xsk: Vec<XskInfo>,
    /// What could not be read, said once.
    pub notes: Vec<String>,
}

/// One CPU's softnet change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SoftnetDelta {
    pub cpu: usize,
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    pub flow_limit_count: u64,
}

/// One NIC counter's change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NicDelta {
    pub iface: String,
    pub counter: String,
    pub queue: Option<u32>,
    pub dir: Option<&'static str>,
    pub delta: u64,
}

/// One AF_XDP socket's change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct XskDelta {
    pub inode: u32,
    pub iface: Option<String>,
    pub queue: u32,
    pub stats: XskStats,
}

/// What changed between two snapshots (only nonzero entries).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Delta {
    pub softnet: Vec<SoftnetDelta>,
    pub udp: UdpCounters,
    pub udp6: UdpCounters,
    pub nic: Vec<NicDelta>,
    pub xsk: Vec<XskDelta>,
}

/// The interfaces of this namespace (every one under /sys/class/net).
pub fn interfaces() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Reads every counter; `ifaces` empty means every interface.
pub fn read(ifaces: &[String]) -> Snapshot {
    let mut s = Snapshot::default();
    match firehose_host::procfs::read("/proc/net/softnet_stat", softnet::parse) {
        Ok(v) => s.softnet = v,
        Err(e) => s.notes.push(e.to_string()),
    }
    match firehose_host::procfs::read("/proc/net/snmp", snmp::parse_udp) {
        Ok(v) => s.udp = v,
        Err(e) => s.notes.push(e.to_string()),
    }
    if let Ok(v) = firehose_host::procfs::read("/proc/net/snmp6", snmp::parse_udp6) {
        s.udp6 = v;
    }
    let all;
    let ifaces = if ifaces.is_empty() {
        all = interfaces();
        &all
    } else {
        ifaces
    };
    let eth = firehose_sys::ethtool::Ethtool::new().ok();
    for iface in ifaces {
        for name in SYSFS_LOSS {
            let path = format!("/sys/class/net/{iface}/statistics/{name}");
            if let Ok(v) = std::fs::read_to_string(&path) {
                if let Ok(v) = v.trim().parse() {
                    s.nic.insert((iface.clone(), name.to_string()), v);
                }
            }
        }
        if let Some(Ok(stats)) = eth.as_ref().map(|e| e.stats(iface)) {
            for (name, v) in stats {
                if nic_stats::loss_counter(&name).is_some() {
                    s.nic.insert((iface.clone(), format!("ethtool {name}")), v);
                }
            }
        }
    }
    match xsk_diag::xdp_sockets() {
        Ok(v) => s.xsk = v,
        Err(e) if e.errno() == Some(2) => s.notes.push(
            "AF_XDP ring statistics: this kernel has no sock_diag for AF_XDP (CONFIG_XDP_SOCKETS_DIAG)"
                .into(),
        ),
        Err(e) => s.notes.push(format!("AF_XDP ring statistics: {e}")),
    }
    s
}

impl Snapshot {
    /// What changed from `before` to this snapshot.
    pub fn since(&self, before: &Snapshot) -> Delta {
        let softnet = softnet::delta(&before.softnet, &self.softnet)
            .into_iter()
            .filter(|r| r.dropped + r.time_squeeze + r.flow_limit_count > 0 || r.processed > 0)
            .map(|r| SoftnetDelta {
                cpu: r.cpu,
                processed: r.processed,
                dropped: r.dropped,
                time_squeeze: r.time_squeeze,
                flow_limit_count: r.flow_limit_count,
            })
            .collect();
        let nic = self
            .nic
            .iter()
            .filter_map(|((iface, counter), v)| {
                let d = v.saturating_sub(*before.nic.get(&(iface.clone(), counter.clone()))?);
                let bare = counter.strip_prefix("ethtool ").unwrap_or(counter);
                let c = nic_stats::loss_counter(bare);
                (d > 0).then(|| NicDelta {
                    iface: iface.clone(),
                    counter: counter.clone(),
                    queue: c.as_ref().and_then(|c| c.queue),
                    dir: c.and_then(|c| c.dir),
                    delta: d,
                })
            })
            .collect();
        let xsk = self
            .xsk
            .iter()
            .filter_map(|x| {
                let now = x.stats?;
                let old = before
                    .xsk
                    .iter()
                    .find(|o| o.inode == x.inode)
                    .and_then(|o| o.stats)
                    .unwrap_or_default();
                let d = XskStats {
                    rx_dropped: now.rx_dropped.saturating_sub(old.rx_dropped),
                    rx_invalid: now.rx_invalid.saturating_sub(old.rx_invalid),
                    rx_ring_full: now.rx_ring_full.saturating_sub(old.rx_ring_full),
                    fill_ring_empty: now.fill_ring_empty.saturating_sub(old.fill_ring_empty),
                    tx_invalid: now.tx_invalid.saturating_sub(old.tx_invalid),
                    tx_ring_empty: now.tx_ring_empty.saturating_sub(old.tx_ring_empty),
                };
                (d != XskStats::default()).then(|| XskDelta {
                    inode: x.inode,
                    iface: crate::xdp::iface_name(x.ifindex),
                    queue: x.queue,
                    stats: d,
                })
            })
            .collect();
        Delta {
            softnet,
            udp: self.udp.since(&before.udp),
            udp6: self.udp6.since(&before.udp6),
            nic,
            xsk,
        }
    }
}
