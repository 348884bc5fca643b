//! The seeds' baseline server, built in so every host has it: one UDP socket shared by N
//! threads, each calling recvfrom() then sendto() (the NTT talk's "simple multi-threaded
//! echo server"). Deliberately naive; it is the yardstick, not a contender.

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
}
