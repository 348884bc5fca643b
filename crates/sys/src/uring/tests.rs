//! The rings against the real kernel on loopback; each test skips with the reason when
//! this kernel has no io_uring (or the opcode it needs).

use super::*;
use crate::socket::UdpSock;
use crate::tcp::{ConnectOptions, TcpListener, TcpSock};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn supported(op: &str) -> bool {
    match UringSupport::probe().require(op) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

fn pair(addr: &str) -> Option<(UdpSock, std::net::UdpSocket)> {
    let client = std::net::UdpSocket::bind(addr).ok()?;
    let srv = UdpSock::new_for(&addr.parse().unwrap()).unwrap();
    srv.bind(&addr.parse().unwrap()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    Some((srv, client))
}

/// A server's ring: names kept, replies from the request buffers.
fn server(fd: i32, buffers: u16, size: usize, setup: &UringSetup) -> DgramRing {
    let cfg = DgramConfig {
        buffers,
        buffer_size: size,
        names: true,
        sends: 64,
        ..DgramConfig::default()
    };
    DgramRing::new(vec![fd], &cfg, setup).unwrap()
}

/// Serves until `n` datagrams were answered, each reply being `f` of the request.
fn serve(r: &mut DgramRing, n: usize, f: impl Fn(&mut [u8], usize) -> usize) -> usize {
    let mut answered = 0;
    let end = Instant::now() + Duration::from_secs(5);
    while answered < n && Instant::now() < end {
        r.poll(Duration::from_millis(50)).unwrap();
        for i in 0..r.take(64) {
            let d = r.datagram(i);
            assert!(d.peer.is_some() && !d.truncated());
            let len = f(d.buf, d.len);
            r.reply(i, len);
        }
        answered += r.flush().unwrap().sent;
    }
    answered
}

#[test]
fn replies_leave_from_the_request_buffers_to_each_sender_v4_and_v6() {
    if !supported("recvmsg") {
        return;
    }
    for addr in ["127.0.0.1:0", "[::1]:0"] {
        let Some((srv, client)) = pair(addr) else {
            eprintln!("skipped {addr}: no such loopback");
            continue;
        };
        let to = srv.local_addr().unwrap();
        let setup = UringSetup {
            single_issuer: true,
            defer_taskrun: true,
            ..UringSetup::default()
        };
        let mut r = server(srv.as_raw_fd(), 16, 2048, &setup);
        let room = 2048 - 16 - NAME_ROOM;
        let sizes = [0usize, 1, 100, 1472, room];
        for (k, &size) in sizes.iter().enumerate() {
            let msg: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
            client.send_to(&msg, to).unwrap();
        }
        // Reply with the request reversed plus its length byte: bytes written in place.
        let answered = serve(&mut r, sizes.len(), |buf, len| {
            buf[..len].reverse();
            if len < buf.len() {
                buf[len] = len as u8;
                len + 1
            } else {
                len
            }
        });
        assert_eq!(answered, sizes.len(), "{addr}");
        let mut got = vec![0u8; 4096];
        for (k, &size) in sizes.iter().enumerate() {
            let (n, from) = crate::retry_interrupted(|| client.recv_from(&mut got)).unwrap();
            assert_eq!(from, to, "{addr}");
            let mut want: Vec<u8> = (0..size).map(|i| (i * 7 + k) as u8).collect();
            want.reverse();
            if size < room {
                want.push(size as u8);
            }
            assert_eq!(&got[..n], &want[..], "{addr} size {size}");
        }
        assert_eq!(r.stats.buffer_ring_empty, 0);
    }
}

#[test]
fn an_empty_buffer_ring_is_counted_and_the_queue_still_drains() {
    if !supported("recvmsg") {
        return;
    }
    let (srv, client) = pair("127.0.0.1:0").unwrap();
    let to = srv.local_addr().unwrap();
    // Two buffers: the third datagram finds the ring empty and ends the receive.
    let mut r = server(srv.as_raw_fd(), 2, 256, &UringSetup::default());
    assert_eq!(r.buffers(), 2);
    for i in 0..20u8 {
        client.send_to(&[i; 10], to).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(serve(&mut r, 20, |_, len| len), 20);
    let mut buf = [0u8; 64];
    for i in 0..20u8 {
        let (n, _) = crate::retry_interrupted(|| client.recv_from(&mut buf)).unwrap();
        assert_eq!(&buf[..n], &[i; 10], "in order, none lost");
    }
    assert!(r.stats.buffer_ring_empty >= 1, "{:?}", r.stats);
    assert!(r.stats.arms >= 2, "armed again: {:?}", r.stats);
}

fn wall_ns() -> u64 {
    crate::clock::realtime_ns()
}

/// What a server ring with `control` bytes of control room hands over for three
/// datagrams on a socket with or without SO_TIMESTAMPNS: (payload, stamp) each, and the
/// (send, answer) times around each.
fn stamped(control: usize, option: bool) -> Vec<(Vec<u8>, Option<u64>, u64, u64)> {
    let (srv, client) = pair("127.0.0.1:0").unwrap();
    srv.set_timestamp_ns(option).unwrap();
    let to = srv.local_addr().unwrap();
    let cfg = DgramConfig {
        buffers: 8,
        buffer_size: 2048,
        names: true,
        control,
        sends: 8,
        ..DgramConfig::default()
    };
    let mut r = DgramRing::new(vec![srv.as_raw_fd()], &cfg, &UringSetup::default()).unwrap();
    let mut out = Vec::new();
    for k in 0..3u8 {
        let sent = wall_ns();
        client.send_to(&[k; 20], to).unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        let mut got = None;
        while got.is_none() && Instant::now() < end {
            r.poll(Duration::from_millis(100)).unwrap();
            if r.take(1) == 1 {
                let d = r.datagram(0);
                assert_eq!(d.peer, Some(client.local_addr().unwrap()));
                got = Some((d.buf[..d.len].to_vec(), d.rx_time_ns));
            }
        }
        let (data, stamp) = got.expect("a datagram in 5 s");
        out.push((data, stamp, sent, wall_ns()));
    }
    out
}

#[test]
fn a_ring_with_control_room_hands_over_the_kernels_arrival_stamp() {
    if !supported("recvmsg") {
        return;
    }
    for (k, (data, stamp, sent, seen)) in stamped(STAMP_ROOM, true).into_iter().enumerate() {
        assert_eq!(data, vec![k as u8; 20]);
        let t = stamp.expect("SO_TIMESTAMPNS and control room: a stamp");
        assert!(sent <= t && t <= seen, "{sent} <= {t} <= {seen}");
    }
    // No stamp without the option, nor without the room (the payload is intact either way).
    for (control, option) in [(STAMP_ROOM, false), (0, true)] {
        for (k, (data, stamp, ..)) in stamped(control, option).into_iter().enumerate() {
            assert_eq!(
                (data, stamp),
                (vec![k as u8; 20], None),
                "{control} {option}"
            );
        }
    }
}

/// A stamped reply leaves by SENDMSG with the request for its stamp: the kernel's
/// transmit stamp comes back on the error queue under the key the reply gave (not the
/// socket's count), between the flush's start and end, for v4 and v6; a plain reply in
/// the same flush takes no stamp, and the reply's bytes reach the sender intact.
#[test]
fn a_stamped_reply_comes_back_on_the_error_queue_under_its_own_key() {
    if !supported("recvmsg") {
        return;
    }
    if let Err(e) = crate::timestamping::key_per_send() {
        eprintln!("skipped: {e}");
        return;
    }
    for addr in ["127.0.0.1:0", "[::1]:0"] {
        let Some((srv, client)) = pair(addr) else {
            eprintln!("skipped {addr}: no such loopback");
            continue;
        };
        srv.set_timestamping(crate::timestamping::TX_ON_REQUEST)
            .unwrap();
        // The kernel turns arrival stamping on for the host from a work queue a little
        // after the first socket asks, and SO_TIMESTAMPING does not stamp a datagram that
        // arrived before: wait until the host stamps (srv keeps it on), as `load` does.
        assert!(
            crate::timestamping::host_rx_stamping(Duration::from_secs(5)).unwrap(),
            "the host never started stamping arrivals"
        );
        let to = srv.local_addr().unwrap();
        let cfg = DgramConfig {
            buffers: 8,
            buffer_size: 2048,
            names: true,
            control: STAMP_ROOM,
            sends: 8,
            ..DgramConfig::default()
        };
        let mut r = DgramRing::new(vec![srv.as_raw_fd()], &cfg, &UringSetup::default()).unwrap();
        for k in 0..3u8 {
            client.send_to(&[k; 48], to).unwrap();
        }
        let end = Instant::now() + Duration::from_secs(5);
        let mut n = 0;
        while n < 3 && Instant::now() < end {
            n = r.poll(Duration::from_millis(100)).unwrap();
        }
        assert_eq!(r.take(3), 3);
        for i in 0..3 {
            assert!(r.datagram(i).rx_time_ns.is_some(), "stamped arrivals too");
            r.datagram(i).buf[0] = 0xA0 + i as u8;
        }
        let before = wall_ns();
        assert!(r.reply_stamped(0, 48, 7000));
        r.reply(1, 48);
        assert!(r.reply_stamped(2, 48, u32::MAX));
        let f = r.flush().unwrap();
        let after = wall_ns();
        assert_eq!((f.sent, f.failed), (3, 0), "{addr}");
        assert!(r.refused_keys().is_empty());
        let mut stamps = Vec::new();
        let mut q = crate::timestamping::ErrQueue::new(8);
        q.drain(&srv, &mut stamps).unwrap();
        let keys: Vec<u32> = stamps.iter().map(|s| s.key).collect();
        assert_eq!(keys, [7000, u32::MAX], "{addr}");
        for s in &stamps {
            assert!(
                before <= s.ns && s.ns <= after,
                "{before} <= {} <= {after}",
                s.ns
            );
        }
        let mut buf = [0u8; 64];
        let mut firsts = Vec::new();
        for _ in 0..3 {
            let (len, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!((len, from), (48, to));
            firsts.push(buf[0]);
            assert_eq!(buf[1..48], [buf[1]; 47]);
        }
        firsts.sort();
        assert_eq!(firsts, [0xA0, 0xA1, 0xA2]);
    }
}

#[test]
fn buffers_with_no_room_left_for_a_payload_are_refused() {
    let cfg = DgramConfig {
        buffer_size: 16 + NAME_ROOM + STAMP_ROOM,
        names: true,
        control: STAMP_ROOM,
        ..DgramConfig::default()
    };
    let e = DgramRing::new(vec![0], &cfg, &UringSetup::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("no room for a payload"), "{e}");
}

/// A connected socket to `to`, bound on loopback.
fn connected(to: std::net::SocketAddr) -> UdpSock {
    let s = UdpSock::new_for(&to).unwrap();
    s.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
    s.connect(&to).unwrap();
    s
}

#[test]
fn batched_slot_sends_arrive_and_receives_count_each_datagram_at_full_length() {
    if !supported("recvmsg") {
        return;
    }
    let rx = UdpSock::new_for(&"127.0.0.1:0".parse().unwrap()).unwrap();
    rx.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
    let tx = connected(rx.local_addr().unwrap());
    let setup = UringSetup {
        single_issuer: true,
        defer_taskrun: true,
        ..UringSetup::default()
    };
    // The sink's shape: receive only, no names, buffers smaller than the datagrams.
    let sink = DgramConfig {
        buffers: 8,
        buffer_size: 256,
        ..DgramConfig::default()
    };
    let mut r = DgramRing::new(vec![rx.as_raw_fd()], &sink, &setup).unwrap();
    // The flood's shape: send only, one payload written once into every slot.
    let flood = DgramConfig {
        receive: false,
        sends: 16,
        tx_slots: 16,
        tx_slot_size: 300,
        ..DgramConfig::default()
    };
    let mut s = DgramRing::new(vec![tx.as_raw_fd()], &flood, &setup).unwrap();
    assert_eq!(s.buffers(), 0);
    for k in 0..16 {
        s.tx_slot(k).fill(9);
    }
    for _ in 0..2 {
        s.queue_sends(0, &[300; 8]);
        let f = s.flush().unwrap();
        assert_eq!((f.sent, f.failed, f.syscalls), (8, 0, 1));
        assert_eq!(s.tx_free(), 16, "every slot free after a flush");
    }
    let mut lens = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while lens.len() < 16 && Instant::now() < end {
        r.poll(Duration::from_millis(100)).unwrap();
        for i in 0..r.take(usize::MAX) {
            lens.push(r.full_len(i));
            assert_eq!(r.payload(i).1.len(), 256 - 16, "cut to the buffer");
        }
    }
    // 16 datagrams through 8 buffers of 256: each cut but counted at full length.
    assert_eq!(lens, vec![300; 16]);
    assert!(r.last_recv_error().is_none());
}

#[test]
fn two_flows_send_in_one_round_and_responses_come_back_per_flow() {
    for plain in [false, true] {
        if supported(if plain { "recv" } else { "recvmsg" }) {
            two_flows(plain);
        }
    }
}

/// The generator's shape on a ring that receives with RECVMSG or (`plain`) RECV.
fn two_flows(plain: bool) {
    // An echo server on a plain socket, answering 20 datagrams.
    let srv = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    srv.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let to = srv.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let mut b = [0u8; 256];
        for _ in 0..20 {
            let (n, from) = crate::retry_interrupted(|| srv.recv_from(&mut b)).unwrap();
            srv.send_to(&b[..n], from).unwrap();
        }
    });
    let socks: Vec<UdpSock> = (0..2).map(|_| connected(to)).collect();
    let fds = socks.iter().map(|s| s.as_raw_fd()).collect();
    // The generator's shape: many connected sockets, send slots, receives per socket.
    let cfg = DgramConfig {
        buffers: 8,
        buffer_size: 256,
        plain,
        sends: 8,
        tx_slots: 8,
        tx_slot_size: 64,
        ..DgramConfig::default()
    };
    let mut r = DgramRing::new(fds, &cfg, &UringSetup::default()).unwrap();
    assert_eq!(r.stats.arms, 2);
    let op = if plain {
        "IORING_OP_RECV"
    } else {
        "IORING_OP_RECVMSG"
    };
    assert_eq!(r.receive_op(), op);
    let mut sent = 0;
    for round in 0..5u8 {
        for flow in 0..2usize {
            for k in 0..2 {
                r.tx_slot(k)[..3].copy_from_slice(&[flow as u8, round, k as u8]);
            }
            r.queue_sends(flow, &[3, 3]);
        }
        assert_eq!(r.tx_free(), 4);
        let f = r.flush().unwrap();
        assert_eq!((f.sent, f.failed), (4, 0));
        sent += f.sent;
    }
    assert_eq!(sent, 20);
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < 20 && Instant::now() < end {
        if r.poll(Duration::from_millis(50)).unwrap() > 0 {
            for i in 0..r.take(3) {
                let (flow, data) = r.payload(i);
                assert_eq!(data[0] as usize, flow, "a response arrives on its flow");
                got.push(data.to_vec());
            }
        }
    }
    echo.join().unwrap();
    got.sort();
    let mut want: Vec<Vec<u8>> = (0..5u8)
        .flat_map(|round| (0..2u8).flat_map(move |f| (0..2u8).map(move |k| vec![f, round, k])))
        .collect();
    want.sort();
    assert_eq!(got, want, "{op}");
}

/// A plain ring (IORING_OP_RECV) writes no header: the payload starts the buffer, the
/// whole buffer is room for it, a longer datagram is cut there but counted at its full
/// length (MSG_TRUNC), and an empty one (which RECV completes without a buffer) is handed
/// over too, in its place. Names or control room cannot go with it.
#[test]
fn a_plain_ring_receives_into_whole_buffers_at_full_length() {
    if !supported("recv") {
        return;
    }
    let rx = UdpSock::new_for(&"127.0.0.1:0".parse().unwrap()).unwrap();
    rx.bind(&"127.0.0.1:0".parse().unwrap()).unwrap();
    let tx = connected(rx.local_addr().unwrap());
    rx.connect(&tx.local_addr().unwrap()).unwrap();
    let cfg = DgramConfig {
        buffers: 4,
        buffer_size: 256,
        plain: true,
        ..DgramConfig::default()
    };
    let mut r = DgramRing::new(vec![rx.as_raw_fd()], &cfg, &UringSetup::default()).unwrap();
    let sizes = [1usize, 256, 300, 0, 100];
    for (k, &n) in sizes.iter().enumerate() {
        let msg: Vec<u8> = (0..n).map(|i| (i + k) as u8).collect();
        assert_eq!(tx.send_to(&msg, None, 0).unwrap(), n);
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < sizes.len() && Instant::now() < end {
        r.poll(Duration::from_millis(100)).unwrap();
        for i in 0..r.take(usize::MAX) {
            let (sock, data) = r.payload(i);
            let (sock, data) = (sock, data.to_vec());
            let d = r.datagram(i);
            // The whole buffer is room; an empty datagram comes without one.
            let room = if d.full_len == 0 { 0 } else { 256 };
            assert_eq!((sock, d.buf.len(), d.peer), (0, room, None));
            got.push((data, r.full_len(i)));
        }
    }
    let want: Vec<(Vec<u8>, usize)> = sizes
        .iter()
        .enumerate()
        .map(|(k, &n)| ((0..n.min(256)).map(|i| (i + k) as u8).collect(), n))
        .collect();
    assert_eq!(got, want);
    assert!(r.last_recv_error().is_none());
    for (names, control) in [(true, 0), (false, STAMP_ROOM)] {
        let bad = DgramConfig {
            names,
            control,
            ..cfg
        };
        let e = DgramRing::new(vec![rx.as_raw_fd()], &bad, &UringSetup::default())
            .err()
            .unwrap();
        assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    }
}

#[test]
fn a_closed_port_is_a_counted_receive_error_and_the_receive_is_armed_again() {
    if !supported("recvmsg") {
        return;
    }
    // A port nobody listens on: the kernel answers with port-unreachable, which ends the
    // connected socket's receive with ECONNREFUSED.
    let gone = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = gone.local_addr().unwrap();
    drop(gone);
    let s = connected(to);
    let cfg = DgramConfig {
        sends: 1,
        tx_slots: 1,
        tx_slot_size: 8,
        ..DgramConfig::default()
    };
    let mut r = DgramRing::new(vec![s.as_raw_fd()], &cfg, &UringSetup::default()).unwrap();
    r.queue_sends(0, &[8]);
    r.flush().unwrap();
    let end = Instant::now() + Duration::from_secs(3);
    while r.stats.recv_errors == 0 && Instant::now() < end {
        r.poll(Duration::from_millis(20)).unwrap();
    }
    assert_eq!(r.stats.last_recv_error, Some(libc::ECONNREFUSED));
    let e = r.last_recv_error().unwrap();
    assert_eq!(e.errno(), Some(libc::ECONNREFUSED), "{e}");
    r.poll(Duration::ZERO).unwrap();
    assert!(r.stats.arms >= 2, "armed again: {:?}", r.stats);
}

#[test]
fn setup_flags_are_named_and_a_refusal_carries_the_errno() {
    let s = UringSetup {
        sqpoll_idle_ms: Some(10),
        defer_taskrun: true,
        ..UringSetup::default()
    };
    assert_eq!(s.flags(), "SQPOLL|DEFER_TASKRUN");
    // DEFER_TASKRUN without SINGLE_ISSUER is refused by the kernel with EINVAL.
    if UringSupport::probe().require("send").is_ok() {
        let alone = UringSetup {
            defer_taskrun: true,
            ..UringSetup::default()
        };
        let e = alone
            .check("send")
            .expect_err("DEFER_TASKRUN alone must be refused");
        assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
        assert!(e.to_string().contains("DEFER_TASKRUN"), "{e}");
    }
}

/// Each IORING_SETUP_* flag a ring was built with is what the kernel enforces on it, read
/// back from another thread: the SQ thread in fdinfo, EEXIST for a foreign register
/// (SINGLE_ISSUER) and for a foreign wait (DEFER_TASKRUN); and none of it without the flag.
#[test]
fn setup_flags_read_back_from_the_kernel() {
    if !supported("recvmsg") {
        return;
    }
    let cases = [
        UringSetup::default(),
        UringSetup {
            sqpoll_idle_ms: Some(50),
            ..UringSetup::default()
        },
        UringSetup {
            single_issuer: true,
            ..UringSetup::default()
        },
        UringSetup {
            single_issuer: true,
            defer_taskrun: true,
            ..UringSetup::default()
        },
        UringSetup {
            sqpoll_idle_ms: Some(50),
            single_issuer: true,
            ..UringSetup::default()
        },
    ];
    for setup in cases {
        let ring = match setup.build(8) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{}: skipped: {e}", setup.flags());
                continue;
            }
        };
        let fd = ring.as_raw_fd();
        assert!(
            rings_of(std::process::id()).unwrap().contains(&fd),
            "{fd} listed as an io_uring"
        );
        let got = std::thread::spawn(move || read_back(std::process::id(), fd))
            .join()
            .unwrap()
            .unwrap();
        let want = (
            setup.sqpoll_idle_ms.is_some(),
            setup.single_issuer,
            setup.defer_taskrun,
        );
        assert_eq!(
            (
                got.sq_thread.is_some(),
                got.single_issuer,
                got.defer_taskrun
            ),
            want,
            "{}: {got:?}",
            setup.flags()
        );
        // The creating thread itself is allowed everything: a wait from here succeeds.
        ring.submit_and_wait(0).unwrap();
    }
}

#[test]
fn send_and_send_zc_deliver_and_notify() {
    if !supported("send_zc") {
        return;
    }
    let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
    let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
    let (s, _) = l.accept(5000).unwrap().unwrap();
    for zc in [false, true] {
        let mut r = SendRing::new(2, 100_000, zc).unwrap();
        r.buffer_mut(0).unwrap().fill(7);
        r.send(c.as_raw_fd(), 0, 100_000).unwrap();
        let mut got = vec![0u8; 100_000];
        assert!(s.recv_exact(&mut got).unwrap());
        assert!(got.iter().all(|&b| b == 7));
        r.drain().unwrap();
        assert!(r.buffer_mut(0).is_some());
        if zc {
            assert!(r.stats.notifications >= 1);
            assert_eq!(r.stats.notifications, r.stats.requests);
        } else {
            assert_eq!(r.stats.notifications, 0);
        }
    }
}

#[test]
fn multishot_recv_returns_the_stream_in_order() {
    if !supported("recv") {
        return;
    }
    let l = TcpListener::bind(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
    let c = TcpSock::connect(&l.local_addr().unwrap(), &ConnectOptions::default()).unwrap();
    let (s, _) = l.accept(5000).unwrap().unwrap();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let sender = std::thread::spawn(move || {
        c.send_all(&data).unwrap();
        c.shutdown_write().unwrap();
        data
    });
    let mut r = RecvRing::new(s.as_raw_fd(), 4, 4096).unwrap();
    assert!(r.multishot());
    let mut got = Vec::new();
    loop {
        let chunk = r.recv().unwrap();
        if chunk.is_empty() {
            break;
        }
        got.extend_from_slice(chunk);
    }
    assert_eq!(got, sender.join().unwrap());
    assert!(r.stats.cqes >= 300_000 / 4096);
}

#[test]
fn zcrx_on_loopback_is_refused_with_an_errno() {
    if !crate::cpu::is_root() {
        eprintln!("skipped: zcrx registration needs CAP_NET_ADMIN (run as root)");
        return;
    }
    let e = probe_zcrx(1, 0).unwrap_err();
    assert!(e.errno().is_some(), "{e}");
    assert!(
        e.to_string().contains("ZCRX_IFQ") || e.to_string().contains("io_uring_setup"),
        "{e}"
    );
}
