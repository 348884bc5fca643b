//! iperf3: the bulk TCP peer of `lab stream` (its copy path and its `-Z` sendfile path) and
//! the UDP sender beside `firehose flood` in `lab flood`. Here: its command lines and the
//! reading of its `-J` report.

use crate::{LabError, LabResult};

/// `iperf3 -s -1` (one test, then exit) on `port`, bound to `bind` when given;
/// `--forceflush` so that its "listening" line is in the log at once.
pub fn server(port: u16, bind: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = ["iperf3", "-s", "-1", "--forceflush"]
        .map(String::from)
        .to_vec();
    if let Some(a) = bind {
        v.extend(["-B".into(), a.into()]);
    }
    v.extend(["-p".into(), port.to_string()]);
    v
}

/// The line `server` prints once it listens.
pub const LISTENING: &str = "listening";

/// A TCP client: `flows` parallel streams (`-P`) of `msg`-byte writes (`-l`) for `secs`
/// seconds, the report as JSON (`-J`); `zerocopy` is its sendfile path (`-Z`).
pub fn tcp_client(
    addr: &str,
    port: u16,
    secs: u64,
    flows: usize,
    msg: usize,
    zerocopy: bool,
) -> Vec<String> {
    let mut v: Vec<String> = [
        "iperf3",
        "-c",
        addr,
        "-p",
        &port.to_string(),
        "-t",
        &secs.to_string(),
        "-P",
        &flows.to_string(),
        "-l",
        &msg.to_string(),
        "-J",
    ]
    .map(String::from)
    .to_vec();
    if zerocopy {
        v.push("-Z".into());
    }
    v
}

/// A UDP client sending `payload`-byte datagrams as fast as it can (`-u -b 0`) for `secs`.
pub fn udp_client(addr: &str, port: u16, payload: usize, secs: u64) -> Vec<String> {
    [
        "iperf3",
        "-c",
        addr,
        "-p",
        &port.to_string(),
        "-u",
        "-b",
        "0",
        "-l",
        &payload.to_string(),
        "-t",
        &secs.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// What a TCP client's `-J` report says: what the server received, and retransmits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpReport {
    pub gbps: f64,
    pub retransmits: Option<u64>,
}

/// Reads a TCP client's `-J` report; an `error` in it, or no received rate, is an error.
pub fn read_tcp(json: &str) -> LabResult<TcpReport> {
    let bad = |e: &dyn std::fmt::Display| LabError::Run(format!("iperf3 -J output: {e}"));
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(&e))?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(LabError::Run(format!("iperf3: {err}")));
    }
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| bad(&"no end.sum_received.bits_per_second"))?;
    Ok(TcpReport {
        gbps: bps / 1e9,
        retransmits: end["sum_sent"]["retransmits"].as_u64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_gives_received_rate_and_retransmits() {
        let j = r#"{"end":{"sum_sent":{"bits_per_second":2.1e10,"retransmits":7},
                   "sum_received":{"bits_per_second":2.0e10}}}"#;
        let r = read_tcp(j).unwrap();
        assert_eq!((r.gbps, r.retransmits), (20.0, Some(7)));
        let e = read_tcp(r#"{"error":"unable to connect"}"#).unwrap_err();
        assert!(e.to_string().contains("unable to connect"), "{e}");
        assert!(read_tcp("{}").is_err());
    }

    #[test]
    fn command_lines() {
        assert_eq!(
            server(5201, Some("fd00::1")).join(" "),
            "iperf3 -s -1 --forceflush -B fd00::1 -p 5201"
        );
        assert_eq!(
            tcp_client("fd00::1", 5201, 3, 16, 524288, true).join(" "),
            "iperf3 -c fd00::1 -p 5201 -t 3 -P 16 -l 524288 -J -Z"
        );
        assert_eq!(
            udp_client("10.0.0.1", 9, 18, 5).join(" "),
            "iperf3 -c 10.0.0.1 -p 9 -u -b 0 -l 18 -t 5"
        );
    }
}
