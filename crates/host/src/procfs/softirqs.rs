//! /proc/softirqs: softirq counts per CPU. The NET_RX row shows which CPUs do the receive
//! work; one hot column means RSS/RPS are not spreading it.

use super::{dec, ParseError};

const FILE: &str = "/proc/softirqs";

/// Counts per softirq kind (rows) and CPU (columns, in the order of `cpus`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Softirqs {
    /// CPU ids from the header (`CPU0 CPU1 ...`).
    pub cpus: Vec<usize>,
    /// (name without the colon, one count per CPU).
    pub rows: Vec<(String, Vec<u64>)>,
}

impl Softirqs {
    /// The counts of one softirq kind, e.g. `"NET_RX"`.
    pub fn row(&self, name: &str) -> Option<&[u64]> {
        self.rows
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// Parses /proc/softirqs. Every row must have one count per CPU of the header.
pub fn parse(text: &str) -> Result<Softirqs, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines
        .next()
        .ok_or_else(|| ParseError::missing(FILE, "empty file"))?;
    let cpus = header
        .split_whitespace()
        .map(|h| {
            h.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| ParseError::line(FILE, 1, format!("bad header column {h:?}")))
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let mut rows = Vec::new();
    for (i, line) in lines {
        let lineno = i + 1;
        let (name, rest) = line
            .split_once(':')
            .ok_or_else(|| ParseError::line(FILE, lineno, "no ':' after the softirq name"))?;
        let name = name.trim();
        let counts = rest
            .split_whitespace()
            .map(|v| dec(FILE, lineno, name, v))
            .collect::<Result<Vec<u64>, _>>()?;
        if counts.len() != cpus.len() {
            return Err(ParseError::line(
                FILE,
                lineno,
                format!("{name}: {} counts for {} CPUs", counts.len(), cpus.len()),
            ));
        }
        rows.push((name.to_string(), counts));
    }
    Ok(Softirqs { cpus, rows })
}
