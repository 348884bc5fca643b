//! The value parsers every subcommand shares, one per kind of value, so a string means the
//! same thing wherever it is given: durations (`10`, `2.5s`, `250ms`; a bare number is
//! seconds), rates (`50k`, `1.5M`), sizes (`64`, `4K`, `1M`), CPUs (`0-3,6`, `auto`,
//! `none`), counts. And the error that means "bad usage" (exit 2).

use firehose_sys::cpu::CpuSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bad input from the user: printed as one line, exit code 2.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Parses a duration greater than zero: `10` or `10s` (seconds, fractions allowed),
/// `250ms`, `50us`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    duration(s, false)
}

/// Parses a duration as [`parse_duration`] does, where zero means "none" (a warm-up, an
/// interval).
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    duration(s, true)
}

fn duration(s: &str, zero_ok: bool) -> Result<Duration, String> {
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
    if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
        return Err(if zero_ok {
            format!("'{s}' must be zero or more")
        } else {
            format!("'{s}' must be greater than zero")
        });
    }
    Duration::try_from_secs_f64(v * scale).map_err(|_| format!("'{s}' is too long"))
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

/// Parses a port number, 1-65535.
pub fn parse_port(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("'{s}' is not a port (1-65535)")),
    }
}

/// Parses a positive whole number.
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if v > 0 => Ok(v as usize),
        Ok(_) => Err(format!("'{s}' must be at least 1")),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

/// A comma list of values read by `parse`, or every value of `all` for "all"; `valid` names
/// them in the error (the lab's `--modes`, `--peers`, `--send`, `--cells` and the like).
pub fn comma_list_or_all<T: Copy>(
    flag: &str,
    text: &str,
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
    valid: &str,
) -> Result<Vec<T>, Usage> {
    if text == "all" {
        return Ok(all.to_vec());
    }
    text.split(',')
        .map(str::trim)
        .map(|w| {
            parse(w).ok_or_else(|| {
                Usage(format!(
                    "{flag}: unknown value '{w}' (valid: {valid}, or all)"
                ))
            })
        })
        .collect()
}

/// Whole seconds of `d`, for a flag whose consumer counts in seconds.
pub fn whole_secs(flag: &str, d: Duration) -> Result<u64, Usage> {
    if d.subsec_nanos() != 0 {
        return Err(Usage(format!(
            "{flag} {}s: only whole seconds are supported here; give e.g. {}s",
            d.as_secs_f64(),
            d.as_secs().max(1)
        )));
    }
    Ok(d.as_secs())
}

/// Whole milliseconds of `d`, for a flag whose consumer counts in milliseconds.
pub fn whole_millis(flag: &str, d: Duration) -> Result<u64, Usage> {
    if !d.as_nanos().is_multiple_of(1_000_000) {
        return Err(Usage(format!(
            "{flag} {:?}: only whole milliseconds are supported here; give e.g. {}ms",
            d,
            d.as_millis().max(1)
        )));
    }
    Ok(d.as_millis() as u64)
}

/// A rate as a whole number per second, for a consumer that takes integers.
pub fn whole_rate(flag: &str, r: f64) -> Result<u64, Usage> {
    if r.fract() != 0.0 {
        return Err(Usage(format!(
            "{flag} {r}: only a whole number of transactions per second is supported here"
        )));
    }
    Ok(r as u64)
}

/// Parses a CPU list (`0-3,6`) naming at least one CPU, for flags where `auto` and `none`
/// mean nothing (the side of a benchmark always runs on the CPUs given).
pub fn parse_cpu_list(s: &str) -> Result<CpuSet, String> {
    match parse_cpus(s)? {
        Cpus::List(l) => Ok(l),
        _ => Err(format!("'{s}': give a CPU list, e.g. 0 or 2-3")),
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

/// Parses a moment as seconds since the Unix epoch (`1700000000`, `1700000000.5`), at most
/// a second in the past and at most a day ahead: a time for several processes to act at
/// together (`load --start-at`).
pub fn parse_unix_time(s: &str) -> Result<SystemTime, String> {
    let v: f64 = s.trim().parse().map_err(|_| {
        format!("'{s}' is not a Unix time in seconds (example: $(( $(date +%s) + 10 )))")
    })?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| format!("the system clock is before 1970: {e}"))?
        .as_secs_f64();
    if !v.is_finite() || v < now - 1.0 {
        return Err(format!(
            "'{s}' is {:.1} s in the past; give a time ahead, e.g. $(( $(date +%s) + 10 ))",
            now - v
        ));
    }
    if v > now + 86_400.0 {
        return Err(format!(
            "'{s}' is {:.0} s ahead, more than a day; check it is in seconds, not ms",
            v - now
        ));
    }
    Ok(UNIX_EPOCH + Duration::from_secs_f64(v))
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

pub use firehose_lab::report::thousands;

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
        assert_eq!(parse_duration_or_zero("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration_or_zero("0ms").unwrap(), Duration::ZERO);
        assert!(parse_duration_or_zero("-1").is_err());
        assert!(parse_duration("1e300").is_err(), "too long for a Duration");
    }

    #[test]
    fn unix_times_near_now_only() {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let at = parse_unix_time(&(now + 5).to_string()).unwrap();
        assert_eq!(at, UNIX_EPOCH + Duration::from_secs(now + 5));
        assert!(parse_unix_time(&format!("{}.25", now + 5)).is_ok());
        let past = parse_unix_time(&(now - 60).to_string()).unwrap_err();
        assert!(past.contains("in the past"), "{past}");
        let far = parse_unix_time(&((now + 2 * 86_400) * 1000).to_string()).unwrap_err();
        assert!(far.contains("more than a day"), "{far}");
        assert!(parse_unix_time("soon").is_err());
    }

    #[test]
    fn whole_units_for_consumers_that_count_them() {
        assert_eq!(whole_secs("--duration", Duration::from_secs(5)).unwrap(), 5);
        let e = whole_secs("--duration", Duration::from_millis(2500)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--duration 2.5s: only whole seconds are supported here; give e.g. 2s"
        );
        assert_eq!(
            whole_millis("--timeout", Duration::from_secs(1)).unwrap(),
            1000
        );
        assert!(whole_millis("--timeout", Duration::from_micros(1500)).is_err());
        assert_eq!(whole_rate("--rate", 10e3).unwrap(), 10_000);
        assert!(whole_rate("--rate", 2.5).is_err());
    }

    #[test]
    fn cpu_list_without_auto() {
        assert_eq!(parse_cpu_list("3").unwrap().to_vec(), [3]);
        assert_eq!(parse_cpu_list(" 1\n").unwrap().to_vec(), [1]);
        assert_eq!(parse_cpu_list("0-1").unwrap().to_vec(), [0, 1]);
        let e = parse_cpu_list("auto").unwrap_err();
        assert_eq!(e, "'auto': give a CPU list, e.g. 0 or 2-3");
        assert!(parse_cpu_list("x")
            .unwrap_err()
            .contains("'x' is not a CPU number"));
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

/// Every subcommand accepts the same strings for the same kind of value.
#[cfg(test)]
mod same_strings {
    use clap::{CommandFactory, Parser};

    /// The words before the value, for every flag of a kind; a test below checks that the
    /// lists name every flag whose value name says it is of that kind.
    const DURATION: &[&[&str]] = &[
        &["serve", "--interval"],
        &["serve", "--duration"],
        &["serve", "--tcp-idle"],
        &["serve", "--radius-dup-window"],
        &["serve", "--ntp-root-delay"],
        &["serve", "--ntp-root-dispersion"],
        &["load", "--target", "127.0.0.1:9", "--duration"],
        &["load", "--target", "127.0.0.1:9", "--warmup"],
        &["load", "--target", "127.0.0.1:9", "--timeout"],
        &["load", "--target", "127.0.0.1:9", "--interval"],
        &["bench", "--duration"],
        &["doctor", "--sample"],
        &["drops", "--duration"],
        &["top", "--interval"],
        &["top", "--duration"],
        &["lab", "ladder", "--duration"],
        &["lab", "ladder", "--warmup"],
        &["lab", "ladder", "--timeout"],
        &["lab", "compare", "--duration"],
        &["lab", "compare", "--warmup"],
        &["lab", "compare", "--timeout"],
        &["lab", "stream", "--duration"],
        &["lab", "latency", "--duration"],
        &["lab", "latency", "--warmup"],
        &["lab", "sink", "--duration"],
        &["lab", "sink", "--warmup"],
        &["lab", "flood", "--duration"],
        &["lab", "flood", "--warmup"],
        &["lab", "zone-load", "--ready-within"],
        &["lab", "zone-load", "--settle"],
        &[
            "lab",
            "answers",
            "--target",
            "127.0.0.1:9",
            "--apex",
            "x.",
            "--within",
        ],
        &["stream", "--target", "127.0.0.1:9", "--duration"],
        &["stream", "--target", "127.0.0.1:9", "--interval"],
        &["sink", "--listen", "127.0.0.1:9", "--duration"],
        &["flood", "--target", "127.0.0.1:9", "--duration"],
    ];
    /// Of those, the ones where zero means "none".
    const DURATION_OR_ZERO: &[&[&str]] = &[
        &["serve", "--ntp-root-delay"],
        &["serve", "--ntp-root-dispersion"],
        &["load", "--target", "127.0.0.1:9", "--warmup"],
        &["load", "--target", "127.0.0.1:9", "--interval"],
        &["lab", "ladder", "--warmup"],
        &["lab", "compare", "--warmup"],
        &["lab", "latency", "--warmup"],
        &["lab", "sink", "--warmup"],
        &["lab", "flood", "--warmup"],
    ];
    const RATE: &[&[&str]] = &[
        &["load", "--target", "127.0.0.1:9", "--rate"],
        &["bench", "--rate"],
        &["lab", "ladder", "--rate"],
        &["lab", "compare", "--rate"],
        &["flood", "--target", "127.0.0.1:9", "--rate"],
    ];
    const SIZE: &[&[&str]] = &[
        &["serve", "--rcvbuf"],
        &["serve", "--sndbuf"],
        &["serve", "--zone-max-size"],
        &["load", "--target", "127.0.0.1:9", "--size"],
        &["lab", "ladder", "--size"],
        &["lab", "compare", "--size"],
        &["lab", "stream", "--msg-size"],
        &["lab", "latency", "--size"],
        &["lab", "zone-load", "--zone-size"],
        &["stream", "--target", "127.0.0.1:9", "--msg-size"],
        &["stream", "--target", "127.0.0.1:9", "--bytes"],
        &["stream", "--target", "127.0.0.1:9", "--window"],
        &["stream", "--target", "127.0.0.1:9", "--sndbuf"],
        &["stream", "--target", "127.0.0.1:9", "--rcvbuf"],
        &["sink", "--listen", "127.0.0.1:9", "--rcvbuf"],
        &["flood", "--target", "127.0.0.1:9", "--size"],
    ];
    const CPULIST: &[&[&str]] = &[
        &["serve", "--cpus"],
        &["load", "--target", "127.0.0.1:9", "--cpus"],
        &["lab", "ladder", "--server-cpus"],
        &["lab", "ladder", "--client-cpus"],
        &["lab", "compare", "--server-cpus"],
        &["lab", "compare", "--client-cpus"],
        &["lab", "stream", "--server-cpus"],
        &["lab", "stream", "--client-cpus"],
        &["lab", "latency", "--server-cpus"],
        &["lab", "latency", "--client-cpus"],
        &["lab", "sink", "--server-cpus"],
        &["lab", "sink", "--client-cpus"],
        &["lab", "flood", "--server-cpus"],
        &["lab", "flood", "--client-cpus"],
        &["lab", "zone-load", "--cpus"],
        &["stream", "--target", "127.0.0.1:9", "--cpus"],
        &["sink", "--listen", "127.0.0.1:9", "--cpus"],
        &["flood", "--target", "127.0.0.1:9", "--cpus"],
    ];
    /// CPU lists where `auto` and `none` mean nothing.
    const CPU_LIST_ONLY: &[&[&str]] = &[&["bench", "--server-cpus"], &["bench", "--client-cpus"]];

    fn parses(words: &[&str], value: &str) -> Result<(), clap::Error> {
        let mut argv: Vec<String> = std::iter::once("firehose")
            .chain(words.iter().copied())
            .map(String::from)
            .collect();
        if value.starts_with('-') {
            // `--flag=-1`: as a separate word, clap takes `-1` for a flag.
            let flag = argv.pop().unwrap_or_default();
            argv.push(format!("{flag}={value}"));
        } else {
            argv.push(value.to_string());
        }
        crate::Cli::try_parse_from(argv).map(|_| ())
    }

    /// Every flag of `flags` accepts every string of `good` and refuses every one of `bad`
    /// as an invalid value.
    fn check(flags: &[&[&str]], good: &[&str], bad: &[&str]) {
        for words in flags {
            for v in good {
                if let Err(e) = parses(words, v) {
                    panic!("{words:?} refused {v:?}: {e}");
                }
            }
            for v in bad {
                let e = parses(words, v).expect_err(&format!("{words:?} took {v:?}"));
                assert_eq!(
                    e.kind(),
                    clap::error::ErrorKind::ValueValidation,
                    "{words:?} {v:?}: {e}"
                );
            }
        }
    }

    #[test]
    fn durations() {
        let good = ["10", "2.5s", "250ms", "1m", "50us", " 3 "];
        check(DURATION, &good, &["ten", "-1", "5 parsecs", ""]);
        check(DURATION_OR_ZERO, &["0", "0s"], &[]);
        let positive: Vec<&[&str]> = DURATION
            .iter()
            .filter(|f| !DURATION_OR_ZERO.contains(f))
            .copied()
            .collect();
        check(&positive, &[], &["0"]);
    }

    #[test]
    fn rates() {
        check(
            RATE,
            &["50000", "50k", "10k", "1.5M", "2.5"],
            &["fast", "0", "-5k", "1G"],
        );
    }

    #[test]
    fn sizes() {
        check(
            SIZE,
            &["64", "4K", "4k", "1M", "1G"],
            &["big", "0", "-1", "4KB"],
        );
    }

    #[test]
    fn cpus() {
        check(
            CPULIST,
            &["0", "0-1", "0,1", " 0-1\n", "1-1,0", "auto"],
            &["0-x", "1-0", "x", ""],
        );
        check(
            CPU_LIST_ONLY,
            &["0", "0-1", " 1\n", "1-1"],
            &["auto", "none", "x", ""],
        );
    }

    /// The lists above name every flag whose value name declares one of these kinds, so a
    /// new flag cannot slip in with a parser of its own.
    #[test]
    fn the_tables_cover_every_flag_of_each_kind() {
        fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<(String, String)>) {
            for a in cmd.get_arguments() {
                let (Some(long), Some(names)) = (a.get_long(), a.get_value_names()) else {
                    continue;
                };
                let kind = names[0].to_string();
                if ["DURATION", "RATE", "SIZE", "CPULIST"].contains(&kind.as_str()) {
                    out.push((format!("{} --{long}", path.join(" ")), kind));
                }
            }
            for sub in cmd.get_subcommands() {
                path.push(sub.get_name().to_string());
                walk(sub, path, out);
                path.pop();
            }
        }
        let mut found = Vec::new();
        walk(&crate::Cli::command(), &mut Vec::new(), &mut found);
        let mut listed = Vec::new();
        for (kind, flags) in [
            ("DURATION", DURATION),
            ("RATE", RATE),
            ("SIZE", SIZE),
            ("CPULIST", CPULIST),
            ("CPULIST", CPU_LIST_ONLY),
        ] {
            for words in flags {
                let flag = words.last().unwrap();
                let path: Vec<&str> = words
                    .iter()
                    .take_while(|w| !w.starts_with("--"))
                    .copied()
                    .collect();
                listed.push((format!("{} {flag}", path.join(" ")), kind.to_string()));
            }
        }
        found.sort();
        listed.sort();
        assert_eq!(found, listed);
    }
}

/// The value parser of a setting whose values are a library type's table (`ALL`) and names,
/// without a help line per value: the flag's own help says what they mean.
pub fn choice<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    name: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(all.iter().map(|&t| name(t))).map(move |s| {
        *all.iter()
            .find(|&&t| name(t) == s)
            .expect("clap checked the value")
    })
}

/// The value parser of a choice whose values are a library's table (`--io` of serve and
/// load, sink's and flood's modes): each entry's name, its help beside it in `--help`.
pub fn table_parser<T: Sync + 'static>(
    all: &'static [T],
    name: fn(&T) -> &'static str,
    help: fn(&T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = &'static T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(all.iter().map(|t| match help(t) {
        "" => PossibleValue::new(name(t)),
        h => PossibleValue::new(name(t)).help(h),
    }))
    .map(move |s| {
        all.iter()
            .find(|t| name(t) == s)
            .expect("clap checked the value")
    })
}
