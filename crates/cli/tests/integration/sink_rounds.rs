//! `firehose sink --count N --repeat R` (docs/sink-flood.md): R rounds, each ended by its
//! N-th datagram and timed from its first datagram to its N-th, then the sink exits by
//! itself. Every step waits for an event (the round's line, the socket's queue drained),
//! never a guessed sleep; the pauses between sends only make a wrong clock visible, as
//! bounds that hold however slow the host is.

use crate::sink_drops::{rx_queue, Sink};
use crate::util::{bin, tmp, until};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

const N: usize = 100;

fn send(from: &UdpSocket, to: SocketAddr, n: usize) {
    for i in 0..n {
        from.send_to(&[i as u8; 64], to).unwrap();
        if i % 20 == 19 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// The `seconds` of round `i` (from 0) of the report.
fn round_secs(v: &serde_json::Value, i: usize) -> f64 {
    v["rounds"][i]["seconds"].as_f64().unwrap()
}

#[test]
fn repeat_runs_r_rounds_of_exactly_count_each_timed_from_its_first_datagram() {
    let j = tmp("sink-rounds.json");
    let mut cmd = Command::new(bin());
    cmd.arg("sink").args([
        "--listen",
        "127.0.0.1:0",
        "--io",
        "recvmsg",
        "--rcvbuf",
        "1M",
        "--count",
        &N.to_string(),
        "--repeat",
        "3",
        "--no-drops",
        "--duration",
        "120",
        "--json-file",
        j.to_str().unwrap(),
    ]);
    let sink = Sink::start(cmd);
    let to = sink.addr;
    let from = UdpSocket::bind("127.0.0.1:0").unwrap();
    let drained = || {
        until("the sink drained its socket", || {
            rx_queue(to.port()) == Some(0)
        })
    };

    send(&from, to, N);
    let line = sink.wait_line("round 1:");
    assert!(line.contains(&format!(" {N} datagrams in ")), "{line}");
    // Idle between rounds: a round timed from the previous round's end (or from the
    // start) would include this.
    std::thread::sleep(Duration::from_millis(400));

    let sent_from = Instant::now();
    send(&from, to, N - 1);
    drained();
    let early: Vec<String> = sink.lines_so_far();
    assert!(
        !early.iter().any(|l| l.trim_start().starts_with("round 2:")),
        "round 2 ended before its {N}-th datagram: {early:?}"
    );
    send(&from, to, 1);
    let line = sink.wait_line("round 2:");
    let round2_window = sent_from.elapsed().as_secs_f64();
    assert!(line.contains(&format!(" {N} datagrams in ")), "{line}");

    // Round 3: its first datagram, a pause, then the rest; the sink then exits by itself.
    send(&from, to, 1);
    drained();
    std::thread::sleep(Duration::from_millis(400));
    send(&from, to, N - 1);
    let v = sink.exited(&j);

    let rounds = v["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 3, "{v}");
    for (i, r) in rounds.iter().enumerate() {
        assert_eq!(r["packets"], N as u64, "round {}: {v}", i + 1);
        let (s, pps) = (r["seconds"].as_f64().unwrap(), r["pps"].as_f64().unwrap());
        assert!(s > 0.0, "round {}: {v}", i + 1);
        assert!((pps * s - N as f64).abs() < 1e-6 * N as f64, "{v}");
    }
    assert_eq!(
        v["packets"],
        3 * N as u64,
        "every datagram, none twice: {v}"
    );
    assert_eq!(v["socket_drops"], 0, "{v}");
    assert!(
        round_secs(&v, 1) <= round2_window,
        "round 2 took at most the {round2_window:.3} s from its first send to its line: {v}"
    );
    assert!(
        round_secs(&v, 2) >= 0.2,
        "round 3 spans the 400 ms pause after its first datagram: {v}"
    );
}
