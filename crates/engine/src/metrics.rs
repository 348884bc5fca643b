//! The Prometheus text exposition format (version 0.0.4), written from counter snapshots.
//!
//! Pure: a scrape takes a snapshot of the workers' atomic counters (no lock, no syscall on a
//! worker's path) and renders it here. Names follow the Prometheus conventions: a
//! `firehose_` prefix, `_total` on counters, base units in the name (`_bytes`, `_seconds`).

use crate::stats::{WorkerCounters, WorkerStats, BATCH_BUCKETS};
use firehose_sys::socket::UdpSock;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Instant;

/// Label pairs of one sample, e.g. `[("worker", "0")]`.
pub type Labels<'a> = &'a [(&'a str, String)];

/// A text exposition being written; each metric family is written whole, once.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// A counter family. `name` must end in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, samples: &[(Labels<'_>, u64)]) {
        debug_assert!(name.ends_with("_total"), "{name}");
        // The text format (0.0.4) names a counter's family by its sample name, `_total` included.
        self.header(name, help, "counter");
        for (labels, v) in samples {
            self.sample(name, labels, &v.to_string());
        }
    }

    /// A gauge family.
    pub fn gauge(&mut self, name: &str, help: &str, samples: &[(Labels<'_>, f64)]) {
        self.header(name, help, "gauge");
        for (labels, v) in samples {
            self.sample(name, labels, &float(*v));
        }
    }

    /// A histogram family: per label set, cumulative counts per upper bound (ascending,
    /// without +Inf, which is the count), the sum of observations and their count.
    pub fn histogram(&mut self, name: &str, help: &str, series: &[HistogramSeries<'_>]) {
        self.header(name, help, "histogram");
        for s in series {
            let mut cumulative = 0;
            for (le, n) in &s.buckets {
                cumulative += n;
                self.sample_le(name, s.labels, &float(*le), cumulative);
            }
            self.sample_le(name, s.labels, "+Inf", s.count);
            self.sample(&format!("{name}_sum"), s.labels, &float(s.sum));
            self.sample(&format!("{name}_count"), s.labels, &s.count.to_string());
        }
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }

    fn header(&mut self, family: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {family} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {family} {kind}");
    }

    fn sample(&mut self, name: &str, labels: Labels<'_>, value: &str) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels, None);
        let _ = writeln!(self.out, " {value}");
    }

    fn sample_le(&mut self, name: &str, labels: Labels<'_>, le: &str, v: u64) {
        let _ = write!(self.out, "{name}_bucket");
        write_labels(&mut self.out, labels, Some(le));
        let _ = writeln!(self.out, " {v}");
    }
}

/// One label set of a histogram: per-bucket (not cumulative) counts with their upper bounds.
pub struct HistogramSeries<'a> {
    pub labels: Labels<'a>,
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

fn write_labels(out: &mut String, labels: Labels<'_>, le: Option<&str>) {
    if labels.is_empty() && le.is_none() {
        return;
    }
    out.push('{');
    let mut first = true;
    let extra = le.map(|v| ("le", v.to_string()));
    for (k, v) in labels.iter().map(|(k, v)| (*k, v.clone())).chain(extra) {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{k}=\"{}\"", escape_label(&v));
    }
    out.push('}');
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn float(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Counters kept outside the engine's workers (e.g. a DNS server's TCP threads), read at
/// each scrape as cumulative (name, value) pairs. It must not lock anything a hot path
/// takes.
pub type CounterProvider = Arc<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>;

/// Handles to a running server's counters, for rendering a scrape from any thread.
#[derive(Clone)]
pub struct MetricsSource {
    proto: &'static str,
    counters: Arc<Vec<WorkerCounters>>,
    sockets: Vec<Arc<UdpSock>>,
    worker_cpus: Vec<Option<usize>>,
    started: Instant,
    providers: Vec<CounterProvider>,
}

impl MetricsSource {
    pub(crate) fn new(
        proto: &'static str,
        counters: Arc<Vec<WorkerCounters>>,
        sockets: Vec<Arc<UdpSock>>,
        worker_cpus: Vec<Option<usize>>,
    ) -> Self {
        MetricsSource {
            proto,
            counters,
            sockets,
            worker_cpus,
            started: Instant::now(),
            providers: Vec::new(),
        }
    }

    /// Adds counters from outside the workers, rendered as `firehose_<name>_total`
    /// without labels. Their names must differ from the workers' handler counters.
    pub fn with_provider(mut self, p: CounterProvider) -> Self {
        self.providers.push(p);
        self
    }

    /// The exposition of every counter now. `version` is the build's version string.
    pub fn render(&self, version: &str) -> String {
        let workers: Vec<WorkerStats> = self
            .counters
            .iter()
            .enumerate()
            .map(|(i, c)| c.snapshot(i, self.worker_cpus[i]))
            .collect();
        let labels: Vec<[(&str, String); 1]> = (0..workers.len())
            .map(|i| [("worker", i.to_string())])
            .collect();
        let mut e = Exposition::new();
        let info = [
            ("version", version.to_string()),
            ("proto", self.proto.to_string()),
        ];
        e.gauge(
            "firehose_build_info",
            "Build and protocol of this server; always 1.",
            &[(&info, 1.0)],
        );
        e.gauge(
            "firehose_uptime_seconds",
            "Seconds since the server started.",
            &[(&[], self.started.elapsed().as_secs_f64())],
        );
        type Field = fn(&WorkerStats) -> u64;
        let per_worker: [(&str, &str, Field); 10] = [
            (
                "firehose_packets_received_total",
                "Requests received.",
                |w| w.packets_in,
            ),
            (
                "firehose_packets_sent_total",
                "Replies the kernel accepted.",
                |w| w.packets_out,
            ),
            (
                "firehose_received_bytes_total",
                "Request bytes received.",
                |w| w.bytes_in,
            ),
            ("firehose_batches_total", "Receive batches handled.", |w| {
                w.batches
            }),
            (
                "firehose_syscalls_total",
                "System calls made by the worker.",
                |w| w.syscalls,
            ),
            (
                "firehose_receive_errors_total",
                "Failed receive calls.",
                |w| w.recv_errors,
            ),
            (
                "firehose_send_errors_total",
                "Replies the kernel refused.",
                |w| w.send_errors,
            ),
            (
                "firehose_handler_errors_total",
                "Requests the handler could not answer.",
                |w| w.handler_errors,
            ),
            (
                "firehose_handler_drops_total",
                "Requests the handler dropped on purpose.",
                |w| w.handler_drops,
            ),
            (
                "firehose_unknown_peer_total",
                "Requests from a sender no reply can be addressed to.",
                |w| w.unknown_peer,
            ),
        ];
        for (name, help, f) in per_worker {
            let samples: Vec<_> = workers
                .iter()
                .zip(&labels)
                .map(|(w, l)| (&l[..], f(w)))
                .collect();
            e.counter(name, help, &samples);
        }
        let socket_labels: Vec<[(&str, String); 1]> = (0..self.sockets.len())
            .map(|i| [("socket", i.to_string())])
            .collect();
        let drops: Vec<_> = self
            .sockets
            .iter()
            .zip(&socket_labels)
            .map(|(s, l)| (&l[..], s.drops().map(u64::from).unwrap_or(0)))
            .collect();
        e.counter(
            "firehose_socket_kernel_drops_total",
            "Datagrams the kernel dropped for the socket (SO_MEMINFO).",
            &drops,
        );
        let series: Vec<HistogramSeries<'_>> = self
            .counters
            .iter()
            .zip(&labels)
            .zip(&workers)
            .map(|((c, l), w)| batch_series(&l[..], &c.batch_histogram(), w.packets_in))
            .collect();
        e.histogram(
            "firehose_batch_size_requests",
            "Requests per receive batch.",
            &series,
        );
        self.named_families(&mut e, &workers, &labels);
        for p in &self.providers {
            for (n, v) in p() {
                e.counter(
                    &format!("firehose_{n}_total"),
                    &format!("The server's `{n}` counter."),
                    &[(&[], v)],
                );
            }
        }
        e.finish()
    }

    /// Backend and handler counters, one family per name, labelled by worker.
    fn named_families(
        &self,
        e: &mut Exposition,
        workers: &[WorkerStats],
        labels: &[[(&str, String); 1]],
    ) {
        let handler: Vec<BTreeMap<String, u64>> =
            self.counters.iter().map(|c| c.handler_snapshot()).collect();
        for (prefix, maps) in [
            (
                "firehose_backend_",
                workers.iter().map(|w| &w.backend).collect::<Vec<_>>(),
            ),
            ("firehose_", handler.iter().collect::<Vec<_>>()),
        ] {
            let names: std::collections::BTreeSet<&String> =
                maps.iter().flat_map(|m| m.keys()).collect();
            for n in names {
                let samples: Vec<_> = maps
                    .iter()
                    .zip(labels)
                    .map(|(m, l)| (&l[..], m.get(n).copied().unwrap_or(0)))
                    .collect();
                let name = format!("{prefix}{n}_total");
                e.counter(&name, &format!("The worker's `{n}` counter."), &samples);
            }
        }
    }
}

/// The batch-size histogram of one worker: bucket `k` has the upper bound `2^k`.
/// Every request arrives in exactly one batch, so the sum of batch sizes is `packets_in`.
fn batch_series<'a>(
    labels: Labels<'a>,
    h: &[u64; BATCH_BUCKETS],
    requests: u64,
) -> HistogramSeries<'a> {
    let buckets: Vec<(f64, u64)> = h
        .iter()
        .enumerate()
        .map(|(k, n)| ((1u64 << k) as f64, *n))
        .collect();
    HistogramSeries {
        labels,
        buckets,
        sum: requests as f64,
        count: h.iter().sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_gauges_and_histograms_in_text_format() {
        let mut e = Exposition::new();
        let w0 = [("worker", "0".to_string())];
        let w1 = [("worker", "1".to_string())];
        e.counter(
            "firehose_packets_received_total",
            "Datagrams received.",
            &[(&w0, 10), (&w1, 5)],
        );
        e.gauge(
            "firehose_uptime_seconds",
            "Seconds since start.",
            &[(&[], 1.5)],
        );
        e.histogram(
            "firehose_batch_size",
            "Datagrams per receive call.",
            &[HistogramSeries {
                labels: &w0,
                buckets: vec![(1.0, 2), (2.0, 0), (4.0, 3)],
                sum: 14.0,
                count: 5,
            }],
        );
        let want = "\
# HELP firehose_packets_received_total Datagrams received.
# TYPE firehose_packets_received_total counter
firehose_packets_received_total{worker=\"0\"} 10
firehose_packets_received_total{worker=\"1\"} 5
# HELP firehose_uptime_seconds Seconds since start.
# TYPE firehose_uptime_seconds gauge
firehose_uptime_seconds 1.5
# HELP firehose_batch_size Datagrams per receive call.
# TYPE firehose_batch_size histogram
firehose_batch_size_bucket{worker=\"0\",le=\"1\"} 2
firehose_batch_size_bucket{worker=\"0\",le=\"2\"} 2
firehose_batch_size_bucket{worker=\"0\",le=\"4\"} 5
firehose_batch_size_bucket{worker=\"0\",le=\"+Inf\"} 5
firehose_batch_size_sum{worker=\"0\"} 14
firehose_batch_size_count{worker=\"0\"} 5
";
        assert_eq!(e.finish(), want);
    }

    #[test]
    fn label_values_are_escaped() {
        let mut e = Exposition::new();
        let l = [("version", "a\"b\\c\nd".to_string())];
        e.gauge("firehose_build_info", "Build.", &[(&l, 1.0)]);
        assert!(e
            .finish()
            .contains("firehose_build_info{version=\"a\\\"b\\\\c\\nd\"} 1\n"));
    }
}
