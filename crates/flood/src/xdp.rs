//! Flood over AF_XDP TX: one queue driver per thread ([`XdpQueue`]), bound to the thread's
//! queue of the interface the route to the target leaves by ([`super::af_packet::resolve`]:
//! source address, MACs from the neighbour table). No XDP program is attached: sending needs
//! none.
//!
//! Every UMEM frame is built once, before the first send (frame `i` carries flow
//! `i % flows`, with crates/frame), and never written again: a send is only descriptors on
//! the tx ring, taken oldest-freed first so that every flow goes in turn, and the driver's
//! kicks (in copy mode as many as the kernel's 32-frame batches need). A frame counts as sent
//! when it comes back on the completion ring. A send the ring or the frames in flight cannot
//! take is counted (`tx_ring_full`) and tried again; frames that never complete within
//! [`STALL`] are counted (`uncompleted`) and end the thread's run, not the process.

use super::af_packet::Path;
use firehose_frame::write_request;
use firehose_sys::mmsg::Flushed;
use firehose_sys::xdp::queue::XdpQueue;
use firehose_sys::xdp::setup::Iface;
use firehose_sys::xdp::xsk::XskConfig;
use firehose_sys::{Setting, SetupError, SysError};
use std::time::{Duration, Instant};

/// How long frames may stay in flight without any completing before they are given up.
pub(crate) const STALL: Duration = Duration::from_secs(2);

/// A thread's AF_XDP queue and its prebuilt frames.
pub(crate) struct XdpSender {
    queue: XdpQueue,
    /// Length of every frame (all flows carry the same payload).
    len: u32,
    last_progress: Instant,
    /// The driver's system calls already reported.
    syscalls_seen: u64,
    /// Sends cut short because the tx ring or every frame was in flight.
    pub tx_ring_full: u64,
    /// Frames given up after [`STALL`] without a completion.
    pub uncompleted: u64,
}

impl XdpSender {
    /// A socket on `queue` of `iface` with frames for `ports` (source ports).
    pub fn new(
        iface: &Iface,
        queue: u32,
        path: &Path,
        ports: &[u16],
        payload: usize,
        xsk: &XskConfig,
        notes: &mut Vec<String>,
    ) -> Result<Self, SetupError> {
        // Whole rounds of flows, so that every flow gets the same share of frames.
        let rounds = xsk.frames.div_ceil(ports.len() as u32).max(1);
        let frames = rounds * ports.len() as u32;
        let cfg = XskConfig { frames, ..*xsk };
        let sock = iface.open_queue(queue, &cfg, notes)?;
        let mut q = XdpQueue::new(sock, false);
        let body: Vec<u8> = (0..payload).map(|k| (k % 251) as u8).collect();
        let mut len = 0;
        for i in 0..frames {
            let mut e = path.endpoints;
            e.src.set_port(ports[(i as usize) % ports.len()]);
            let addr = q.xsk().umem.frame_addr(i);
            let n = write_request(q.frame_mut(addr), &e, &body).ok_or_else(|| {
                SetupError::usage(
                    Setting::Size,
                    format!(
                        "{} xdp: a {payload}-byte payload does not fit a {}-byte UMEM frame; \
                         lower {} or use {} 4096",
                        Setting::Io.r(),
                        cfg.frame_size,
                        Setting::Size.r(),
                        Setting::FrameSize.r()
                    ),
                )
            })?;
            len = n;
        }
        if len - 14 > iface.mtu {
            return Err(SetupError::usage(
                Setting::Size,
                format!(
                    "{} xdp: {}-byte packets exceed {}'s MTU of {}; lower {}",
                    Setting::Io.r(),
                    len - 14,
                    iface.name,
                    iface.mtu,
                    Setting::Size.r()
                ),
            ));
        }
        Ok(XdpSender {
            queue: q,
            len: len as u32,
            last_progress: Instant::now(),
            syscalls_seen: 0,
            tx_ring_full: 0,
            uncompleted: 0,
        })
    }

    /// True when zero-copy was granted; the errno name of its refusal otherwise.
    pub fn zerocopy(&self) -> (bool, Option<&str>) {
        let x = self.queue.xsk();
        (x.zerocopy(), x.zerocopy_refusal())
    }

    /// Frames of its UMEM (whole rounds of its flows).
    pub fn frames(&self) -> u32 {
        self.queue.xsk().umem.frames()
    }

    /// Frames handed to the kernel and not yet completed.
    pub fn pending(&self) -> usize {
        if self.gave_up() {
            return 0;
        }
        self.queue.in_flight() as usize
    }

    /// True once frames were given up (no completion within [`STALL`]).
    pub fn gave_up(&self) -> bool {
        self.uncompleted > 0
    }

    /// Completed frames back to the free list; notes progress.
    fn reap(&mut self) -> u32 {
        let n = self.queue.reap();
        if n > 0 {
            self.last_progress = Instant::now();
        }
        n
    }

    /// Puts up to `n` more frames (flows in turn) on the tx ring, lets the driver kick, and
    /// reaps; `sent` is what completed during this call.
    pub fn send(&mut self, n: usize) -> Result<Flushed, SysError> {
        let mut done = self.reap();
        let q = &mut self.queue;
        let want = (n as u32).min(q.free_frames() as u32);
        let k = q.tx_room(want);
        if k < n as u32 {
            self.tx_ring_full += 1;
        }
        for _ in 0..k {
            let addr = q.alloc_oldest().expect("tx_room <= free frames");
            q.transmit(addr, self.len);
        }
        q.flush();
        done += self.reap();
        let q = &mut self.queue;
        if done == 0 && k == 0 && q.in_flight() > 0 {
            if self.last_progress.elapsed() >= STALL {
                self.uncompleted += q.in_flight() as u64;
            } else {
                // Nothing moved: wait a little for the completion ring instead of spinning.
                q.wait(1, None);
            }
        }
        let calls = q.counters().syscalls;
        let syscalls = (calls - self.syscalls_seen) as usize;
        self.syscalls_seen = calls;
        Ok(Flushed {
            sent: done as usize,
            syscalls,
            ..Flushed::default()
        })
    }
}
