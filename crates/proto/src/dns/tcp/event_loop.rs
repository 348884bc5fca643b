//! One TCP thread: a level-triggered epoll loop over the shared listener and the
//! connections this thread accepted.
//!
//! A connection costs a small struct until it has something in flight: bytes are read
//! into the thread's scratch buffer and answered from there; only a partial message (or
//! messages held back while the client is not reading) is copied into the connection,
//! and only what the socket would not take is queued on it. Past [`HIGH_WATER`] bytes
//! queued, the connection stops reading (so it stops answering) and waits for EPOLLOUT;
//! a client that does not read therefore holds its own queue only, never the thread.
//! Idle connections are closed from a heap of deadlines checked every turn, the next
//! one being the epoll timeout.

use super::super::counters::{slot, COUNTERS};
use super::super::handler::{has_edns_option, Transport, MAX_TCP_MESSAGE, OPT_TCP_KEEPALIVE};
use super::super::wire::{get16, parse_query, rcode, rtype, NameBuf, Parsed, CLASS_IN};
use super::super::DnsHandler;
use super::transfer::Transfer;
use super::{push_framed, Shared};
use firehose_engine::Verdict;
use firehose_sys::epoll::{Epoll, Event, Interest};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The listener's token (connections use slot | generation << 32).
pub(super) const LISTENER: u64 = u64::MAX;
/// The token of the shutdown wake-up.
pub(super) const WAKE: u64 = u64::MAX - 1;
/// Output queued on one connection beyond which it stops reading until the client reads.
const HIGH_WATER: usize = 64 * 1024;
/// Connections accepted per listener event, so accepting does not starve the served.
const ACCEPT_BATCH: usize = 64;
/// How long to stop accepting when out of descriptors or memory.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// Room to read into: a whole largest message behind a partial one.
const SCRATCH: usize = 2 * (2 + MAX_TCP_MESSAGE);
/// Events taken per wait.
const EVENTS: usize = 256;

/// An epoll set watching `listener` (shared: one waiter woken per connection) and the
/// shutdown wake-up `wake` (readable once, for good).
pub(super) fn watch(
    listener: &TcpListener,
    wake: &std::os::unix::net::UnixStream,
) -> std::io::Result<Epoll> {
    let ep = Epoll::new(EVENTS).map_err(io)?;
    ep.add_exclusive(listener.as_raw_fd(), LISTENER)
        .map_err(io)?;
    ep.add(wake.as_raw_fd(), Interest::READ, WAKE).map_err(io)?;
    Ok(ep)
}

/// One connection's state.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    /// Its epoll token: slot | generation << 32 (a slot is reused, a generation not soon).
    token: u64,
    /// Received and not yet answered: a partial message, or messages held back while
    /// the output is over the high-water mark or a transfer runs.
    pending: Vec<u8>,
    /// Output the socket has not taken yet.
    out: Vec<u8>,
    transfer: Option<Box<Transfer>>,
    /// The idle timeout runs from here (an answered query or bytes written).
    last_active: Instant,
    /// The client closed its side: answer what came, then close.
    eof: bool,
    /// Something we do not answer came (RFC 7766 §6.2.2 lets us close): flush, close.
    bad: bool,
    interest: Interest,
}

impl Conn {
    /// Whether `pending` holds a complete message.
    fn has_message(&self) -> bool {
        self.pending.len() >= 2 && self.pending.len() >= 2 + get16(&self.pending, 0) as usize
    }

    /// Nothing left to do but close.
    fn finished(&self) -> bool {
        (self.eof || self.bad)
            && self.out.is_empty()
            && self.transfer.is_none()
            && (self.bad || !self.has_message())
    }
}

/// What a message led to.
enum Answered {
    Done,
    Close,
    Transfer(Box<Transfer>),
}

/// One TCP thread's loop and buffers.
pub(super) struct Loop<'a> {
    sh: &'a Shared,
    listener: &'a TcpListener,
    ep: Epoll,
    ready: Vec<Event>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u32,
    /// (deadline, slot, generation), at most one live entry per connection.
    timers: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    /// Accepting stopped (EMFILE and the like) until then.
    accept_paused: Option<Instant>,
    now: Instant,
    handler: DnsHandler,
    /// The handler's counters as last added to the shared ones.
    published: [u64; COUNTERS],
    /// The message being answered (a response is built in place, up to 65535 bytes).
    msg: Vec<u8>,
    name: Box<NameBuf>,
    scratch: Vec<u8>,
    /// An output buffer lent to a connection while it answers (kept by one whose
    /// socket did not take everything).
    out: Vec<u8>,
}

impl<'a> Loop<'a> {
    /// A loop over `listener` (nonblocking) with `ep` from [`watch`].
    pub(super) fn new(sh: &'a Shared, listener: &'a TcpListener, ep: Epoll) -> Self {
        Loop {
            sh,
            listener,
            ep,
            ready: Vec::with_capacity(EVENTS),
            conns: Vec::new(),
            free: Vec::new(),
            next_generation: 0,
            timers: BinaryHeap::new(),
            accept_paused: None,
            now: Instant::now(),
            handler: DnsHandler::live(sh.live.clone(), sh.cfg.max_udp)
                .with_options(sh.cfg.options.clone())
                .with_transfers(&sh.cfg.allow_transfer)
                .counted_as_tcp(),
            published: [0; COUNTERS],
            msg: vec![0; MAX_TCP_MESSAGE],
            name: Box::default(),
            scratch: vec![0; SCRATCH],
            out: Vec::with_capacity(HIGH_WATER + 2 + MAX_TCP_MESSAGE),
        }
    }

    /// Serves until the server stops, then closes every connection this thread holds.
    pub(super) fn run(mut self) {
        while !self.sh.stop.load(Ordering::Acquire) {
            let timeout = self.timeout();
            self.ready.clear();
            match self.ep.wait_events(timeout) {
                Ok(evs) => self.ready.extend(evs),
                // Only a broken epoll fails here; nothing more can be served.
                Err(_) => break,
            }
            self.now = Instant::now();
            for i in 0..self.ready.len() {
                let ev = self.ready[i];
                match ev.token {
                    LISTENER => self.accept(),
                    WAKE => {}
                    t => self.on_event(t, ev),
                }
            }
            self.expire();
        }
        for slot in 0..self.conns.len() {
            if let Some(c) = self.conns[slot].take() {
                self.close(c);
            }
        }
    }

    /// How long to wait: until the next idle deadline or the end of an accept pause.
    fn timeout(&mut self) -> Option<Duration> {
        if self.accept_paused.is_some_and(|t| t <= Instant::now()) {
            self.accept_paused = None;
            // Re-adding can fail only as adding failed at start; then no more accepts.
            let _ = self.ep.add_exclusive(self.listener.as_raw_fd(), LISTENER);
        }
        let next = self.timers.peek().map(|Reverse((t, _, _))| *t);
        let next = match (next, self.accept_paused) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        next.map(|t| t.saturating_duration_since(Instant::now()))
    }

    /// Accepts what is waiting, admitting each connection if the limits allow.
    fn accept(&mut self) {
        if self.accept_paused.is_some() {
            return;
        }
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((s, peer)) => self.admit(s, peer),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.raw_os_error().map(firehose_sys::errno_name),
                        Some("EMFILE" | "ENFILE" | "ENOBUFS" | "ENOMEM")
                    ) =>
                {
                    // The connection stays queued; level-triggered epoll would report it
                    // again at once, so stop watching the listener for a while.
                    let _ = self.ep.delete(self.listener.as_raw_fd());
                    self.accept_paused = Some(self.now + ACCEPT_PAUSE);
                    return;
                }
                // Reset before we accepted it, and the like: go on.
                Err(_) => {}
            }
        }
    }

    fn admit(&mut self, s: TcpStream, peer: SocketAddr) {
        let sh = self.sh;
        if !sh.admit(peer.ip()) {
            sh.counters.rejected.fetch_add(1, Ordering::Relaxed);
            return;
        }
        sh.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let generation = self.next_generation;
        self.next_generation = generation.wrapping_add(1);
        let token = slot as u64 | (generation as u64) << 32;
        if s.set_nonblocking(true).is_err()
            || s.set_nodelay(true).is_err()
            || self.ep.add(s.as_raw_fd(), Interest::READ, token).is_err()
        {
            self.free.push(slot);
            sh.release(peer.ip());
            return;
        }
        self.conns[slot] = Some(Conn {
            stream: s,
            peer,
            token,
            pending: Vec::new(),
            out: Vec::new(),
            transfer: None,
            last_active: self.now,
            eof: false,
            bad: false,
            interest: Interest::READ,
        });
        self.timers
            .push(Reverse((self.now + sh.cfg.idle, slot, generation)));
        // Entries of closed connections wait for their deadline; keep them bounded.
        if self.timers.len() > 2 * (self.conns.len() - self.free.len()) + 1024 {
            let conns = &self.conns;
            self.timers.retain(|Reverse((_, s, g))| {
                conns[*s]
                    .as_ref()
                    .is_some_and(|c| c.token >> 32 == *g as u64)
            });
        }
        // A client usually sends its query right behind the handshake: read it now rather
        // than after another turn of the loop (an empty read costs one EAGAIN).
        self.on_event(
            token,
            Event {
                token,
                readable: true,
                writable: false,
            },
        );
    }

    fn on_event(&mut self, token: u64, ev: Event) {
        let slot = token as u32 as usize;
        let Some(mut c) = self
            .conns
            .get_mut(slot)
            .and_then(|c| c.take_if(|c| c.token == token))
        else {
            return;
        };
        if self.step(&mut c, ev.readable) {
            self.conns[slot] = Some(c);
        } else {
            self.free.push(slot);
            self.close(c);
        }
    }

    /// Closes connections idle past the timeout.
    fn expire(&mut self) {
        let idle = self.sh.cfg.idle;
        while let Some(&Reverse((deadline, slot, generation))) = self.timers.peek() {
            if deadline > self.now {
                return;
            }
            self.timers.pop();
            let live = self.conns[slot]
                .as_ref()
                .filter(|c| c.token >> 32 == generation as u64);
            let Some(due) = live.map(|c| c.last_active + idle) else {
                continue;
            };
            if due > self.now {
                self.timers.push(Reverse((due, slot, generation)));
                continue;
            }
            if let Some(c) = self.conns[slot].take() {
                self.sh.counters.idle_closed.fetch_add(1, Ordering::Relaxed);
                self.free.push(slot);
                self.close(c);
            }
        }
    }

    fn close(&mut self, c: Conn) {
        // Closing the socket removes it from the epoll set.
        self.sh.release(c.peer.ip());
        if self.out.capacity() == 0 {
            self.out = c.out;
        }
    }

    /// Writes, streams, reads and answers as far as the socket allows; false to close.
    ///
    /// Never leaves a readable socket unread while reading is wanted: the loop is
    /// level-triggered, so it would be woken for it again at once and spin. A full
    /// socket therefore stops writing, not reading: input is read and answered into the
    /// queue until [`HIGH_WATER`], and only then does reading stop (until EPOLLOUT).
    fn step(&mut self, c: &mut Conn, readable: bool) -> bool {
        let mut readable = readable && !c.eof && !c.bad;
        // The socket would not take more: no more writes until EPOLLOUT.
        let mut full = false;
        loop {
            if !c.out.is_empty() && !full {
                if !self.flush(c) {
                    return false;
                }
                full = !c.out.is_empty();
            }
            if let Some(t) = c.transfer.as_mut() {
                if full {
                    break;
                }
                if t.fill(&mut c.out, HIGH_WATER) {
                    c.transfer = None;
                    self.sh.counters.dns[slot::NOERROR].fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            if c.bad || c.out.len() >= HIGH_WATER || !(readable || c.has_message()) {
                break;
            }
            if !self.serve(c, readable) {
                return false;
            }
            readable = false;
        }
        if c.finished() {
            return false;
        }
        let want = Interest::of(
            !c.eof && !c.bad && c.transfer.is_none() && c.out.len() < HIGH_WATER,
            !c.out.is_empty(),
        );
        if want != c.interest {
            if self.ep.modify(c.stream.as_raw_fd(), want, c.token).is_err() {
                return false;
            }
            c.interest = want;
        }
        true
    }

    /// Reads once (if `read`) and answers every complete message, into `c.out`, until
    /// the output passes the high-water mark or a transfer starts. False to close.
    fn serve(&mut self, c: &mut Conn, read: bool) -> bool {
        let mut filled = c.pending.len();
        self.scratch[..filled].copy_from_slice(&c.pending);
        c.pending.clear();
        // (Room is left: answering stops with a partial message kept, or at the mark.)
        if read && filled < self.scratch.len() {
            match c.stream.read(&mut self.scratch[filled..]) {
                Ok(0) => c.eof = true,
                Ok(n) => filled += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return false,
            }
        }
        if c.out.capacity() == 0 {
            c.out = std::mem::take(&mut self.out);
        }
        let mut at = 0;
        while filled - at >= 2 && !c.bad && c.transfer.is_none() && c.out.len() < HIGH_WATER {
            let len = get16(&self.scratch, at) as usize;
            if filled - at < 2 + len {
                break;
            }
            self.msg[..len].copy_from_slice(&self.scratch[at + 2..at + 2 + len]);
            at += 2 + len;
            c.last_active = self.now;
            match self.answer(c.peer, len, &mut c.out) {
                Answered::Done => {}
                Answered::Close => c.bad = true,
                Answered::Transfer(t) => c.transfer = Some(t),
            }
        }
        if at < filled {
            c.pending.extend_from_slice(&self.scratch[at..filled]);
        }
        true
    }

    /// Writes `c.out`; false if the connection is broken.
    fn flush(&mut self, c: &mut Conn) -> bool {
        let mut sent = 0;
        while sent < c.out.len() {
            match c.stream.write(&c.out[sent..]) {
                Ok(0) => return false,
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.sh
                        .counters
                        .write_blocked
                        .fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if sent > 0 {
            c.last_active = self.now;
        }
        if sent == c.out.len() {
            c.out.clear();
            // Hand the buffer back, so an idle connection holds none.
            if self.out.capacity() == 0 {
                std::mem::swap(&mut self.out, &mut c.out);
            } else {
                c.out = Vec::new();
            }
        } else {
            c.out.drain(..sent);
        }
        true
    }

    /// Answers `msg[..len]` into `out`, or starts a transfer.
    fn answer(&mut self, peer: SocketAddr, len: usize, out: &mut Vec<u8>) -> Answered {
        let sh = self.sh;
        sh.counters.queries.fetch_add(1, Ordering::Relaxed);
        let q = match parse_query(&self.msg[..len], &mut self.name) {
            Parsed::Query(q) => Some(q),
            _ => None,
        };
        let keepalive = q
            .filter(|q| q.edns.is_some())
            .is_some_and(|q| has_edns_option(&self.msg[..len], q.question_end, OPT_TCP_KEEPALIVE))
            .then(|| (sh.cfg.idle.as_millis() / 100).min(u16::MAX as u128) as u16);
        let tr = Transport::Tcp { keepalive };
        // AXFR, and IXFR from a client whose copy is older than ours, answered
        // AXFR-style (RFC 1995 §4: we keep no history of changes); the handler answers
        // every other IXFR.
        if let Some(q) = q.filter(|q| q.qclass == CLASS_IN) {
            let whole = match (q.qtype, q.ixfr_serial) {
                (rtype::AXFR, _) => true,
                (rtype::IXFR, Some(serial)) => self.behind(peer, q.name_len, serial),
                _ => false,
            };
            if whole {
                return self.transfer(peer, len, q.name_len, q.question_end, tr, out);
            }
        }
        let verdict = self.handler.respond(
            &mut self.msg,
            len,
            tr,
            &firehose_engine::Peer::from_addr(peer),
        );
        sh.counters
            .add_dns(self.handler.stats(), &mut self.published);
        match verdict {
            Verdict::Reply(n) => push_framed(out, &self.msg[..n]),
            // A response sent to us, or a runt.
            Verdict::Drop | Verdict::Error => return Answered::Close,
        }
        Answered::Done
    }

    /// Whether `peer` may transfer the zone whose apex is the `name_len` bytes of the
    /// parsed name, and holds a copy with a serial older than ours (RFC 1982 order),
    /// or one we cannot tell (a zone without transfer data, which [`Self::transfer`]
    /// then refuses).
    fn behind(&mut self, peer: SocketAddr, name_len: usize, serial: u32) -> bool {
        if !self
            .handler
            .may_transfer(&firehose_engine::Peer::from_addr(peer))
        {
            return false;
        }
        let db = self.handler.zones();
        let Some(&z) = db.apexes.get(&self.name.bytes[..name_len]) else {
            return false;
        };
        db.zones[z as usize]
            .serial()
            .is_none_or(|ours| (serial.wrapping_sub(ours) as i32) < 0)
    }

    /// A zone transfer, or its refusal.
    fn transfer(
        &mut self,
        peer: SocketAddr,
        len: usize,
        name_len: usize,
        qend: usize,
        tr: Transport,
        out: &mut Vec<u8>,
    ) -> Answered {
        let sh = self.sh;
        let allowed = sh.cfg.allow_transfer.iter().any(|p| p.contains(peer.ip()));
        let db = self.handler.zones().clone();
        let zone = db.apexes.get(&self.name.bytes[..name_len]).copied();
        let rc = match zone.map(|z| &db.zones[z as usize]) {
            // Not allowed, or the zones were built without their transfer data.
            _ if !allowed => rcode::REFUSED,
            Some(z) if z.transfer.is_empty() || z.records.is_none() => rcode::REFUSED,
            None => rcode::NOTAUTH,
            Some(_) => rcode::NOERROR,
        };
        match zone.filter(|_| rc == rcode::NOERROR) {
            Some(z) => {
                sh.counters.axfr.fetch_add(1, Ordering::Relaxed);
                Answered::Transfer(Box::new(Transfer::new(
                    db,
                    z as usize,
                    &self.msg[..len],
                    qend,
                )))
            }
            None => {
                sh.counters.axfr_refused.fetch_add(1, Ordering::Relaxed);
                if let Some(n) = self.handler.refuse(&mut self.msg, len, rc, tr) {
                    push_framed(out, &self.msg[..n]);
                }
                sh.counters
                    .add_dns(self.handler.stats(), &mut self.published);
                Answered::Done
            }
        }
    }
}

fn io(e: firehose_sys::SysError) -> std::io::Error {
    std::io::Error::new(e.source.kind(), e.to_string())
}
