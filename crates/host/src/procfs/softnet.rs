//! /proc/net/softnet_stat: per-CPU backlog counters in hex. `dropped` counts packets lost
//! because a CPU's backlog (netdev_max_backlog) was full; `time_squeeze` counts NET_RX runs
//! that ran out of budget with work left (netdev_budget / netdev_budget_usecs).
//!
//! Column layout by kernel: 10 columns before flow limits (3.x), 11 with `flow_limit_count`,
//! 13 adding the backlog length and the CPU id (5.10+), 15 adding the input and process queue
//! lengths (6.x). Without the CPU-id column, rows are numbered in order, which is only right
//! when no CPU is offline.

use super::{hex, ParseError};

const FILE: &str = "/proc/net/softnet_stat";

/// One CPU's softnet counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SoftnetRow {
    pub cpu: usize,
    pub processed: u64,
    pub dropped: u64,
    pub time_squeeze: u64,
    pub received_rps: u64,
    /// 0 on kernels that do not print it (10 columns).
    pub flow_limit_count: u64,
    /// Packets waiting in the backlog at read time, when the kernel prints it (12+ columns).
    pub backlog_len: Option<u64>,
}

/// Parses softnet_stat in any of its known layouts.
pub fn parse(text: &str) -> Result<Vec<SoftnetRow>, ParseError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.is_empty() {
            continue;
        }
        if cols.len() < 10 {
            return Err(ParseError::line(
                FILE,
                lineno,
                format!("{} columns, need at least 10", cols.len()),
            ));
        }
        let col = |k: usize, name: &str| hex(FILE, lineno, name, cols[k]);
        let cpu = if cols.len() >= 13 {
            col(12, "cpu")? as usize
        } else {
            rows.len()
        };
        rows.push(SoftnetRow {
            cpu,
            processed: col(0, "processed")?,
            dropped: col(1, "dropped")?,
            time_squeeze: col(2, "time_squeeze")?,
            received_rps: col(9, "received_rps")?,
            flow_limit_count: if cols.len() >= 11 {
                col(10, "flow_limit_count")?
            } else {
                0
            },
            backlog_len: if cols.len() >= 12 {
                Some(col(11, "backlog_len")?)
            } else {
                None
            },
        });
    }
    Ok(rows)
}

/// Per-CPU changes from `a` to `b`; the kernel's counters are 32-bit and wrap. A CPU absent
/// from `a` counts from zero.
pub fn delta(a: &[SoftnetRow], b: &[SoftnetRow]) -> Vec<SoftnetRow> {
    let d = |new: u64, old: u64| new.wrapping_sub(old) & 0xffff_ffff;
    b.iter()
        .map(|r| {
            let old = a
                .iter()
                .find(|o| o.cpu == r.cpu)
                .cloned()
                .unwrap_or_default();
            SoftnetRow {
                cpu: r.cpu,
                processed: d(r.processed, old.processed),
                dropped: d(r.dropped, old.dropped),
                time_squeeze: d(r.time_squeeze, old.time_squeeze),
                received_rps: d(r.received_rps, old.received_rps),
                flow_limit_count: d(r.flow_limit_count, old.flow_limit_count),
                backlog_len: r.backlog_len,
            }
        })
        .collect()
}
