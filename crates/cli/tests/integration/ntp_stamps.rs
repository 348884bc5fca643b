//! Where `serve --proto ntp` takes its receive timestamps on the other I/O paths: io_uring
//! hands over the kernel's arrival stamp (control room in each provided buffer), as the
//! socket path does; AF_XDP the time its XDP program wrote into each frame's metadata.
//! Each answer's receive timestamp lies between the client's send and its receipt of the
//! answer, and before the transmit timestamp; the counters say who stamped.

use crate::ntp::{recv, request};
use crate::util::{freeze, json_of, signal_pid, tmp, Served};
use crate::xdp_util::{udp, Lab, CLI4, SRV4};
use firehose_ntpwire::{parse, Header, Timestamp};
use firehose_sys::clock::realtime_ns;
use std::net::UdpSocket;
use std::time::Duration;

/// Timestamps are fuzzed below the clock's precision (about 2^-24 s here) and carry one
/// marker bit: a nanosecond-scale slack, well under any path's delay.
const SLACK_NS: i128 = 1_000;

/// Sends `n` requests to `to` from `s`, each answered before the next; checks each answer
/// and returns the (send, receive, transmit, back) times in ns.
pub fn exchange(s: &UdpSocket, n: u64) -> Vec<[i128; 4]> {
    (0..n)
        .map(|i| {
            let t = 0x2222_0000_0000_0000 + i;
            let sent = realtime_ns();
            s.send(&request(t)).unwrap();
            let r = recv(s).expect("an answer");
            let back = realtime_ns();
            let h: Header = parse(&r).unwrap().header;
            assert_eq!(
                (h.mode, h.stratum, h.origin),
                (4, 10, Timestamp(t)),
                "{h:?}"
            );
            let (rx, tx) = (h.receive.to_unix_ns(sent), h.transmit.to_unix_ns(sent));
            let (sent, back) = (i128::from(sent), i128::from(back));
            assert!(
                sent - SLACK_NS <= rx && rx <= tx + SLACK_NS && tx <= back + SLACK_NS,
                "send {sent} <= receive {rx} <= transmit {tx} <= back {back}"
            );
            [sent, rx, tx, back]
        })
        .collect()
}

/// The NTP server's arguments here: serving its clock as local stratum 10, its counters to
/// `json` at exit, then `extra`.
fn ntp_args<'a>(json: &'a std::path::Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--ntp-local-stratum", "10", "--json-file"];
    args.push(json.to_str().unwrap());
    args.extend_from_slice(extra);
    args
}

/// Stops `srv` and returns its counters (from `json`, then removed), checked to say that
/// each of its `n` answers carried the kernel's receive stamp, none the handler's reading.
fn stamped_by_the_kernel(srv: Served, json: &std::path::Path, n: u64) -> serde_json::Value {
    let out = srv.stop_with("INT");
    let j = json_of(json);
    let _ = std::fs::remove_file(json);
    let h = &j["handler"];
    assert_eq!(
        (&h["ntp_client"], &h["ntp_rx_kernel"], &h["ntp_rx_daemon"]),
        (&n.into(), &n.into(), &0.into()),
        "{h}\n{out}"
    );
    j
}

#[test]
fn io_uring_answers_with_the_kernels_receive_stamps() {
    if !crate::util::uring_or_skip("recvmsg") {
        return;
    }
    let json = tmp("ntp-uring.json");
    let srv = Served::proto("ntp", &ntp_args(&json, &["--io", "uring"]));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    exchange(&s, 5);
    stamped_by_the_kernel(srv, &json, 5);
}

#[test]
fn io_uring_answers_a_burst_sent_at_once_and_refuses_a_send_batch() {
    // A burst queues up and is received as one batch: every request is answered and the
    // worker lives (a send in the middle of an io_uring batch once gave its buffers back
    // and the next request of the batch panicked the worker).
    if !crate::util::uring_or_skip("recvmsg") {
        return;
    }
    let json = tmp("ntp-uring-burst.json");
    let srv = Served::proto("ntp", &ntp_args(&json, &["--io", "uring"]));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let n = 40u64;
    for i in 0..n {
        s.send(&request(0x3333_0000_0000_0000 + i)).unwrap();
    }
    let mut answered = 0u64;
    while answered < n && recv(&s).is_some() {
        answered += 1;
    }
    let out = srv.stop();
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(answered, n, "{out}");
    assert_eq!(j["handler"]["ntp_client"], n, "{j}");
    assert!(j["applied"].get("send_batch").is_none(), "{j}");

    let o = crate::util::run(&[
        "serve",
        "--proto",
        "ntp",
        "--io",
        "uring",
        "--send-batch",
        "1",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = crate::util::stderr(&o);
    assert!(
        err.contains("--send-batch works with --io socket and xdp only")
            && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn af_xdp_answers_with_the_xdp_programs_arrival_stamps() {
    if !crate::xdp_util::is_root() {
        eprintln!("skipped: AF_XDP on a veth pair in namespaces needs root");
        return;
    }
    let lab = Lab::new("nt");
    let json = tmp("ntp-xdp.json");
    let listen = format!("{SRV4}:12300");
    let xdp = [
        "--proto", "ntp", "--io", "xdp", "--iface", &lab.dev, "--listen", &listen,
    ];
    let srv = Served::start_in(&lab.srv, &ntp_args(&json, &xdp));
    assert!(
        srv.banner.contains("rx_timestamps=XDP program"),
        "{}",
        srv.banner
    );
    let to: std::net::SocketAddr = listen.parse().unwrap();
    let times = Lab::in_ns(&lab.cli, move || {
        let s = udp(&format!("{CLI4}:0"));
        s.connect(to).unwrap();
        exchange(&s, 20)
    });
    assert_eq!(times.len(), 20);
    let j = stamped_by_the_kernel(srv, &json, 20);
    let b = &j["totals"]["backend"];
    // Every request came through the XDP program, stamped there, and was answered with it.
    assert_eq!(
        (
            &b["xdp_requests"],
            &b["xdp_rx_stamped"],
            &b["socket_requests"]
        ),
        (&20.into(), &20.into(), &0.into()),
        "{b}"
    );
}

/// Over AF_XDP each NTP answer leaves by its own kick of the tx ring right after its
/// transmit timestamp is read (`--send-batch 1`, NTP's default), even when a whole batch of
/// requests waits at once: a kick per batch would send the k-th answer after the k-1 before
/// it, its timestamp early by their transmission (the -60 us offset at saturation).
#[test]
fn af_xdp_kicks_each_ntp_answer_out_right_after_writing_it() {
    if !crate::xdp_util::is_root() {
        eprintln!("skipped: AF_XDP on a veth pair in namespaces needs root");
        return;
    }
    const N: u64 = 32;
    let lab = Lab::new("nk");
    let json = tmp("ntp-xdp-kicks.json");
    let listen = format!("{SRV4}:12301");
    let xdp = [
        "--proto", "ntp", "--io", "xdp", "--iface", &lab.dev, "--listen", &listen,
    ];
    let srv = Served::start_in(&lab.srv, &ntp_args(&json, &xdp));
    assert!(srv.banner.contains("one send per reply"), "{}", srv.banner);
    // The requests pile up in the rx ring while the server is stopped, so its worker finds
    // them in one or a few batches.
    let pid = srv.child.id();
    freeze(pid);
    let to: std::net::SocketAddr = listen.parse().unwrap();
    let answers = Lab::in_ns(&lab.cli, move || {
        let s = udp(&format!("{CLI4}:0"));
        s.connect(to).unwrap();
        for i in 0..N {
            s.send(&request(0x3333_0000_0000_0000 + i)).unwrap();
        }
        signal_pid(pid, "CONT");
        let mut got = Vec::new();
        while (got.len() as u64) < N {
            match recv(&s) {
                Some(r) => got.push(parse(&r).unwrap().header),
                None => break,
            }
        }
        got
    });
    let origins: std::collections::BTreeSet<u64> = answers.iter().map(|h| h.origin.0).collect();
    assert_eq!(origins.len() as u64, N, "{answers:?}");
    assert!(answers.iter().all(|h| h.mode == 4), "{answers:?}");
    let out = srv.stop_with("INT");
    let j = json_of(&json);
    let _ = std::fs::remove_file(&json);
    let b = &j["totals"]["backend"];
    assert_eq!(b["xdp_replies"], N, "{out}");
    let kicks = b["xdp_tx_kicks"].as_u64().expect("xdp_tx_kicks");
    assert!(kicks >= N, "{kicks} kicks for {N} answers: {b}");
    assert_eq!(j["applied"]["send_batch"], 1, "{j}");
}
