//! The BPF way: the drop program (`firehose_sys::trace::prog::drops`) on `skb:kfree_skb`,
//! counting into a per-CPU hash. Offsets of the record come from its format; offsets into
//! `sk_buff`, `sock`, `socket` and `net` come from BTF. Without BTF the program still counts
//! by reason and location, and the report says what it cannot tell.

use super::{Counts, NEEDS};
use crate::error::ObserveError;
use firehose_host::kernel::btf::Btf;
use firehose_host::kernel::tracepoint::Format;
use firehose_sys::bpf_map::{MapKind, PerCpuMap};
use firehose_sys::trace::perf::{attach_tracepoint, TracepointLink};
use firehose_sys::trace::prog::{
    self, DropKey, DropSpec, Field, NetLayout, SkbLayout, SockLayout, DROP_KEY_SIZE,
};
use firehose_sys::trace::{self, ProgStats, StatsEnabled, TraceProg};
use std::os::fd::AsRawFd;

/// Distinct (reason, location, port, socket, namespace) keys the map holds; drops with a
/// new key once it is full are counted as unkeyed.
pub const MAX_KEYS: u32 = 16384;

/// The program's name, as `bpftool prog` shows it.
pub const PROG_NAME: &str = "fh_drops";

pub(crate) struct BpfDrops {
    prog: TraceProg,
    _link: TracepointLink,
    map: PerCpuMap,
    overflow: PerCpuMap,
    _stats: Option<StatsEnabled>,
}

fn field(f: &Format, name: &str) -> Option<Field> {
    let d = f.field(name)?;
    matches!(d.size, 1 | 2 | 4 | 8).then_some(Field {
        offset: d.offset,
        size: d.size as u8,
    })
}

/// The kernel-structure offsets, from BTF, and what is missing.
fn layouts(limits: &mut Vec<String>) -> (Option<SkbLayout>, Option<SockLayout>, Option<NetLayout>) {
    let data = match std::fs::read("/sys/kernel/btf/vmlinux") {
        Ok(d) => d,
        Err(e) => {
            limits.push(format!(
                "no BTF (/sys/kernel/btf/vmlinux: {e}): no port, socket or namespace per drop"
            ));
            return (None, None, None);
        }
    };
    let btf = match Btf::parse(&data) {
        Ok(b) => b,
        Err(e) => {
            limits.push(format!("{e}: no port, socket or namespace per drop"));
            return (None, None, None);
        }
    };
    let o = |s: &str, m: &str| btf.offset_of(s, m);
    let skb = match (
        o("sk_buff", "sk"),
        o("sk_buff", "head"),
        o("sk_buff", "network_header"),
    ) {
        (Some(sk), Some(head), Some(nh)) => Some(SkbLayout {
            sk,
            head,
            network_header: nh,
        }),
        _ => {
            limits.push("BTF lacks sk_buff.sk/head/network_header: no port of a packet".into());
            None
        }
    };
    let sock = match (
        o("sock", "__sk_common.skc_num"),
        o("sock", "sk_socket"),
        o("socket_alloc", "vfs_inode"),
        o("socket_alloc", "socket"),
        o("inode", "i_ino"),
        o("sock", "__sk_common.skc_net"),
    ) {
        (Some(num), Some(socket), Some(vfs), Some(sa), Some(ino), Some(net)) => Some(SockLayout {
            num,
            socket,
            ino: vfs - sa + ino,
            net,
        }),
        _ => {
            limits.push("BTF lacks the socket fields: no socket or process per drop".into());
            None
        }
    };
    let net = match (
        o("sk_buff", "dev"),
        o("net_device", "nd_net"),
        o("net", "ns.inum"),
    ) {
        (Some(dev), Some(nd_net), Some(inum)) if sock.is_some() => {
            Some(NetLayout { dev, nd_net, inum })
        }
        _ => {
            limits.push("BTF lacks the namespace fields: no network namespace per drop".into());
            None
        }
    };
    (skb, sock, net)
}

impl BpfDrops {
    pub(crate) fn start(
        f: &Format,
        id: u64,
        prog_stats: bool,
    ) -> Result<(BpfDrops, Vec<String>), ObserveError> {
        let needs = NEEDS[1];
        let mut limits = Vec::new();
        let rx_sk = field(f, "rx_sk");
        if rx_sk.is_none() {
            limits.push(
                "skb:kfree_skb has no rx_sk (kernels before 6.12): a receive drop's socket is known only after early demux"
                    .into(),
            );
        }
        let (skb, sock, net) = layouts(&mut limits);
        let spec = DropSpec {
            reason: field(f, "reason").expect("checked by the caller"),
            location: field(f, "location").expect("checked by the caller"),
            skbaddr: field(f, "skbaddr").expect("checked by the caller"),
            protocol: field(f, "protocol"),
            rx_sk,
            skb,
            sock,
            net,
        };
        let map = PerCpuMap::new(MapKind::PerCpuHash, DROP_KEY_SIZE, MAX_KEYS, "fh_drops")
            .map_err(|e| ObserveError::from_sys(e, needs))?;
        let overflow = PerCpuMap::new(MapKind::PerCpuArray, 4, 1, "fh_drops_full")
            .map_err(|e| ObserveError::from_sys(e, needs))?;
        let insns = prog::drops(&spec, map.as_raw_fd(), overflow.as_raw_fd());
        let prog = trace::load(&insns, PROG_NAME).map_err(|e| ObserveError::from_sys(e, needs))?;
        let stats = if prog_stats {
            Some(trace::enable_stats().map_err(|e| ObserveError::from_sys(e, needs))?)
        } else {
            None
        };
        let link = attach_tracepoint(prog.as_raw_fd(), id, "skb:kfree_skb")
            .map_err(|e| ObserveError::from_sys(e, needs))?;
        Ok((
            BpfDrops {
                prog,
                _link: link,
                map,
                overflow,
                _stats: stats,
            },
            limits,
        ))
    }

    pub(crate) fn counts(&mut self) -> Result<Counts, ObserveError> {
        let mut c = Counts::default();
        for (k, v) in self.map.sums()? {
            if let Some(key) = DropKey::from_bytes(&k) {
                *c.by_key.entry(key).or_default() += v;
            }
        }
        c.unkeyed = self.overflow.sum(&0u32.to_ne_bytes())?;
        c.missed = self.stats().map_or(0, |s| s.recursion_misses);
        Ok(c)
    }

    pub(crate) fn stats(&self) -> Option<ProgStats> {
        self.prog.stats().ok()
    }
}
