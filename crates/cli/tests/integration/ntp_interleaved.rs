//! Interleaved mode (chronyd's `xleave`) of `firehose serve --proto ntp`: chronyd as a client
//! in interleaved mode gets interleaved answers (its measurements log says so) and stays
//! within 100 µs; on the wire, an interleaved answer carries the kernel's transmit time of
//! the previous answer, once, on the socket path and on io_uring; basic clients and a server
//! with the mode off get basic answers.

use crate::ntp::{chronyd_query, recv, request};
use crate::util::{installed, json_of, tempdir, tmp, Served};
use firehose_ntpwire::{parse, Header, Timestamp};
use firehose_sys::clock::realtime_ns;
use std::net::UdpSocket;
use std::time::Duration;

/// Timestamps are fuzzed below the clock's precision (about 2^-24 s here): ns-scale slack.
const SLACK_NS: i128 = 1_000;

/// A version 4 client request as a client in interleaved mode sends it: `origin` (one of
/// the server's receive timestamps), its own `receive` and `transmit`.
fn xleave_request(origin: u64, receive: u64, transmit: u64) -> [u8; 48] {
    let mut b = request(transmit);
    Timestamp(origin).write(&mut b[24..]);
    Timestamp(receive).write(&mut b[32..]);
    b
}

/// Sends `req` and returns the answer's header with the client's send and receipt times.
fn ask(s: &UdpSocket, req: &[u8; 48]) -> (Header, i128, i128) {
    let sent = realtime_ns();
    s.send(req).unwrap();
    let r = recv(s).expect("an answer");
    let back = realtime_ns();
    (
        parse(&r).unwrap().header,
        i128::from(sent),
        i128::from(back),
    )
}

fn unix(t: Timestamp) -> i128 {
    t.to_unix_ns(realtime_ns())
}

/// The I/O paths that stamp sends, as `serve` flags: the socket path, and io_uring where
/// this kernel has it and takes a stamp's key in the send (SCM_TS_OPT_ID, Linux 6.13+;
/// otherwise says why not).
pub fn stamping_paths() -> Vec<Vec<&'static str>> {
    let mut paths = vec![vec![]];
    if crate::util::uring_or_skip("recvmsg") {
        match firehose_sys::timestamping::key_per_send() {
            Ok(()) => paths.push(vec!["--io", "uring"]),
            Err(e) => eprintln!("io_uring left out: {e}"),
        }
    }
    paths
}

#[test]
fn an_interleaved_answer_carries_when_the_previous_answer_left() {
    for io in stamping_paths() {
        interleaved_on_the_wire(&io);
    }
}

fn interleaved_on_the_wire(io: &[&str]) {
    let json = tmp("ntp-xleave.json");
    let srv = Served::local_ntp_on(&json, io);
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.connect(srv.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();

    // A basic client (origin 0) is answered as always and leaves nothing behind.
    let (b, _, _) = ask(&s, &request(0x1111_0000_0000_0000));
    assert_eq!(b.origin, Timestamp(0x1111_0000_0000_0000));

    // A first request in interleaved form: its origin is no answer of ours, so basic.
    let a_tx = 0x3333_0000_0000_0000;
    let (a, a_sent, a_back) = ask(&s, &xleave_request(0x7777_0000_0000_0001, 0x4444, a_tx));
    assert_eq!(a.origin, Timestamp(a_tx), "basic: {a:?}");
    assert!(a_sent - SLACK_NS <= unix(a.receive) && unix(a.transmit) <= a_back + SLACK_NS);

    // The next asks for that answer: interleaved. Origin = the request's receive
    // timestamp; transmit = when answer `a` left, after the server wrote it and before
    // the client had it.
    let b_rx = 0x5555_0000_0000_0000;
    let b_req = xleave_request(a.receive.0, b_rx, 0x6666_0000_0000_0000);
    let (b, _, _) = ask(&s, &b_req);
    assert_eq!(b.origin, Timestamp(b_rx), "interleaved: {b:?}");
    let left = unix(b.transmit);
    assert!(
        unix(a.transmit) - SLACK_NS <= left && left <= a_back + SLACK_NS,
        "answer a written at {} left at {left}, received at {a_back}",
        unix(a.transmit)
    );
    assert_ne!(b.receive, a.receive);
    assert_eq!((b.receive.0 & 1, b.transmit.0 & 1), (1, 0));

    // Asked again for the same answer (a replay): basic, as chronyd answers it.
    let (c, _, _) = ask(&s, &b_req);
    assert_eq!(c.origin, Timestamp(0x6666_0000_0000_0000), "{c:?}");
    // A version 3 request never is interleaved.
    let mut v3 = xleave_request(b.receive.0, 0x8888, 0x9999_0000_0000_0000);
    v3[0] = 0x1b;
    let (d, _, _) = ask(&s, &v3);
    assert_eq!(d.origin, Timestamp(0x9999_0000_0000_0000), "{d:?}");

    srv.stop();
    let doc = json_of(&json);
    let h = &doc["handler"];
    // b interleaved from the kernel's stamp; a and c asked and were not found (c: used up).
    assert_eq!(h["ntp_interleaved"], 1, "{io:?}: {h}");
    assert_eq!(h["ntp_tx_kernel"], 1, "{io:?}: {h}");
    assert_eq!(h["ntp_interleaved_missed"], 2, "{io:?}: {h}");
    assert_eq!(h["ntp_client"], 5, "{io:?}: {h}");
    // Three answers asked for their transmit stamp (a, b, c), and each came back.
    let w = &doc["workers"][0]["backend"];
    assert_eq!(
        (&w["tx_stamped"], &w["tx_stamps_missing"]),
        (&3.into(), &0.into()),
        "{io:?}: {w}"
    );
    assert_eq!(
        doc["applied"]["socket_detail"][0]["tx_timestamps"], true,
        "{doc}"
    );
    if !io.is_empty() {
        let tx = doc["applied"]["backend"]["settings"]["tx_timestamps"].to_string();
        assert!(tx.contains("IORING_OP_SENDMSG"), "{doc}");
    }
    let _ = std::fs::remove_file(&json);
}

#[test]
fn without_transmit_stamps_every_answer_is_basic() {
    let mut cases = vec![vec!["--ntp-interleaved-entries", "0"]];
    if crate::util::uring_or_skip("recvmsg") {
        cases.push(vec!["--io", "uring", "--ntp-interleaved-entries", "0"]);
    }
    for extra in cases {
        let json = tmp("ntp-xleave-off.json");
        let mut args = vec![
            "--ntp-local-stratum",
            "10",
            "--json-file",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(&extra);
        let srv = Served::proto("ntp", &args);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let (a, _, _) = ask(
            &s,
            &xleave_request(0x7777_0001, 0x4444, 0x3333_0000_0000_0000),
        );
        let (b, _, _) = ask(
            &s,
            &xleave_request(a.receive.0, 0x5555, 0x6666_0000_0000_0000),
        );
        assert_eq!(
            b.origin,
            Timestamp(0x6666_0000_0000_0000),
            "{extra:?}: basic"
        );
        srv.stop();
        let doc = json_of(&json);
        assert_eq!(doc["handler"]["ntp_interleaved"], 0, "{extra:?}");
        assert_eq!(doc["handler"]["ntp_interleaved_missed"], 0, "{extra:?}");
        let _ = std::fs::remove_file(&json);
    }
}

#[test]
fn chronyd_in_interleaved_mode_gets_interleaved_answers() {
    if !installed("chronyd") {
        eprintln!("skipped: chronyd is not installed (apt-get install chrony)");
        return;
    }
    for io in stamping_paths() {
        chronyd_interleaved(&io);
    }
}

fn chronyd_interleaved(io: &[&str]) {
    let json = tmp("ntp-xleave-chronyd.json");
    let srv = Served::local_ntp_on(&json, io);
    let dir = tempdir("ntp-xleave-chronyd");
    // Its measurements log has a line per answer, whose mode column says 4B (basic) or 4I
    // (interleaved); the third answer is the first that can be interleaved, so it waits
    // for 6 samples.
    let (offset, text) = chronyd_query(
        &[
            format!(
                "server 127.0.0.1 port {} iburst xleave minsamples 6 maxsamples 6",
                srv.addr.port()
            ),
            format!("logdir {}", dir.display()),
            "log measurements".into(),
            format!("pidfile {}", dir.join("chronyd.pid").display()),
        ],
        30,
    );
    let log = std::fs::read_to_string(dir.join("measurements.log")).unwrap_or_default();
    let modes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("127.0.0.1"))
        .filter_map(|l| l.split_whitespace().find(|w| *w == "4B" || *w == "4I"))
        .collect();
    assert!(
        modes.contains(&"4I"),
        "{io:?}: no interleaved answer: {modes:?}\n{log}\n{text}"
    );
    assert!(
        offset.abs() <= 100e-6,
        "chronyd's offset {offset} s:\n{text}"
    );
    srv.stop();
    let h = &json_of(&json)["handler"];
    // chronyd may exit before it reads the last answer.
    let interleaved = h["ntp_interleaved"].as_u64().unwrap();
    assert!(
        interleaved >= modes.iter().filter(|m| **m == "4I").count() as u64,
        "{h}\n{log}"
    );
    assert_eq!(
        h["ntp_tx_kernel"], h["ntp_interleaved"],
        "kernel stamps: {h}"
    );
    let _ = std::fs::remove_file(&json);
}
