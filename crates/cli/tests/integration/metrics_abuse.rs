//! `serve --metrics` against clients that do not play fair (issue 20): a scrape gets through
//! while another client trickles its request, such a client is cut off at the request
//! deadline, and an accept that fails for want of file descriptors waits instead of
//! spinning a core.

use crate::metrics::serve_with_metrics;
use crate::util::tmp;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A scrape that must answer within `within`: the status line, or what went wrong.
fn scrape(addr: SocketAddr, within: Duration) -> Result<String, String> {
    let mut c = TcpStream::connect_timeout(&addr, within).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(within)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut text = String::new();
    match c.read_to_string(&mut text) {
        Ok(_) => Ok(text.lines().next().unwrap_or_default().to_string()),
        Err(e) => Err(format!("{e} after {within:?}")),
    }
}

/// A client that sends `GET /metrics` one byte every `gap` until told to stop (at most
/// `limit`); returns when and how the server ended the connection, if it did.
fn trickle(
    addr: SocketAddr,
    gap: Duration,
    limit: Duration,
    stop: Arc<AtomicBool>,
) -> Option<Duration> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(gap)).unwrap();
    let started = Instant::now();
    let req = b"GET /metrics HTTP/1.1\r\nHost: slow";
    let mut buf = [0u8; 4096];
    for b in req.iter().cycle() {
        if stop.load(Ordering::Relaxed) || started.elapsed() > limit {
            return None;
        }
        if c.write_all(&[*b]).is_err() {
            return Some(started.elapsed());
        }
        match c.read(&mut buf) {
            Ok(_) => return Some(started.elapsed()), // closed (0) or told why (408)
            // EINTR: this process was frozen and thawed (a read timeout is set), not the server.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

#[test]
fn a_scrape_gets_through_while_another_client_trickles() {
    let json = tmp("metrics-trickle.json");
    let (srv, addr) = serve_with_metrics(&[], &json);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    // Connected first: a server that serves one connection at a time serves it first.
    let slow = std::thread::spawn(move || {
        trickle(addr, Duration::from_millis(250), Duration::from_secs(4), s)
    });
    std::thread::sleep(Duration::from_millis(300));
    let r = scrape(addr, Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    slow.join().unwrap();
    assert_eq!(
        r.as_deref(),
        Ok("HTTP/1.1 200 OK"),
        "the scrape beside the trickler"
    );
    drop(srv);
    let _ = std::fs::remove_file(json);
}

#[test]
fn a_client_that_never_finishes_its_request_is_cut_off_at_the_deadline() {
    let json = tmp("metrics-deadline.json");
    let (srv, addr) = serve_with_metrics(&[], &json);
    let stop = Arc::new(AtomicBool::new(false));
    // One byte every 200 ms keeps any per-read timeout from firing; the request deadline
    // (5 s) ends it.
    let ended = trickle(
        addr,
        Duration::from_millis(200),
        Duration::from_secs(9),
        stop,
    );
    let ended = ended.expect("the server never closed a request that never ends");
    assert!(
        ended >= Duration::from_secs(4),
        "cut off too early: {ended:?}"
    );
    drop(srv);
    let _ = std::fs::remove_file(json);
}

/// How many times thread `comm` of process `pid` went to sleep of its own accord, from
/// /proc/PID/task/TID/status: a thread that retries a failing accept at once never sleeps
/// (0), one that spins with a tiny sleep sleeps thousands of times a second, and one that
/// backs off sleeps a few times. Unlike the time it was runnable, the count does not depend
/// on how busy the host is (a backing-off thread waited on a run queue 27% of a second on a
/// CI host at load average 12).
fn voluntary_sleeps(pid: u32, comm: &str) -> Option<u64> {
    crate::util::voluntary_switches(&thread_dir(pid, comm)?)
}

/// /proc/PID/task/TID of the thread of process `pid` named `comm`, if it is there.
fn thread_dir(pid: u32, comm: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .map(|t| t.path())
        .find(|t| std::fs::read_to_string(t.join("comm")).is_ok_and(|n| n.trim() == comm))
}

/// Waits (up to 20 s) until thread `comm` of process `pid` sleeps in accept4(2) or
/// accept(2), read from /proc/PID/task/TID/syscall (x86_64 numbers 288 and 43; root reads
/// it, as this test runs). Panics naming what it saw otherwise.
fn wait_blocked_in_accept(pid: u32, comm: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::from("no such thread");
    while Instant::now() < deadline {
        if let Some(t) = thread_dir(pid, comm) {
            seen = std::fs::read_to_string(t.join("syscall")).unwrap_or_default();
            let nr = seen.split_whitespace().next().unwrap_or("");
            if nr == "288" || nr == "43" {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("thread {comm} of pid {pid} never waited in accept: /proc syscall says {seen:?}");
}

#[test]
fn accept_without_file_descriptors_backs_off_instead_of_spinning() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        println!("skipped: prlimit not installed (util-linux)");
        return;
    }
    let json = tmp("metrics-emfile.json");
    let (srv, addr) = serve_with_metrics(&[], &json);
    let pid = srv.pid();
    let soft = |n: &str| {
        let lim = format!("--nofile={n}:");
        let st = Command::new("prlimit")
            .args(["--pid", &pid.to_string(), &lim])
            .status()
            .unwrap();
        assert!(st.success(), "prlimit {lim}");
    };
    // No descriptor below 3 is free: every accept fails with EMFILE. An accept already
    // waiting in the kernel took its descriptor before it slept, so one scrape still gets
    // through: wait until the accept thread is there (after the start-up scrape it may still
    // be on its way back on a busy host, and its next accept would fail at once).
    wait_blocked_in_accept(pid, "fh-metrics");
    soft("3");
    assert_eq!(
        scrape(addr, Duration::from_secs(5)).as_deref(),
        Ok("HTTP/1.1 200 OK")
    );
    let queued = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let v0 = voluntary_sleeps(pid, "fh-metrics").expect("the metrics thread's status");
    // Back-offs of 160 ms and more by now (10 ms doubling, at most 1 s): a window of 2 s
    // holds at least one and at most a dozen.
    std::thread::sleep(Duration::from_secs(2));
    let sleeps = voluntary_sleeps(pid, "fh-metrics").unwrap() - v0;
    soft("1024");
    drop(queued);
    assert!(
        (1..=12).contains(&sleeps),
        "the metrics thread slept {sleeps} times in 2 s while accept failed with EMFILE \
         (0: it retries without sleeping; hundreds: it does not back off)"
    );
    // Descriptors free again: scrapes are served (after at most one back-off of 1 s).
    let r = (0..20)
        .map(|_| scrape(addr, Duration::from_secs(2)))
        .find(|r| r.as_deref() == Ok("HTTP/1.1 200 OK"));
    assert!(r.is_some(), "no scrape served once descriptors were free");
    drop(srv);
    let _ = std::fs::remove_file(json);
}
