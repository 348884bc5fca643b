//! `load --io uring`: a generator thread's flows through one io_uring
//! ([`firehose_sys::uring_flows::FlowRing`]): the requests of every flow of a round leave
//! with one io_uring_enter, and one wait collects the responses of all flows from a
//! multishot receive per flow. The ring is made in the thread ([`FlowIo::start`]), so
//! IORING_SETUP_SINGLE_ISSUER holds.

use crate::gen::{open_flows, LoadConfig};
use crate::io::{Datagram, FlowIo, Flushed};
use firehose_sys::socket::UdpSock;
use firehose_sys::uring_dgram::UringSetup;
use firehose_sys::uring_flows::FlowRing;
use firehose_sys::SetupError;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// One generator thread's flows on an io_uring.
pub struct UringFlows {
    socks: Vec<UdpSock>,
    setup: UringSetup,
    slots: usize,
    slot_size: usize,
    buffers: u16,
    ring: Option<FlowRing>,
    /// Most responses one `recv` hands out (the generator's batch).
    batch: usize,
    lens: Vec<usize>,
    /// Requests refused by a send round that ended in an error, reported at flush.
    refused: usize,
}

/// Checks on the calling thread that this kernel gives an io_uring with `setup` and the
/// multishot receive, so a refusal stops the run before any thread starts.
pub fn probe(setup: &UringSetup) -> Result<(), SetupError> {
    firehose_sys::uring::UringSupport::probe().require("recv")?;
    drop(setup.build(4)?);
    Ok(())
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
            UringFlows {
                // Room for the responses of a burst that arrives between two polls.
                buffers: (slots * 4).clamp(512, 4096) as u16,
                batch: cfg.batch.max(1),
                socks,
                setup,
                slots,
                slot_size: max_payload.max(1),
                ring: None,
                lens: Vec::with_capacity(slots),
                refused: 0,
            }
        })
        .collect())
}

impl UringFlows {
    fn ring(&mut self) -> &mut FlowRing {
        self.ring.as_mut().expect("FlowIo::start made the ring")
    }

    /// Sends what is queued; a failed enter counts the round's requests as refused.
    fn submit(&mut self) {
        let round = self.slots - self.ring().tx_free();
        match self.ring().submit_sends() {
            Ok(f) => self.refused += f.failed,
            Err(_) => self.refused += round,
        }
    }
}

impl FlowIo for UringFlows {
    fn start(&mut self) -> Result<(), SetupError> {
        let fds = self.socks.iter().map(|s| s.as_raw_fd()).collect();
        // A response is at most a request's size; a longer one arrives cut and matches none.
        let size = self.slot_size.max(2048);
        self.ring = Some(FlowRing::new(
            fds,
            self.slots,
            self.slot_size,
            self.buffers,
            size,
            &self.setup,
        )?);
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
        let failed = match self.ring().queue_sends(flow, &lens) {
            Ok(()) => 0,
            Err(_) => lens.len(),
        };
        self.lens = lens;
        self.lens.clear();
        Flushed {
            failed,
            ..Flushed::default()
        }
    }

    fn flush(&mut self) -> usize {
        self.submit();
        std::mem::take(&mut self.refused)
    }

    fn gso_refusal(&self, _flow: usize) -> Option<String> {
        None
    }

    /// Every response collected is read in this round: each source is a batch of them.
    fn poll(&mut self, wait: Duration) -> Result<usize, SetupError> {
        Ok(self.ring().poll(wait)?.div_ceil(self.batch))
    }

    fn source(&self, _i: usize) -> usize {
        0
    }

    fn source_flow(&self, _s: usize) -> Option<usize> {
        None
    }

    fn recv(&mut self, _s: usize, max: usize) -> Result<usize, SetupError> {
        Ok(self.ring().take(max))
    }

    fn datagram(&self, i: usize) -> Datagram<'_> {
        let (flow, data) = self
            .ring
            .as_ref()
            .expect("FlowIo::start made the ring")
            .response(i);
        Datagram { flow, data }
    }

    fn syscalls(&self) -> u64 {
        self.ring.as_ref().map_or(0, |r| r.stats.enters)
    }

    fn path(&self) -> &'static str {
        "io_uring"
    }
}
