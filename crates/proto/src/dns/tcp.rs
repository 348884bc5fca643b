//! DNS over TCP (RFC 7766) beside the UDP workers, on the same address.
//!
//! A fixed number of TCP threads (one by default), each an epoll loop over the shared
//! nonblocking listener and the connections it accepted, so TCP never runs on (or
//! slows) the UDP workers and an idle connection costs a descriptor and a small struct,
//! not a thread. Connections are bounded in total and per client address. Each reads
//! 2-byte length-prefixed messages, in any pieces, answers every complete message it
//! has (pipelined queries are answered in order, one write per burst), closes after an
//! idle timeout, and advertises that timeout to clients that send edns-tcp-keepalive
//! (RFC 7828). Answers may be up to 65535 bytes. AXFR (RFC 5936) is streamed to the
//! addresses allowed to transfer as the socket drains, and refused to everyone else.

mod event_loop;
mod transfer;

use super::counters::{DnsStats, COUNTERS};
use super::live::LiveZones;
use super::prefix::{Net, Prefix};
use event_loop::Loop;
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Stack of a TCP thread (its buffers live on the heap).
const THREAD_STACK: usize = 256 * 1024;

/// Limits and policy of the TCP side.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Connections open at once, all clients together.
    pub max_conns: usize,
    /// Connections open at once from one client: an IPv4 address, or an IPv6 /64.
    pub max_per_client: usize,
    /// A connection with no complete query for this long is closed.
    pub idle: Duration,
    /// Who may pull zones with AXFR.
    pub allow_transfer: Vec<Prefix>,
    /// The UDP payload size we advertise in OPT.
    pub max_udp: u16,
    /// NSID and cookies, answered as over UDP.
    pub options: super::options::OptionsConfig,
    /// Event-loop threads (at least one).
    pub threads: usize,
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
            threads: 1,
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
    /// Writes that found a client's socket full (it was not reading), so its
    /// connection waited for room instead of reading more.
    write_blocked: AtomicU64,
    /// Answers by rcode, queries by type and so on (the slots of [`DnsStats`]), added
    /// after each message by the connection that answered it.
    dns: [AtomicU64; COUNTERS],
}

/// A client, for the per-client limit: an IPv4 address or an IPv6 /64 (what one host
/// holds: counted by address, a single /64 could take every connection).
const CLIENT_V4: u8 = 32;
const CLIENT_V6: u8 = 64;

/// Open connections per client network, for the limits.
#[derive(Default)]
struct Limits {
    per_client: HashMap<Net, usize>,
    open: usize,
}

struct Shared {
    cfg: TcpConfig,
    live: Arc<LiveZones>,
    counters: Counters,
    limits: Mutex<Limits>,
    active: AtomicUsize,
    stop: AtomicBool,
}

/// A running TCP side; stops on [`TcpServer::shutdown`] or drop.
pub struct TcpServer {
    local: SocketAddr,
    shared: Arc<Shared>,
    /// Written to once at shutdown; every loop watches `woken`, the other end.
    wake: UnixStream,
    woken: UnixStream,
    threads: Vec<JoinHandle<()>>,
}

impl TcpServer {
    /// Listens on `addr` (the UDP side's address, port included) and serves `live` from
    /// `cfg.threads` event-loop threads.
    pub fn start(addr: SocketAddr, live: Arc<LiveZones>, cfg: TcpConfig) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let (wake, woken) = UnixStream::pair()?;
        let listener = Arc::new(listener);
        let threads = cfg.threads.max(1);
        let mut server = TcpServer {
            local,
            shared: Arc::new(Shared {
                cfg,
                live,
                counters: Counters::default(),
                limits: Mutex::default(),
                active: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
            }),
            wake,
            woken,
            threads: Vec::with_capacity(threads),
        };
        for i in 0..threads {
            // Set up here, so that a failure is reported by start.
            let ep = event_loop::watch(&listener, &server.woken)?;
            let (sh, l) = (server.shared.clone(), listener.clone());
            let t = std::thread::Builder::new()
                .name(format!("fh-dns-tcp{i}"))
                .stack_size(THREAD_STACK)
                .spawn(move || Loop::new(&sh, &l, ep).run())?;
            server.threads.push(t);
        }
        Ok(server)
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

    /// Stops accepting, closes every connection, waits for the threads, and returns the
    /// counters.
    pub fn shutdown(mut self) -> Vec<(&'static str, u64)> {
        self.stop_all();
        self.counters()
    }

    fn stop_all(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Never read, so it stays readable and wakes every loop.
        let _ = self.wake.write_all(&[1]);
        for t in self.threads.drain(..) {
            let _ = t.join();
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
            ("dns_tcp_write_blocked", g(&self.write_blocked)),
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

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Limits> {
        self.limits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a new connection from `ip` if the limits allow it.
    fn admit(&self, ip: IpAddr) -> bool {
        let net = Net::of(ip, CLIENT_V4, CLIENT_V6);
        let mut l = self.lock();
        let n = l.per_client.get(&net).copied().unwrap_or(0);
        if l.open >= self.cfg.max_conns || n >= self.cfg.max_per_client {
            return false;
        }
        l.open += 1;
        *l.per_client.entry(net).or_insert(0) += 1;
        self.active.fetch_add(1, Ordering::AcqRel);
        true
    }

    fn release(&self, ip: IpAddr) {
        let net = Net::of(ip, CLIENT_V4, CLIENT_V6);
        let mut l = self.lock();
        l.open -= 1;
        if let Some(n) = l.per_client.get_mut(&net) {
            *n -= 1;
            if *n == 0 {
                l.per_client.remove(&net);
            }
        }
        drop(l);
        self.active.fetch_sub(1, Ordering::AcqRel);
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

    fn shared(cfg: TcpConfig) -> Shared {
        let db = std::sync::Arc::new(super::super::db::ZoneSet::default());
        Shared {
            cfg,
            live: LiveZones::new(db),
            counters: Counters::default(),
            limits: Mutex::default(),
            active: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    #[test]
    fn a_client_is_its_ipv6_64_or_its_ipv4_address() {
        let sh = shared(TcpConfig {
            max_per_client: 2,
            ..TcpConfig::default()
        });
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Addresses of one /64 count together.
        assert!(sh.admit(ip("2001:db8:0:1::1")));
        assert!(sh.admit(ip("2001:db8:0:1::2")));
        assert!(!sh.admit(ip("2001:db8:0:1:ffff::3")));
        assert!(sh.admit(ip("2001:db8:0:2::1")), "another /64");
        sh.release(ip("2001:db8:0:1::1"));
        assert!(sh.admit(ip("2001:db8:0:1::9")), "room again after a close");
        // IPv4 by address, also when it comes IPv4-mapped from a dual-stack socket.
        assert!(sh.admit(ip("192.0.2.1")));
        assert!(sh.admit(ip("::ffff:192.0.2.1")));
        assert!(!sh.admit(ip("192.0.2.1")));
        assert!(sh.admit(ip("192.0.2.2")));
        assert_eq!(sh.active.load(Ordering::Acquire), 6);
    }
}
