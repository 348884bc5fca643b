//! Request lengths are clamped once, in the backend contract, for every backend: over
//! AF_XDP a datagram longer than the room the frame leaves under the MTU (veth forwards
//! IPv4 packets up to MTU + 4 bytes) is counted as a handler error, never handed to the
//! handler with a length past its buffer (which killed the DNS worker). Needs root.

use crate::util::Served;
use crate::xdp_util::*;

/// The `h_err` column of the `total` row serve prints at exit.
fn total_handler_errors(out: &str) -> u64 {
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("total "))
        .unwrap_or_else(|| panic!("no total row in {out}"));
    row.split_whitespace().nth(6).unwrap().parse().unwrap()
}

/// A DNS query for example.com A.
fn query(id: u8) -> Vec<u8> {
    let mut q = vec![0x12, id, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x07example\x03com\x00\x00\x01\x00\x01");
    q
}

#[test]
fn an_xdp_datagram_longer_than_its_frame_room_is_counted_not_handled() {
    if !is_root() {
        eprintln!("skipping: AF_XDP needs root (network namespaces, BPF)");
        return;
    }
    let lab = Lab::new("L");
    // The client may send IPv4 packets of 1501-1504 bytes; the server's MTU stays 1500.
    lab.client_mtu(1504);
    let zone = crate::util::example_zone();
    let listen = format!("{SRV4}:5300");
    let srv = Served::start_in(
        &lab.srv,
        &[
            "--proto", "dns", "--zone", &zone, "--listen", &listen, "--io", "xdp", "--iface",
            &lab.dev,
        ],
    );
    let to: std::net::SocketAddr = listen.parse().unwrap();
    let answers = Lab::in_ns(&lab.cli, move || {
        let s = udp(&format!("{CLI4}:0"));
        // UDP payloads of 1473-1476 bytes: 1-4 bytes past the 1472 the frame leaves.
        for len in 1473..=1476 {
            let mut q = query(0);
            q.resize(len, 0);
            s.send_to(&q, to).unwrap();
        }
        // The worker that read them still answers, from the same socket (same queue).
        (1..=3).map(|i| ask(&s, to, &query(i))).collect::<Vec<_>>()
    });
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(&a[..2], &[0x12, i as u8 + 1], "answer {i}");
    }
    let out = srv.stop_with("TERM");
    assert_eq!(total_handler_errors(&out), 4, "{out}");
    assert_eq!(counter(&out, "xdp_requests"), 7, "{out}");
}
