//! `--tcp-max-conns` holds over the sum of every TCP thread (docs/dns.md: "checked at accept,
//! across all threads"), through the binary. The server is frozen while the connections
//! queue in its listener's backlog, so on the thaw every TCP thread finds the listener ready
//! at once and they accept side by side (awake one at a time, the first waiting thread would
//! take every connection and a limit kept per thread would pass). Exactly the limit is
//! admitted and answered; every other connection is closed unanswered and counted rejected.

use crate::util::{example_zone, framed_query, freeze, signal_pid, Served};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The answer's ID, or None when the server closed the connection unanswered.
fn answer(s: &mut TcpStream) -> Option<u16> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut m = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut m).ok()?;
    Some(u16::from_be_bytes([m[0], m[1]]))
}

/// Connections each TCP thread holds: the descriptors its epoll set watches beyond the
/// listener and the shutdown wake-up (/proc/PID/fdinfo of each epoll descriptor).
fn held_per_thread(pid: u32) -> Vec<usize> {
    let mut held = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let target = std::fs::read_link(fd.path()).unwrap_or_default();
        if target.to_string_lossy() != "anon_inode:[eventpoll]" {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            fd.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let watched = info.lines().filter(|l| l.starts_with("tfd:")).count();
        held.push(watched.saturating_sub(2));
    }
    held
}

#[test]
fn the_connection_limit_holds_over_the_sum_of_all_tcp_threads() {
    const LIMIT: usize = 6;
    const THREADS: usize = 4;
    // More than one accept batch (64) of the first thread to wake, so others take some,
    // and fewer than the listener's backlog (128), which holds them all while frozen.
    const TRIED: usize = 100;
    let z = example_zone();
    let srv = Served::start(&[
        "--proto",
        "dns",
        "--zone",
        &z,
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--tcp-threads",
        &THREADS.to_string(),
        "--tcp-max-conns",
        &LIMIT.to_string(),
        "--tcp-max-per-client",
        "1000",
        "--tcp-idle",
        "60s",
    ]);
    freeze(srv.pid());
    // Established in the kernel's backlog, each with its query queued, none accepted yet.
    let mut conns: Vec<TcpStream> = (0..TRIED)
        .map(|i| {
            let mut s = TcpStream::connect_timeout(&srv.addr, Duration::from_secs(10)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s.write_all(&framed_query(i as u16)).unwrap();
            s
        })
        .collect();
    signal_pid(srv.pid(), "CONT");
    // Each connection is either answered (admitted) or closed unanswered (rejected at
    // accept): a read ends either way, no timing involved.
    let answered: Vec<usize> = conns
        .iter_mut()
        .enumerate()
        .filter_map(|(i, s)| answer(s).inspect(|&id| assert_eq!(id, i as u16)).map(|_| i))
        .collect();
    let held = held_per_thread(srv.pid());
    assert_eq!(
        held.len(),
        THREADS,
        "one epoll set per TCP thread: {held:?}"
    );
    assert_eq!(
        answered.len(),
        LIMIT,
        "--tcp-max-conns {LIMIT} over {THREADS} threads admitted {} of {TRIED} (held per thread {held:?})",
        answered.len()
    );
    assert_eq!(held.iter().sum::<usize>(), LIMIT, "held open: {held:?}");
    // The admitted stay served; a closed one leaves room for exactly one more.
    let mut first = conns.swap_remove(answered[0]);
    first.write_all(&framed_query(4242)).unwrap();
    assert_eq!(
        answer(&mut first),
        Some(4242),
        "an admitted one is still served"
    );
    drop(first);
    // The server has seen the close once its thread stops watching that descriptor.
    let deadline = Instant::now() + Duration::from_secs(20);
    while held_per_thread(srv.pid()).iter().sum::<usize>() != LIMIT - 1 {
        assert!(Instant::now() < deadline, "the close not seen in 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut next = TcpStream::connect(srv.addr).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    next.write_all(&framed_query(77)).unwrap();
    assert_eq!(answer(&mut next), Some(77), "room for one after a close");
    let mut over = TcpStream::connect(srv.addr).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    over.write_all(&framed_query(78)).unwrap();
    assert_eq!(answer(&mut over), None, "the limit is full again");
    drop((conns, next, over));
    let out = srv.stop();
    assert_eq!(counter(&out, "dns_tcp_accepted"), LIMIT as u64 + 1, "{out}");
    assert_eq!(
        counter(&out, "dns_tcp_rejected"),
        (TRIED - LIMIT + 1) as u64,
        "{out}"
    );
}

/// A counter of serve's exit line ("  dns: name value, name value, ...").
fn counter(out: &str, name: &str) -> u64 {
    out.split([',', ':', '\n'])
        .find_map(|f| f.trim().strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {out}"))
}
