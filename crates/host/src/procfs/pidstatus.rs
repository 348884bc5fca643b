//! /proc/<pid>/status: a process's memory, resident now and at its peak.

use super::{dec, ParseError};

const FILE: &str = "/proc/<pid>/status";

/// Resident memory of a process, in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PidMemory {
    /// VmRSS: resident now.
    pub rss_kib: u64,
    /// VmHWM: the most it was ever resident (the peak a load reached).
    pub hwm_kib: u64,
}

/// Reads VmRSS and VmHWM (kernel threads have neither: an error).
pub fn parse(text: &str) -> Result<PidMemory, ParseError> {
    let mut rss = None;
    let mut hwm = None;
    for (i, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "VmRSS" => &mut rss,
            "VmHWM" => &mut hwm,
            _ => continue,
        };
        let num = rest.split_whitespace().next().unwrap_or("");
        *slot = Some(dec(FILE, i + 1, key, num)?);
    }
    match (rss, hwm) {
        (Some(rss_kib), Some(hwm_kib)) => Ok(PidMemory { rss_kib, hwm_kib }),
        _ => Err(ParseError::missing(FILE, "VmRSS and VmHWM")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_and_peak() {
        let t = "Name:\tknotd\nUmask:\t0022\nVmPeak:\t 1372660 kB\nVmHWM:\t  256104 kB\nVmRSS:\t  241000 kB\nThreads:\t5\n";
        assert_eq!(
            parse(t).unwrap(),
            PidMemory {
                rss_kib: 241000,
                hwm_kib: 256104
            }
        );
        assert!(parse("Name:\tkthreadd\nThreads:\t1\n").is_err());
        assert!(parse("VmHWM:\tlots kB\nVmRSS:\t1 kB\n").is_err());
    }
}
