//! One run of one cell: a receiver in the server namespace, a sender in the client
//! namespace, both pinned with taskset, measured from outside the same way for
//! `firehose stream` and for iperf3.

use super::StreamMatrixOptions;
use crate::cputime::{self, Scope};
use crate::proc::{self, Proc};
use crate::topology::{Side, Topology};
use crate::{LabError, LabResult};
use firehose_stream::cpu::{self as scpu, HostCpu};
use firehose_stream::report::SenderDocument;
use firehose_stream::{RecvMode, SendMode};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

/// Who moves the bytes in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "tool")]
pub enum Engine {
    Firehose {
        send: SendMode,
        recv: RecvMode,
    },
    /// iperf3; `zerocopy` is its `-Z` (sendfile) path.
    Iperf3 {
        zerocopy: bool,
    },
}

impl Engine {
    pub fn name(&self) -> String {
        match self {
            Engine::Firehose { send, recv } => format!("firehose {send}/{recv}"),
            Engine::Iperf3 { zerocopy: false } => "iperf3".into(),
            Engine::Iperf3 { zerocopy: true } => "iperf3 -Z".into(),
        }
    }

    pub fn is_peer(&self) -> bool {
        matches!(self, Engine::Iperf3 { .. })
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixTrial {
    pub cell: String,
    pub repetition: usize,
    /// Throughput counted by the receiving side.
    pub gbps: f64,
    /// Wall time from the sender's start to its exit.
    pub seconds: f64,
    /// CPU seconds of each process over its whole life.
    pub sender_cpu_s: f64,
    pub receiver_cpu_s: f64,
    /// Sender + receiver CPU seconds over `seconds`.
    pub process_cores: f64,
    /// /proc/stat on the CPUs the run used, over the sender's life.
    pub host: HostCpu,
    pub retransmits: Option<u64>,
    /// Zero-copy sends, and those the kernel copied anyway (firehose zerocopy modes).
    pub zerocopy_sends: Option<u64>,
    pub zerocopy_copied: Option<u64>,
    /// What firehose's counters say about the path the bytes took.
    pub notes: Vec<String>,
    pub sender_command: String,
    pub receiver_command: String,
}

#[cfg(test)]
impl MatrixTrial {
    /// A trial with nothing measured, for tests of the readers and the report.
    pub(crate) fn blank(cell: &str) -> MatrixTrial {
        MatrixTrial {
            cell: cell.into(),
            repetition: 1,
            gbps: 0.0,
            seconds: 1.0,
            sender_cpu_s: 0.0,
            receiver_cpu_s: 0.0,
            process_cores: 0.0,
            host: HostCpu::default(),
            retransmits: None,
            zerocopy_sends: None,
            zerocopy_copied: None,
            notes: Vec::new(),
            sender_command: String::new(),
            receiver_command: String::new(),
        }
    }
}

/// How a run ended.
pub enum Outcome {
    Done(Box<MatrixTrial>),
    /// The kernel refused a mode: the tool's one-line reason (with the errno).
    Unsupported(String),
}

/// Where and how to run.
pub struct Spec<'a> {
    pub topo: &'a Topology,
    pub addr: IpAddr,
    pub port: u16,
    pub opts: &'a StreamMatrixOptions,
    pub cell: &'a str,
    pub repetition: usize,
}

/// True when a TCP socket of `pid`'s namespace listens on `port` (/proc/PID/net/tcp6, tcp).
fn listening(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["tcp6", "tcp"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .map(|t| {
                t.lines().skip(1).any(|l| {
                    let mut c = l.split_whitespace();
                    let local = c.nth(1).unwrap_or("");
                    let state = c.nth(1).unwrap_or("");
                    local.ends_with(&want) && state == "0A"
                })
            })
            .unwrap_or(false)
    })
}

fn commands(s: &Spec<'_>, e: &Engine) -> (Command, Command) {
    let o = s.opts;
    let sa = SocketAddr::new(s.addr, s.port).to_string();
    let secs = o.duration.as_secs().max(1).to_string();
    let (flows, msg) = (o.flows.to_string(), o.msg_size.to_string());
    let fh = o.firehose.as_os_str().to_str().unwrap_or("firehose");
    match e {
        Engine::Firehose { send, recv } => {
            let mut rx = s.topo.command(Side::Server, &o.server_cpus, fh);
            rx.args(["stream", "--listen", &sa, "--recv", recv.name(), "--once"]);
            let mut tx = s.topo.command(Side::Client, &o.client_cpus, fh);
            tx.args(["stream", "--target", &sa, "--send", send.name()]);
            tx.args(["--flows", &flows, "--msg-size", &msg, "--duration", &secs]);
            tx.arg("--json");
            (rx, tx)
        }
        Engine::Iperf3 { zerocopy } => {
            let (a, p) = (s.addr.to_string(), s.port.to_string());
            let mut rx = s.topo.command(Side::Server, &o.server_cpus, "iperf3");
            rx.args(["-s", "-1", "-B", &a, "-p", &p]);
            let mut tx = s.topo.command(Side::Client, &o.client_cpus, "iperf3");
            tx.args([
                "-c", &a, "-p", &p, "-t", &secs, "-P", &flows, "-l", &msg, "-J",
            ]);
            if *zerocopy {
                tx.arg("-Z");
            }
            (rx, tx)
        }
    }
}

/// The error line of a tool that refused (exit 2 is firehose's "unsupported here").
fn refused(p: &Proc) -> String {
    let t = p.stderr_tail();
    t.strip_prefix("error: ").unwrap_or(&t).to_string()
}

/// Runs one cell once.
pub fn run(s: &Spec<'_>, e: &Engine) -> LabResult<Outcome> {
    let stop = s.opts.stop.as_deref();
    let logs = &s.opts.logs;
    let tag = format!("{}-r{}", s.cell.replace([' ', '/'], "_"), s.repetition);
    let (rxc, txc) = commands(s, e);
    let (rx_line, tx_line) = (proc::argv(&rxc), proc::argv(&txc));
    let me = std::process::id();
    let mut rx = Proc::spawn(rxc, &format!("{tag}-rx"), logs)?;
    let ready_by = Instant::now() + Duration::from_secs(10);
    while !listening(rx.pid(), s.port) {
        if let Some(st) = rx.exited() {
            if st.code() == Some(2) {
                return Ok(Outcome::Unsupported(refused(&rx)));
            }
            return Err(LabError::Run(format!(
                "{}: receiver exited ({st}): {}",
                s.cell,
                rx.stderr_tail()
            )));
        }
        proc::check(stop)?;
        if Instant::now() >= ready_by {
            return Err(LabError::Run(format!(
                "{}: receiver never listened",
                s.cell
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let c0 = cputime::seconds(me, Scope::Reaped)?;
    let a = scpu::sample();
    let mut tx = Proc::spawn(txc, &format!("{tag}-tx"), logs)?;
    let deadline = Instant::now() + s.opts.duration + Duration::from_secs(30);
    let Some(st) = tx.wait_until(deadline, stop)? else {
        return Err(LabError::Run(format!("{}: sender did not finish", s.cell)));
    };
    let b = scpu::sample();
    let c1 = cputime::seconds(me, Scope::Reaped)?;
    if st.code() == Some(2) {
        return Ok(Outcome::Unsupported(refused(&tx)));
    }
    if !st.success() {
        return Err(LabError::Run(format!(
            "{}: sender exited ({st}): {}",
            s.cell,
            tx.stderr_tail()
        )));
    }
    let rx_st = rx.wait_until(Instant::now() + Duration::from_secs(15), stop)?;
    let c2 = cputime::seconds(me, Scope::Reaped)?;
    if rx_st.is_none() {
        rx.stop("INT", Duration::from_secs(2));
        return Err(LabError::Run(format!(
            "{}: receiver did not exit after the sender",
            s.cell
        )));
    }
    let seconds = a.elapsed(&b);
    let mut t = MatrixTrial {
        cell: s.cell.to_string(),
        repetition: s.repetition,
        gbps: 0.0,
        seconds,
        sender_cpu_s: c1 - c0,
        receiver_cpu_s: c2 - c1,
        process_cores: if seconds > 0.0 {
            (c2 - c0) / seconds
        } else {
            0.0
        },
        host: scpu::host_cpu(&a, &b, &cpus_used(s.opts)).unwrap_or_default(),
        retransmits: None,
        zerocopy_sends: None,
        zerocopy_copied: None,
        notes: Vec::new(),
        sender_command: tx_line,
        receiver_command: rx_line,
    };
    let out = tx.stdout();
    match e {
        Engine::Firehose { .. } => read_firehose(&mut t, &out)?,
        Engine::Iperf3 { .. } => read_iperf3(&mut t, &out)?,
    }
    Ok(Outcome::Done(Box::new(t)))
}

fn cpus_used(o: &StreamMatrixOptions) -> Vec<usize> {
    let mut v: Vec<usize> = o
        .server_cpus
        .iter()
        .chain(&o.client_cpus)
        .copied()
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn bad(cell: &str, what: &str, e: impl std::fmt::Display) -> LabError {
    LabError::Run(format!("{cell}: {what}: {e}"))
}

/// Takes throughput and counters from `firehose stream --json` (the receiver's figures
/// come back to the sender on flow 0).
pub fn read_firehose(t: &mut MatrixTrial, json: &str) -> LabResult<()> {
    let doc: SenderDocument = serde_json::from_str(json)
        .map_err(|e| bad(&t.cell, "firehose stream printed no report", e))?;
    let r = doc.body.report;
    let Some(rx) = &r.receiver else {
        return Err(LabError::Run(format!(
            "{}: no receiver report ({})",
            t.cell,
            r.receiver_missing.unwrap_or_default()
        )));
    };
    t.gbps = rx.gbps;
    t.retransmits = Some(
        r.sender
            .flows
            .iter()
            .filter_map(|f| f.tcp_info.as_ref()?.total_retrans)
            .map(u64::from)
            .sum(),
    );
    let zc: Vec<_> = r
        .sender
        .flows
        .iter()
        .filter_map(|f| f.zerocopy.as_ref())
        .collect();
    if !zc.is_empty() {
        t.zerocopy_sends = Some(zc.iter().map(|z| z.sends).sum());
        t.zerocopy_copied = Some(zc.iter().map(|z| z.copied).sum());
    }
    t.notes = r.sender.notes.iter().chain(&rx.notes).cloned().collect();
    Ok(())
}

/// Takes throughput (what the server received) and retransmits from `iperf3 -J`.
pub fn read_iperf3(t: &mut MatrixTrial, json: &str) -> LabResult<()> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| bad(&t.cell, "iperf3 -J output", e))?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(LabError::Run(format!("{}: iperf3: {err}", t.cell)));
    }
    let end = &v["end"];
    t.gbps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| bad(&t.cell, "iperf3 -J", "no end.sum_received.bits_per_second"))?
        / 1e9;
    t.retransmits = end["sum_sent"]["retransmits"].as_u64();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_json_gives_received_rate_and_retransmits() {
        let mut t = MatrixTrial::blank("c");
        let j = r#"{"end":{"sum_sent":{"bits_per_second":2.1e10,"retransmits":7},
                   "sum_received":{"bits_per_second":2.0e10}}}"#;
        read_iperf3(&mut t, j).unwrap();
        assert_eq!(t.gbps, 20.0);
        assert_eq!(t.retransmits, Some(7));
        let e = read_iperf3(
            &mut MatrixTrial::blank("c"),
            r#"{"error":"unable to connect"}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unable to connect"), "{e}");
        assert!(read_iperf3(&mut MatrixTrial::blank("c"), "{}").is_err());
    }

    #[test]
    fn engine_names() {
        let e = Engine::Firehose {
            send: SendMode::UringZc,
            recv: RecvMode::Mmap,
        };
        assert_eq!(e.name(), "firehose uring-zc/mmap");
        assert_eq!(Engine::Iperf3 { zerocopy: true }.name(), "iperf3 -Z");
    }
}
