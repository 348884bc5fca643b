//! dnsperf, the DNS load generator beside `firehose load --proto dns` (`lab compare --proto
//! dns`, and `lab compare --io --proto dns` as the kernel-socket driver): its command line
//! and the reading of its "Statistics" block.

use std::collections::BTreeMap;
use std::path::Path;

/// DNS over TCP: this many connections, each closed after `queries_per_conn` queries
/// (never, if `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TcpLoad {
    pub connections: usize,
    pub queries_per_conn: Option<u32>,
}

/// One dnsperf run: one thread (`-T 1`).
#[derive(Debug, Clone)]
pub struct Dnsperf<'a> {
    pub server: &'a str,
    pub port: u16,
    /// The query file (`name type` per line).
    pub queries: &'a Path,
    pub seconds: f64,
    /// Queries in flight (`-q`).
    pub outstanding: usize,
    /// Queries per second (`-Q`); `None`: as many as answers allow.
    pub rate: Option<u64>,
    /// Over TCP (`-m tcp`, `-c` connections) instead of UDP (one socket).
    pub tcp: Option<TcpLoad>,
    /// Seconds before a query counts as lost (`-t`); `None`: dnsperf's 5.
    pub timeout_s: Option<u64>,
}

impl Dnsperf<'_> {
    pub fn argv(&self) -> Vec<String> {
        let mut v: Vec<String> = [
            "dnsperf",
            "-s",
            self.server,
            "-p",
            &self.port.to_string(),
            "-d",
            &self.queries.display().to_string(),
            "-l",
            &format!("{}", self.seconds),
            "-q",
            &self.outstanding.to_string(),
            "-c",
            &self.tcp.map_or(1, |t| t.connections).to_string(),
            "-T",
            "1",
        ]
        .map(String::from)
        .to_vec();
        if let Some(t) = self.timeout_s {
            v.extend(["-t".into(), t.to_string()]);
        }
        if let Some(t) = self.tcp {
            v.extend(["-m".into(), "tcp".into()]);
            if let Some(n) = t.queries_per_conn {
                v.extend(["-O".into(), format!("num-queries-per-conn={n}")]);
            }
        }
        if let Some(r) = self.rate {
            v.extend(["-Q".into(), r.to_string()]);
        }
        v
    }
}

/// What dnsperf's "Statistics" block says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Statistics {
    pub qps: f64,
    pub completed: u64,
    pub lost: u64,
    /// dnsperf reports the mean latency only.
    pub mean_us: Option<f64>,
    pub codes: BTreeMap<String, u64>,
    /// "Run time (s)": how long it sent queries.
    pub run_s: Option<f64>,
}

/// Reads dnsperf's "Statistics" block; `None` when it is not there.
pub fn parse(text: &str) -> Option<Statistics> {
    let field = |label: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(str::trim)
    };
    let first_num = |s: &str| s.split_whitespace().next()?.parse::<f64>().ok();
    let completed = first_num(field("Queries completed:")?)? as u64;
    let lost = first_num(field("Queries lost:")?)? as u64;
    let qps = first_num(field("Queries per second:")?)?;
    let mean_us = field("Average Latency (s):")
        .and_then(first_num)
        .map(|s| s * 1e6);
    let mut codes = BTreeMap::new();
    if let Some(list) = field("Response codes:") {
        for item in list.split(',') {
            let mut it = item.split_whitespace();
            if let (Some(name), Some(n)) = (it.next(), it.next().and_then(|n| n.parse().ok())) {
                codes.insert(name.to_string(), n);
            }
        }
    }
    Some(Statistics {
        qps,
        completed,
        lost,
        mean_us,
        codes,
        run_s: field("Run time (s):").and_then(first_num),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dnsperf_statistics() {
        let text = include_str!("../../tests/samples/dnsperf_2.10.txt");
        let r = parse(text).unwrap();
        assert_eq!(r.completed, 193833);
        assert_eq!(r.lost, 0);
        assert!((r.qps - 193817.688403).abs() < 1e-6);
        assert_eq!(r.mean_us, Some(75.0));
        assert_eq!(r.run_s, Some(1.000079));
        assert_eq!(r.codes["NOERROR"], 145375);
        assert_eq!(r.codes["NXDOMAIN"], 48458);
        assert!(parse("no statistics here").is_none());
    }

    #[test]
    fn rate_tcp_and_timeout_go_to_their_flags() {
        let mut d = Dnsperf {
            server: "127.0.0.1",
            port: 53,
            queries: Path::new("q"),
            seconds: 5.0,
            outstanding: 100,
            rate: Some(50_000),
            tcp: None,
            timeout_s: None,
        };
        let l = d.argv().join(" ");
        assert_eq!(
            l,
            "dnsperf -s 127.0.0.1 -p 53 -d q -l 5 -q 100 -c 1 -T 1 -Q 50000"
        );
        (d.rate, d.outstanding, d.timeout_s) = (None, 512, Some(1));
        d.tcp = Some(TcpLoad {
            connections: 8,
            queries_per_conn: Some(1),
        });
        let l = d.argv().join(" ");
        assert!(
            l.ends_with("-q 512 -c 8 -T 1 -t 1 -m tcp -O num-queries-per-conn=1"),
            "{l}"
        );
    }
}
