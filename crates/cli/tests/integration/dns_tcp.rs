//! `firehose serve --proto dns` over TCP as a real process: connections cost no threads,
//! and the thread count is bounded like --workers.

use crate::util::{example_zone, framed_query, run, Served};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends one query and reads its answer's ID.
fn ask(s: &mut TcpStream, id: u16) -> u16 {
    s.write_all(&framed_query(id)).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut m = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut m).unwrap();
    u16::from_be_bytes([m[0], m[1]])
}

fn count(pid: u32, dir: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/{dir}"))
        .unwrap()
        .count()
}

/// Descriptors the test and the server (which inherits the limit) each need: 1001
/// connections and what else they hold.
const FILES: u64 = 1001 + 64;

#[test]
fn a_thousand_idle_connections_add_no_threads() {
    match firehose_sys::limits::raise_open_files(FILES) {
        Ok(n) if n >= FILES => {}
        Ok(n) => {
            eprintln!("skipped: needs {FILES} open files, the hard limit (ulimit -Hn) allows {n}");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    let z = example_zone();
    let srv = Served::start(&[
        "--proto",
        "dns",
        "--zone",
        &z,
        "--listen",
        "127.0.0.1:0",
        "--tcp-threads",
        "2",
        "--tcp-max-conns",
        "1100",
        "--tcp-max-per-client",
        "1100",
        "--tcp-idle",
        "60s",
    ]);
    let connect = || {
        let s = TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let mut first = connect();
    assert_eq!(ask(&mut first, 7), 7);
    let (threads, fds) = (count(srv.pid(), "task"), count(srv.pid(), "fd"));
    // Each is accepted and answered once, then left idle.
    let conns: Vec<TcpStream> = (0..1000u16)
        .map(|i| {
            let mut s = connect();
            assert_eq!(ask(&mut s, i), i);
            s
        })
        .collect();
    assert!(
        count(srv.pid(), "fd") >= fds + 1000,
        "the server holds every connection open"
    );
    assert_eq!(
        count(srv.pid(), "task"),
        threads,
        "no thread per connection"
    );
    assert_eq!(ask(&mut first, 8), 8, "still served");
    drop(conns);
    let out = srv.stop();
    assert!(out.contains("dns_tcp_accepted 1001,"), "{out}");
    assert!(out.contains("dns_tcp_queries 1002"), "{out}");
    // Zero counters are not printed.
    assert!(!out.contains("dns_tcp_rejected"), "{out}");
}

#[test]
fn tcp_threads_are_bounded_like_workers() {
    let z = example_zone();
    for (n, want) in [
        ("0", "'0' must be"),
        ("100000", "--tcp-threads 100000 is more than"),
    ] {
        let out = run(&["serve", "--proto", "dns", "--zone", &z, "--tcp-threads", n]);
        assert_eq!(out.status.code(), Some(2), "--tcp-threads {n}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
}
