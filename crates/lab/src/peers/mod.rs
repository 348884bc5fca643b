//! The programs the lab runs beside firehose, each configured and started in one place:
//! its command lines, its config files, how the lab knows it is ready, and how its output
//! is read. A study never writes a peer's command line itself.
//!
//! Adding a peer: a module here with the command line (a `Vec<String>` argv, placed on a
//! side of the test host and its CPUs by [`crate::study::Lab::spawn`]), the config file
//! text if it takes one (written into the run's private work directory), the parser of
//! what it prints (tested on a captured sample in `crates/lab/tests/samples/`), and its
//! Debian package in `cmd::install_hint` and `mk/deps` (docs/lab.md, "Adding a peer").

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

pub mod chronyd;
pub mod dns_server;
pub mod dnsperf;
pub mod firehose;
pub mod freeradius;
pub mod iperf3;
pub mod knot;
pub mod nsd;
pub mod ntpd;
pub mod perf;
pub mod radius_server;
pub mod sockperf;
pub mod trafgen;
pub mod udp_sink;

/// Sends `request` to `addr` from a fresh socket and waits up to `timeout` for a datagram
/// that `is_answer` accepts (others are read past): the one readiness probe of the peers
/// (an SOA query, a Status-Server, an NTP client request).
pub fn probe(
    addr: SocketAddr,
    request: &[u8],
    timeout: Duration,
    is_answer: impl Fn(&[u8]) -> bool,
) -> bool {
    let bind: SocketAddr = if addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let Ok(s) = UdpSocket::bind(bind) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    if s.send_to(request, addr).is_err() {
        return false;
    }
    let mut buf = [0u8; 4096];
    let by = Instant::now() + timeout;
    while Instant::now() < by {
        match s.recv_from(&mut buf) {
            Ok((n, _)) if is_answer(&buf[..n]) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    false
}
