//! Argument parsers shared by subcommands, and the error that means "bad usage" (exit 2).

use firehose_sys::cpu::CpuSet;
use std::time::Duration;

/// Bad input from the user: printed as one line, exit code 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Parses a duration: `10` or `10s` (seconds, fractions allowed), `250ms`, `50us`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 10, 2.5s, 250ms, 1m)"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("'{s}' must be greater than zero"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// Parses a byte size: `4194304`, `4M`, `256K`, `1G`.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let v: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size in bytes (examples: 4194304, 256K, 4M)"))?;
    if v == 0 {
        return Err(format!("'{s}' must be greater than zero"));
    }
    v.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Parses a positive whole number.
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if v > 0 => Ok(v as usize),
        Ok(_) => Err(format!("'{s}' must be at least 1")),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

/// Parses a positive rate (transactions per second); `k`/`M` suffixes allowed.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (examples: 50000, 50k, 1.5M)"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("'{s}' must be greater than zero"));
    }
    Ok(v * mult)
}

/// Where threads run, as every subcommand takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cpus {
    /// `auto`: the program places them (one per allowed CPU, in order, unless a
    /// subcommand says otherwise).
    Auto,
    /// `none`: wherever the scheduler puts them.
    None,
    /// A CPU list such as `0-3,6`, naming at least one CPU.
    List(CpuSet),
}

/// Parses `auto`, `none` or a CPU list (`0-3,6`).
pub fn parse_cpus(s: &str) -> Result<Cpus, String> {
    match s.trim() {
        "auto" => Ok(Cpus::Auto),
        "none" => Ok(Cpus::None),
        t => {
            let set = CpuSet::parse_list(t).map_err(|e| e.to_string())?;
            if set.is_empty() {
                return Err(format!(
                    "'{s}' names no CPU (expected auto, none, or a CPU list such as 0-3,6)"
                ));
            }
            Ok(Cpus::List(set))
        }
    }
}

/// Formats a count with thousands separators.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("ten").is_err());
    }

    #[test]
    fn cpus() {
        assert_eq!(parse_cpus("auto").unwrap(), Cpus::Auto);
        assert_eq!(parse_cpus("none").unwrap(), Cpus::None);
        let Cpus::List(l) = parse_cpus("0-3,6").unwrap() else {
            panic!("not a list")
        };
        assert_eq!(l.to_vec(), [0, 1, 2, 3, 6]);
        let e = parse_cpus("0-x").unwrap_err();
        assert!(e.contains("'x' is not a CPU number"), "{e}");
        let e = parse_cpus(" ").unwrap_err();
        assert!(e.contains("names no CPU"), "{e}");
    }

    #[test]
    fn sizes_rates_counts() {
        assert_eq!(parse_bytes("4M").unwrap(), 4 << 20);
        assert!(parse_bytes("0").is_err());
        assert_eq!(parse_rate("50k").unwrap(), 50_000.0);
        assert!(parse_rate("0").is_err());
        assert!(parse_positive("-3").is_err());
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(12.0), "12");
    }
}
