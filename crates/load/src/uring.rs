//! `load --io uring`: a generator thread's flows on one [`DgramRing`]
//! ([`firehose_sys::uring`]): the requests of every flow of a round leave from the ring's
//! send slots with one io_uring_enter, and one wait collects the responses of all flows
//! from a multishot IORING_OP_RECV per flow (a plain ring: no header, no sender). The ring
//! is made in the thread ([`FlowIo::start`]), so IORING_SETUP_SINGLE_ISSUER holds.

use crate::gen::{open_flows, LoadConfig};
use crate::io::{Caps, Datagram, FlowIo, Flushed, PathStats};
use firehose_sys::socket::UdpSock;
use firehose_sys::uring::{DgramConfig, DgramRing, UringSetup};
use firehose_sys::SetupError;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// One generator thread's flows on an io_uring.
pub struct UringFlows {
    socks: Vec<UdpSock>,
    setup: UringSetup,
    cfg: DgramConfig,
    ring: Option<DgramRing>,
    /// Most responses one `recv` hands out (the generator's batch).
    batch: usize,
    lens: Vec<usize>,
    /// Requests refused by a send round that ended in an error, reported at flush.
    refused: usize,
}

/// Checks on the calling thread that this kernel gives an io_uring with `setup` and the
/// multishot receive, so a refusal stops the run before any thread starts.
pub fn probe(setup: &UringSetup) -> Result<(), SetupError> {
    Ok(setup.check("recv")?)
}

/// The flows of `cfg` dealt to its threads, each thread's on its own ring; requests (and
/// responses) up to `max_payload` bytes.
pub fn open(
    cfg: &LoadConfig,
    setup: UringSetup,
    max_payload: usize,
) -> Result<Vec<UringFlows>, SetupError> {
    probe(&setup)?;
    let per_thread = open_flows(cfg)?;
    Ok(per_thread
        .into_iter()
        .map(|socks| {
            // Room for a round: every flow's window, at least a batch.
            let slots = (socks.len() * cfg.window.max(1)).clamp(cfg.batch, 4096);
            let slot_size = max_payload.max(1);
            UringFlows {
                cfg: DgramConfig {
                    // Room for the responses of a burst that arrives between two polls.
                    buffers: (slots * 4).clamp(512, 4096) as u16,
                    // A response is at most a request's size; a longer one arrives cut and
                    // matches none. At least 2 KiB, two buffers to a page.
                    buffer_size: slot_size.max(2048),
                    names: false,
                    // Connected flows need no sender and no header: a multishot RECV.
                    plain: true,
                    control: 0,
                    receive: true,
                    sends: slots,
                    tx_slots: slots,
                    tx_slot_size: slot_size,
                },
                batch: cfg.batch.max(1),
                socks,
                setup,
                ring: None,
                lens: Vec::with_capacity(slots),
                refused: 0,
            }
        })
        .collect())
}

impl UringFlows {
    fn ring(&mut self) -> &mut DgramRing {
        self.ring.as_mut().expect("FlowIo::start made the ring")
    }

    /// Sends what is queued; a failed enter counts the round's requests as refused.
    fn submit(&mut self) {
        let round = self.cfg.tx_slots - self.ring().tx_free();
        match self.ring().flush() {
            Ok(f) => self.refused += f.failed,
            Err(_) => self.refused += round,
        }
    }
}

impl FlowIo for UringFlows {
    fn caps(&self) -> Caps {
        Caps {
            path: "io_uring",
            source_per_flow: false,
            rx_timestamps: false,
            tx_timestamps: false,
            polls_every_source: false,
        }
    }

    fn start(&mut self) -> Result<(), SetupError> {
        let fds = self.socks.iter().map(|s| s.as_raw_fd()).collect();
        self.ring = Some(DgramRing::new(fds, &self.cfg, &self.setup)?);
        Ok(())
    }

    fn flows(&self) -> usize {
        self.socks.len()
    }

    fn tx_capacity(&mut self) -> usize {
        if self.ring().tx_free() == 0 {
            // Every slot is in this round: send them now to free the slots.
            self.submit();
        }
        self.ring().tx_free()
    }

    fn tx_slot(&mut self, k: usize) -> &mut [u8] {
        self.ring().tx_slot(k)
    }

    fn queue(&mut self, k: usize, len: usize) {
        debug_assert_eq!(k, self.lens.len());
        self.lens.push(len);
    }

    fn send(&mut self, flow: usize) -> Flushed {
        let lens = std::mem::take(&mut self.lens);
        self.ring().queue_sends(flow, &lens);
        self.lens = lens;
        self.lens.clear();
        // Refusals come out of the round's flush.
        Flushed::default()
    }

    fn flush(&mut self) -> usize {
        self.submit();
        std::mem::take(&mut self.refused)
    }

    /// Every response collected is read in this round: each source is a batch of them.
    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        Ok(self.ring().poll(wait)?.div_ceil(self.batch))
    }

    fn source(&self, _i: usize) -> usize {
        0
    }

    fn recv(&mut self, _s: usize, max: usize) -> Result<usize, SetupError> {
        Ok(self.ring().take(max))
    }

    fn datagram(&self, i: usize) -> Datagram<'_> {
        let ring = self.ring.as_ref().expect("FlowIo::start made the ring");
        let (flow, data) = ring.payload(i);
        Datagram {
            flow: flow as u32,
            data,
            rx_time_ns: None,
        }
    }

    fn stats(&self) -> PathStats {
        PathStats {
            syscalls: self.ring.as_ref().map_or(0, |r| r.stats.enters),
            gso_refusal: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::Length;

    /// The flows' ring receives with IORING_OP_RECV (no header to copy per response), and a
    /// request written into a slot comes back through it to its flow.
    #[test]
    fn flows_receive_by_plain_recv_and_responses_reach_their_flow() {
        let setup = UringSetup::default();
        if let Err(e) = probe(&setup) {
            eprintln!("skipped: {e}");
            return;
        }
        let echo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let cfg = LoadConfig {
            target: echo.local_addr().unwrap(),
            flows: 2,
            window: 1,
            rate: None,
            threads: 1,
            cpus: None,
            length: Length::Requests(2),
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            batch: 8,
            spin: false,
            gso: false,
            per_wake: Some(1),
            tx_stamps: false,
            arrivals: crate::pace::Arrivals::Uniform,
        };
        let mut io = open(&cfg, setup, 64).unwrap().pop().unwrap();
        io.start().unwrap();
        assert_eq!(io.ring().receive_op(), "IORING_OP_RECV");
        for flow in 0..2 {
            assert!(io.tx_capacity() >= 1);
            io.tx_slot(0)[..2].copy_from_slice(&[0xf1, flow as u8]);
            io.queue(0, 2);
            io.send(flow);
        }
        assert_eq!(io.flush(), 0, "nothing refused");
        let mut b = [0u8; 64];
        for _ in 0..2 {
            let (n, from) = echo.recv_from(&mut b).unwrap();
            echo.send_to(&b[..n], from).unwrap();
        }
        let mut got = Vec::new();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < 2 && std::time::Instant::now() < end {
            if io.poll(Duration::from_millis(50)).unwrap() > 0 {
                for i in 0..io.recv(0, 8).unwrap() {
                    let d = io.datagram(i);
                    got.push((d.flow, d.data.to_vec()));
                }
            }
        }
        got.sort();
        assert_eq!(got, vec![(0, vec![0xf1, 0]), (1, vec![0xf1, 1])]);
    }
}
