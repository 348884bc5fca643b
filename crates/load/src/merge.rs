//! The load reports of several agents (generators on several machines) as one: counts
//! summed, histograms added exactly, tps over the window that spans them all.

use crate::decompose::{Decomposition, Parts};
use crate::report::{
    decode_histogram, encode_histogram, latency_of, new_histogram, HistogramError, LoadReport,
    Summary,
};
use std::collections::BTreeMap;

/// Why reports could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("no reports to merge")]
    Empty,
    #[error("report {index}: latency_histogram: {source}")]
    Histogram {
        index: usize,
        #[source]
        source: HistogramError,
    },
}

/// The merged report and how well the agents' windows lined up.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// Counts and codes summed; latency from the sum of the histograms; `tps` is all
    /// completions over the span from the earliest start to the latest end, which never
    /// overstates the rate. CPU per transaction is the agents' total CPU over all
    /// completions (unknown if any agent's is). Server CPU is left out: each agent saw the
    /// same server, so theirs do not add. `threads` are every agent's, in order;
    /// `intervals` stay with the agents (their clocks differ).
    pub report: LoadReport,
    /// Seconds all agents measured at once (latest start to earliest end); below the
    /// span when they did not start together. Negative when some never overlapped.
    pub overlap_s: f64,
}

/// The agents' latency parts added, when every agent took them (a part of the agents'
/// transactions would misrepresent the whole); the first agent's hardware answer.
fn merge_parts(reports: &[LoadReport]) -> Result<Option<Parts>, MergeError> {
    let mut sum = Decomposition::new();
    for (index, r) in reports.iter().enumerate() {
        let Some(p) = &r.parts else {
            return Ok(None);
        };
        let d = p
            .decomposition()
            .map_err(|source| MergeError::Histogram { index, source })?;
        sum.add(&d);
    }
    let hardware = reports[0]
        .parts
        .as_ref()
        .map_or(String::new(), |p| p.hardware.clone());
    Parts::of(&sum, hardware)
        .map(Some)
        .map_err(|source| MergeError::Histogram { index: 0, source })
}

/// Merges `reports`, in order.
pub fn merge(reports: &[LoadReport]) -> Result<Merged, MergeError> {
    let first = reports.first().ok_or(MergeError::Empty)?;
    let mut hist = new_histogram();
    for (index, r) in reports.iter().enumerate() {
        let h = decode_histogram(&r.latency_histogram)
            .map_err(|source| MergeError::Histogram { index, source })?;
        hist.add(&h).map_err(|e| MergeError::Histogram {
            index,
            source: HistogramError::Range(e.to_string()),
        })?;
    }
    let sum = |f: fn(&LoadReport) -> u64| reports.iter().map(f).sum::<u64>();
    let completed = sum(|r| r.completed);
    let start_unix = reports
        .iter()
        .map(|r| r.start_unix)
        .fold(f64::MAX, f64::min);
    let end_unix = reports.iter().map(|r| r.end_unix).fold(f64::MIN, f64::max);
    let latest_start = reports
        .iter()
        .map(|r| r.start_unix)
        .fold(f64::MIN, f64::max);
    let earliest_end = reports.iter().map(|r| r.end_unix).fold(f64::MAX, f64::min);
    let span = (end_unix - start_unix).max(0.0);
    // An agent's total of something it reports per transaction.
    let total_per_txn = |f: fn(&LoadReport) -> Option<f64>| -> Option<f64> {
        let mut total = 0.0;
        for r in reports {
            total += f(r)? * r.completed as f64;
        }
        (completed > 0).then(|| total / completed as f64)
    };
    let mut codes = BTreeMap::new();
    let mut invalid = BTreeMap::new();
    for r in reports {
        for (k, v) in &r.codes {
            *codes.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &r.invalid {
            *invalid.entry(k.clone()).or_insert(0) += v;
        }
    }
    let (latency_us, percentiles) = latency_of(&hist);
    let report = LoadReport {
        parts: merge_parts(reports)?,
        // Each agent's timer, not a property of the merged load.
        wake_ups: None,
        summary: Summary {
            tps: if span > 0.0 {
                completed as f64 / span
            } else {
                0.0
            },
            completed,
            sent: sum(|r| r.sent),
            lost: sum(|r| r.lost),
            stray: sum(|r| r.stray),
            dup: sum(|r| r.dup),
            unsent: sum(|r| r.unsent),
            duration_s: span,
            start_unix,
            end_unix,
            latency_us,
        },
        send_errors: sum(|r| r.send_errors),
        latency_histogram: encode_histogram(&hist)
            .map_err(|source| MergeError::Histogram { index: 0, source })?,
        percentiles,
        client_cpu_us_per_txn: total_per_txn(|r| r.client_cpu_us_per_txn),
        client_cpu_util: reports
            .iter()
            .map(|r| r.client_cpu_util)
            .fold(0.0, f64::max),
        client_syscalls_per_txn: total_per_txn(|r| r.client_syscalls_per_txn),
        send_path: if reports.iter().any(|r| r.send_path == "gso") {
            "gso"
        } else {
            first.send_path.as_str()
        }
        .to_string(),
        gso_error: reports.iter().find_map(|r| r.gso_error.clone()),
        server_cpu_us_per_txn: None,
        server_cpu_util: None,
        client_saturated: reports.iter().any(|r| r.client_saturated),
        client_bound: reports.iter().any(|r| r.client_bound),
        codes,
        invalid,
        // Percentiles of agents' measures cannot be added; the agents' reports keep them.
        measures: BTreeMap::new(),
        threads: reports.iter().flat_map(|r| r.threads.clone()).collect(),
        intervals: Vec::new(),
    };
    Ok(Merged {
        report,
        overlap_s: earliest_end - latest_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::ThreadResult;
    use crate::report::summarize;
    use std::time::Duration;

    fn thread(i: usize, latencies_ns: &[u64], lost: u64) -> ThreadResult {
        let mut h = new_histogram();
        let mut parts = Decomposition::new();
        for &l in latencies_ns {
            h.record(l).unwrap();
            parts.record(l / 2, l / 4, l / 4);
        }
        ThreadResult {
            parts: Some(parts),
            thread: i,
            cpu: None,
            flows: 1,
            sent: latencies_ns.len() as u64 + lost,
            completed: latencies_ns.len() as u64,
            lost,
            stray: 1,
            dup: 2,
            unsent: 0,
            send_errors: 0,
            syscalls: 10,
            gso_sends: 0,
            io: "socket",
            gso_error: None,
            codes: BTreeMap::from([(0, latencies_ns.len() as u64)]),
            invalid: Vec::new(),
            measures: Vec::new(),
            latency_ns: h,
            cpu_time: Duration::from_millis(500),
            preempted: 3,
            run_delay: Duration::from_micros(40),
            wake_late_ns: None,
            window: Duration::from_secs(2),
        }
    }

    fn agent(t: &ThreadResult, start_unix: f64) -> LoadReport {
        let t = ThreadResult {
            latency_ns: t.latency_ns.clone(),
            codes: t.codes.clone(),
            invalid: t.invalid.clone(),
            measures: t.measures.clone(),
            gso_error: None,
            parts: t.parts.clone(),
            wake_late_ns: t.wake_late_ns.clone(),
            ..*t
        };
        summarize(&[t], None, None, Vec::new(), start_unix, |c| c.to_string()).unwrap()
    }

    #[test]
    fn merging_agents_equals_one_run_of_all_their_threads() {
        let a: Vec<u64> = (1..=3000).map(|i| i * 1000).collect();
        let b: Vec<u64> = (1..=500).map(|i| 40_000 + i * 7919).collect();
        let (ta, tb) = (thread(0, &a, 3), thread(1, &b, 5));
        let (ra, rb) = (agent(&ta, 100.0), agent(&tb, 100.5));
        let m = merge(&[ra.clone(), rb.clone()]).unwrap();
        let together =
            summarize(&[ta, tb], None, None, Vec::new(), 100.0, |c| c.to_string()).unwrap();
        let r = &m.report;
        assert_eq!(r.completed, 3500);
        assert_eq!((r.lost, r.stray, r.dup, r.sent), (8, 2, 4, 3508));
        assert_eq!(r.latency_us, together.latency_us);
        assert_eq!(r.percentiles, together.percentiles);
        assert_eq!(r.latency_histogram, together.latency_histogram);
        assert_eq!(r.codes["0"], 3500);
        assert_eq!(r.parts, together.parts, "the parts add like the latency");
        assert_eq!(r.parts.as_ref().map(|p| p.stamped), Some(3500));
        let mut without = rb.clone();
        without.parts = None;
        assert_eq!(merge(&[ra.clone(), without]).unwrap().report.parts, None);
        assert_eq!(
            (r.start_unix, r.end_unix, r.duration_s),
            (100.0, 102.5, 2.5)
        );
        assert_eq!(r.tps, 3500.0 / 2.5);
        assert_eq!(m.overlap_s, 1.5);
        // 0.25 s of CPU per agent over 3500 completions.
        let cpu = r.client_cpu_us_per_txn.unwrap();
        assert!((cpu - 1e6 / 3500.0).abs() < 1e-9, "{cpu}");
        assert_eq!(r.threads.len(), 2);
        // A merged report merges again.
        assert_eq!(
            merge(std::slice::from_ref(&m.report))
                .unwrap()
                .report
                .completed,
            3500
        );
    }

    #[test]
    fn a_bad_histogram_is_named_by_its_report() {
        let mut r = agent(&thread(0, &[1000], 0), 1.0);
        r.latency_histogram = "not base64!".into();
        let e = merge(&[agent(&thread(0, &[1], 0), 1.0), r]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("report 1: latency_histogram: not base64"),
            "{e}"
        );
        assert!(matches!(merge(&[]), Err(MergeError::Empty)));
    }
}
