//! A client that pipelines queries with large answers and never reads must cost the
//! TCP thread nothing while it is stuck: the loop is level-triggered, and a readable
//! socket left unread would wake it again at once (issue: 96-100% of a core until the
//! idle timeout). Alone in its test binary so that its server's thread is the only
//! `fh-dns-tcp0` in the process.

mod common;

use common::{query, start_udp_tcp};
use firehose_proto::dns::TcpConfig;
use hickory_proto::rr::RecordType;
use std::io::Write;
use std::time::{Duration, Instant};

/// utime + stime of this process's thread named `name`, in clock ticks.
fn thread_ticks(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the command (which may hold spaces) start after the last ')'.
        let rest: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        // utime and stime are fields 14 and 15, the 12th and 13th after the command.
        return Some(rest[11].parse::<u64>().ok()? + rest[12].parse::<u64>().ok()?);
    }
    None
}

fn counter(tcp: &firehose_proto::dns::TcpServer, name: &str) -> u64 {
    let c = tcp.counters();
    c.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

#[test]
fn a_stuck_pipelining_client_costs_the_tcp_thread_nothing() {
    let cfg = TcpConfig {
        // Longer than the test: the connection stays open and stuck throughout.
        idle: Duration::from_secs(60),
        ..TcpConfig::default()
    };
    // One name with 40 KB of TXT: answers larger than a socket takes at once.
    let dir = std::env::temp_dir().join(format!("fh-dns-spin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zone = dir.join("huge.zone");
    let mut text =
        "$ORIGIN huge.test.\n@ SOA ns h 1 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n".to_string();
    for i in 0..160 {
        text += &format!("big TXT \"{i:03}{}\"\n", "x".repeat(240));
    }
    std::fs::write(&zone, text).unwrap();
    let (udp, tcp) = start_udp_tcp(&[zone.to_str().unwrap()], cfg);
    std::fs::remove_dir_all(&dir).unwrap();
    let mut s = std::net::TcpStream::connect(udp.local_addr()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // About 200 KB of queries whose answers are 40 KB each, never read: far more than
    // the sockets hold.
    let q = query("big.huge.test.", RecordType::TXT, None);
    let mut burst = Vec::new();
    while burst.len() < 200_000 {
        burst.extend_from_slice(&(q.len() as u16).to_be_bytes());
        burst.extend_from_slice(&q);
    }
    // The server stops reading once its queue is full, so the write may not finish.
    let _ = s.write_all(&burst);
    // Stuck: the socket refused a write and the answers stopped growing.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = (0, Instant::now());
    loop {
        let answered = counter(&tcp, "dns_tcp_queries");
        if answered != last.0 {
            last = (answered, Instant::now());
        }
        if counter(&tcp, "dns_tcp_write_blocked") > 0
            && last.1.elapsed() > Duration::from_millis(500)
        {
            break;
        }
        assert!(Instant::now() < deadline, "the connection never got stuck");
        std::thread::sleep(Duration::from_millis(50));
    }
    let hz = firehose_sys::cpu::clock_ticks_per_sec() as f64;
    let before = thread_ticks("fh-dns-tcp0").expect("the TCP thread");
    let blocked = counter(&tcp, "dns_tcp_write_blocked");
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let used = (thread_ticks("fh-dns-tcp0").unwrap() - before) as f64 / hz;
    let share = used / t.elapsed().as_secs_f64();
    let blocked = counter(&tcp, "dns_tcp_write_blocked") - blocked;
    eprintln!(
        "TCP thread: {:.1}% of a CPU and {blocked} writes blocked over {:.1} s stuck ({} queries answered)",
        share * 100.0,
        t.elapsed().as_secs_f64(),
        counter(&tcp, "dns_tcp_queries"),
    );
    assert!(
        share < 0.05,
        "the TCP thread used {:.1}% of a CPU",
        share * 100.0
    );
    // Nothing changed on the socket: a write is tried only when it reports room.
    assert!(
        blocked < 10,
        "{blocked} writes found the socket full while stuck"
    );
    // And it still serves others.
    let mut other = common::connect(udp.local_addr());
    common::send_framed(&mut other, &[query("ns.huge.test.", RecordType::A, None)]);
    assert!(
        common::read_framed(&mut other).is_some(),
        "another client is answered"
    );
    drop(s);
    tcp.shutdown();
    udp.shutdown().expect("no worker failed");
}
