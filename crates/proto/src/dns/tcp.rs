//! DNS over TCP (RFC 7766) beside the UDP workers, on the same address.
//!
//! One acceptor thread and one thread per connection, bounded by a total and a
//! per-client limit, so TCP never runs on (or slows) the UDP workers. Each connection
//! reads 2-byte length-prefixed messages, answers every complete message it has
//! (pipelined queries are answered in order, one write per burst), closes after an
//! idle timeout, and advertises that timeout to clients that send edns-tcp-keepalive
//! (RFC 7828). Answers may be up to 65535 bytes. AXFR (RFC 5936) is served to the
//! addresses allowed to transfer and refused to everyone else.

use super::counters::{slot, DnsStats, COUNTERS};
use super::handler::{has_edns_option, Transport, MAX_TCP_MESSAGE, OPT_TCP_KEEPALIVE};
use super::live::LiveZones;
use super::wire::{get16, parse_query, put16, rcode, NameBuf, Parsed, HEADER};
use super::DnsHandler;
use firehose_engine::Verdict;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// NOTAUTH: a transfer of a name that is not one of our zone apexes.
const NOTAUTH: u8 = 9;
/// QTYPE of a full zone transfer.
const AXFR: u16 = 252;
/// Largest transfer message we build (well under 65535, as other servers do).
const AXFR_MESSAGE: usize = 16384;
/// Stack of a connection thread (its buffers live on the heap).
const CONN_STACK: usize = 128 * 1024;

/// An address or prefix (`192.0.2.0/24`, `2001:db8::/32`, `127.0.0.1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| {
            format!("'{s}' is not an address or prefix (e.g. 192.0.2.1, 10.0.0.0/8, ::1)")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("'{s}': the prefix length must be 0 to {max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl Prefix {
    /// Whether `ip` lies in this prefix (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (a, b, bits) = match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
            _ => return false,
        };
        let len = self.len as u32;
        len == 0 || (a >> (bits - len)) == (b >> (bits - len))
    }
}

/// Limits and policy of the TCP side.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Connections open at once, all clients together.
    pub max_conns: usize,
    /// Connections open at once from one client address.
    pub max_per_client: usize,
    /// A connection with no complete query for this long is closed.
    pub idle: Duration,
    /// Who may pull zones with AXFR.
    pub allow_transfer: Vec<Prefix>,
    /// The UDP payload size we advertise in OPT.
    pub max_udp: u16,
    /// NSID and cookies, answered as over UDP.
    pub options: super::options::OptionsConfig,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            max_conns: 128,
            max_per_client: 8,
            idle: Duration::from_secs(10),
            allow_transfer: Vec::new(),
            max_udp: super::DEFAULT_MAX_UDP,
            options: Default::default(),
        }
    }
}

/// Counters of the TCP side.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    rejected: AtomicU64,
    idle_closed: AtomicU64,
    queries: AtomicU64,
    axfr: AtomicU64,
    axfr_refused: AtomicU64,
    /// Answers by rcode, queries by type and so on (the slots of [`DnsStats`]), added
    /// after each message by the connection that answered it.
    dns: [AtomicU64; COUNTERS],
}

/// Open connections, for the limits and for shutdown.
#[derive(Default)]
struct Registry {
    per_client: HashMap<IpAddr, usize>,
    open: HashMap<u64, TcpStream>,
    next_id: u64,
}

struct Shared {
    cfg: TcpConfig,
    live: Arc<LiveZones>,
    counters: Counters,
    registry: Mutex<Registry>,
    active: AtomicUsize,
    stop: AtomicBool,
}

/// A running TCP listener; stops on [`TcpServer::shutdown`] or drop.
pub struct TcpServer {
    local: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl TcpServer {
    /// Listens on `addr` (the UDP side's address, port included) and serves `live`.
    pub fn start(addr: SocketAddr, live: Arc<LiveZones>, cfg: TcpConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            cfg,
            live,
            counters: Counters::default(),
            registry: Mutex::default(),
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("fh-dns-tcp".into())
            .spawn(move || accept_loop(listener, sh))?;
        Ok(TcpServer {
            local,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.shared.active.load(Ordering::Acquire)
    }

    /// Counters, named beside the UDP ones (`dns_tcp_*`).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.shared.counters.read()
    }

    /// A reader of [`TcpServer::counters`] that outlives the server's handle, for a
    /// metrics scrape: relaxed loads only, no lock.
    pub fn counter_reader(&self) -> impl Fn() -> Vec<(&'static str, u64)> + Send + Sync + 'static {
        let sh = self.shared.clone();
        move || sh.counters.read()
    }

    /// Stops accepting, closes every connection, waits (up to 2 s) for their threads,
    /// and returns the counters.
    pub fn shutdown(mut self) -> Vec<(&'static str, u64)> {
        self.stop_all();
        self.counters()
    }

    fn stop_all(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&wake_addr(self.local), Duration::from_millis(200));
        let _ = acceptor.join();
        for s in self.shared.lock().open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.shared.active.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        self.stop_all();
    }
}

impl Counters {
    fn read(&self) -> Vec<(&'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut v = vec![
            ("dns_tcp_accepted", g(&self.accepted)),
            ("dns_tcp_rejected", g(&self.rejected)),
            ("dns_tcp_idle_closed", g(&self.idle_closed)),
            ("dns_tcp_queries", g(&self.queries)),
            ("dns_tcp_axfr", g(&self.axfr)),
            ("dns_tcp_axfr_refused", g(&self.axfr_refused)),
        ];
        let names = DnsStats::tcp();
        v.extend(
            names
                .named()
                .iter()
                .zip(&self.dns)
                .map(|((n, _), c)| (*n, g(c))),
        );
        v
    }

    /// Adds what `now` counted since `published`, and remembers it as published.
    fn add_dns(&self, now: &DnsStats, published: &mut [u64; COUNTERS]) {
        for (i, ((_, v), p)) in now.named().iter().zip(published.iter_mut()).enumerate() {
            if *v != *p {
                self.dns[i].fetch_add(*v - *p, Ordering::Relaxed);
                *p = *v;
            }
        }
    }
}

/// Where to connect to reach a listener on `local` (a wildcard address is reached on
/// loopback).
fn wake_addr(local: SocketAddr) -> SocketAddr {
    let ip = match local.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, local.port())
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection if the limits allow; its id.
    fn admit(&self, s: &TcpStream, ip: IpAddr) -> Option<u64> {
        let mut r = self.lock();
        let n = r.per_client.get(&ip).copied().unwrap_or(0);
        if r.open.len() >= self.cfg.max_conns || n >= self.cfg.max_per_client {
            return None;
        }
        let clone = s.try_clone().ok()?;
        let id = r.next_id;
        r.next_id += 1;
        r.open.insert(id, clone);
        *r.per_client.entry(ip).or_insert(0) += 1;
        self.active.fetch_add(1, Ordering::AcqRel);
        Some(id)
    }

    fn release(&self, id: u64, ip: IpAddr) {
        let mut r = self.lock();
        r.open.remove(&id);
        if let Some(n) = r.per_client.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                r.per_client.remove(&ip);
            }
        }
        drop(r);
        self.active.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept_loop(listener: TcpListener, sh: Arc<Shared>) {
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(c) => c,
            // Out of descriptors or a connection reset before accept: keep serving.
            Err(_) if !sh.stop.load(Ordering::Acquire) => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(_) => return,
        };
        if sh.stop.load(Ordering::Acquire) {
            return;
        }
        let ip = peer.ip();
        let Some(id) = sh.admit(&stream, ip) else {
            sh.counters.rejected.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        sh.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let sh2 = sh.clone();
        let spawned = std::thread::Builder::new()
            .name("fh-dns-tcp-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || {
                let mut conn = Conn::new(&sh2, peer);
                conn.run(stream);
                sh2.release(id, ip);
            });
        if spawned.is_err() {
            sh.release(id, ip);
            sh.counters.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One connection's state.
struct Conn<'a> {
    sh: &'a Shared,
    peer: SocketAddr,
    handler: DnsHandler,
    /// Bytes received and not yet consumed.
    inbuf: Vec<u8>,
    /// The message being answered (a response is built in place, up to 65535 bytes).
    msg: Vec<u8>,
    /// Responses waiting to be written, each with its length prefix.
    out: Vec<u8>,
    name: Box<NameBuf>,
    /// The handler's counters as last added to the shared ones.
    published: [u64; COUNTERS],
}

impl<'a> Conn<'a> {
    fn new(sh: &'a Shared, peer: SocketAddr) -> Self {
        Conn {
            sh,
            peer,
            handler: DnsHandler::live(sh.live.clone(), sh.cfg.max_udp)
                .with_options(sh.cfg.options.clone())
                .counted_as_tcp(),
            inbuf: vec![0; 2 * (2 + MAX_TCP_MESSAGE)],
            msg: vec![0; MAX_TCP_MESSAGE],
            out: Vec::with_capacity(4096),
            name: Box::default(),
            published: [0; COUNTERS],
        }
    }

    fn run(&mut self, mut s: TcpStream) {
        let idle = self.sh.cfg.idle;
        if s.set_read_timeout(Some(idle)).is_err()
            || s.set_write_timeout(Some(idle)).is_err()
            || s.set_nodelay(true).is_err()
        {
            return;
        }
        let mut filled = 0;
        loop {
            // Answer every complete message received so far, then write them at once.
            let mut at = 0;
            while filled - at >= 2 {
                let len = get16(&self.inbuf, at) as usize;
                if filled - at < 2 + len {
                    break;
                }
                self.msg[..len].copy_from_slice(&self.inbuf[at + 2..at + 2 + len]);
                at += 2 + len;
                if !self.answer(len, &mut s) {
                    return;
                }
            }
            self.inbuf.copy_within(at..filled, 0);
            filled -= at;
            if !self.out.is_empty() {
                if s.write_all(&self.out).is_err() {
                    return;
                }
                self.out.clear();
            }
            if self.sh.stop.load(Ordering::Acquire) {
                return;
            }
            match s.read(&mut self.inbuf[filled..]) {
                Ok(0) => return,
                Ok(n) => filled += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    self.sh.counters.idle_closed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Answers `msg[..len]` into `out` (or streams a transfer); false to close.
    fn answer(&mut self, len: usize, s: &mut TcpStream) -> bool {
        self.sh.counters.queries.fetch_add(1, Ordering::Relaxed);
        let q = match parse_query(&self.msg[..len], &mut self.name) {
            Parsed::Query(q) => Some(q),
            _ => None,
        };
        let keepalive = q
            .filter(|q| q.edns.is_some())
            .is_some_and(|q| has_edns_option(&self.msg[..len], q.question_end, OPT_TCP_KEEPALIVE))
            .then(|| (self.sh.cfg.idle.as_millis() / 100).min(u16::MAX as u128) as u16);
        let tr = Transport::Tcp { keepalive };
        if let Some(q) = q.filter(|q| q.qtype == AXFR && q.qclass == super::wire::CLASS_IN) {
            return self.transfer(len, q.name_len, q.question_end, tr, s);
        }
        let peer = firehose_engine::Peer::from_addr(self.peer);
        let verdict = self.handler.respond(&mut self.msg, len, tr, &peer);
        self.sh
            .counters
            .add_dns(self.handler.stats(), &mut self.published);
        match verdict {
            Verdict::Reply(n) => push_framed(&mut self.out, &self.msg[..n]),
            // A response sent to us, or a runt: RFC 7766 §6.2.2 lets the server close.
            Verdict::Drop | Verdict::Error => return false,
        }
        true
    }

    /// A zone transfer, or its refusal. False to close the connection.
    fn transfer(
        &mut self,
        len: usize,
        name_len: usize,
        qend: usize,
        tr: Transport,
        s: &mut TcpStream,
    ) -> bool {
        let allowed = self
            .sh
            .cfg
            .allow_transfer
            .iter()
            .any(|p| p.contains(self.peer.ip()));
        let db = self.handler.zones().clone();
        let zone = db
            .apexes
            .get(&self.name.bytes[..name_len])
            .map(|&z| &db.zones[z as usize]);
        let rc = match zone {
            // Not allowed, or the zones were built without their transfer data.
            _ if !allowed => rcode::REFUSED,
            Some(z) if z.transfer.is_empty() || z.records.is_none() => rcode::REFUSED,
            None => NOTAUTH,
            Some(_) => rcode::NOERROR,
        };
        let Some((z, recs)) = zone
            .filter(|_| rc == rcode::NOERROR)
            .and_then(|z| Some((z, z.records.as_deref()?)))
        else {
            self.sh
                .counters
                .axfr_refused
                .fetch_add(1, Ordering::Relaxed);
            if let Some(n) = self.handler.refuse(&mut self.msg, len, rc, tr) {
                push_framed(&mut self.out, &self.msg[..n]);
            }
            self.sh
                .counters
                .add_dns(self.handler.stats(), &mut self.published);
            return true;
        };
        self.sh.counters.axfr.fetch_add(1, Ordering::Relaxed);
        // Earlier pipelined answers go first.
        if s.write_all(&self.out).is_err() {
            return false;
        }
        self.out.clear();
        let id = [self.msg[0], self.msg[1]];
        let flags = 0x84 | (self.msg[2] & 0x01); // QR, AA, RD echoed
        let header = |with_question: bool| {
            let mut m = Vec::with_capacity(AXFR_MESSAGE);
            m.extend_from_slice(&[
                id[0],
                id[1],
                flags,
                0,
                0,
                with_question as u8,
                0,
                0,
                0,
                0,
                0,
                0,
            ]);
            m
        };
        let mut m = header(true);
        m.extend_from_slice(&self.msg[HEADER..qend]);
        let mut count = 0u16;
        let mut framed = Vec::with_capacity(AXFR_MESSAGE + 2);
        let mut flush = |m: &mut Vec<u8>, count: u16| {
            put16(m, 6, count);
            framed.clear();
            push_framed(&mut framed, m);
            s.write_all(&framed).is_ok()
        };
        // Every record, then the SOA again (RFC 5936 §2.2), written from the zone's
        // records as loaded.
        let mut rr = Vec::with_capacity(512);
        for &i in z.transfer.iter().chain(z.transfer.first()) {
            rr.clear();
            recs.rec(i as usize).write_plain(&mut rr);
            if count > 0 && m.len() + rr.len() > AXFR_MESSAGE {
                if !flush(&mut m, count) {
                    return false;
                }
                (m, count) = (header(false), 0);
            }
            m.extend_from_slice(&rr);
            count += 1;
        }
        if !flush(&mut m, count) {
            return false;
        }
        self.sh.counters.dns[slot::NOERROR].fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// Appends `m` with its 2-byte length prefix.
fn push_framed(out: &mut Vec<u8>, m: &[u8]) {
    out.extend_from_slice(&(m.len() as u16).to_be_bytes());
    out.extend_from_slice(m);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_by_their_length() {
        let p: Prefix = "192.0.2.0/24".parse().unwrap();
        assert!(p.contains("192.0.2.77".parse().unwrap()));
        assert!(!p.contains("192.0.3.1".parse().unwrap()));
        assert!(p.contains("::ffff:192.0.2.1".parse().unwrap()));
        let one: Prefix = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        assert!(!one.contains("127.0.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("nope".parse::<Prefix>().is_err());
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
    }
}
