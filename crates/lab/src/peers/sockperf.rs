//! sockperf as a peer: `sockperf sr` is a server to compare ours with (lab compare, bench's
//! ping-pong, lab sink's receivers), `sockperf ping-pong` a generator to compare `firehose
//! load` with, and `sockperf tp` a sender beside `firehose flood`. Here: their command lines
//! and the reading of the client's summary (it has no machine-readable output); the client
//! runs with `--full-rtt` so latencies are round trips like ours, not sockperf's default
//! half-RTT.

use crate::metrics::Latency;
use serde::Serialize;

/// sockperf's own warm-up at the start of its run time, in milliseconds.
pub const WARMUP_MS: u64 = 400;

fn argv(mode: &str, addr: &str, port: u16, rest: &[&str]) -> Vec<String> {
    ["sockperf", mode, "-i", addr, "-p", &port.to_string()]
        .iter()
        .chain(rest)
        .map(|s| s.to_string())
        .collect()
}

/// `sockperf sr` (its server) on `addr:port`; `flags` such as `--nonblocked`.
pub fn server(addr: &str, port: u16, flags: &[&str]) -> Vec<String> {
    argv("sr", addr, port, flags)
}

/// `sockperf ping-pong --full-rtt`: `size`-byte messages for `secs` seconds at `mps`
/// messages per second (`None`: as fast as answers come), `flags` such as `--nonblocked`.
pub fn ping_pong(
    addr: &str,
    port: u16,
    size: usize,
    secs: u64,
    mps: Option<u64>,
    flags: &[&str],
) -> Vec<String> {
    let (size, secs) = (size.to_string(), secs.to_string());
    let mps = mps.map_or("--mps=max".to_string(), |r| format!("--mps={r}"));
    let mut rest = vec!["-m", &size, "--full-rtt", "-t", &secs, &mps];
    rest.extend(flags);
    argv("ping-pong", addr, port, &rest)
}

/// How many messages `sockperf under-load` sends per reply it asks for and times
/// (`--reply-every`, its default): its latency figures sample 1 in this many.
pub const REPLY_EVERY: u64 = 100;

/// `sockperf under-load --full-rtt`: `size`-byte messages for `secs` seconds at `mps`
/// messages per second, every [`REPLY_EVERY`]th asking for a reply that is timed (round
/// trips, not sockperf's default half), `flags` such as `--nonblocked`.
pub fn under_load(
    addr: &str,
    port: u16,
    size: usize,
    secs: u64,
    mps: u64,
    flags: &[&str],
) -> Vec<String> {
    let (size, secs) = (size.to_string(), secs.to_string());
    let (mps, every) = (format!("--mps={mps}"), REPLY_EVERY.to_string());
    let mut rest = vec![
        "-m",
        &size,
        "--full-rtt",
        "-t",
        &secs,
        &mps,
        "--reply-every",
        &every,
    ];
    rest.extend(flags);
    argv("under-load", addr, port, &rest)
}

/// `sockperf tp`: its throughput mode's sender, one sendto() per `payload`-byte message,
/// flat out for `secs` seconds, waiting for no answer.
pub fn throughput(addr: &str, port: u16, payload: usize, secs: u64) -> Vec<String> {
    let (payload, secs) = (payload.to_string(), secs.to_string());
    argv(
        "tp",
        addr,
        port,
        &["-m", &payload, "-t", &secs, "--mps", "max"],
    )
}

/// What `sockperf ping-pong --full-rtt` printed about its valid window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClientReport {
    /// Seconds of the valid window (after sockperf's own warm-up).
    pub runtime_s: f64,
    pub sent: u64,
    pub received: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub avg_rtt_us: Option<f64>,
    /// (percentile, round trip in µs), as printed.
    pub percentiles: Vec<(f64, f64)>,
    pub min_us: Option<f64>,
    pub max_us: Option<f64>,
}

impl ClientReport {
    /// Transactions per second over the valid window.
    pub fn tps(&self) -> f64 {
        if self.runtime_s > 0.0 {
            self.received as f64 / self.runtime_s
        } else {
            0.0
        }
    }

    fn pct(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (q - p).abs() < 1e-6)
            .map(|x| x.1)
    }

    /// In the shape of our latency figures.
    pub fn latency(&self) -> Latency {
        Latency {
            min: self.min_us,
            p50: self.pct(50.0),
            p90: self.pct(90.0),
            p99: self.pct(99.0),
            p999: self.pct(99.9),
            p9999: self.pct(99.99),
            max: self.max_us,
            mean: self.avg_rtt_us,
        }
    }
}

/// Removes ANSI colour sequences (sockperf colours some lines).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The number after `key=` (or `key =`) in `line`.
fn field(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// Parses the client's output. Fails when the valid-window summary is missing (sockperf
/// got no answers, or its output changed).
pub fn parse_client(text: &str) -> Result<ClientReport, String> {
    let text = strip_ansi(text);
    let mut r = ClientReport::default();
    let mut have_window = false;
    for line in text.lines() {
        if line.contains("[Valid Duration]") {
            r.runtime_s = field(line, "RunTime").ok_or("no RunTime in [Valid Duration]")?;
            r.sent = field(line, "SentMessages").unwrap_or(0.0) as u64;
            r.received = field(line, "ReceivedMessages").unwrap_or(0.0) as u64;
            have_window = true;
        } else if line.contains("avg-rtt") {
            r.avg_rtt_us = field(line, "avg-rtt");
        } else if line.contains("avg-latency") {
            return Err("sockperf printed half round trips (run it with --full-rtt)".into());
        } else if line.contains("# dropped messages") {
            r.dropped = field(line, "# dropped messages").unwrap_or(0.0) as u64;
            r.duplicated = field(line, "# duplicated messages").unwrap_or(0.0) as u64;
        } else if line.contains("<MAX> observation") {
            r.max_us = field(line, "observation");
        } else if line.contains("<MIN> observation") {
            r.min_us = field(line, "observation");
        } else if let Some(i) = line.find("percentile") {
            let rest = &line[i + "percentile".len()..];
            if let Some((p, v)) = rest.split_once('=') {
                if let (Ok(p), Ok(v)) = (p.trim().parse(), v.trim().parse()) {
                    r.percentiles.push((p, v));
                }
            }
        }
    }
    if !have_window {
        return Err("no '[Valid Duration]' summary in sockperf's output".into());
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_ping_pong_output() {
        let text = include_str!("../../tests/samples/sockperf_pp_full_rtt.txt");
        let r = parse_client(text).unwrap();
        assert_eq!(r.runtime_s, 0.55);
        assert_eq!((r.sent, r.received, r.dropped), (22615, 22615, 0));
        assert_eq!(r.avg_rtt_us, Some(24.294));
        assert_eq!(r.max_us, Some(3002.374));
        assert_eq!(r.min_us, Some(3.643));
        let l = r.latency();
        assert_eq!(l.p50, Some(4.141));
        assert_eq!(l.p99, Some(92.774));
        assert_eq!(l.p999, Some(306.855));
        assert_eq!(l.p9999, Some(752.963));
        assert!((r.tps() - 22615.0 / 0.55).abs() < 1e-6);
    }

    #[test]
    fn refuses_half_rtt_and_empty_output() {
        assert!(parse_client("sockperf: ====> avg-latency=57.1\n").is_err());
        assert!(parse_client("sockperf: ERROR: connection refused\n").is_err());
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            server("10.0.0.1", 7, &["--nonblocked"]).join(" "),
            "sockperf sr -i 10.0.0.1 -p 7 --nonblocked"
        );
        assert_eq!(
            ping_pong("127.0.0.1", 9, 100, 3, Some(2000), &[]).join(" "),
            "sockperf ping-pong -i 127.0.0.1 -p 9 -m 100 --full-rtt -t 3 --mps=2000"
        );
        assert!(ping_pong("a", 9, 100, 3, None, &["--nonblocked"])
            .join(" ")
            .ends_with("--mps=max --nonblocked"));
        assert_eq!(
            under_load("127.0.0.1", 9, 100, 2, 5000, &["--nonblocked"]).join(" "),
            "sockperf under-load -i 127.0.0.1 -p 9 -m 100 --full-rtt -t 2 --mps=5000 --reply-every 100 --nonblocked"
        );
        assert_eq!(
            throughput("a", 9, 18, 4).join(" "),
            "sockperf tp -i a -p 9 -m 18 -t 4 --mps max"
        );
    }

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(strip_ansi("a\u{1b}[2;35mb\u{1b}[0mc"), "abc");
    }
}
