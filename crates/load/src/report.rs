//! Turning thread results into the numbers a user reads: the DESIGN vocabulary
//! (`tps`, `lost`, `stray`, `dup`, latency percentiles, CPU per transaction).

use crate::decompose::{Decomposition, Parts};
use crate::gen::ThreadResult;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Latency summary in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub mean: f64,
}

/// One point of the percentile distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Percentile {
    pub percentile: f64,
    pub latency_us: f64,
}

/// One interval line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// End of the interval, seconds since the run started.
    pub t: f64,
    pub tps: f64,
    pub lost: u64,
    pub stray: u64,
}

/// Per-thread figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSummary {
    pub thread: usize,
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub cpu: Option<usize>,
    pub flows: usize,
    pub completed: u64,
    pub cpu_util: f64,
    /// Times the thread lost its CPU while it could run (involuntary context switches)
    /// over the window: what makes a spinning sender leave late.
    #[serde(default)]
    pub preempted: u64,
    /// How long it waited on the run queue over the window (us, schedstat): how much
    /// those preemptions took.
    #[serde(default)]
    pub run_delay_us: f64,
}

/// CPU use of the server process, measured from outside over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServerCpu {
    pub pid: u32,
    /// CPU seconds (user + system) over the window.
    pub cpu_s: f64,
    /// Window length in seconds.
    pub window_s: f64,
}

/// What a run's measured window adds up to: its rate, counts and latency, and when it was.
/// A [`LoadReport`] holds it (and derefs to it: `report.tps`), and so does each agent's row
/// of a merged run (`document::AgentRow`), which lists exactly these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub tps: f64,
    pub completed: u64,
    pub sent: u64,
    pub lost: u64,
    pub stray: u64,
    pub dup: u64,
    pub unsent: u64,
    pub duration_s: f64,
    /// Start of the measured window (after warm-up), seconds since the Unix epoch: what
    /// `report merge` lines agents up by.
    pub start_unix: f64,
    /// End of the measured window, seconds since the Unix epoch.
    pub end_unix: f64,
    pub latency_us: LatencyUs,
}

/// The result of a load run: what `firehose load --json` writes (beside its `config`), and
/// the type every reader of that file (the lab, `firehose bench`) parses it into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    #[serde(flatten)]
    pub summary: Summary,
    pub send_errors: u64,
    /// The whole latency histogram (values in ns), HdrHistogram V2 compressed (deflate) and
    /// base64: the encoding of HdrHistogram's interval logs, so `report merge` adds agents'
    /// histograms exactly and HdrHistogram's own tools can decode it.
    pub latency_histogram: String,
    pub percentiles: Vec<Percentile>,
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub client_cpu_us_per_txn: Option<f64>,
    /// Busiest generator thread's CPU use over the window, as a fraction of one CPU.
    pub client_cpu_util: f64,
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub client_syscalls_per_txn: Option<f64>,
    /// How requests left: "gso" (UDP_SEGMENT super-datagrams, at least partly),
    /// "sendmmsg", "af_xdp" (frames on AF_XDP tx rings) or "io_uring" (IORING_OP_SEND).
    pub send_path: String,
    /// Why the kernel refused GSO, when it did.
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub gso_error: Option<String>,
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub server_cpu_us_per_txn: Option<f64>,
    /// Server CPU seconds per second of window (may exceed 1 with several workers).
    #[serde(deserialize_with = "firehose_host::document::required")]
    pub server_cpu_util: Option<f64>,
    /// The busiest generator thread used (nearly) a whole CPU.
    pub client_saturated: bool,
    /// The generator was saturated while the server was not: the result measures the client.
    /// Needs the server's CPU (`--server-pid`); false when it is unknown.
    pub client_bound: bool,
    pub codes: BTreeMap<String, u64>,
    /// Responses that carried a request's id but failed the protocol's checks, by reason
    /// (RADIUS: a bad Response Authenticator, an Accept where a Reject was due...). Counted
    /// over the whole run, warm-up included; each left its request to time out as lost.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub invalid: BTreeMap<String, u64>,
    /// Measurements of the answers beyond latency, in µs, by name (NTP: `offset`, `delay`,
    /// `hold`), over the measured window; signed where the value can be negative. Not
    /// merged by `report merge`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, LatencyUs>,
    pub threads: Vec<ThreadSummary>,
    pub intervals: Vec<Interval>,
    /// Latency taken apart by kernel timestamps (`load --stamps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<Parts>,
    /// The paced open loop's wake-ups over the window and how late each came after the
    /// time its sleep asked for. Not merged by `report merge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_ups: Option<WakeUps>,
}

/// The paced generator's wake-ups over the window: how precisely its sleeps ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeUps {
    /// Wake-ups from a sleep, all threads.
    pub count: u64,
    /// How late each came after the time asked for, µs.
    pub late_us: LatencyUs,
}

impl std::ops::Deref for LoadReport {
    type Target = Summary;
    fn deref(&self) -> &Summary {
        &self.summary
    }
}

impl std::ops::DerefMut for LoadReport {
    fn deref_mut(&mut self) -> &mut Summary {
        &mut self.summary
    }
}

/// Client CPU use at or above this fraction of a CPU means the generator is saturated.
pub const SATURATED: f64 = 0.95;

/// Highest latency a histogram holds (60 s, in ns).
pub const HIST_MAX_NS: u64 = 60_000_000_000;

/// Why a histogram could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("not an HdrHistogram V2 histogram: {0}")]
    Decode(String),
    #[error("could not encode the histogram: {0}")]
    Encode(String),
    #[error("values beyond the histogram's range: {0}")]
    Range(String),
}

/// An empty latency histogram: 1 ns to 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("static histogram bounds are valid")
}

/// `h` as HdrHistogram V2 compressed (deflate), base64.
pub fn encode_histogram(h: &Histogram<u64>) -> Result<String, HistogramError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| HistogramError::Encode(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The histogram [`encode_histogram`] wrote (or any V2 / V2-deflate histogram, base64).
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| HistogramError::Decode(e.to_string()))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// The latency summary and percentile distribution of `hist` (ns), in microseconds.
pub fn latency_of(hist: &Histogram<u64>) -> (LatencyUs, Vec<Percentile>) {
    if hist.is_empty() {
        return (LatencyUs::default(), Vec::new());
    }
    let summary = LatencyUs {
        min: us(hist.min()),
        p50: us(hist.value_at_quantile(0.50)),
        p90: us(hist.value_at_quantile(0.90)),
        p99: us(hist.value_at_quantile(0.99)),
        p999: us(hist.value_at_quantile(0.999)),
        p9999: us(hist.value_at_quantile(0.9999)),
        max: us(hist.max()),
        mean: hist.mean() / 1000.0,
    };
    let percentiles = hist
        .iter_quantiles(2)
        .map(|v| Percentile {
            percentile: v.percentile(),
            latency_us: us(v.value_iterated_to()),
        })
        .collect();
    (summary, percentiles)
}

/// Summarises thread results; `start_unix` is when the measured window began (seconds
/// since the Unix epoch); `code_name` names protocol result codes.
pub fn summarize(
    results: &[ThreadResult],
    server: Option<ServerCpu>,
    server_workers: Option<usize>,
    intervals: Vec<Interval>,
    start_unix: f64,
    code_name: impl Fn(u16) -> String,
) -> Result<LoadReport, HistogramError> {
    let mut hist = new_histogram();
    let mut codes = BTreeMap::new();
    let mut invalid = BTreeMap::new();
    let mut measures: BTreeMap<&str, crate::measure::SignedHistogram> = BTreeMap::new();
    let (mut completed, mut sent, mut lost, mut stray, mut dup, mut unsent, mut send_errors) =
        (0, 0, 0, 0, 0, 0, 0);
    let mut syscalls = 0;
    let mut gso_sends = 0;
    let mut gso_error = None;
    let mut cpu_s = 0.0;
    let mut window_s: f64 = 0.0;
    let mut threads = Vec::new();
    let mut parts: Option<Decomposition> = None;
    let mut wake_late: Option<Histogram<u64>> = None;
    for r in results {
        if let Some(h) = &r.wake_late_ns {
            wake_late
                .get_or_insert_with(new_histogram)
                .add(h)
                .map_err(|e| HistogramError::Range(e.to_string()))?;
        }
        if let Some(p) = &r.parts {
            parts.get_or_insert_with(Decomposition::new).add(p);
        }
        hist.add(&r.latency_ns)
            .map_err(|e| HistogramError::Range(e.to_string()))?;
        completed += r.completed;
        sent += r.sent;
        lost += r.lost;
        stray += r.stray;
        dup += r.dup;
        unsent += r.unsent;
        send_errors += r.send_errors;
        syscalls += r.syscalls;
        gso_sends += r.gso_sends;
        if gso_error.is_none() {
            gso_error = r.gso_error.clone();
        }
        cpu_s += r.cpu_time.as_secs_f64();
        window_s = window_s.max(r.window.as_secs_f64());
        for (c, n) in &r.codes {
            *codes.entry(code_name(*c)).or_insert(0) += n;
        }
        for (k, n) in &r.invalid {
            if *n > 0 {
                *invalid.entry(k.to_string()).or_insert(0) += n;
            }
        }
        for (k, h) in &r.measures {
            measures.entry(k).or_default().add(h);
        }
        let w = r.window.as_secs_f64();
        threads.push(ThreadSummary {
            thread: r.thread,
            cpu: r.cpu,
            flows: r.flows,
            completed: r.completed,
            preempted: r.preempted,
            run_delay_us: r.run_delay.as_secs_f64() * 1e6,
            cpu_util: if w > 0.0 {
                r.cpu_time.as_secs_f64() / w
            } else {
                0.0
            },
        });
    }
    let (latency_us, percentiles) = latency_of(&hist);
    let per_txn = |x: f64| (completed > 0).then(|| x / completed as f64);
    let client_cpu_util = threads.iter().map(|t| t.cpu_util).fold(0.0, f64::max);
    let server_cpu_util = server.map(|s| {
        if s.window_s > 0.0 {
            s.cpu_s / s.window_s
        } else {
            0.0
        }
    });
    // The server is saturated when it uses (nearly) one CPU per worker; without a worker
    // count, one CPU's worth is taken as saturated, which errs against calling a result
    // client-bound.
    let server_saturated = server_cpu_util.map(|u| u >= 0.9 * server_workers.unwrap_or(1) as f64);
    let client_saturated = client_cpu_util >= SATURATED;
    Ok(LoadReport {
        summary: Summary {
            tps: if window_s > 0.0 {
                completed as f64 / window_s
            } else {
                0.0
            },
            completed,
            sent,
            lost,
            stray,
            dup,
            unsent,
            duration_s: window_s,
            start_unix,
            end_unix: start_unix + window_s,
            latency_us,
        },
        send_errors,
        latency_histogram: encode_histogram(&hist)?,
        percentiles,
        client_cpu_us_per_txn: per_txn(cpu_s * 1e6),
        client_cpu_util,
        client_syscalls_per_txn: per_txn(syscalls as f64),
        send_path: if results.iter().any(|r| r.io == "af_xdp") {
            "af_xdp"
        } else if results.iter().any(|r| r.io == "io_uring") {
            "io_uring"
        } else if gso_sends > 0 {
            "gso"
        } else {
            "sendmmsg"
        }
        .to_string(),
        gso_error,
        server_cpu_us_per_txn: server.and_then(|s| per_txn(s.cpu_s * 1e6)),
        server_cpu_util,
        client_saturated,
        client_bound: client_saturated && server_saturated == Some(false),
        codes,
        invalid,
        measures: measures
            .iter()
            .map(|(k, h)| (k.to_string(), h.summary_us()))
            .collect(),
        threads,
        intervals,
        parts: parts.map(|d| Parts::of(&d, String::new())).transpose()?,
        wake_ups: wake_late.map(|h| WakeUps {
            count: h.len(),
            late_us: latency_of(&h).0,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_through_its_own_type_with_the_documented_keys() {
        let server = ServerCpu {
            pid: 7,
            cpu_s: 0.5,
            window_s: 1.0,
        };
        let r = summarize(&[], Some(server), Some(1), Vec::new(), 1.7e9, |c| {
            c.to_string()
        })
        .unwrap();
        let v = serde_json::to_value(&r).unwrap();
        for k in [
            "tps",
            "completed",
            "sent",
            "lost",
            "stray",
            "dup",
            "unsent",
            "latency_us",
            "percentiles",
            "client_cpu_us_per_txn",
            "server_cpu_us_per_txn",
            "send_path",
            "client_bound",
            "codes",
            "intervals",
            "start_unix",
            "end_unix",
            "latency_histogram",
        ] {
            assert!(v.get(k).is_some(), "{k} missing");
        }
        assert_eq!(v["send_path"], "sendmmsg");
        assert_eq!(v["server_cpu_util"], 0.5);
        let back: LoadReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
