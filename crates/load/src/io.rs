//! How one generator thread's requests leave and its responses arrive: the seam between the
//! generator (flows, windows, schedules, matching) and the path its datagrams take.
//!
//! Contract: the generator fills slots `0..n` (`tx_slot`, `queue`) and sends them on one flow
//! (`send`); to receive it asks which sources are ready (`poll`, which may wait), reads each
//! (`recv`) and looks at the datagrams of that read (`datagram`) before the next `recv`. A
//! source is whatever one read drains: a flow's socket on the socket path, a queue's AF_XDP
//! socket on the XDP path (where one read carries responses of many flows).

use crate::gen::LoadError;
use firehose_sys::epoll::Epoll;
pub use firehose_sys::mmsg::Flushed;
use firehose_sys::mmsg::{Batch, SendMode};
use firehose_sys::socket::{is_would_block, UdpSock, ECONNREFUSED, MSG_DONTWAIT};
pub use firehose_sys::timestamping::TxStamp;
use firehose_sys::timestamping::{ErrQueue, TX_SOFTWARE};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Largest datagram a socket slot must hold.
const SLOT: usize = 65536;

/// A response as the generator sees it.
pub struct Datagram<'a> {
    /// The flow it arrived on (a flow of no thread's when it matches none).
    pub flow: u32,
    pub data: &'a [u8],
}

/// One thread's send/receive path.
pub trait FlowIo: Send {
    /// Called once inside the generator's thread (after pinning) before any other call:
    /// state that belongs to the thread (an io_uring with SINGLE_ISSUER) is made here.
    fn start(&mut self) -> Result<(), LoadError> {
        Ok(())
    }
    /// Flows this thread sends on.
    fn flows(&self) -> usize;
    /// The most requests the next `send` takes (may reclaim sent buffers first).
    fn tx_capacity(&mut self) -> usize;
    /// Where the payload of request `k` of the next send goes.
    fn tx_slot(&mut self, k: usize) -> &mut [u8];
    /// Request `k` is written and `len` bytes long.
    fn queue(&mut self, k: usize, len: usize);
    /// Sends the queued requests on `flow` (or queues them for [`FlowIo::flush`]).
    /// Requests the kernel refused (`failed`) stay outstanding and end as lost;
    /// `gso_unavailable` says GSO was asked for but refused ([`FlowIo::gso_refusal`]).
    fn send(&mut self, flow: usize) -> Flushed;
    /// Makes everything `send` queued leave: called once per round of sends. Returns the
    /// requests the kernel refused that `send` could not report yet.
    fn flush(&mut self) -> usize {
        0
    }
    /// Why the kernel refused GSO on `flow`, once it has.
    fn gso_refusal(&self, flow: usize) -> Option<String>;
    /// Waits up to `wait` for responses (zero: look without waiting) and returns how many
    /// sources to read; [`FlowIo::source`] names them.
    fn poll(&mut self, wait: Duration) -> Result<usize, LoadError>;
    /// The `i`-th source ready after the last `poll`.
    fn source(&self, i: usize) -> usize;
    /// The flow whose socket source `s` is, on a path with a source per flow.
    fn source_flow(&self, s: usize) -> Option<usize>;
    /// Reads up to `max` datagrams from source `s`; returns how many it got.
    fn recv(&mut self, s: usize, max: usize) -> Result<usize, LoadError>;
    /// Datagram `i` of the last `recv`.
    fn datagram(&self, i: usize) -> Datagram<'_>;
    /// Whether every datagram carries the kernel's receive time ([`FlowIo::rx_time_ns`]):
    /// then the generator may drain responses late, on its own schedule, and still time
    /// each from its arrival.
    fn rx_timestamps(&self) -> bool {
        false
    }
    /// When the kernel received datagram `i` of the last `recv`, in ns since the Unix
    /// epoch (CLOCK_REALTIME).
    fn rx_time_ns(&self, _i: usize) -> Option<u64> {
        None
    }
    /// Whether the kernel stamps every request as it leaves ([`FlowIo::tx_stamps`]), and
    /// every response as it arrives ([`FlowIo::rx_time_ns`]).
    fn tx_timestamps(&self) -> bool {
        false
    }
    /// Which requests `k` of the last `send` the kernel refused: they take no stamp key.
    fn refused(&self) -> &[usize] {
        &[]
    }
    /// Appends the transmit stamps `flow` has queued since the last call, oldest first;
    /// the key of a stamp counts the flow's requests the kernel accepted, from 0.
    fn tx_stamps(&mut self, _flow: usize, _out: &mut Vec<TxStamp>) -> Result<(), LoadError> {
        Ok(())
    }
    /// System calls made so far.
    fn syscalls(&self) -> u64;
    /// The send path's name for reports.
    fn path(&self) -> &'static str;
}

/// Kernel UDP sockets, one connected socket per flow: sendmmsg (or UDP GSO) out,
/// recvmmsg in, epoll to wait (or spinning, or one blocking socket). In open loop (not
/// spinning) the sockets stamp what they receive (SO_TIMESTAMPNS) and hold a few ms of
/// responses, so the generator reads them once per pacing wake-up instead of waking for
/// each; with few flows it reads every socket then, without epoll.
pub struct SocketFlows {
    socks: Vec<UdpSock>,
    epoll: Option<Epoll>,
    ready: Vec<usize>,
    recv_flags: i32,
    batch: usize,
    rx: Batch,
    tx: Batch,
    syscalls: u64,
    current: usize,
    stamped: bool,
    /// The error queue reader, when sends are stamped.
    errq: Option<ErrQueue>,
}

/// Open loop reads every socket at each wake-up, without epoll, up to this many flows.
const PACED_SCAN_FLOWS: usize = 4;

/// Receive buffer of a paced flow: room for several ms of responses at hundreds of
/// thousands per second, read once per wake-up.
const PACED_RCVBUF: i32 = 4 << 20;

/// Opens one connected, non-blocking socket to `target`.
pub fn open_flow(target: &SocketAddr) -> Result<UdpSock, LoadError> {
    let s = UdpSock::new_for(target)?;
    let any: SocketAddr = if target.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    s.bind(&any)?;
    s.connect(target)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

impl SocketFlows {
    /// A thread's sockets: `batch` datagrams per recvmmsg, `tx_slots` per send, GSO when
    /// asked. Spinning polls every socket itself; one socket in closed loop blocks in
    /// recvmmsg (one syscall fewer per wake-up); everything else waits in epoll.
    pub fn new(
        socks: Vec<UdpSock>,
        batch: usize,
        tx_slots: usize,
        gso: bool,
        spin: bool,
        open_loop: bool,
    ) -> Result<Self, LoadError> {
        let blocking_single = socks.len() == 1 && !open_loop && !spin;
        let mut stamped = false;
        if open_loop && !spin {
            for s in &socks {
                s.set_timestamp_ns(true)?;
                // Forcing past rmem_max needs CAP_NET_ADMIN; without it the kernel caps.
                s.set_rcvbuf(PACED_RCVBUF, true)
                    .or_else(|_| s.set_rcvbuf(PACED_RCVBUF, false))?;
            }
            // Paced only if every socket says it stamps; otherwise answers wake the thread.
            stamped = socks.iter().all(|s| s.timestamp_ns().unwrap_or(false));
        }
        let scan = spin || (stamped && socks.len() <= PACED_SCAN_FLOWS);
        let epoll = if !scan && !blocking_single {
            let ep = Epoll::new(socks.len().min(256))?;
            for (i, s) in socks.iter().enumerate() {
                ep.add_readable(s.as_raw_fd(), i as u64)?;
            }
            Some(ep)
        } else {
            None
        };
        if blocking_single {
            socks[0].set_nonblocking(false)?;
            // Wake at least every 2 ms to expire losses and check the clock.
            socks[0].set_recv_timeout(Duration::from_millis(2))?;
        }
        Ok(SocketFlows {
            recv_flags: if !blocking_single { MSG_DONTWAIT } else { 0 },
            ready: Vec::with_capacity(256),
            epoll,
            batch,
            rx: Batch::new(batch, SLOT).with_control(stamped),
            tx: Batch::new(tx_slots, SLOT).with_send(if gso {
                SendMode::Gso
            } else {
                SendMode::Batch
            }),
            socks,
            syscalls: 0,
            current: 0,
            stamped,
            errq: None,
        })
    }

    /// Stamps every request as the kernel sends it and every response as it arrives
    /// (SO_TIMESTAMPING software stamps, each flag read back), with the paced receive
    /// buffer (stamps are charged to it until read). Requests then leave by
    /// sendmmsg, one datagram each: a UDP GSO super-datagram would carry one stamp for
    /// all its segments.
    pub fn with_tx_stamps(mut self) -> Result<Self, LoadError> {
        for s in &self.socks {
            // SO_TIMESTAMPNS stays on beside it: the kernel turns receive stamping on for
            // the whole host a little after the first socket asks, and only SO_TIMESTAMPNS
            // stamps a datagram that arrived before that (when it is read).
            s.set_timestamp_ns(true)?;
            s.set_timestamping(TX_SOFTWARE)?;
            // Stamps wait in the receive buffer's memory until read: room for them too.
            s.set_rcvbuf(PACED_RCVBUF, true)
                .or_else(|_| s.set_rcvbuf(PACED_RCVBUF, false))?;
            let got = s.timestamping()?;
            if got != TX_SOFTWARE {
                return Err(LoadError::Config(format!(
                    "the kernel set SO_TIMESTAMPING to {got:#x}, not {TX_SOFTWARE:#x}: it cannot stamp this socket's sends"
                )));
            }
        }
        self.rx = Batch::new(self.batch, SLOT).with_control(true);
        let slots = self.tx.capacity();
        self.tx = Batch::new(slots, SLOT).with_send(SendMode::Batch);
        self.stamped = true;
        self.errq = Some(ErrQueue::new(self.batch.max(64)));
        Ok(self)
    }
}

impl FlowIo for SocketFlows {
    fn flows(&self) -> usize {
        self.socks.len()
    }

    fn tx_capacity(&mut self) -> usize {
        self.tx.capacity()
    }

    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        self.tx.slot_mut(k)
    }

    fn queue(&mut self, k: usize, len: usize) {
        self.tx.queue_send(k, len);
    }

    fn send(&mut self, flow: usize) -> Flushed {
        let res = self.tx.flush(&self.socks[flow], 0);
        self.syscalls += res.syscalls as u64;
        res
    }

    fn gso_refusal(&self, flow: usize) -> Option<String> {
        self.socks[flow].gso_unavailable().map(str::to_string)
    }

    fn poll(&mut self, wait: Duration) -> Result<usize, LoadError> {
        self.ready.clear();
        match self.epoll.as_mut() {
            None => self.ready.extend(0..self.socks.len()),
            Some(ep) => {
                self.syscalls += 1;
                for token in ep.wait(wait)? {
                    if self.ready.len() < 256 {
                        self.ready.push(token as usize);
                    }
                }
            }
        }
        Ok(self.ready.len())
    }

    fn source(&self, i: usize) -> usize {
        self.ready[i]
    }

    fn source_flow(&self, s: usize) -> Option<usize> {
        Some(s)
    }

    fn recv(&mut self, s: usize, max: usize) -> Result<usize, LoadError> {
        self.syscalls += 1;
        self.current = s;
        match self
            .rx
            .recv_some(&self.socks[s], max.min(self.batch), self.recv_flags)
        {
            Ok(n) => Ok(n),
            Err(e) if is_would_block(&e) => Ok(0),
            // ECONNREFUSED: the target port is closed (ICMP port unreachable). The request
            // stays pending and is counted lost at its timeout.
            Err(e) if e.errno() == Some(ECONNREFUSED) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    fn datagram(&self, i: usize) -> Datagram<'_> {
        Datagram {
            flow: self.current as u32,
            data: self.rx.data(i),
        }
    }

    fn rx_timestamps(&self) -> bool {
        self.stamped
    }

    fn tx_timestamps(&self) -> bool {
        self.errq.is_some()
    }

    fn refused(&self) -> &[usize] {
        self.tx.refused()
    }

    fn tx_stamps(&mut self, flow: usize, out: &mut Vec<TxStamp>) -> Result<(), LoadError> {
        if let Some(q) = self.errq.as_mut() {
            self.syscalls += 1;
            q.drain(&self.socks[flow], out)?;
        }
        Ok(())
    }

    fn rx_time_ns(&self, i: usize) -> Option<u64> {
        self.rx.rx_timestamp_ns(i)
    }

    fn syscalls(&self) -> u64 {
        self.syscalls
    }

    fn path(&self) -> &'static str {
        "socket"
    }
}
