//! What `firehose top` shows, as data: a [`Reading`] of the host's counters, and a
//! [`Frame`] of rates between two readings (per-CPU time split, NET_RX/NET_TX softirqs,
//! packets per interface and queue, UDP in/out/errors, the busiest sockets, the top drop
//! reasons, and every `firehose serve --metrics` found). Sorting and filtering are here
//! too, so the screen, `--once` and `--json` show the same thing.

use crate::drops::report::{self, DropRow, Namer};
use crate::drops::{Counts, DropWatch};
use crate::servers::{self, Server};
use firehose_host::cputime::{cpu_split, StatReading};
use firehose_host::nic_stats;
use firehose_host::procfs::snmp::{self, UdpCounters};
use firehose_host::procfs::socket_owners::{self, Owner};
use firehose_host::procfs::softirqs::{self, Softirqs};
use firehose_host::procfs::udp_sockets::{self, UdpSocketRow};
use firehose_sys::cpu::clock_ticks_per_sec;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// One interface's counters.
#[derive(Debug, Clone, Default)]
pub struct IfaceReading {
    pub name: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    /// (queue, "rx"/"tx") -> packets, from the driver's per-queue counters.
    pub queues: BTreeMap<(u32, &'static str), u64>,
}

/// Everything read at one instant.
#[derive(Debug, Clone)]
pub struct Reading {
    pub at: Instant,
    /// /proc/stat and the moment it was read (the clock of its idle times).
    pub stat: Option<StatReading>,
    pub softirqs: Option<Softirqs>,
    pub udp: UdpCounters,
    pub ifaces: Vec<IfaceReading>,
    pub sockets: Vec<UdpSocketRow>,
    pub drops: Option<Counts>,
    pub servers: Vec<Server>,
}

/// One CPU's time split over the frame, in percent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CpuRow {
    pub cpu: usize,
    pub usr: f64,
    pub sys: f64,
    pub softirq: f64,
    pub irq: f64,
    pub idle: f64,
    pub net_rx_per_s: f64,
    pub net_tx_per_s: f64,
}

/// One queue's packet rate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueRow {
    pub queue: u32,
    pub dir: &'static str,
    pub pps: f64,
}

/// One interface's rates.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IfaceRow {
    pub iface: String,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub rx_dropped_per_s: f64,
    pub tx_dropped_per_s: f64,
    pub queues: Vec<QueueRow>,
}

/// UDP over IPv4 and IPv6 together, per second.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct UdpRates {
    pub in_per_s: f64,
    pub out_per_s: f64,
    pub in_errors_per_s: f64,
    pub rcvbuf_errors_per_s: f64,
    pub no_ports_per_s: f64,
    pub sndbuf_errors_per_s: f64,
}

/// One UDP socket: its queue now and its drops.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SocketRow {
    pub local: String,
    pub port: u16,
    pub rx_queue_bytes: u64,
    pub drops_total: u64,
    pub drops_per_s: f64,
    pub inode: u64,
    pub process: Option<Owner>,
}

/// A drop row with its rate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DropRate {
    pub per_s: f64,
    #[serde(flatten)]
    pub row: DropRow,
}

/// A firehose server's rates, from its metrics endpoint.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ServerRow {
    pub pid: u32,
    pub metrics: String,
    pub rx_pps: Option<f64>,
    pub tx_pps: Option<f64>,
    pub kernel_drops_per_s: Option<f64>,
    pub errors_per_s: Option<f64>,
    /// Why it could not be read, if it could not.
    pub error: Option<String>,
}

/// The rates between two readings.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Frame {
    pub seconds: f64,
    pub cpus: Vec<CpuRow>,
    pub ifaces: Vec<IfaceRow>,
    pub udp: UdpRates,
    pub sockets: Vec<SocketRow>,
    pub drops: Vec<DropRate>,
    pub servers: Vec<ServerRow>,
    pub notes: Vec<String>,
}

/// What the tables are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Sockets by drops per second, drop rows by rate (the default).
    #[default]
    Drops,
    /// Sockets by receive queue depth.
    Queue,
    /// Sockets and drop rows by port.
    Port,
}

impl SortBy {
    /// The next order, for a key that cycles.
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Drops => SortBy::Queue,
            SortBy::Queue => SortBy::Port,
            SortBy::Port => SortBy::Drops,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SortBy::Drops => "drops",
            SortBy::Queue => "queue",
            SortBy::Port => "port",
        }
    }
}

/// What a frame keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub port: Option<u16>,
    pub iface: Option<String>,
    pub sort: SortBy,
}

/// Reads the host; keeps the drop watch and what it learnt of sockets' owners.
pub struct Sampler {
    drops: Option<DropWatch>,
    /// The network namespace whose drops are shown (the sampler's own).
    netns: Option<u32>,
    namer: Option<Namer>,
    owners: BTreeMap<u64, Owner>,
    servers_seen: Option<Instant>,
    servers: Vec<(u32, String)>,
    pub notes: Vec<String>,
}

/// A driver's per-queue packet counter (`rx_queue_0_packets`, `rx-3.packets`,
/// `rx0_packets`): its queue and direction.
fn queue_packets(name: &str) -> Option<(u32, &'static str)> {
    let base = name.strip_suffix("packets")?;
    let c = nic_stats::queue_of(base)?;
    Some((c.queue?, c.dir?))
}

fn read_iface(name: &str, eth: Option<&firehose_sys::ethtool::Ethtool>) -> IfaceReading {
    let n = |f: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/statistics/{f}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    };
    let mut queues = BTreeMap::new();
    if let Some(Ok(stats)) = eth.map(|e| e.stats(name)) {
        for (k, v) in stats {
            if let Some((q, dir)) = queue_packets(&k) {
                queues.insert((q, dir), v);
            }
        }
    }
    IfaceReading {
        name: name.to_string(),
        rx_packets: n("rx_packets"),
        tx_packets: n("tx_packets"),
        rx_dropped: n("rx_dropped"),
        tx_dropped: n("tx_dropped"),
        queues,
    }
}

impl Sampler {
    /// A sampler; `drops` is the watch for the drop rows (None: shown as a note), kept to
    /// namespace `netns` (the one whose interfaces and sockets the other tables show).
    pub fn new(drops: Option<DropWatch>, netns: Option<u32>) -> Sampler {
        Sampler {
            netns,
            namer: drops.as_ref().map(|_| Namer::load()),
            drops,
            owners: BTreeMap::new(),
            servers_seen: None,
            servers: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Reads everything once.
    pub fn read(&mut self) -> Reading {
        let stat = StatReading::now().ok();
        let softirqs = firehose_host::procfs::read("/proc/softirqs", softirqs::parse).ok();
        let mut udp =
            firehose_host::procfs::read("/proc/net/snmp", snmp::parse_udp).unwrap_or_default();
        if let Ok(u6) = firehose_host::procfs::read("/proc/net/snmp6", snmp::parse_udp6) {
            udp.in_datagrams += u6.in_datagrams;
            udp.out_datagrams += u6.out_datagrams;
            udp.in_errors += u6.in_errors;
            udp.rcvbuf_errors += u6.rcvbuf_errors;
            udp.no_ports += u6.no_ports;
            udp.sndbuf_errors += u6.sndbuf_errors;
        }
        let eth = firehose_sys::ethtool::Ethtool::new().ok();
        let ifaces = crate::counters::interfaces()
            .iter()
            .map(|n| read_iface(n, eth.as_ref()))
            .collect();
        let mut sockets = Vec::new();
        for f in ["/proc/net/udp", "/proc/net/udp6"] {
            if let Ok(v) = firehose_host::procfs::read(f, udp_sockets::parse) {
                sockets.extend(v);
            }
        }
        let drops = self.drops.as_mut().and_then(|d| d.counts().ok());
        // Servers are looked for every 10 s; their counters are read every time.
        if self
            .servers_seen
            .is_none_or(|t| t.elapsed().as_secs() >= 10)
        {
            self.servers = servers::find();
            self.servers_seen = Some(Instant::now());
        }
        let servers = self
            .servers
            .iter()
            .map(|(pid, addr)| servers::scrape(*pid, addr))
            .collect();
        Reading {
            at: Instant::now(),
            stat,
            softirqs,
            udp,
            ifaces,
            sockets,
            drops,
            servers,
        }
    }

    /// The rates from `a` to `b`, kept and sorted by `view`, at most `rows` per table.
    pub fn frame(&mut self, a: &Reading, b: &Reading, view: &View, rows: usize) -> Frame {
        let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
        let rate = |new: u64, old: u64| new.saturating_sub(old) as f64 / secs;
        let cpus = cpu_rows(a, b, secs);
        let ifaces = b
            .ifaces
            .iter()
            .filter(|i| view.iface.as_ref().is_none_or(|f| *f == i.name))
            .map(|i| {
                let old = a.ifaces.iter().find(|o| o.name == i.name);
                let o = old.cloned().unwrap_or_default();
                IfaceRow {
                    iface: i.name.clone(),
                    rx_pps: rate(i.rx_packets, o.rx_packets),
                    tx_pps: rate(i.tx_packets, o.tx_packets),
                    rx_dropped_per_s: rate(i.rx_dropped, o.rx_dropped),
                    tx_dropped_per_s: rate(i.tx_dropped, o.tx_dropped),
                    queues: i
                        .queues
                        .iter()
                        .map(|(&(queue, dir), &v)| QueueRow {
                            queue,
                            dir,
                            pps: rate(v, o.queues.get(&(queue, dir)).copied().unwrap_or(v)),
                        })
                        .collect(),
                }
            })
            .collect();
        let u = b.udp.since(&a.udp);
        let per = |v: u64| v as f64 / secs;
        let udp = UdpRates {
            in_per_s: per(u.in_datagrams),
            out_per_s: per(u.out_datagrams),
            in_errors_per_s: per(u.in_errors),
            rcvbuf_errors_per_s: per(u.rcvbuf_errors),
            no_ports_per_s: per(u.no_ports),
            sndbuf_errors_per_s: per(u.sndbuf_errors),
        };
        let mut sockets: Vec<SocketRow> = b
            .sockets
            .iter()
            .filter(|s| view.port.is_none_or(|p| p == s.local.port()))
            .map(|s| {
                let old = a.sockets.iter().find(|o| o.inode == s.inode);
                SocketRow {
                    local: s.local.to_string(),
                    port: s.local.port(),
                    rx_queue_bytes: s.rx_queue,
                    drops_total: s.drops,
                    drops_per_s: rate(s.drops, old.map_or(s.drops, |o| o.drops)),
                    inode: s.inode,
                    process: None,
                }
            })
            .collect();
        match view.sort {
            SortBy::Drops => sockets.sort_by(|x, y| {
                y.drops_per_s
                    .total_cmp(&x.drops_per_s)
                    .then(y.rx_queue_bytes.cmp(&x.rx_queue_bytes))
                    .then(y.drops_total.cmp(&x.drops_total))
            }),
            SortBy::Queue => sockets.sort_by_key(|s| std::cmp::Reverse(s.rx_queue_bytes)),
            SortBy::Port => sockets.sort_by_key(|s| s.port),
        }
        sockets.truncate(rows);
        self.owners_of(&mut sockets);
        let drops = self.drop_rates(a, b, view, rows, secs);
        let servers = b
            .servers
            .iter()
            .map(|s| {
                let old = a.servers.iter().find(|o| o.pid == s.pid);
                servers::rates(s, old, secs)
            })
            .collect();
        let notes = self.notes.clone();
        Frame {
            seconds: secs,
            cpus,
            ifaces,
            udp,
            sockets,
            drops,
            servers,
            notes,
        }
    }

    /// Looks up owners for sockets not seen before (one /proc walk for all of them).
    fn owners_of(&mut self, sockets: &mut [SocketRow]) {
        let unknown: BTreeSet<u64> = sockets
            .iter()
            .map(|s| s.inode)
            .filter(|i| *i != 0 && !self.owners.contains_key(i))
            .collect();
        if !unknown.is_empty() {
            self.owners.extend(socket_owners::owners(&unknown));
        }
        for s in sockets {
            s.process = self.owners.get(&s.inode).cloned();
        }
    }

    fn drop_rates(
        &mut self,
        a: &Reading,
        b: &Reading,
        view: &View,
        rows: usize,
        secs: f64,
    ) -> Vec<DropRate> {
        let (Some(w), Some(namer), Some(new)) = (&self.drops, &self.namer, &b.drops) else {
            return Vec::new();
        };
        let c = match &a.drops {
            Some(old) => new.since(old),
            None => new.clone(),
        };
        let mut r = report::rows(&c, w.format(), namer, false);
        report::filter(&mut r, view.port, self.netns);
        if view.sort == SortBy::Port {
            r.sort_by_key(|d| d.port);
        }
        r.truncate(rows);
        let mut out: Vec<DropRate> = r
            .into_iter()
            .map(|row| DropRate {
                per_s: row.count as f64 / secs,
                row,
            })
            .collect();
        let inodes: BTreeSet<u64> = out
            .iter()
            .filter_map(|d| d.row.socket_inode)
            .filter(|i| !self.owners.contains_key(i))
            .collect();
        if !inodes.is_empty() {
            self.owners.extend(socket_owners::owners(&inodes));
        }
        for d in &mut out {
            d.row.process = d
                .row
                .socket_inode
                .and_then(|i| self.owners.get(&i).cloned());
        }
        out
    }
}

/// Each CPU's time over the frame ([`cpu_split`]: busy is wall time less idle and steal, the
/// busy columns the ticks sampled in each).
fn cpu_rows(a: &Reading, b: &Reading, secs: f64) -> Vec<CpuRow> {
    let (Some(sa), Some(sb)) = (&a.stat, &b.stat) else {
        return Vec::new();
    };
    let soft = |r: &Option<Softirqs>, name: &str, i: usize| {
        r.as_ref()
            .and_then(|s| s.row(name).map(|row| (s.cpus.clone(), row.to_vec())))
            .and_then(|(cpus, row)| cpus.iter().position(|c| *c == i).map(|k| row[k]))
    };
    let (wall, hz) = (
        sb.at.saturating_duration_since(sa.at),
        clock_ticks_per_sec(),
    );
    sb.stat
        .cpus
        .iter()
        .filter_map(|(cpu, _)| {
            let s = cpu_split(&sa.stat, &sb.stat, *cpu, wall, hz)?;
            let d =
                |name: &str| match (soft(&a.softirqs, name, *cpu), soft(&b.softirqs, name, *cpu)) {
                    (Some(x), Some(y)) => y.saturating_sub(x) as f64 / secs,
                    _ => 0.0,
                };
            Some(CpuRow {
                cpu: *cpu,
                usr: s.usr,
                sys: s.sys,
                softirq: s.soft,
                irq: s.irq,
                idle: s.idle,
                net_rx_per_s: d("NET_RX"),
                net_tx_per_s: d("NET_TX"),
            })
        })
        .collect()
}
