//! The Prometheus scrape endpoint over HTTP/1.1 (`serve --metrics`), built so that a scrape
//! gets through whatever other clients do.
//!
//! Several connections are served at once, each on its own short-lived thread: at most
//! [`Limits::connections`] in all and [`Limits::per_client`] from one address, so one
//! client cannot take every slot. Each connection has one deadline for reading its
//! request and writing the answer ([`Limits::deadline`]): a client that trickles a byte
//! now and then is cut off, not waited for. A failing accept (out of file descriptors,
//! out of memory) backs off ([`Backoff`]) instead of retrying at once, which would spin a
//! core while the connection stays queued. The request reader ([`head`], [`route`]) is
//! pure, so it is fuzzed (fuzz/, target `metrics_http`).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Renders the exposition text of a scrape; called from the connection threads.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// What one client, and all of them, may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once, all clients together.
    pub connections: usize,
    /// Connections served at once from one address.
    pub per_client: usize,
    /// From accept to the last byte of the answer.
    pub deadline: Duration,
    /// Longest request head (request line and headers).
    pub max_request: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 8,
            per_client: 2,
            deadline: Duration::from_secs(5),
            max_request: 8192,
        }
    }
}

/// Where a request's head stands in the bytes received so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// The head ends (blank line included) at this offset.
    Complete(usize),
    /// No blank line yet; more may come.
    Incomplete,
    /// No blank line within the first `max` bytes.
    TooLarge,
}

/// Finds the end of the request head in `buf`: the first blank line (CRLF CRLF, or a bare
/// LF LF, which RFC 9112 §2.2 lets a server accept) within the first `max` bytes.
pub fn head(buf: &[u8], max: usize) -> Head {
    let seen = &buf[..buf.len().min(max)];
    for i in 0..seen.len() {
        if seen[i] != b'\n' {
            continue;
        }
        if i >= 1 && seen[i - 1] == b'\n' {
            return Head::Complete(i + 1);
        }
        if i >= 3 && &seen[i - 3..i] == b"\r\n\r" {
            return Head::Complete(i + 1);
        }
    }
    if buf.len() >= max {
        Head::TooLarge
    } else {
        Head::Incomplete
    }
}

/// An answer: status line text, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: &'static str,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn text(status: &'static str, body: &str) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    /// The answer on the wire: status line, headers, body; the connection closes after it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

/// The answer to a request head (or to what arrived before the client closed its side):
/// the metrics for `GET /metrics` (a query string is ignored), 404 for another path, 405
/// for another method. `render` is called only for the metrics.
pub fn route(head: &[u8], render: &dyn Fn() -> String) -> Response {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => Response {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: render(),
        },
        ("GET", _) => Response::text("404 Not Found", "firehose serves metrics at /metrics\n"),
        _ => Response::text("405 Method Not Allowed", "only GET is served\n"),
    }
}

/// The wait after a failed accept: none when the failure was the connection's own (it
/// went away before it was accepted, or a signal came), otherwise 10 ms doubling up to
/// 1 s for as long as accepts keep failing (EMFILE, ENFILE, ENOBUFS, ENOMEM...: the
/// connection stays queued, so retrying at once would fail at once, forever).
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    next: Option<Duration>,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

impl Backoff {
    /// How long to wait after `e`.
    pub fn after(&mut self, e: &std::io::Error) -> Duration {
        let own = matches!(
            e.kind(),
            ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
        );
        if own {
            return Duration::ZERO;
        }
        let d = self.next.unwrap_or(BACKOFF_FIRST);
        self.next = Some((d * 2).min(BACKOFF_MAX));
        d
    }

    /// An accept succeeded: the next failure waits the shortest time again.
    pub fn reset(&mut self) {
        self.next = None;
    }
}

/// Counters of the endpoint, for tests and the curious.
#[derive(Debug, Default)]
pub struct EndpointCounters {
    /// Connections served (answered or cut off at the deadline).
    pub served: AtomicU64,
    /// Connections closed at once because the limits were reached.
    pub refused: AtomicU64,
    /// Connections cut off at the deadline.
    pub timed_out: AtomicU64,
    /// Accepts that failed.
    pub accept_errors: AtomicU64,
}

struct Shared {
    limits: Limits,
    render: Render,
    stop: AtomicBool,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
    counters: EndpointCounters,
}

impl Shared {
    fn admit(&self, ip: IpAddr) -> bool {
        let mut g = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, per) = &mut *g;
        let mine = per.get(&ip).copied().unwrap_or(0);
        if *total >= self.limits.connections || mine >= self.limits.per_client {
            return false;
        }
        *total += 1;
        per.insert(ip, mine + 1);
        true
    }

    fn release(&self, ip: IpAddr) {
        let mut g = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, per) = &mut *g;
        *total -= 1;
        if let Some(n) = per.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&ip);
            }
        }
    }
}

/// Gives a connection's slot back when its thread ends, however it ends.
struct Slot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared.release(self.ip);
    }
}

/// A running endpoint; stops accepting on drop (connections in flight end by their
/// deadline).
pub struct Endpoint {
    local: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on `addr` and answers scrapes with `render()`.
    pub fn start(addr: SocketAddr, render: Render, limits: Limits) -> std::io::Result<Endpoint> {
        let listener = TcpListener::bind(addr)?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            limits,
            render,
            stop: AtomicBool::new(false),
            open: Mutex::new((0, HashMap::new())),
            counters: EndpointCounters::default(),
        });
        let sh = shared.clone();
        let accept = std::thread::Builder::new()
            .name("fh-metrics".into())
            .spawn(move || accept_loop(&listener, &sh))?;
        Ok(Endpoint {
            local,
            shared,
            accept: Some(accept),
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The endpoint's counters.
    pub fn counters(&self) -> &EndpointCounters {
        &self.shared.counters
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept; if even that fails, the thread ends at the next
        // connection or with the process.
        let wake = match self.local.ip() {
            ip if ip.is_unspecified() && ip.is_ipv4() => IpAddr::from([127, 0, 0, 1]),
            ip if ip.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let woke = TcpStream::connect_timeout(
            &SocketAddr::new(wake, self.local.port()),
            Duration::from_secs(1),
        );
        if let (Ok(_), Some(t)) = (woke, self.accept.take()) {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, sh: &Arc<Shared>) {
    let mut backoff = Backoff::default();
    while !sh.stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, peer)) => {
                backoff.reset();
                if !sh.stop.load(Ordering::Acquire) {
                    dispatch(sh, conn, peer);
                }
            }
            Err(e) => {
                sh.counters.accept_errors.fetch_add(1, Ordering::Relaxed);
                let wait = backoff.after(&e);
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
            }
        }
    }
}

/// Serves `conn` on a thread of its own, or refuses it (503, without waiting) when the
/// limits are reached.
fn dispatch(sh: &Arc<Shared>, conn: TcpStream, peer: SocketAddr) {
    if !sh.admit(peer.ip()) {
        sh.counters.refused.fetch_add(1, Ordering::Relaxed);
        let busy = Response::text("503 Service Unavailable", "too many scrapes at once\n");
        let _ = conn.set_nonblocking(true);
        let _ = (&conn).write(&busy.to_bytes());
        return;
    }
    let slot = Slot {
        shared: sh.clone(),
        ip: peer.ip(),
    };
    let spawned = std::thread::Builder::new()
        .name("fh-metrics-conn".into())
        .spawn(move || {
            let sh = slot.shared.clone();
            let answered = answer(conn, &sh);
            sh.counters.served.fetch_add(1, Ordering::Relaxed);
            if answered.is_err_and(|e| e.kind() == ErrorKind::TimedOut) {
                sh.counters.timed_out.fetch_add(1, Ordering::Relaxed);
            }
            drop(slot);
        });
    // Without a thread the connection (moved into the closure) is dropped, which
    // closes it and gives its slot back.
    drop(spawned);
}

/// The time left before `end`, or TimedOut.
fn left(end: Instant) -> std::io::Result<Duration> {
    match end.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(ErrorKind::TimedOut.into()),
    }
}

/// Reads one request and writes its answer, all before the deadline.
fn answer(mut conn: TcpStream, sh: &Shared) -> std::io::Result<()> {
    let end = Instant::now() + sh.limits.deadline;
    let max = sh.limits.max_request;
    let mut req = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let response = loop {
        match head(&req, max) {
            Head::Complete(n) => break route(&req[..n], &*sh.render),
            Head::TooLarge => {
                break Response::text(
                    "431 Request Header Fields Too Large",
                    "the request head is too long\n",
                )
            }
            Head::Incomplete => {}
        }
        let wait = match left(end) {
            Ok(d) => d,
            Err(e) => {
                late(&conn);
                return Err(e);
            }
        };
        conn.set_read_timeout(Some(wait))?;
        match conn.read(&mut chunk) {
            // The client closed its side: answer what came.
            Ok(0) => break route(&req, &*sh.render),
            Ok(n) => req.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                late(&conn);
                return Err(ErrorKind::TimedOut.into());
            }
            Err(e) => return Err(e),
        }
    };
    let bytes = response.to_bytes();
    let mut at = 0;
    while at < bytes.len() {
        conn.set_write_timeout(Some(left(end)?))?;
        match conn.write(&bytes[at..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(ErrorKind::TimedOut.into()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Tells a client cut off at the deadline why, if its socket takes it at once.
fn late(conn: &TcpStream) {
    let r = Response::text(
        "408 Request Timeout",
        "the request did not arrive in time\n",
    );
    let _ = conn.set_nonblocking(true);
    let _ = (&*conn).write(&r.to_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_metrics_and_refuses_the_rest() {
        let r = || "x 1\n".to_string();
        let get = |req: &[u8]| route(req, &r);
        assert_eq!(
            get(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").body,
            "x 1\n"
        );
        assert_eq!(get(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").status, "200 OK");
        assert_eq!(get(b"GET / HTTP/1.1\r\n\r\n").status, "404 Not Found");
        assert_eq!(
            get(b"POST /metrics HTTP/1.1\r\n\r\n").status,
            "405 Method Not Allowed"
        );
        assert_eq!(get(b"").status, "405 Method Not Allowed");
        assert_eq!(get(b"GET /metrics\n\n").status, "200 OK");
    }

    #[test]
    fn a_head_ends_at_its_first_blank_line_within_the_limit() {
        assert_eq!(
            head(b"GET / HTTP/1.1\r\nHost: a\r\n", 100),
            Head::Incomplete
        );
        assert_eq!(head(b"GET / HTTP/1.1\r\n\r\nbody", 100), Head::Complete(18));
        assert_eq!(head(b"GET /\n\nx", 100), Head::Complete(7));
        assert_eq!(head(b"GET / HTTP/1.1\r\n\r\n", 17), Head::TooLarge);
        assert_eq!(head(b"GET / HTTP/1.1\r\n\r\n", 18), Head::Complete(18));
        assert_eq!(head(&[b'a'; 10], 10), Head::TooLarge);
        assert_eq!(head(&[b'a'; 9], 10), Head::Incomplete);
    }

    #[test]
    fn the_answer_says_its_length_and_closes() {
        let r = Response::text("200 OK", "abc");
        let b = String::from_utf8(r.to_bytes()).unwrap();
        assert!(b.starts_with("HTTP/1.1 200 OK\r\n"), "{b}");
        assert!(b.contains("\r\nContent-Length: 3\r\n"), "{b}");
        assert!(b.contains("\r\nConnection: close\r\n"), "{b}");
        assert!(b.ends_with("\r\n\r\nabc"), "{b}");
    }

    #[test]
    fn failed_accepts_back_off_until_one_succeeds() {
        let mut b = Backoff::default();
        let emfile = std::io::Error::from_raw_os_error(24);
        let waits: Vec<_> = (0..9).map(|_| b.after(&emfile).as_millis()).collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        let aborted = std::io::Error::from(ErrorKind::ConnectionAborted);
        assert_eq!(
            b.after(&aborted),
            Duration::ZERO,
            "the connection's own failure"
        );
        b.reset();
        assert_eq!(b.after(&emfile), Duration::from_millis(10));
    }
}
