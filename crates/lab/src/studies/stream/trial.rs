//! One run of one cell: a receiver in the server namespace, a sender in the client
//! namespace, both pinned with taskset, measured from outside the same way for
//! `firehose stream` and for iperf3.

use super::StreamMatrix;
use crate::cputime::{self, Scope};
use crate::loss::LossAttribution;
use crate::peers::iperf3;
use crate::proc::{self, Proc};
use crate::study::{Lab, Outcome};
use crate::topology::Side;
use crate::{LabError, LabResult};
use firehose_stream::cpu::{self as scpu, HostCpu};
use firehose_stream::report::SenderDocument;
use firehose_stream::{RecvMode, SendMode};
use serde::{Deserialize, Serialize};
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
    /// Where the kernel dropped what was retransmitted (firehose's sender, as root); listed
    /// once in the document, under `loss_attribution`.
    #[serde(skip)]
    pub loss: Option<LossAttribution>,
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
            loss: None,
        }
    }
}

/// Where and how to run.
pub struct Spec<'a> {
    pub addr: IpAddr,
    pub port: u16,
    pub matrix: &'a StreamMatrix,
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

fn commands(lab: &Lab<'_>, s: &Spec<'_>, e: &Engine) -> (Command, Command) {
    let m = s.matrix;
    let p = &lab.placement;
    let sa = SocketAddr::new(s.addr, s.port).to_string();
    let secs = m.duration.as_secs().max(1);
    let (flows, msg) = (m.flows.to_string(), m.msg_size.to_string());
    let place = |side, cpus: &[usize], argv: Vec<String>| {
        let mut c = lab.command(side, cpus, &argv[0]);
        c.args(&argv[1..]);
        c
    };
    match e {
        Engine::Firehose { send, recv } => {
            let rx = lab.firehose(&["stream", "--listen", &sa, "--recv", recv.name(), "--once"]);
            let secs = secs.to_string();
            let tx = lab.firehose(&[
                "stream",
                "--target",
                &sa,
                "--send",
                send.name(),
                "--flows",
                &flows,
                "--msg-size",
                &msg,
                "--duration",
                &secs,
                "--json",
            ]);
            (
                place(Side::Server, &p.server_cpus, rx),
                place(Side::Client, &p.client_cpus, tx),
            )
        }
        Engine::Iperf3 { zerocopy } => {
            let a = s.addr.to_string();
            let rx = iperf3::server(s.port, Some(&a));
            let tx = iperf3::tcp_client(&a, s.port, secs, m.flows, m.msg_size, *zerocopy);
            (
                place(Side::Server, &p.server_cpus, rx),
                place(Side::Client, &p.client_cpus, tx),
            )
        }
    }
}

/// The error line of a tool that refused (exit 2 is firehose's "unsupported here").
fn refused(p: &Proc) -> String {
    let t = p.stderr_tail();
    t.strip_prefix("error: ").unwrap_or(&t).to_string()
}

/// Runs one cell once; `Skip` when the kernel refused a mode (the tool's one-line reason,
/// with the errno).
pub fn run(lab: &Lab<'_>, s: &Spec<'_>, e: &Engine) -> LabResult<Outcome<MatrixTrial>> {
    let stop = Some(lab.stop);
    let logs = &lab.workdir;
    let tag = format!("{}-r{}", s.cell.replace([' ', '/'], "_"), s.repetition);
    let (rxc, txc) = commands(lab, s, e);
    let (rx_line, tx_line) = (proc::argv(&rxc), proc::argv(&txc));
    let me = std::process::id();
    let mut rx = Proc::spawn(rxc, &format!("{tag}-rx"), logs)?;
    let ready_by = Instant::now() + Duration::from_secs(10);
    while !listening(rx.pid(), s.port) {
        if let Some(st) = rx.exited() {
            if st.code() == Some(2) {
                return Ok(Outcome::Skip(refused(&rx)));
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
    let deadline = Instant::now() + s.matrix.duration + Duration::from_secs(30);
    let Some(st) = tx.wait_until(deadline, stop)? else {
        return Err(LabError::Run(format!("{}: sender did not finish", s.cell)));
    };
    let b = scpu::sample();
    let c1 = cputime::seconds(me, Scope::Reaped)?;
    if st.code() == Some(2) {
        return Ok(Outcome::Skip(refused(&tx)));
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
        host: scpu::host_cpu(&a, &b, &cpus_used(lab)).unwrap_or_default(),
        retransmits: None,
        zerocopy_sends: None,
        zerocopy_copied: None,
        notes: Vec::new(),
        sender_command: tx_line,
        receiver_command: rx_line,
        loss: None,
    };
    let out = tx.stdout();
    match e {
        Engine::Firehose { .. } => read_firehose(&mut t, &out)?,
        Engine::Iperf3 { .. } => read_iperf3(&mut t, &out)?,
    }
    Ok(Outcome::Done(t))
}

fn cpus_used(lab: &Lab<'_>) -> Vec<usize> {
    let p = &lab.placement;
    let mut v: Vec<usize> = p
        .server_cpus
        .iter()
        .chain(&p.client_cpus)
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
    let no_report = |e| bad(&t.cell, "firehose stream printed no report", e);
    let v: serde_json::Value = serde_json::from_str(json).map_err(no_report)?;
    let doc = SenderDocument::deserialize(&v).map_err(no_report)?;
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
    t.loss = LossAttribution::from_document("stream", t.retransmits.unwrap_or(0), &v);
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
    let r = iperf3::read_tcp(json).map_err(|e| LabError::Run(format!("{}: {e}", t.cell)))?;
    t.gbps = r.gbps;
    t.retransmits = r.retransmits;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_errors_name_the_cell() {
        let e = read_iperf3(
            &mut MatrixTrial::blank("c1"),
            r#"{"error":"unable to connect"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("c1: iperf3: unable to connect"), "{e}");
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
