//! The socket modes block with no receive timeout: stop must still end them, and the
//! shutdown that wakes them must not be counted as a datagram.

use super::*;
use std::net::UdpSocket;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn config(io: SinkIo, workers: usize) -> SinkConfig {
    SinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        io,
        workers,
        cpus: None,
        batch: 8,
        busy_poll_us: None,
        rcvbuf: None,
        reuseport: true,
        interface: None,
        fanout: Fanout::Hash,
        ring: RxRingConfig::default(),
        uring: UringSetup::default(),
        xdp: XdpOptions::default(),
    }
}

/// Stops `sink` on another thread; a worker left blocked would hang `stop`, so the
/// caller gets `None` after a generous bound instead of a hung test.
fn stop_within(sink: Sink, bound: Duration) -> Option<Result<Snapshot, WorkerFailure>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(sink.stop());
    });
    rx.recv_timeout(bound).ok()
}

/// Waits until the sink has counted `n` packets (bounded).
fn wait_for(sink: &Sink, n: u64) {
    let by = Instant::now() + Duration::from_secs(10);
    while sink.packets() < n && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn socket_modes_block_without_a_timeout_and_stop_wakes_every_worker() {
    for io in [
        SinkIo::Recv,
        SinkIo::Recvfrom,
        SinkIo::Recvmsg,
        SinkIo::Recvmmsg,
    ] {
        for reuseport in [true, false] {
            let mut cfg = config(io, 2);
            cfg.reuseport = reuseport;
            let sink = Sink::start(&cfg).unwrap();
            for s in &sink.sockets {
                // SO_RCVTIMEO read back: zero, a receive sleeps until data or shutdown.
                assert_eq!(s.recv_timeout().unwrap(), Duration::ZERO, "{io:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
            let snap = stop_within(sink, Duration::from_secs(10))
                .unwrap_or_else(|| {
                    panic!("{io:?} reuseport={reuseport}: stop left a worker blocked")
                })
                .unwrap();
            assert_eq!(
                snap.total(|w| w.packets),
                0,
                "{io:?}: the wake-up is no datagram"
            );
        }
    }
}

#[test]
fn empty_datagrams_count_and_stop_counts_nothing_extra() {
    for io in [
        SinkIo::Recv,
        SinkIo::Recvfrom,
        SinkIo::Recvmsg,
        SinkIo::Recvmmsg,
    ] {
        let sink = Sink::start(&config(io, 1)).unwrap();
        let to = sink.local_addr();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sizes = [0usize, 7, 0, 3000, 1];
        for len in sizes {
            tx.send_to(&vec![1u8; len], to).unwrap();
        }
        wait_for(&sink, sizes.len() as u64);
        assert_eq!(sink.packets(), sizes.len() as u64, "{io:?}");
        let snap = stop_within(sink, Duration::from_secs(10))
            .expect("stop returns")
            .unwrap();
        assert_eq!(snap.total(|w| w.packets), sizes.len() as u64, "{io:?}");
        assert_eq!(
            snap.total(|w| w.bytes),
            sizes.iter().sum::<usize>() as u64,
            "{io:?}"
        );
        assert_eq!(
            snap.per_cpu.iter().map(|&(_, n)| n).sum::<u64>(),
            sizes.len() as u64
        );
    }
}

#[test]
fn a_dropped_sink_ends_its_blocked_workers() {
    let sink = Sink::start(&config(SinkIo::Recvmsg, 1)).unwrap();
    let sock = sink.sockets[0].clone();
    drop(sink);
    // The worker held the other reference; once it has ended, this is the only one.
    let by = Instant::now() + Duration::from_secs(10);
    while Arc::strong_count(&sock) > 1 && Instant::now() < by {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        Arc::strong_count(&sock),
        1,
        "a worker is still blocked in recvmsg"
    );
}
