//! `load --io uring`: a generator thread's flows on one [`DgramRing`]
//! ([`firehose_sys::uring`]): the requests of every flow of a round leave from the ring's
//! send slots with one io_uring_enter, and one wait collects the responses of all flows
//! from a multishot IORING_OP_RECV per flow (a plain ring: no header, no sender). The ring
//! is made in the thread ([`FlowIo::start`]), so IORING_SETUP_SINGLE_ISSUER holds.
//!
//! Paced open loop (not spinning), the flows receive with a multishot RECVMSG that keeps
//! each response's kernel arrival stamp (SO_TIMESTAMPNS), so the generator paces as it does
//! over sockets: it sleeps through a wake-up period and reads what arrived, timed by its
//! stamp, instead of waking for every response. Its sleep is the ring's own wait
//! ([`DgramRing::sleep`]), in the io_uring_enter that submits the wake-up's sends: one
//! system call per wake-up. With `--defer-taskrun` the responses do not wake the thread
//! before the wait ends.

use crate::gen::{open_flows, LoadConfig};
use crate::io::{Caps, Datagram, FlowIo, Flushed, PathStats, SendShape};
use firehose_sys::socket::UdpSock;
use firehose_sys::uring::{DgramConfig, DgramRing, UringSetup, STAMP_ROOM};
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
    /// Paced: every response carries its arrival stamp, and the sends of a wake-up leave
    /// in its sleep.
    paced: bool,
}

/// Receive buffer of a paced flow, as the socket path's: its responses wait in the socket
/// until the wake-up's wait ends.
const PACED_RCVBUF: i32 = 4 << 20;

/// Asks every socket to stamp arrivals (SO_TIMESTAMPNS) with a paced receive buffer; true
/// when each says it does.
fn stamp_arrivals(socks: &[UdpSock]) -> Result<bool, SetupError> {
    for s in socks {
        s.set_timestamp_ns(true)?;
        // Forcing past rmem_max needs CAP_NET_ADMIN; without it the kernel caps.
        s.set_rcvbuf(PACED_RCVBUF, true)
            .or_else(|_| s.set_rcvbuf(PACED_RCVBUF, false))?;
    }
    Ok(socks.iter().all(|s| s.timestamp_ns().unwrap_or(false)))
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
    per_thread
        .into_iter()
        .map(|socks| {
            let paced = cfg.rate.is_some() && !cfg.spin && stamp_arrivals(&socks)?;
            // Room for a round: every flow's window, at least a batch.
            let slots = (socks.len() * cfg.window.max(1)).clamp(cfg.batch, 4096);
            let slot_size = max_payload.max(1);
            Ok(UringFlows {
                cfg: DgramConfig {
                    // Room for the responses of a burst that arrives between two polls.
                    buffers: (slots * 4).clamp(512, 4096) as u16,
                    // A response is at most a request's size; a longer one arrives cut and
                    // matches none. At least 2 KiB, two buffers to a page.
                    buffer_size: slot_size.max(2048),
                    names: false,
                    // Connected flows need no sender: a multishot RECV, with no header to
                    // copy per response, unless paced (the stamp needs RECVMSG's control).
                    plain: !paced,
                    control: if paced { STAMP_ROOM } else { 0 },
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
                paced,
            })
        })
        .collect()
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
            rx_timestamps: self.paced,
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

    /// Every request is its own datagram on this path, in either shape.
    fn send(&mut self, flow: usize, _shape: SendShape) -> Flushed {
        let lens = std::mem::take(&mut self.lens);
        self.ring().queue_sends(flow, &lens);
        self.lens = lens;
        self.lens.clear();
        // Refusals come out of the round's flush.
        Flushed::default()
    }

    fn flush(&mut self) -> usize {
        // Paced, the sends leave in the wake-up's sleep.
        if !self.paced {
            self.submit();
        }
        std::mem::take(&mut self.refused)
    }

    fn sleep(&mut self, wait: Duration) -> Result<bool, SetupError> {
        if !self.paced {
            return Ok(false);
        }
        self.ring().sleep(wait)?;
        // The sends completed in the sleep's enter: their results, and the slots freed.
        self.submit();
        Ok(true)
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
            rx_time_ns: if self.paced { ring.rx_time_ns(i) } else { None },
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

    fn realtime_ns() -> i128 {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        t.unwrap().as_nanos() as i128
    }

    /// A local echo socket and a generator configuration aimed at it (`rate` `None`:
    /// closed loop); `None` when the kernel refuses a ring with `setup` (the test skips).
    fn echo_and_config(
        setup: &UringSetup,
        flows: usize,
        rate: Option<f64>,
    ) -> Option<(std::net::UdpSocket, LoadConfig)> {
        if let Err(e) = probe(setup) {
            eprintln!("skipped: {e}");
            return None;
        }
        let echo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        echo.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let cfg = LoadConfig {
            target: echo.local_addr().unwrap(),
            flows,
            window: 1,
            rate,
            threads: 1,
            cpus: None,
            length: Length::Requests(flows as u64),
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(1),
            batch: 8,
            spin: false,
            gso: false,
            per_wake: Some(1),
            tx_stamps: false,
            arrivals: crate::pace::Arrivals::Uniform,
        };
        Some((echo, cfg))
    }

    /// The flows' ring receives with IORING_OP_RECV (no header to copy per response), and a
    /// request written into a slot comes back through it to its flow.
    #[test]
    fn flows_receive_by_plain_recv_and_responses_reach_their_flow() {
        let setup = UringSetup::default();
        let Some((echo, cfg)) = echo_and_config(&setup, 2, None) else {
            return;
        };
        let mut io = open(&cfg, setup, 64).unwrap().pop().unwrap();
        io.start().unwrap();
        assert_eq!(io.ring().receive_op(), "IORING_OP_RECV");
        for flow in 0..2 {
            assert!(io.tx_capacity() >= 1);
            io.tx_slot(0)[..2].copy_from_slice(&[0xf1, flow as u8]);
            io.queue(0, 2);
            io.send(flow, SendShape::Apart);
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

    /// Paced, the flows keep each response's arrival stamp, and a wake-up's sends leave in
    /// its sleep: one io_uring_enter sends the request and sleeps, during which the answer
    /// arrives, stamped between the send and the wake.
    #[test]
    fn paced_flows_send_in_their_sleep_and_stamp_each_arrival() {
        let setup = UringSetup {
            single_issuer: true,
            defer_taskrun: true,
            ..UringSetup::default()
        };
        let Some((echo, cfg)) = echo_and_config(&setup, 1, Some(1000.0)) else {
            return;
        };
        let answer = std::thread::spawn(move || {
            let mut b = [0u8; 64];
            let (n, from) = echo.recv_from(&mut b).unwrap();
            echo.send_to(&b[..n], from).unwrap();
        });
        let mut io = open(&cfg, setup, 64).unwrap().pop().unwrap();
        io.start().unwrap();
        assert!(io.caps().rx_timestamps, "a paced flow stamps arrivals");
        assert_eq!(io.ring().receive_op(), "IORING_OP_RECVMSG");
        let before = realtime_ns();
        let enters = io.stats().syscalls;
        io.tx_slot(0)[..3].copy_from_slice(b"req");
        io.queue(0, 3);
        io.send(0, SendShape::Apart);
        assert_eq!(io.flush(), 0, "nothing refused");
        assert_eq!(
            io.stats().syscalls,
            enters,
            "flush leaves the sends to the sleep"
        );
        // A sleep with no time to sleep is one enter that sends.
        assert!(io.sleep(Duration::ZERO).unwrap());
        assert_eq!(io.stats().syscalls, enters + 1);
        assert_eq!(io.flush(), 0, "the request was sent");
        // Once the answer is in the socket (loopback delivers inside the echo's send), the
        // next sleep is one enter that also collects it, and the read after it needs none.
        answer.join().unwrap();
        assert!(io.sleep(Duration::from_millis(1)).unwrap());
        assert_eq!(io.poll(Duration::ZERO).unwrap(), 1, "the answer, collected");
        assert_eq!(
            io.stats().syscalls,
            enters + 2,
            "one enter per sleep, none to read"
        );
        assert_eq!(io.recv(0, 8).unwrap(), 1);
        let d = io.datagram(0);
        assert_eq!(d.data, b"req");
        let at = d.rx_time_ns.expect("an arrival stamp") as i128;
        let after = realtime_ns();
        assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
    }
}
