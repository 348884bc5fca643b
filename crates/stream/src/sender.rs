//! The sending side: opens the flows, sends the header on each, streams in the chosen mode
//! on pinned threads, prints intervals through a callback, then collects the receiver's
//! report from flow 0.

use crate::cpu;
use crate::pattern::Header;
use crate::report::{FlowReport, StreamReport};
use crate::send_modes::{self, FlowSend};
use crate::side::{finish, join_all, Side};
use crate::{gbps, Interval, SendMode, StreamError};
use firehose_sys::supervise::{Health, Supervisor};
use firehose_sys::tcp::{ConnectOptions, TcpSock};
use firehose_sys::uring::UringSupport;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What to send and how.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub target: SocketAddr,
    pub mode: SendMode,
    pub flows: u32,
    pub msg_size: usize,
    /// Run time; ignored for flows that reach `bytes_per_flow` first.
    pub duration: Duration,
    /// Send exactly this many bytes per flow, then stop (tests use it).
    pub bytes_per_flow: Option<u64>,
    /// CPUs to pin flow threads to, round robin; empty: not pinned.
    pub cpus: Vec<usize>,
    pub sndbuf: Option<i32>,
    pub rcvbuf: Option<i32>,
    pub mss: Option<i32>,
    pub congestion: Option<String>,
    /// Buffers per flow (the ring a zero-copy sender cycles through).
    pub buffers: usize,
    /// Rewrite each buffer with the next message as soon as the kernel releases it.
    pub rewrite: bool,
    pub interval: Duration,
}

impl SenderConfig {
    /// Defaults of the Bloomberg talk: 16 flows, 512 KiB messages.
    pub fn new(target: SocketAddr, mode: SendMode) -> Self {
        SenderConfig {
            target,
            mode,
            flows: 16,
            msg_size: 512 << 10,
            duration: Duration::from_secs(10),
            bytes_per_flow: None,
            cpus: Vec::new(),
            sndbuf: None,
            rcvbuf: None,
            mss: None,
            congestion: None,
            buffers: 8,
            rewrite: false,
            interval: Duration::from_secs(1),
        }
    }

    fn validate(&self) -> Result<(), StreamError> {
        if self.flows == 0 || self.flows > 1024 {
            return Err(StreamError::Config(format!(
                "--flows {} must be 1..=1024",
                self.flows
            )));
        }
        if self.msg_size == 0 || self.msg_size > 64 << 20 {
            return Err(StreamError::Config(format!(
                "--msg-size {} must be 1 byte..64 MiB",
                self.msg_size
            )));
        }
        if self.rewrite && !self.mode.can_rewrite() {
            return Err(StreamError::Config(format!(
                "--rewrite-buffers does not apply to --send {}: it sends fixed pages (use copy, zerocopy, uring or uring-zc)",
                self.mode
            )));
        }
        if self.buffers == 0 || self.buffers > 4096 {
            return Err(StreamError::Config(
                "buffers per flow must be 1..=4096".into(),
            ));
        }
        Ok(())
    }

    fn probe(&self) -> Result<(), StreamError> {
        let op = match self.mode {
            SendMode::Uring => "send",
            SendMode::UringZc => "send_zc",
            _ => return Ok(()),
        };
        UringSupport::probe()
            .require(op)
            .map_err(|source| StreamError::Unsupported {
                mode: format!("--send {}", self.mode),
                source,
            })
    }
}

/// A connected flow before the data phase.
struct Flow {
    sock: TcpSock,
    report: FlowReport,
}

fn connect(cfg: &SenderConfig, run_id: u64, flow: u32) -> Result<Flow, StreamError> {
    let opts = ConnectOptions {
        sndbuf: cfg.sndbuf,
        rcvbuf: cfg.rcvbuf,
        mss: cfg.mss,
        congestion: cfg.congestion.clone(),
        zerocopy: cfg.mode == SendMode::Zerocopy,
    };
    let sock = TcpSock::connect(&cfg.target, &opts).map_err(|source| {
        if source.what.starts_with("setsockopt(SO_ZEROCOPY") {
            StreamError::Unsupported {
                mode: "--send zerocopy".into(),
                source,
            }
        } else {
            StreamError::Setup {
                what: format!("flow {flow}"),
                source,
            }
        }
    })?;
    let header = Header {
        run_id,
        flow,
        flows: cfg.flows,
        msg_size: cfg.msg_size as u32,
        cycle: if cfg.rewrite { 0 } else { cfg.buffers as u32 },
    };
    sock.send_all(&header.encode())
        .map_err(StreamError::setup(format!("flow {flow}: header")))?;
    let granted =
        |r: firehose_sys::SysResult<i32>| r.map_err(StreamError::setup(format!("flow {flow}")));
    let report = FlowReport {
        flow,
        sndbuf: granted(sock.sndbuf())?,
        rcvbuf: granted(sock.rcvbuf())?,
        mss: granted(sock.maxseg())?,
        ..FlowReport::default()
    };
    Ok(Flow { sock, report })
}

fn run_id() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    t ^ ((std::process::id() as u64) << 40)
}

/// Runs a sender; `stop` ends the run early (Ctrl-C). Calls `on_interval` once per interval.
pub fn run(
    cfg: &SenderConfig,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<StreamReport, StreamError> {
    cfg.validate()?;
    cfg.probe()?;
    let id = run_id();
    let mut flows = Vec::new();
    for f in 0..cfg.flows {
        flows.push(connect(cfg, id, f)?);
    }
    let congestion = flows[0]
        .sock
        .congestion()
        .map_err(StreamError::setup("flow 0"))?;
    let counters: Vec<AtomicU64> = (0..cfg.flows).map(|_| AtomicU64::new(0)).collect();
    let flows_stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let mut on_interval = |i: &Interval| {
        seen.push(i.clone());
        on_interval(i)
    };
    let before = cpu::sample();
    let start = Instant::now();
    let results: Vec<Result<FlowReport, StreamError>> = std::thread::scope(|s| {
        let handles: Vec<_> = flows
            .iter()
            .enumerate()
            .map(|(i, fl)| {
                let (counter, flows_stop) = (&counters[i], &flows_stop);
                let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[i % cfg.cpus.len()]);
                s.spawn(move || flow_thread(cfg, fl, counter, flows_stop, cpu))
            })
            .collect();
        monitor(
            cfg,
            stop,
            &flows_stop,
            &counters,
            start,
            &handles,
            &mut on_interval,
        );
        join_all(handles)
    });
    let sender = finish(
        Side {
            role: "sender",
            mode: cfg.mode.name(),
            cpus: &cfg.cpus,
            checked: cfg.rewrite,
        },
        &before,
        &counters,
        results,
    )?;
    let (receiver, receiver_missing) = match read_receiver_report(&flows[0].sock) {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    // Read TCP_INFO once the receiver has everything, so retransmits cover the whole run.
    let mut sender = sender;
    for (r, fl) in sender.flows.iter_mut().zip(&flows) {
        r.tcp_info = fl.sock.tcp_info().ok();
    }
    let roi = StreamReport::compute_roi(&sender, receiver.as_ref());
    Ok(StreamReport {
        target: cfg.target.to_string(),
        flows: cfg.flows,
        msg_size: cfg.msg_size,
        congestion,
        sender,
        receiver,
        receiver_missing,
        roi,
        intervals: seen,
    })
}

fn flow_thread(
    cfg: &SenderConfig,
    fl: &Flow,
    counter: &AtomicU64,
    flows_stop: &AtomicBool,
    cpu: Option<usize>,
) -> Result<FlowReport, StreamError> {
    if let Some(c) = cpu {
        firehose_sys::cpu::pin_current_thread(c).map_err(StreamError::setup(format!(
            "flow {}: pin to CPU {c}",
            fl.report.flow
        )))?;
    }
    let f = FlowSend {
        sock: &fl.sock,
        flow: fl.report.flow,
        msg_size: cfg.msg_size,
        buffers: cfg.buffers,
        rewrite: cfg.rewrite,
        limit: cfg.bytes_per_flow,
        stop: flows_stop,
        sent: counter,
    };
    let fail = |source| {
        flows_stop.store(true, Ordering::Relaxed);
        StreamError::Transfer {
            flow: fl.report.flow,
            bytes: counter.load(Ordering::Relaxed),
            source,
        }
    };
    let zc = send_modes::run(cfg.mode, &f).map_err(fail)?;
    let mut r = fl.report.clone();
    r.bytes = counter.load(Ordering::Relaxed);
    r.zerocopy = zc;
    fl.sock.shutdown_write().map_err(fail)?;
    Ok(r)
}

/// Emits intervals until every flow thread finished; stops the flows at the deadline.
fn monitor<T>(
    cfg: &SenderConfig,
    stop: &AtomicBool,
    flows_stop: &AtomicBool,
    counters: &[AtomicU64],
    start: Instant,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    on_interval: &mut dyn FnMut(&Interval),
) {
    let deadline = start + cfg.duration;
    intervals(stop, counters, start, cfg.interval, on_interval, || {
        if stop.load(Ordering::Relaxed)
            || (cfg.bytes_per_flow.is_none() && Instant::now() >= deadline)
        {
            flows_stop.store(true, Ordering::Relaxed);
        }
        handles.iter().all(|h| h.is_finished())
    });
}

/// Calls `on_interval` every `every` with per-flow rates until `done()` says so, on the
/// supervisor loop every role shares ([`firehose_sys::supervise`]). A signal (`stop`) does
/// not end the loop by itself: `done` sees it, stops the flows, and the loop waits for them
/// to end and report.
pub(crate) fn intervals(
    stop: &AtomicBool,
    counters: &[AtomicU64],
    start: Instant,
    every: Duration,
    on_interval: &mut dyn FnMut(&Interval),
    mut done: impl FnMut() -> bool,
) {
    let mut last: Vec<u64> = vec![0; counters.len()];
    let mut last_t = start;
    let mut sv = Supervisor::new(stop);
    sv.interval = Some(every);
    sv.poll = Duration::from_millis(20);
    sv.drain = true;
    let watch = |_| {
        Ok(if done() {
            Health::Done
        } else {
            Health::Running
        })
    };
    let tick = |now: Instant| {
        let secs = now.duration_since(last_t).as_secs_f64();
        let cur: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let per_flow: Vec<f64> = cur
            .iter()
            .zip(&last)
            .map(|(c, l)| gbps(c - l, secs))
            .collect();
        on_interval(&Interval {
            t: now.duration_since(start).as_secs_f64(),
            total_gbps: per_flow.iter().sum(),
            per_flow_gbps: per_flow,
        });
        last = cur;
        last_t = now;
        Ok(())
    };
    // Neither callback fails: the loop ends only when `done` says so.
    let _ = sv.run::<std::convert::Infallible>(start, watch, tick);
}

fn read_receiver_report(sock: &TcpSock) -> Result<crate::report::SideReport, String> {
    sock.set_timeouts(Duration::from_secs(30))
        .map_err(|e| e.to_string())?;
    let mut len = [0u8; 4];
    match sock.recv_exact(&mut len) {
        Ok(true) => {}
        Ok(false) => {
            return Err(
                "the receiver closed flow 0 without a report (not a firehose stream receiver?)"
                    .into(),
            )
        }
        Err(e) => return Err(format!("reading the receiver's report: {e}")),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > 16 << 20 {
        return Err(format!("receiver report of {n} bytes is implausible"));
    }
    let mut buf = vec![0u8; n];
    sock.recv_exact(&mut buf)
        .map_err(|e| format!("reading the receiver's report: {e}"))?;
    serde_json::from_slice(&buf).map_err(|e| format!("receiver report is not valid JSON: {e}"))
}
