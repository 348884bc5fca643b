//! The firehose servers on this host that expose `--metrics`: found from their command
//! lines (/proc/<pid>/cmdline), scraped over HTTP, their counters turned into rates.

use crate::top::ServerRow;
use firehose_host::prom;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One scrape of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub pid: u32,
    pub metrics: String,
    /// (rx packets, tx packets, kernel drops, errors), summed over workers.
    pub counters: Result<[Option<f64>; 4], String>,
}

/// The `--metrics` address in a firehose serve command line (NUL-separated), if any.
pub fn metrics_addr(cmdline: &str) -> Option<String> {
    let mut words = cmdline.split('\0');
    let prog = words.next()?;
    if prog.rsplit('/').next()? != "firehose" {
        return None;
    }
    let words: Vec<&str> = words.collect();
    if words.first() != Some(&"serve") {
        return None;
    }
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if *w == "--metrics" {
            return it.next().map(|s| s.to_string());
        }
        if let Some(v) = w.strip_prefix("--metrics=") {
            return Some(v.to_string());
        }
    }
    None
}

/// Every running `firehose serve --metrics ADDR` in this network namespace: (pid, ADDR).
/// A server in another namespace is left out: its address means something only there (a
/// scrape from here would reach another socket, or send on this namespace's loopback).
pub fn find() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(d) = std::fs::read_dir("/proc") else {
        return out;
    };
    let netns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    let here = netns("self");
    for e in d.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // Unreadable links (another user's process, without root) do not rule it out.
        if let (Some(a), Some(b)) = (&here, netns(&pid.to_string())) {
            if *a != b {
                continue;
            }
        }
        if let Ok(c) = std::fs::read_to_string(format!("/proc/{pid}/cmdline")) {
            if let Some(a) = metrics_addr(&c) {
                out.push((pid, a));
            }
        }
    }
    out.sort();
    out
}

/// GET /metrics from `addr` with a short timeout.
fn get(addr: &str) -> Result<String, String> {
    let sa: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let t = Duration::from_millis(300);
    let mut s = TcpStream::connect_timeout(&sa, t).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(t)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(t)).map_err(|e| e.to_string())?;
    s.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut body = Vec::new();
    s.take(4 << 20)
        .read_to_end(&mut body)
        .map_err(|e| format!("{addr}: {e}"))?;
    let text = String::from_utf8_lossy(&body);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.") || head.split_whitespace().nth(1).is_none_or(|c| c != "200") {
        return Err(format!("{addr}: {}", head.lines().next().unwrap_or("")));
    }
    Ok(rest.to_string())
}

/// Scrapes one server.
pub fn scrape(pid: u32, addr: &str) -> Server {
    let counters = get(addr).map(|text| {
        let s = prom::parse(&text);
        let errors = match (
            prom::sum(&s, "firehose_receive_errors_total"),
            prom::sum(&s, "firehose_send_errors_total"),
        ) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        [
            prom::sum(&s, "firehose_packets_received_total"),
            prom::sum(&s, "firehose_packets_sent_total"),
            prom::sum(&s, "firehose_socket_kernel_drops_total"),
            errors,
        ]
    });
    Server {
        pid,
        metrics: addr.to_string(),
        counters,
    }
}

/// A server's rates since `old` (its previous scrape).
pub fn rates(s: &Server, old: Option<&Server>, secs: f64) -> ServerRow {
    let (now, before) = match (&s.counters, old.map(|o| &o.counters)) {
        (Ok(n), Some(Ok(b))) => (Some(*n), Some(*b)),
        (Ok(n), _) => (Some(*n), None),
        (Err(_), _) => (None, None),
    };
    let r = |i: usize| Some((now?[i]? - before?[i]?).max(0.0) / secs);
    ServerRow {
        pid: s.pid,
        metrics: s.metrics.clone(),
        rx_pps: r(0),
        tx_pps: r(1),
        kernel_drops_per_s: r(2),
        errors_per_s: r(3),
        error: s.counters.as_ref().err().cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_metrics_flag_of_a_server_only() {
        assert_eq!(
            metrics_addr("/usr/bin/firehose\0serve\0--listen\0x\0--metrics\x00127.0.0.1:9100\0"),
            Some("127.0.0.1:9100".into())
        );
        assert_eq!(
            metrics_addr("firehose\0serve\0--metrics=[::1]:9100\0"),
            Some("[::1]:9100".into())
        );
        assert_eq!(metrics_addr("firehose\0load\0--metrics\0x\0"), None);
        assert_eq!(metrics_addr("firehose\0serve\0--listen\0x\0"), None);
        assert_eq!(metrics_addr("nginx\0serve\0--metrics\0x\0"), None);
        assert_eq!(metrics_addr(""), None);
    }

    #[test]
    fn rates_need_two_scrapes() {
        let a = Server {
            pid: 1,
            metrics: "m".into(),
            counters: Ok([Some(100.0), Some(90.0), None, Some(0.0)]),
        };
        let b = Server {
            counters: Ok([Some(300.0), Some(290.0), None, Some(2.0)]),
            ..a.clone()
        };
        let r = rates(&b, Some(&a), 2.0);
        assert_eq!(
            (r.rx_pps, r.tx_pps, r.kernel_drops_per_s, r.errors_per_s),
            (Some(100.0), Some(100.0), None, Some(1.0))
        );
        assert_eq!(rates(&b, None, 2.0).rx_pps, None);
        let e = Server {
            counters: Err("refused".into()),
            ..a
        };
        assert_eq!(rates(&e, None, 1.0).error.as_deref(), Some("refused"));
    }
}
