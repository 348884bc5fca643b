//! The NTT talk's baseline server, built in so every host has it: one UDP socket shared by N
//! threads, each calling recvfrom() then sendto() (the NTT talk's "simple multi-threaded
//! echo server"). Deliberately naive; it is the yardstick, not a contender.
//!
//! It also answers sockperf's framing the way `sockperf sr` does, so that both `firehose
//! load` and `sockperf ping-pong` can drive the same server and be compared as generators:
//! a sockperf message starts with a 64-bit sequence number, 16-bit flags (1 = from the
//! client, 2 = answer requested) and a 32-bit length equal to the datagram's, all big-endian;
//! the reply is the message with the client flag cleared, and only when an answer is
//! requested. Any other datagram is echoed unchanged.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Counts over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EchoCounts {
    pub packets_in: u64,
    pub packets_out: u64,
    pub send_errors: u64,
}

/// A bound baseline server; [`PlainEcho::run`] serves until `stop` is set.
pub struct PlainEcho {
    sock: UdpSocket,
    threads: usize,
}

impl PlainEcho {
    /// Binds one socket. `threads` must be at least 1.
    pub fn bind(listen: SocketAddr, threads: usize) -> std::io::Result<PlainEcho> {
        let sock = UdpSocket::bind(listen)?;
        // Wake up now and then to see the stop flag.
        sock.set_read_timeout(Some(Duration::from_millis(100)))?;
        Ok(PlainEcho {
            sock,
            threads: threads.max(1),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Echoes every datagram back to its sender until `stop` is set.
    pub fn run(&self, stop: &AtomicBool) -> EchoCounts {
        let (pin, pout, perr) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..self.threads {
                s.spawn(|| {
                    let mut buf = vec![0u8; 65536];
                    let (mut i, mut o, mut e) = (0u64, 0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let Ok((n, peer)) = self.sock.recv_from(&mut buf) else {
                            continue;
                        };
                        i += 1;
                        let Some(n) = reply(&mut buf, n) else {
                            continue;
                        };
                        match self.sock.send_to(&buf[..n], peer) {
                            Ok(_) => o += 1,
                            Err(_) => e += 1,
                        }
                    }
                    pin.fetch_add(i, Ordering::Relaxed);
                    pout.fetch_add(o, Ordering::Relaxed);
                    perr.fetch_add(e, Ordering::Relaxed);
                });
            }
        });
        EchoCounts {
            packets_in: pin.into_inner(),
            packets_out: pout.into_inner(),
            send_errors: perr.into_inner(),
        }
    }
}

/// Flags of a sockperf message.
const SOCKPERF_CLIENT: u8 = 1;
const SOCKPERF_PONG_REQUEST: u8 = 2;

/// What to send back for the `n`-byte datagram in `buf`: `Some(len)` to reply with
/// `buf[..len]` (edited in place for sockperf), `None` to stay silent.
pub fn reply(buf: &mut [u8], n: usize) -> Option<usize> {
    if n >= 14 && n <= buf.len() {
        let len = u32::from_be_bytes([buf[10], buf[11], buf[12], buf[13]]) as usize;
        let flags_hi = buf[8];
        let flags = buf[9];
        if len == n && flags_hi == 0 && flags & SOCKPERF_CLIENT != 0 && flags < 8 {
            if flags & SOCKPERF_PONG_REQUEST == 0 {
                return None;
            }
            buf[9] &= !SOCKPERF_CLIENT;
            return Some(n);
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_bytes_and_counts_them() {
        let srv = PlainEcho::bind("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let addr = srv.local_addr().unwrap();
        let stop = AtomicBool::new(false);
        let counts = std::thread::scope(|s| {
            let h = s.spawn(|| srv.run(&stop));
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 256];
            for k in 0..10u8 {
                let msg = [k; 100];
                c.send_to(&msg, addr).unwrap();
                let (n, from) = c.recv_from(&mut buf).unwrap();
                assert_eq!((n, from), (100, addr));
                assert_eq!(buf[..n], msg);
            }
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap()
        });
        assert_eq!(counts.packets_in, 10);
        assert_eq!(counts.packets_out, 10);
    }

    #[test]
    fn sockperf_frames_are_answered_like_sockperf_sr() {
        // Captured from `sockperf ping-pong -m 100`: seq 1, flags 3 (client, answer), len 100.
        let mut buf = [0u8; 100];
        buf[7] = 1;
        buf[9] = 3;
        buf[13] = 100;
        assert_eq!(reply(&mut buf, 100), Some(100));
        assert_eq!(buf[9], 2, "client flag cleared, the rest untouched");
        assert_eq!(buf[7], 1);
        // No answer requested: silence, as sockperf sr does.
        let mut quiet = buf;
        quiet[9] = 1;
        assert_eq!(reply(&mut quiet, 100), None);
        // A length field that does not match the datagram: not sockperf, echoed unchanged.
        let mut other = buf;
        other[9] = 3;
        assert_eq!(reply(&mut other, 99), Some(99));
        assert_eq!(other[9], 3);
        // firehose load's requests ("FHL1" + id + time) are echoed byte for byte.
        let mut ours = [0u8; 100];
        ours[..4].copy_from_slice(b"FHL1");
        ours[9] = 3;
        let before = ours;
        assert_eq!(reply(&mut ours, 100), Some(100));
        assert_eq!(ours, before);
    }
}
