//! The one report writer: a [`Page`] (preamble lines, tables, lists, charts, prose) every
//! study builds from its rows, rendered as the terminal's text, `report.md` and a
//! self-contained `report.html` with SVG charts ([`page`]); and the number formats every
//! table uses.

pub mod charts;
pub mod html;
pub mod page;

use crate::sample::CpuRow;
use crate::stats::Summary;
use crate::{LabError, LabResult};
use std::path::Path;

pub use page::Page;

fn write(path: &Path, text: &str) -> LabResult<()> {
    std::fs::write(path, text).map_err(|e| LabError::io(path.display(), e))
}

/// Writes `report.md` and `report.html` into `dir` (created if needed).
pub fn write_pages(dir: &Path, markdown: &str, html: &str) -> LabResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir.display(), e))?;
    write(&dir.join("report.md"), markdown)?;
    write(&dir.join("report.html"), html)
}

/// Formats a count with thousands separators (1,234,567).
pub fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Formats a rate with a unit suffix (1.23M, 456k).
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// `median (min-max)` with a formatter, or "-" when absent.
pub fn range(s: &Option<Summary>, f: &dyn Fn(f64) -> String) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 || s.min == s.max => f(s.median),
        Some(s) => format!("{} ({}-{})", f(s.median), f(s.min), f(s.max)),
    }
}

/// `median (min-max)` with `digits` decimals, or `none` when absent.
pub fn mmm(s: &Option<Summary>, digits: usize, none: &str) -> String {
    match s {
        None => none.into(),
        Some(s) => format!("{:.d$} ({:.d$}-{:.d$})", s.median, s.min, s.max, d = digits),
    }
}

/// Short figure with 2 significant decimals for small numbers.
pub fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `c0 1/40/55` per CPU: usr/sys/soft percent (the NTT talk's sar columns that matter).
pub fn cpu_split(cpus: &[CpuRow]) -> String {
    cpus.iter()
        .map(|c| {
            let s = &c.split;
            format!("c{} {:.0}/{:.0}/{:.0}", c.cpu, s.usr, s.sys, s.soft + s.irq)
        })
        .collect::<Vec<_>>()
        .join(" ")
}
