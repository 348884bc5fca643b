//! The host's receive-drop counters around a run: /proc/net/snmp and snmp6 (Udp
//! RcvbufErrors, InErrors) and /proc/net/softnet_stat (dropped, time_squeeze), as deltas.

use firehose_host::procfs::{self, snmp, softnet};

/// Host-wide counters at one moment (those a kernel does not print read as 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostDrops {
    /// Udp + Udp6 RcvbufErrors: datagrams dropped because a receive buffer was full.
    pub udp_rcvbuf_errors: u64,
    /// Udp + Udp6 InErrors (includes RcvbufErrors).
    pub udp_in_errors: u64,
    /// softnet_stat `dropped`, all CPUs: backlog (netdev_max_backlog) overflows.
    pub softnet_dropped: u64,
    /// softnet_stat `time_squeeze`, all CPUs: NET_RX runs out of budget with work left.
    pub softnet_time_squeeze: u64,
}

impl HostDrops {
    /// Reads the counters now; a file this kernel lacks counts as zeros.
    pub fn read() -> HostDrops {
        let mut d = HostDrops::default();
        for (path, parse) in [
            ("/proc/net/snmp", snmp::parse_udp as fn(&str) -> _),
            ("/proc/net/snmp6", snmp::parse_udp6),
        ] {
            if let Ok(u) = procfs::read(path, parse) {
                d.udp_rcvbuf_errors += u.rcvbuf_errors;
                d.udp_in_errors += u.in_errors;
            }
        }
        if let Ok(rows) = procfs::read("/proc/net/softnet_stat", softnet::parse) {
            d.softnet_dropped = rows.iter().map(|r| r.dropped).sum();
            d.softnet_time_squeeze = rows.iter().map(|r| r.time_squeeze).sum();
        }
        d
    }

    /// The increase from `before` to `self` (counters only grow; a reset reads as 0).
    pub fn since(&self, before: &HostDrops) -> HostDrops {
        HostDrops {
            udp_rcvbuf_errors: self
                .udp_rcvbuf_errors
                .saturating_sub(before.udp_rcvbuf_errors),
            udp_in_errors: self.udp_in_errors.saturating_sub(before.udp_in_errors),
            softnet_dropped: self.softnet_dropped.saturating_sub(before.softnet_dropped),
            softnet_time_squeeze: self
                .softnet_time_squeeze
                .saturating_sub(before.softnet_time_squeeze),
        }
    }
}
