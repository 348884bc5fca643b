//! Per-worker counters: written by one worker, read by anyone, never locked.

use crate::server::Applied;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Most counters a backend may add (see [`crate::backend::Backend::counters`]).
pub const MAX_BACKEND_COUNTERS: usize = 16;

/// One worker's counters, padded to their own cache lines so workers never share one.
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    pub packets_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub bytes_in: AtomicU64,
    pub batches: AtomicU64,
    pub syscalls: AtomicU64,
    pub recv_errors: AtomicU64,
    pub send_errors: AtomicU64,
    pub handler_errors: AtomicU64,
    pub handler_drops: AtomicU64,
    /// Requests from a sender the backend could not address a reply to.
    pub unknown_peer: AtomicU64,
    /// The socket's cumulative drop count as last reported in-band by SO_RXQ_OVFL.
    pub rxq_ovfl: AtomicU64,
    /// The backend's own counters, named once when first published.
    backend: NamedCounters,
    /// The handler's own counters (e.g. DNS responses by rcode), published once per batch.
    handler: NamedCounters,
    /// Receive batches by size: bucket `k` counts batches of `2^(k-1) < n <= 2^k` requests.
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
}

/// Buckets of the batch-size histogram: upper bounds 1, 2, 4, ... 1024 (the largest batch).
pub const BATCH_BUCKETS: usize = 11;

/// Most counters a handler may publish live (see [`crate::handler::Handler::counters`]).
pub const MAX_HANDLER_COUNTERS: usize = 32;

/// Counters named by their publisher the first time it publishes; values are stored, not
/// added, because the publisher keeps the cumulative count itself.
#[derive(Default)]
struct NamedCounters {
    names: OnceLock<Vec<&'static str>>,
    values: [AtomicU64; MAX_HANDLER_COUNTERS],
}

impl NamedCounters {
    #[inline]
    fn publish(&self, counters: &[(&'static str, u64)], max: usize) {
        if counters.is_empty() {
            return;
        }
        debug_assert!(
            counters.len() <= max,
            "{} counters, room for {max}",
            counters.len()
        );
        self.names
            .get_or_init(|| counters.iter().take(max).map(|(n, _)| *n).collect());
        for (slot, (_, v)) in self.values.iter().take(max).zip(counters) {
            slot.store(*v, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.names
            .get()
            .map(|names| {
                names
                    .iter()
                    .zip(&self.values)
                    .map(|(n, v)| (n.to_string(), v.load(Ordering::Relaxed)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl WorkerCounters {
    /// Adds to a counter. Only the owning worker writes, so a relaxed load and store is
    /// exact, and costs no locked read-modify-write on the worker's path.
    #[inline]
    pub fn add(&self, c: &AtomicU64, v: u64) {
        if v != 0 {
            c.store(c.load(Ordering::Relaxed) + v, Ordering::Relaxed);
        }
    }

    /// Publishes the backend's counters (cumulative values; the names must not change
    /// between calls). Counters past [`MAX_BACKEND_COUNTERS`] are not reported.
    #[inline]
    pub fn publish_backend(&self, counters: &[(&'static str, u64)]) {
        self.backend.publish(counters, MAX_BACKEND_COUNTERS);
    }

    /// Publishes the handler's live counters (cumulative values, names fixed).
    #[inline]
    pub fn publish_handler(&self, counters: &[(&'static str, u64)]) {
        self.handler.publish(counters, MAX_HANDLER_COUNTERS);
    }

    /// Counts one receive batch of `n` requests in the batch-size histogram.
    #[inline]
    pub fn record_batch(&self, n: usize) {
        let k = (usize::BITS - n.max(1).saturating_sub(1).leading_zeros()) as usize;
        self.add(&self.batch_sizes[k.min(BATCH_BUCKETS - 1)], 1);
    }

    /// Batches per size bucket (not cumulative); bucket `k` has the upper bound `2^k`.
    pub fn batch_histogram(&self) -> [u64; BATCH_BUCKETS] {
        std::array::from_fn(|k| self.batch_sizes[k].load(Ordering::Relaxed))
    }

    /// The handler's live counters as last published.
    pub fn handler_snapshot(&self) -> BTreeMap<String, u64> {
        self.handler.snapshot()
    }

    /// A consistent-enough copy for reporting.
    pub fn snapshot(&self, worker: usize, cpu: Option<usize>) -> WorkerStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WorkerStats {
            worker,
            cpu,
            packets_in: g(&self.packets_in),
            packets_out: g(&self.packets_out),
            bytes_in: g(&self.bytes_in),
            batches: g(&self.batches),
            syscalls: g(&self.syscalls),
            recv_errors: g(&self.recv_errors),
            send_errors: g(&self.send_errors),
            handler_errors: g(&self.handler_errors),
            handler_drops: g(&self.handler_drops),
            unknown_peer: g(&self.unknown_peer),
            rxq_ovfl: g(&self.rxq_ovfl),
            backend: self.backend.snapshot(),
        }
    }
}

/// A snapshot of one worker's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkerStats {
    pub worker: usize,
    pub cpu: Option<usize>,
    pub packets_in: u64,
    pub packets_out: u64,
    pub bytes_in: u64,
    pub batches: u64,
    pub syscalls: u64,
    pub recv_errors: u64,
    pub send_errors: u64,
    pub handler_errors: u64,
    pub handler_drops: u64,
    /// Requests not handled because no reply could be addressed to their sender (an
    /// address family the backend cannot answer).
    #[serde(default)]
    pub unknown_peer: u64,
    pub rxq_ovfl: u64,
    /// Counters the backend adds (e.g. `xdp_answered`, `tx_stamped`); absent when it has none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub backend: BTreeMap<String, u64>,
}

impl WorkerStats {
    /// Sums counters over workers (worker and cpu fields are left at their defaults).
    pub fn total(all: &[WorkerStats]) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in all {
            t.packets_in += w.packets_in;
            t.packets_out += w.packets_out;
            t.bytes_in += w.bytes_in;
            t.batches += w.batches;
            t.syscalls += w.syscalls;
            t.recv_errors += w.recv_errors;
            t.send_errors += w.send_errors;
            t.handler_errors += w.handler_errors;
            t.handler_drops += w.handler_drops;
            t.unknown_peer += w.unknown_peer;
            t.rxq_ovfl = t.rxq_ovfl.max(w.rxq_ovfl);
            for (k, v) in &w.backend {
                *t.backend.entry(k.clone()).or_insert(0) += v;
            }
        }
        t
    }

    /// Counter differences since `before` (for per-interval lines).
    pub fn delta(&self, before: &WorkerStats) -> WorkerStats {
        WorkerStats {
            worker: self.worker,
            cpu: self.cpu,
            packets_in: self.packets_in - before.packets_in,
            packets_out: self.packets_out - before.packets_out,
            bytes_in: self.bytes_in - before.bytes_in,
            batches: self.batches - before.batches,
            syscalls: self.syscalls - before.syscalls,
            recv_errors: self.recv_errors - before.recv_errors,
            send_errors: self.send_errors - before.send_errors,
            handler_errors: self.handler_errors - before.handler_errors,
            handler_drops: self.handler_drops - before.handler_drops,
            unknown_peer: self.unknown_peer - before.unknown_peer,
            rxq_ovfl: self.rxq_ovfl,
            backend: self
                .backend
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(before.backend.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect(),
        }
    }
}

/// Kernel-side counters of one socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SocketStats {
    pub index: usize,
    /// sk_drops from SO_MEMINFO: datagrams the kernel dropped for this socket.
    pub kernel_drops: u64,
    /// SO_INCOMING_CPU: the CPU whose softirq last queued a packet to this socket.
    pub incoming_cpu: Option<i32>,
}

/// CPU time of the server process over its whole run (getrusage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub sys_s: f64,
}

/// `firehose serve --json`: the envelope and a [`StatsDocument`].
pub type ServeDocument = firehose_host::document::Document<StatsDocument>;

/// The body of the document `firehose serve --json-file` writes at exit. The writer and
/// every reader (the lab, `firehose bench`) share this type, so the keys cannot drift apart.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatsDocument {
    /// The protocol served ("echo", "dns").
    pub proto: String,
    pub applied: Applied,
    pub elapsed_s: f64,
    pub totals: WorkerStats,
    pub workers: Vec<WorkerStats>,
    pub sockets: Vec<SocketStats>,
    /// The handler's own counters (e.g. `dns_noerror`).
    pub handler: BTreeMap<String, u64>,
    pub cpu: ProcessCpu,
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub syscalls_per_packet: Option<f64>,
    /// One record per `--interval` (absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalRecord>,
    pub environment: firehose_host::env::Environment,
}

/// One `--interval` record of `serve --json-file` (in its `intervals` array; earlier versions
/// wrote JSON lines before the final document).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Seconds since the server started.
    pub t: f64,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub totals: WorkerStats,
    pub kernel_drops: u64,
}

/// Syscalls per received packet, `None` before the first packet.
pub fn syscalls_per_packet(totals: &WorkerStats) -> Option<f64> {
    (totals.packets_in > 0).then(|| totals.syscalls as f64 / totals.packets_in as f64)
}

impl StatsDocument {
    /// Reads what `serve --json-file` wrote: one document, or (from versions before 0.2,
    /// with `--interval`) interval lines followed by the document as the last line.
    pub fn parse(text: &str) -> Result<StatsDocument, serde_json::Error> {
        serde_json::from_str(text).or_else(|whole| {
            match text.lines().rev().find(|l| !l.trim().is_empty()) {
                Some(last) if last.len() < text.trim_end().len() => serde_json::from_str(last),
                _ => Err(whole),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> StatsDocument {
        let totals = WorkerStats {
            packets_in: 200,
            packets_out: 200,
            syscalls: 300,
            ..WorkerStats::default()
        };
        StatsDocument {
            proto: "echo".into(),
            applied: Applied {
                listen: "127.0.0.1:9000".into(),
                workers: 1,
                sockets: crate::SocketMode::Shared,
                steer: crate::Steer::None,
                batch: 1,
                send_batch: None,
                busy_poll: false,
                worker_cpus: vec![Some(0)],
                worker_sockets: vec![0],
                socket_detail: Vec::new(),
                epoll_busy_poll: None,
                notes: Vec::new(),
                backend: None,
            },
            elapsed_s: 1.5,
            syscalls_per_packet: syscalls_per_packet(&totals),
            workers: vec![totals.clone()],
            totals,
            sockets: vec![SocketStats {
                index: 0,
                kernel_drops: 3,
                incoming_cpu: Some(0),
            }],
            handler: BTreeMap::from([("dns_noerror".to_string(), 7)]),
            cpu: ProcessCpu {
                user_s: 0.25,
                sys_s: 0.5,
            },
            intervals: Vec::new(),
            environment: firehose_host::env::Environment::capture(),
        }
    }

    #[test]
    fn document_reads_back_alone_and_after_interval_lines() {
        let d = doc();
        assert_eq!(d.syscalls_per_packet, Some(1.5));
        let pretty = serde_json::to_string_pretty(&d).unwrap();
        let back = StatsDocument::parse(&pretty).unwrap();
        assert_eq!(back.totals, d.totals);
        assert_eq!(back.handler["dns_noerror"], 7);
        let rec = IntervalRecord {
            t: 1.0,
            rx_pps: 10.0,
            tx_pps: 10.0,
            totals: d.totals.clone(),
            kernel_drops: 0,
        };
        let lines = format!(
            "{}\n{}\n",
            serde_json::to_string(&rec).unwrap(),
            serde_json::to_string(&d).unwrap()
        );
        let back = StatsDocument::parse(&lines).unwrap();
        assert_eq!(back.sockets[0].kernel_drops, 3);
        assert!(StatsDocument::parse("{}").is_err());
        assert_eq!(syscalls_per_packet(&WorkerStats::default()), None);
    }

    #[test]
    fn keys_are_those_the_readme_documents() {
        let v = serde_json::to_value(doc()).unwrap();
        for k in [
            "proto",
            "applied",
            "elapsed_s",
            "totals",
            "workers",
            "sockets",
            "handler",
            "cpu",
            "syscalls_per_packet",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["cpu"]["sys_s"], 0.5);
        assert_eq!(v["totals"]["packets_in"], 200);
    }

    #[test]
    fn batch_sizes_fall_in_power_of_two_buckets() {
        let c = WorkerCounters::default();
        for n in [1, 2, 3, 4, 5, 64, 65, 1024, 5000] {
            c.record_batch(n);
        }
        let h = c.batch_histogram();
        // Upper bounds 1, 2, 4, 8, ... 1024; 5000 is counted in the last bucket.
        assert_eq!(h[0], 1, "n=1");
        assert_eq!(h[1], 1, "n=2");
        assert_eq!(h[2], 2, "n=3,4");
        assert_eq!(h[3], 1, "n=5");
        assert_eq!(h[6], 1, "n=64");
        assert_eq!(h[7], 1, "n=65");
        assert_eq!(h[10], 2, "n=1024, 5000");
        assert_eq!(h.iter().sum::<u64>(), 9);
    }

    #[test]
    fn handler_counters_are_published_by_name() {
        let c = WorkerCounters::default();
        assert!(c.handler_snapshot().is_empty());
        c.publish_handler(&[("dns_noerror", 3), ("dns_nxdomain", 1)]);
        c.publish_handler(&[("dns_noerror", 5), ("dns_nxdomain", 1)]);
        let s = c.handler_snapshot();
        assert_eq!((s["dns_noerror"], s["dns_nxdomain"]), (5, 1));
    }

    #[test]
    fn backend_counters_are_named_summed_and_differenced() {
        let (a, b) = (WorkerCounters::default(), WorkerCounters::default());
        assert!(
            a.snapshot(0, None).backend.is_empty(),
            "none until published"
        );
        a.publish_backend(&[("xdp_answered", 5), ("fallback_answered", 1)]);
        b.publish_backend(&[("xdp_answered", 7), ("fallback_answered", 0)]);
        let before = a.snapshot(0, None);
        a.publish_backend(&[("xdp_answered", 9), ("fallback_answered", 1)]);
        let after = a.snapshot(0, None);
        assert_eq!(after.delta(&before).backend["xdp_answered"], 4);
        let t = WorkerStats::total(&[after, b.snapshot(1, None)]);
        assert_eq!(t.backend["xdp_answered"], 16);
        assert_eq!(t.backend["fallback_answered"], 1);
    }
}
