//! The socket set every backend starts from: sockets opened, every option applied,
//! bound (port-in-use checked even for reuseport), steered, and read back.

use crate::config::{PmtuDisc, ServeConfig, SocketMode, Steer};
use firehose_sys::epoll::{Epoll, EpollParams};
use firehose_sys::socket::{consts, pmtudisc_name, UdpSock};
use firehose_sys::{bpf, cpu, SetupError, SysError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// One socket as the kernel configured it, read back with getsockopt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppliedSocket {
    pub index: usize,
    pub local: String,
    pub reuseport: bool,
    pub steering: String,
    pub rcvbuf: i32,
    pub sndbuf: i32,
    pub mtu_discover: String,
    pub busy_poll_us: i32,
    pub prefer_busy_poll: Option<bool>,
    pub busy_poll_budget: Option<i32>,
    pub rxq_ovfl: bool,
    /// Arrival stamps, read back: SO_TIMESTAMPNS, or SO_TIMESTAMPING's software RX stamps.
    #[serde(default)]
    pub rx_timestamps: bool,
    /// SO_TIMESTAMPING read back reports keyed software transmit stamps for the replies
    /// that ask for one (NTP's interleaved mode).
    #[serde(default)]
    pub tx_timestamps: bool,
}

/// The bound, configured sockets of a server, in bind order.
pub(crate) struct SocketSet {
    pub sockets: Vec<UdpSock>,
    /// The address bound (with the real port when 0 was asked).
    pub listen: SocketAddr,
    pub detail: Vec<AppliedSocket>,
    /// Options the kernel refused that the server can run without.
    pub notes: Vec<String>,
    /// The epoll busy-poll parameters granted, when busy-polling (see [`epoll_params`]).
    pub epoll: Option<EpollParams>,
}

impl SocketSet {
    /// Opens one socket (shared) or one per worker (reuseport) for `cfg`.
    pub fn open(cfg: &ServeConfig) -> Result<SocketSet, SetupError> {
        let n_sockets = match cfg.sockets {
            SocketMode::Shared => 1,
            SocketMode::Reuseport => cfg.workers,
        };
        let reuseport = cfg.sockets == SocketMode::Reuseport;
        if reuseport && cfg.listen.port() != 0 {
            // A reuseport bind silently joins another process's group on the same port
            // (same uid); probe with a plain bind first so "port in use" is an error.
            let probe = UdpSock::new_for(&cfg.listen)?;
            if probe.is_v6() {
                probe.set_v6only(true)?;
            }
            probe.bind(&cfg.listen)?;
        }
        let mut notes = Vec::new();
        let mut sockets = Vec::with_capacity(n_sockets);
        let mut listen = cfg.listen;
        for i in 0..n_sockets {
            let s = open_socket(cfg, reuseport)?;
            if cfg.busy_poll.is_some() {
                busy_poll_extras(&s, cfg.batch, &mut notes);
            }
            s.bind(&listen)?;
            if i == 0 {
                // With port 0, every later socket joins the port the first one got.
                listen = s.local_addr()?;
            }
            sockets.push(s);
        }
        let steering = attach_steering(cfg.steer, &sockets)?;
        let busy = cfg.busy_poll.is_some();
        let mut detail = Vec::new();
        for (i, s) in sockets.iter().enumerate() {
            detail.push(read_back(s, i, steering, busy)?);
            let granted = detail[i].rcvbuf;
            if let Some(asked) = cfg.rcvbuf.filter(|&b| (granted as usize) < b) {
                notes.push(format!(
                    "SO_RCVBUF: asked {asked} bytes, the kernel granted {granted}: net.core.rmem_max caps it without CAP_NET_ADMIN (raise it, e.g. firehose doctor --apply, or run as root)"
                ));
            }
            if busy {
                s.set_nonblocking(true)?;
            } else {
                s.set_recv_timeout(Duration::from_millis(100))?;
            }
        }
        let epoll = cfg
            .busy_poll
            .and_then(|us| epoll_params(us, cfg.batch, &mut notes));
        dedup_notes(&mut notes);
        Ok(SocketSet {
            sockets,
            listen,
            detail,
            notes,
            epoll,
        })
    }
}

/// SO_PREFER_BUSY_POLL and SO_BUSY_POLL_BUDGET: wanted, not required (kernel 5.11+).
fn busy_poll_extras(s: &UdpSock, batch: usize, notes: &mut Vec<String>) {
    if let Err(e) = s.set_prefer_busy_poll(true) {
        notes.push(format!("SO_PREFER_BUSY_POLL not applied: {e}"));
    }
    // The default budget is 8; ask for the batch size, which needs CAP_NET_ADMIN above 8.
    let want = (batch as i32).max(8);
    if let Err(e) = s.set_busy_poll_budget(want) {
        notes.push(format!("SO_BUSY_POLL_BUDGET={want} not applied: {e}"));
    }
}

/// The epoll busy-poll parameters for a busy-polling worker's idle wait (EPIOCSPARAMS,
/// kernel 6.9+): poll the NAPI for the profile's busy-poll time, with its budget, preferring
/// busy polling (so defer-hard-irqs, gro-flush-timeout and irq-suspend-timeout apply).
/// Asked of a probe instance and read back (EPIOCGPARAMS); what the kernel refused goes to
/// `notes` with its errno and the workers wait without it.
pub(crate) fn epoll_params(
    busy_us: u32,
    batch: usize,
    notes: &mut Vec<String>,
) -> Option<EpollParams> {
    let want = EpollParams::new(
        busy_us.min(i32::MAX as u32),
        batch.clamp(8, 64) as u16,
        true,
    );
    let probe = match Epoll::new(1) {
        Ok(p) => p,
        Err(e) => {
            notes.push(format!("epoll busy-poll parameters not applied: {e}"));
            return None;
        }
    };
    let granted = probe
        .set_busy_poll_params(&want)
        .and_then(|()| probe.busy_poll_params());
    match granted {
        Ok(got) if got == want => Some(got),
        Ok(got) => {
            notes.push(format!(
                "EPIOCSPARAMS: asked {want:?}, the kernel holds {got:?}; not used"
            ));
            None
        }
        Err(e) => {
            notes.push(format!(
                "epoll busy-poll parameters (EPIOCSPARAMS, kernel 6.9+) not applied: {e}"
            ));
            None
        }
    }
}

/// Attaches the steering program to the reuseport group; returns its description.
fn attach_steering(steer: Steer, sockets: &[UdpSock]) -> Result<&'static str, SetupError> {
    let n = sockets.len() as u32;
    Ok(match steer {
        Steer::None => "none",
        Steer::Cpu => {
            sockets[0].attach_reuseport_cbpf_cpu(n)?;
            "cbpf: cpu % n"
        }
        Steer::CpuEbpf => {
            let prog = bpf::load_cpu_steering(n)?;
            sockets[0].attach_reuseport_ebpf(&prog)?;
            // The reuseport group holds its own reference; our fd can close.
            "ebpf: cpu % n"
        }
    })
}

fn open_socket(cfg: &ServeConfig, reuseport: bool) -> Result<UdpSock, SetupError> {
    let s = UdpSock::new_for(&cfg.listen)?;
    if s.is_v6() {
        s.set_v6only(true)?;
    }
    if reuseport {
        s.set_reuseport(true)?;
    }
    let force = cpu::is_root();
    if let Some(b) = cfg.rcvbuf {
        s.set_rcvbuf(clamp_i32(b), force)?;
    }
    if let Some(b) = cfg.sndbuf {
        s.set_sndbuf(clamp_i32(b), force)?;
    }
    match cfg.pmtudisc {
        PmtuDisc::Default => {}
        PmtuDisc::Dont => s.set_mtu_discover(consts::IP_PMTUDISC_DONT)?,
        PmtuDisc::Do => s.set_mtu_discover(consts::IP_PMTUDISC_DO)?,
        PmtuDisc::Omit => s.set_mtu_discover(consts::IP_PMTUDISC_OMIT)?,
    }
    if let Some(us) = cfg.busy_poll {
        s.set_busy_poll(us.min(i32::MAX as u32) as i32)?;
    }
    if cfg.rxq_ovfl {
        s.set_rxq_ovfl(true)?;
    }
    if cfg.tx_timestamps {
        // Arrival stamps come as SCM_TIMESTAMPING then: both options would put two stamps
        // in each datagram's control room.
        s.set_timestamping(firehose_sys::timestamping::TX_ON_REQUEST)?;
    } else if cfg.rx_timestamps {
        s.set_timestamp_ns(true)?;
    }
    Ok(s)
}

fn clamp_i32(v: usize) -> i32 {
    v.min(i32::MAX as usize / 2) as i32
}

fn read_back(
    s: &UdpSock,
    index: usize,
    steering: &'static str,
    busy: bool,
) -> Result<AppliedSocket, SetupError> {
    let opt = |r: Result<i32, SysError>| r.ok();
    let tx_stamps = s.timestamping()? == firehose_sys::timestamping::TX_ON_REQUEST;
    Ok(AppliedSocket {
        index,
        local: s.local_addr()?.to_string(),
        reuseport: s.reuseport()?,
        steering: steering.to_string(),
        rcvbuf: s.rcvbuf()?,
        sndbuf: s.sndbuf()?,
        mtu_discover: pmtudisc_name(s.mtu_discover()?).to_string(),
        busy_poll_us: s.busy_poll()?,
        prefer_busy_poll: if busy {
            s.prefer_busy_poll().ok()
        } else {
            None
        },
        busy_poll_budget: if busy {
            opt(s.busy_poll_budget())
        } else {
            None
        },
        rxq_ovfl: s.rxq_ovfl()?,
        // TX_ON_REQUEST stamps arrivals too.
        rx_timestamps: s.timestamp_ns()? || tx_stamps,
        tx_timestamps: tx_stamps,
    })
}

fn dedup_notes(notes: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
}
