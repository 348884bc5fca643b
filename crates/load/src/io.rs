//! How one generator thread's requests leave and its responses arrive: the seam between the
//! generator (flows, windows, schedules, matching) and the path its datagrams take.
//!
//! Contract: the generator fills slots `0..n` (`tx_slot`, `queue`) and sends them on one flow
//! (`send`), and ends each round of sends with `flush`; to receive it asks which sources are
//! ready (`poll`, which may wait), reads each (`recv`) and looks at the datagrams of that read
//! (`datagram`) before the next `recv`. A source is whatever one read drains: a flow's socket
//! on the socket path, a queue's AF_XDP socket on the XDP path, a batch of the ring's
//! completions on the io_uring path (where one read carries responses of many flows).
//!
//! What a path can do is data ([`Caps`]: a source per flow, arrival stamps), and so is what
//! it did ([`PathStats`]: system calls, a GSO refusal): no path stubs a method it has no use
//! for. Implementations: [`SocketFlows`] here, [`crate::uring::UringFlows`] and
//! [`crate::xdp::XdpIo`].

use firehose_sys::epoll::Epoll;
use firehose_sys::mmsg::{Batch, SendMode};
pub use firehose_sys::mmsg::{Flushed, NOT_SENT};
use firehose_sys::socket::{is_would_block, UdpSock, ECONNREFUSED, MSG_DONTWAIT};
pub use firehose_sys::timestamping::TxStamp;
use firehose_sys::timestamping::{host_rx_stamping, key_per_send, ErrQueue, TX_SOFTWARE};
use firehose_sys::SetupError;
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
    /// When the kernel received it, in ns since the Unix epoch (CLOCK_REALTIME), on a path
    /// whose [`Caps::rx_timestamps`] says it stamps arrivals.
    pub rx_time_ns: Option<u64>,
}

/// What a path can do, settled when it is made: data the generator branches on, not
/// methods a path would have to stub (quinn-udp keeps a socket's capabilities the same
/// way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// The path's name for reports: "socket", "io_uring", "af_xdp".
    pub path: &'static str,
    /// Source `s` is flow `s`'s own socket: the generator asks it for no more than that
    /// flow has outstanding. Otherwise one read carries responses of many flows.
    pub source_per_flow: bool,
    /// Every datagram carries the kernel's receive time ([`Datagram::rx_time_ns`]): the
    /// generator may then drain responses late, on its own schedule, and still time each
    /// from its arrival.
    pub rx_timestamps: bool,
    /// The kernel stamps every request as it leaves ([`FlowIo::tx_stamps`]) and every
    /// response as it arrives: latency can be taken apart ([`crate::decompose`]).
    pub tx_timestamps: bool,
    /// `poll` names every source without asking the kernel which are ready (sockets read
    /// in turn, without epoll): the generator then reads only the flows that have
    /// requests outstanding, so a wake-up reads the one flow its last send went to rather
    /// than every flow.
    pub polls_every_source: bool,
}

/// What a path did, for the thread's result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathStats {
    /// System calls made so far.
    pub syscalls: u64,
    /// Why the kernel refused UDP GSO, once it has (the sends went by sendmmsg instead).
    pub gso_refusal: Option<String>,
}

/// How the requests of one send leave (the paced loop's choice: [`crate::pace::Pace::send_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendShape {
    /// One datagram per message (sendmmsg): the kernel delivers each before it takes the
    /// next, so the server receives them a few µs apart, as a schedule on time spaces
    /// them; with stamps, each takes its own transmit stamp and key.
    Apart,
    /// Requests intended at one instant, or owed from earlier wake-ups: they may leave
    /// as one UDP GSO send (where the path has GSO and it is not turned off), one pass
    /// through the sender's stack for all of them, which is what keeps a high rate.
    Together,
}

/// One thread's send/receive path.
pub trait FlowIo: Send {
    /// What this path can do.
    fn caps(&self) -> Caps;
    /// Called once inside the generator's thread (after pinning) before any other call:
    /// state that belongs to the thread (an io_uring with SINGLE_ISSUER) is made here.
    fn start(&mut self) -> Result<(), SetupError> {
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
    /// Sends the queued requests on `flow` (or queues them for [`FlowIo::flush`]), in
    /// `shape` (a path without UDP GSO sends every request as its own datagram either
    /// way). Requests the kernel refused (`failed`) stay outstanding and end as lost.
    fn send(&mut self, flow: usize, shape: SendShape) -> Flushed;
    /// Makes everything `send` queued leave: called once per round of sends (a path whose
    /// [`FlowIo::sleep`] sends leaves them to it). Returns the requests the kernel refused
    /// that `send` could not report yet.
    fn flush(&mut self) -> usize {
        0
    }
    /// Paced open loop: makes what `send` queued leave and sleeps `wait` (zero: not at
    /// all) in one call of the path's own, so a wake-up costs one system call fewer (an
    /// io_uring_enter that submits the sends and waits with a timeout). `false`: the path
    /// has no such call, and the thread sleeps by itself.
    fn sleep(&mut self, _wait: Duration) -> Result<bool, SetupError> {
        Ok(false)
    }
    /// Waits up to `wait` for responses (zero: look without waiting) and returns how many
    /// sources to read; [`FlowIo::source`] names them.
    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError>;
    /// The `i`-th source ready after the last `poll`.
    fn source(&self, i: usize) -> usize;
    /// Reads up to `max` datagrams from source `s`; returns how many it got.
    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError>;
    /// Datagram `i` of the last `recv`.
    fn datagram(&self, i: usize) -> Datagram<'_>;
    /// What the path did so far.
    fn stats(&self) -> PathStats;
    /// For each request `k` of the last `send`: the key its transmit stamp will carry
    /// (requests that left in one send share it), or [`NOT_SENT`] when the kernel refused
    /// it. Asked only of a path whose [`Caps::tx_timestamps`] is set.
    fn sent_keys(&self) -> &[u32] {
        &[]
    }
    /// Appends the transmit stamps `flow` has queued since the last call, oldest first;
    /// the key of a stamp counts the flow's requests the kernel accepted, from 0. Asked
    /// only of a path whose [`Caps::tx_timestamps`] is set.
    fn tx_stamps(&mut self, _flow: usize, _out: &mut Vec<TxStamp>) -> Result<(), SetupError> {
        Ok(())
    }
}

/// A path chosen at run time (the cli's table of paths) is a boxed one.
impl<T: FlowIo + ?Sized> FlowIo for Box<T> {
    fn caps(&self) -> Caps {
        (**self).caps()
    }
    fn start(&mut self) -> Result<(), SetupError> {
        (**self).start()
    }
    fn flows(&self) -> usize {
        (**self).flows()
    }
    fn tx_capacity(&mut self) -> usize {
        (**self).tx_capacity()
    }
    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        (**self).tx_slot(k)
    }
    fn queue(&mut self, k: usize, len: usize) {
        (**self).queue(k, len)
    }
    fn send(&mut self, flow: usize, shape: SendShape) -> Flushed {
        (**self).send(flow, shape)
    }
    fn flush(&mut self) -> usize {
        (**self).flush()
    }
    fn sleep(&mut self, wait: Duration) -> Result<bool, SetupError> {
        (**self).sleep(wait)
    }
    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        (**self).poll(wait)
    }
    fn source(&self, i: usize) -> usize {
        (**self).source(i)
    }
    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError> {
        (**self).recv(s, max)
    }
    fn datagram(&self, i: usize) -> Datagram<'_> {
        (**self).datagram(i)
    }
    fn stats(&self) -> PathStats {
        (**self).stats()
    }
    fn sent_keys(&self) -> &[u32] {
        (**self).sent_keys()
    }
    fn tx_stamps(&mut self, flow: usize, out: &mut Vec<TxStamp>) -> Result<(), SetupError> {
        (**self).tx_stamps(flow, out)
    }
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
    gso_refusal: Option<String>,
    /// The error queue reader, when sends are stamped.
    errq: Option<ErrQueue>,
    /// Stamped sends without a key of their own (a kernel before SCM_TS_OPT_ID): per
    /// flow, the socket's count of the datagrams it accepted, which keys their stamps
    /// (the batch assigns them: [`Batch::count_stamp_keys_from`]).
    counted_keys: Option<Vec<u32>>,
}

/// How long a stamping generator waits for the host to stamp arrivals before its first
/// send ([`host_rx_stamping`]); the kernel's work queue takes well under a millisecond.
const RX_STAMPING_WAIT: Duration = Duration::from_secs(1);

/// Open loop reads every socket at each wake-up, without epoll, up to this many flows.
const PACED_SCAN_FLOWS: usize = 4;

/// Receive buffer of a paced flow: room for several ms of responses at hundreds of
/// thousands per second, read once per wake-up.
const PACED_RCVBUF: i32 = 4 << 20;

/// Opens one connected, non-blocking socket to `target`.
pub fn open_flow(target: &SocketAddr) -> Result<UdpSock, SetupError> {
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
    /// A thread's sockets (connected, as [`open_flow`] makes them): `batch` datagrams
    /// per recvmmsg, `tx_slots` per send, GSO when asked. Spinning polls every socket itself; one socket in closed loop blocks in
    /// recvmmsg (one syscall fewer per wake-up); everything else waits in epoll.
    pub fn new(
        socks: Vec<UdpSock>,
        batch: usize,
        tx_slots: usize,
        gso: bool,
        spin: bool,
        open_loop: bool,
    ) -> Result<Self, SetupError> {
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
            // Each socket is connected: its datagrams all come from the target, so the
            // kernel need not copy their address out.
            rx: Batch::new(batch, SLOT)
                .with_control(stamped)
                .with_names(false),
            tx: Batch::new(tx_slots, SLOT).with_send(if gso {
                SendMode::Gso
            } else {
                SendMode::Batch
            }),
            socks,
            syscalls: 0,
            current: 0,
            stamped,
            gso_refusal: None,
            errq: None,
            counted_keys: None,
        })
    }

    /// Stamps every request as the kernel sends it and every response as it arrives
    /// (SO_TIMESTAMPING software stamps, each flag read back), with the paced receive
    /// buffer (stamps are charged to it until read).
    ///
    /// One receive stamp per response: SO_TIMESTAMPNS is turned off once the host is seen
    /// to stamp arrivals ([`host_rx_stamping`], before any request leaves, so no response
    /// can arrive unstamped); only if it is not seen within [`RX_STAMPING_WAIT`] does
    /// SO_TIMESTAMPNS stay on beside it, stamping a datagram that arrived before that
    /// when it is read.
    ///
    /// Where the kernel takes a send's stamp key in the send (SCM_TS_OPT_ID, Linux
    /// 6.13+), each send carries its own and requests sent [`SendShape::Together`] keep
    /// the path's UDP GSO: the segments of one GSO send leave together and share its
    /// stamp. Otherwise requests leave by sendmmsg, one datagram and one counted key each.
    pub fn with_tx_stamps(mut self) -> Result<Self, SetupError> {
        for s in &self.socks {
            s.set_timestamping(TX_SOFTWARE)?;
            // Stamps wait in the receive buffer's memory until read: room for them too.
            s.set_rcvbuf(PACED_RCVBUF, true)
                .or_else(|_| s.set_rcvbuf(PACED_RCVBUF, false))?;
            let got = s.timestamping()?;
            if got != TX_SOFTWARE {
                return Err(SetupError::host(format!(
                    "the kernel set SO_TIMESTAMPING to {got:#x}, not {TX_SOFTWARE:#x}: it cannot stamp this socket's sends"
                )));
            }
        }
        // The sockets above hold the host's receive stamping on from here.
        let arrivals_stamped = host_rx_stamping(RX_STAMPING_WAIT).unwrap_or(false);
        for s in &self.socks {
            s.set_timestamp_ns(!arrivals_stamped)?;
        }
        self.rx = Batch::new(self.batch, SLOT)
            .with_control(true)
            .with_names(false);
        let slots = self.tx.capacity();
        let gso = self.tx.send_mode() == SendMode::Gso;
        self.tx = if key_per_send().is_ok() {
            self.counted_keys = None;
            let mode = if gso { SendMode::Gso } else { SendMode::Batch };
            Batch::new(slots, SLOT).with_send(mode).with_stamp_keys(0)
        } else {
            self.counted_keys = Some(vec![0; self.socks.len()]);
            // Counted keys are assigned per send ([`FlowIo::send`]).
            Batch::new(slots, SLOT).with_send(SendMode::Batch)
        };
        self.stamped = true;
        self.errq = Some(ErrQueue::new(self.batch.max(64)));
        Ok(self)
    }

    /// Whether each response carries one receive stamp (SO_TIMESTAMPING's) rather than
    /// two (SO_TIMESTAMPNS's beside it): what [`Self::with_tx_stamps`] settled.
    #[cfg(test)]
    pub(crate) fn one_rx_stamp(&self) -> bool {
        self.errq.is_some() && !self.socks.iter().any(|s| s.timestamp_ns().unwrap_or(true))
    }

    /// Whether stamped sends carry their own keys (and may go by UDP GSO).
    #[cfg(test)]
    pub(crate) fn keyed_sends(&self) -> bool {
        self.errq.is_some() && self.counted_keys.is_none()
    }
}

impl FlowIo for SocketFlows {
    fn caps(&self) -> Caps {
        Caps {
            path: "socket",
            source_per_flow: true,
            rx_timestamps: self.stamped,
            tx_timestamps: self.errq.is_some(),
            // (One blocking socket waits in its read: that read is the thread's sleep.)
            polls_every_source: self.epoll.is_none() && self.recv_flags == MSG_DONTWAIT,
        }
    }

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

    fn send(&mut self, flow: usize, shape: SendShape) -> Flushed {
        if let Some(c) = &self.counted_keys {
            self.tx.count_stamp_keys_from(c[flow]);
        }
        let sock = &self.socks[flow];
        let res = match shape {
            SendShape::Apart => self.tx.flush_apart(sock, 0),
            SendShape::Together => self.tx.flush(sock, 0),
        };
        self.syscalls += res.syscalls as u64;
        if let Some(c) = self.counted_keys.as_mut() {
            // The socket counted the datagrams it accepted.
            c[flow] = c[flow].wrapping_add(res.sent as u32);
        }
        if res.gso_unavailable && self.gso_refusal.is_none() {
            // The batch fell back to sendmmsg; keep the kernel's reason once.
            self.gso_refusal = self.socks[flow].gso_unavailable().map(str::to_string);
        }
        res
    }

    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
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

    fn recv(&mut self, s: usize, max: usize) -> Result<usize, SetupError> {
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
            rx_time_ns: if self.stamped {
                self.rx.rx_timestamp_ns(i)
            } else {
                None
            },
        }
    }

    fn sent_keys(&self) -> &[u32] {
        self.tx.carried_by()
    }

    fn tx_stamps(&mut self, flow: usize, out: &mut Vec<TxStamp>) -> Result<(), SetupError> {
        if let Some(q) = self.errq.as_mut() {
            self.syscalls += 1;
            q.drain(&self.socks[flow], out)?;
        }
        Ok(())
    }

    fn stats(&self) -> PathStats {
        PathStats {
            syscalls: self.syscalls,
            gso_refusal: self.gso_refusal.clone(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use firehose_sys::timestamping::{is_rx_stamp, key_per_send};

    /// A server socket on loopback and one stamped, paced flow to it, sending by GSO.
    pub(crate) fn stamped_flow() -> (UdpSock, SocketFlows) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let srv = UdpSock::new_for(&any).unwrap();
        srv.bind(&any).unwrap();
        srv.set_recv_timeout(Duration::from_secs(5)).unwrap();
        let flow = open_flow(&srv.local_addr().unwrap()).unwrap();
        let io = SocketFlows::new(vec![flow], 64, 64, true, false, true)
            .unwrap()
            .with_tx_stamps()
            .unwrap();
        (srv, io)
    }

    /// Queues `n` 100-byte requests numbered from `first` and sends them on flow 0.
    fn send(io: &mut SocketFlows, first: u32, n: usize, shape: SendShape) -> Flushed {
        for k in 0..n {
            io.tx_slot(k)[..4].copy_from_slice(&(first + k as u32).to_ne_bytes());
            io.queue(k, 100);
        }
        io.send(0, shape)
    }

    /// Round `round` of a wake-up's 12 requests on flow 0, sent in `shape`: what the send
    /// did, the key each request went under and the stamps read right after, checking
    /// that it cost two system calls, the send and one error-queue read.
    fn twelve_stamped(
        io: &mut SocketFlows,
        round: u32,
        shape: SendShape,
    ) -> (Flushed, Vec<u32>, Vec<TxStamp>) {
        let calls = io.stats().syscalls;
        let f = send(io, round * 12, 12, shape);
        let keys = io.sent_keys().to_vec();
        let mut stamps = Vec::new();
        io.tx_stamps(0, &mut stamps).unwrap();
        let made = io.stats().syscalls - calls;
        assert_eq!(made, 2, "round {round}: a send and an error-queue read");
        (f, keys, stamps)
    }

    /// The receive stamps among datagram `i`'s control messages.
    fn rx_stamps(io: &SocketFlows, i: usize) -> usize {
        io.rx.cmsgs(i).filter(is_rx_stamp).count()
    }

    /// Counted over a real socket: a wake-up's 12 requests sent together leave in one GSO
    /// send under one key, their one stamp is read in one call, and each response read back carries one
    /// receive stamp (SO_TIMESTAMPNS is off), never two.
    #[test]
    fn twelve_stamped_requests_cost_one_send_one_stamp_read_and_one_rx_stamp_each() {
        let (srv, mut io) = stamped_flow();
        assert!(
            io.one_rx_stamp(),
            "the host stamps arrivals once a socket asks"
        );
        assert!(
            !io.socks[0].timestamp_ns().unwrap(),
            "SO_TIMESTAMPNS read back off"
        );
        if !io.keyed_sends() {
            eprintln!("skipped: {:?}", key_per_send().unwrap_err());
            return;
        }
        let mut back = Batch::new(64, 2048);
        for round in 0..50u32 {
            let (f, keys, stamps) = twelve_stamped(&mut io, round, SendShape::Together);
            assert_eq!(
                (f.sent, f.syscalls, f.gso_sends),
                (12, 1, 1),
                "round {round}"
            );
            assert_eq!(keys, vec![round * 12; 12], "one send, one key");
            assert_eq!(stamps.len(), 1, "round {round}: {stamps:?}");
            assert_eq!(stamps[0].key, round * 12);
            // The server echoes the 12; the flow reads them with one stamp each.
            let mut n = 0;
            while n < 12 {
                let got = back.recv(&srv, 64, 0).unwrap();
                for i in 0..got {
                    back.queue_reply(i, back.len(i));
                }
                back.flush(&srv, 0);
                n += got;
            }
            let mut read = 0;
            while read < 12 {
                let got = io.recv(0, 64).unwrap();
                for i in 0..got {
                    assert_eq!(rx_stamps(&io, i), 1, "round {round}, datagram {i}");
                    let d = io.datagram(i);
                    assert!(
                        d.rx_time_ns.unwrap() >= stamps[0].ns,
                        "arrived after it left"
                    );
                }
                read += got;
            }
        }
    }

    /// A burst of 400 sends of 12 whose stamps nobody reads until the end: every send's
    /// stamp is there, once, in key order (the error queue holds 400, not 4,800).
    #[test]
    fn no_stamp_of_a_burst_is_lost() {
        let (srv, mut io) = stamped_flow();
        if !io.keyed_sends() {
            eprintln!("skipped: {:?}", key_per_send().unwrap_err());
            return;
        }
        let mut sink = Batch::new(64, 2048);
        let mut keys = Vec::new();
        for round in 0..400u32 {
            assert_eq!(send(&mut io, round * 12, 12, SendShape::Together).sent, 12);
            keys.push(io.sent_keys()[0]);
            // The server reads what arrived, so nothing is dropped on its side.
            let mut n = 0;
            while n < 12 {
                n += sink.recv(&srv, 64, 0).unwrap();
            }
        }
        let mut stamps = Vec::new();
        io.tx_stamps(0, &mut stamps).unwrap();
        assert_eq!(stamps.iter().map(|s| s.key).collect::<Vec<_>>(), keys);
        assert!(stamps.windows(2).all(|w| w[0].ns <= w[1].ns));
    }

    /// Counted over a real socket: 12 requests sent apart leave in one sendmmsg as 12
    /// datagrams, each under its own key; their 12 stamps come back in one error-queue
    /// read, one per key in order, and the server reads 12 datagrams, each whole.
    #[test]
    fn twelve_requests_sent_apart_leave_as_twelve_datagrams_with_twelve_stamps() {
        let (srv, mut io) = stamped_flow();
        if !io.keyed_sends() {
            eprintln!("skipped: {:?}", key_per_send().unwrap_err());
            return;
        }
        let mut sink = Batch::new(64, 2048);
        for round in 0..50u32 {
            let (f, keys, stamps) = twelve_stamped(&mut io, round, SendShape::Apart);
            assert_eq!(
                (f.sent, f.syscalls, f.gso_sends),
                (12, 1, 0),
                "round {round}"
            );
            let want: Vec<u32> = (round * 12..round * 12 + 12).collect();
            assert_eq!(keys, want, "round {round}: a key each");
            let got: Vec<u32> = stamps.iter().map(|s| s.key).collect();
            assert_eq!(got, want, "round {round}: a stamp each");
            assert!(stamps.windows(2).all(|w| w[0].ns <= w[1].ns));
            let mut n = 0;
            while n < 12 {
                let got = sink.recv(&srv, 64, 0).unwrap();
                for i in 0..got {
                    let id = u32::from_ne_bytes(sink.data(i)[..4].try_into().unwrap());
                    assert_eq!((id, sink.len(i)), (round * 12 + (n + i) as u32, 100));
                }
                n += got;
            }
        }
    }
}
