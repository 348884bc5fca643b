//! The receiving side: accepts the flows of one sender run (grouped by the header's run
//! id), receives in the chosen mode on pinned threads, checks the pattern, and sends its
//! report back on flow 0 when every flow has ended.

use crate::cpu;
use crate::pattern::{Checker, Header, HEADER_LEN};
use crate::recv_modes::{self, FlowRecv};
use crate::report::{FlowReport, SideReport};
use crate::sender::intervals;
use crate::side::{finish, join_all, Side};
use crate::{Interval, RecvMode, StreamError};
use firehose_sys::ifaddr::interface_of;
use firehose_sys::tcp::{TcpListener, TcpSock};
use firehose_sys::uring::probe_zcrx;
use firehose_sys::uring::UringSupport;
use firehose_sys::SysError;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How to receive.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub listen: SocketAddr,
    pub mode: RecvMode,
    /// CPUs to pin flow threads to, round robin; empty: not pinned.
    pub cpus: Vec<usize>,
    /// SO_RCVBUF for the listener (inherited by the flows).
    pub rcvbuf: Option<i32>,
    /// Check every byte against the pattern.
    pub check: bool,
    /// Receive buffer / mmap window per flow.
    pub chunk: usize,
    pub interval: Duration,
}

impl ReceiverConfig {
    /// Defaults: copy receive, pattern checked, 512 KiB chunks.
    pub fn new(listen: SocketAddr, mode: RecvMode) -> Self {
        ReceiverConfig {
            listen,
            mode,
            cpus: Vec::new(),
            rcvbuf: None,
            check: true,
            chunk: 512 << 10,
            interval: Duration::from_secs(1),
        }
    }
}

/// A bound receiver, ready to serve runs.
pub struct Receiver {
    l: TcpListener,
    cfg: ReceiverConfig,
}

fn unsupported(mode: RecvMode, source: SysError) -> StreamError {
    StreamError::Unsupported {
        mode: format!("--recv {mode}"),
        source,
    }
}

/// Checks that the kernel offers `mode` on the interface of `listen`.
fn probe(mode: RecvMode, listen: &SocketAddr) -> Result<(), StreamError> {
    match mode {
        RecvMode::Copy | RecvMode::Mmap => Ok(()),
        RecvMode::Uring => UringSupport::probe()
            .require("recv")
            .map_err(|e| unsupported(mode, e)),
        RecvMode::UringZcrx => {
            if listen.ip().is_unspecified() {
                return Err(StreamError::Config(
                    "--recv uring-zcrx needs a specific --listen address, so the interface to register is known".into(),
                ));
            }
            let (ifindex, name) = interface_of(listen.ip())
                .map_err(|e| unsupported(mode, e))?
                .ok_or_else(|| {
                    StreamError::Config(format!("no interface has address {}", listen.ip()))
                })?;
            probe_zcrx(ifindex, 0).map_err(|mut e| {
                e.what = format!("{} on {name}", e.what);
                unsupported(mode, e)
            })?;
            // Registration worked, which needs a NIC with header split; firehose has no
            // zcrx data path yet, and says so rather than receive some other way.
            Err(unsupported(
                mode,
                SysError {
                    what: format!("zcrx registered on {name}, but firehose's zcrx receive path is not implemented"),
                    source: std::io::Error::from_raw_os_error(95),
                },
            ))
        }
    }
}

impl Receiver {
    /// Probes the mode and binds.
    pub fn bind(cfg: ReceiverConfig) -> Result<Receiver, StreamError> {
        if cfg.chunk < 4096 || cfg.chunk > 64 << 20 {
            return Err(StreamError::Config(
                "receive chunk must be 4 KiB..64 MiB".into(),
            ));
        }
        probe(cfg.mode, &cfg.listen)?;
        let l = TcpListener::bind(&cfg.listen, 1024).map_err(StreamError::setup("listen"))?;
        if let Some(b) = cfg.rcvbuf {
            l.set_rcvbuf(b).map_err(StreamError::setup("listen"))?;
        }
        Ok(Receiver { l, cfg })
    }

    /// The address bound.
    pub fn local_addr(&self) -> Result<SocketAddr, StreamError> {
        self.l
            .local_addr()
            .map_err(StreamError::setup("getsockname"))
    }

    /// Accepts one connection and its header; `None` when `stop` was set first.
    fn accept_flow(
        &self,
        stop: &AtomicBool,
        timeout: Option<Duration>,
    ) -> Result<Option<(TcpSock, Header)>, StreamError> {
        let t0 = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if timeout.is_some_and(|t| t0.elapsed() > t) {
                return Err(StreamError::Protocol(
                    "timed out waiting for the sender's remaining flows".into(),
                ));
            }
            let Some((sock, _peer)) = self.l.accept(200).map_err(StreamError::setup("accept"))?
            else {
                continue;
            };
            let mut b = [0u8; HEADER_LEN];
            let ok = sock.set_timeouts(Duration::from_secs(10)).is_ok()
                && sock.recv_exact(&mut b).unwrap_or(false);
            // A connection that is not a firehose stream sender is closed and ignored.
            if let (true, Some(h)) = (ok, Header::decode(&b)) {
                sock.set_timeouts(Duration::ZERO)
                    .map_err(StreamError::setup("SO_RCVTIMEO"))?;
                return Ok(Some((sock, h)));
            }
        }
    }

    /// Serves one sender run to its end; `None` if `stop` was set before it began.
    pub fn serve_one(
        &self,
        stop: &AtomicBool,
        on_interval: &mut dyn FnMut(&Interval),
    ) -> Result<Option<SideReport>, StreamError> {
        let Some((s0, h0)) = self.accept_flow(stop, None)? else {
            return Ok(None);
        };
        let n = h0.flows as usize;
        let mut flows: Vec<Option<(TcpSock, Header)>> = (0..n).map(|_| None).collect();
        flows[h0.flow as usize] = Some((s0, h0));
        while flows.iter().any(Option::is_none) {
            let Some((s, h)) = self.accept_flow(stop, Some(Duration::from_secs(10)))? else {
                return Ok(None);
            };
            if h.run_id == h0.run_id && (h.flow as usize) < n && flows[h.flow as usize].is_none() {
                flows[h.flow as usize] = Some((s, h));
            }
        }
        let flows: Vec<(TcpSock, Header)> = flows.into_iter().flatten().collect();
        let counters: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let before = cpu::sample();
        let start = Instant::now();
        let results: Vec<Result<FlowReport, StreamError>> = std::thread::scope(|s| {
            let handles: Vec<_> = flows
                .iter()
                .enumerate()
                .map(|(i, (sock, h))| {
                    let counter = &counters[i];
                    let cpu =
                        (!self.cfg.cpus.is_empty()).then(|| self.cfg.cpus[i % self.cfg.cpus.len()]);
                    s.spawn(move || self.flow_thread(sock, h, counter, cpu))
                })
                .collect();
            intervals(
                stop,
                &counters,
                start,
                self.cfg.interval,
                on_interval,
                || handles.iter().all(|h| h.is_finished()),
            );
            join_all(handles)
        });
        let report = finish(
            Side {
                role: "receiver",
                mode: self.cfg.mode.name(),
                cpus: &self.cfg.cpus,
                checked: self.cfg.check,
            },
            &before,
            &counters,
            results,
        )?;
        let json = serde_json::to_vec(&report).map_err(|e| StreamError::Protocol(e.to_string()))?;
        let mut msg = (json.len() as u32).to_le_bytes().to_vec();
        msg.extend_from_slice(&json);
        // The sender may be gone (it was stopped); the local report still stands.
        let _ = flows[0].0.send_all(&msg);
        Ok(Some(report))
    }

    fn flow_thread(
        &self,
        sock: &TcpSock,
        h: &Header,
        counter: &AtomicU64,
        cpu: Option<usize>,
    ) -> Result<FlowReport, StreamError> {
        if let Some(c) = cpu {
            firehose_sys::cpu::pin_current_thread(c).map_err(StreamError::setup(format!(
                "flow {}: pin to CPU {c}",
                h.flow
            )))?;
        }
        let mut f = FlowRecv {
            sock,
            flow: h.flow,
            checker: self.cfg.check.then(|| Checker::new(h)),
            got: counter,
            chunk: self.cfg.chunk,
        };
        let counts = recv_modes::run(self.cfg.mode, &mut f)?;
        let granted = |r: firehose_sys::SysResult<i32>| {
            r.map_err(StreamError::setup(format!("flow {}", h.flow)))
        };
        Ok(FlowReport {
            flow: h.flow,
            bytes: counter.load(Ordering::Relaxed),
            sndbuf: granted(sock.sndbuf())?,
            rcvbuf: granted(sock.rcvbuf())?,
            mss: granted(sock.maxseg())?,
            tcp_info: sock.tcp_info().ok(),
            mmap: counts.mmap,
            uring_recv: counts.uring,
            ..FlowReport::default()
        })
    }
}
