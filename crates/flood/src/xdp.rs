//! Flood over AF_XDP TX: one socket per thread, bound to the thread's queue of the interface
//! the route to the target leaves by ([`super::af_packet::resolve`]: source address, MACs from
//! the neighbour table). No XDP program is attached: sending needs none.
//!
//! Every UMEM frame is built once, before the first send (frame `i` carries flow
//! `i % flows`, with crates/frame), and never written again: a send is only descriptors on
//! the tx ring and, when the ring asks (always in copy mode, which the kernel drains at most
//! 32 frames per call), a zero-length sendto. A frame counts as sent when it comes back on
//! the completion ring. A send the ring or the frames in flight cannot take is counted
//! (`tx_ring_full`) and tried again; frames that never complete within [`STALL`] are counted
//! (`uncompleted`) and end the thread's run, not the process.

use super::af_packet::Path;
use firehose_frame::write_request;
use firehose_sys::epoll::poll_readable;
use firehose_sys::mmsg::Flushed;
use firehose_sys::xdp::ring::Desc;
use firehose_sys::xdp::setup::Iface;
use firehose_sys::xdp::xsk::{Xsk, XskConfig};
use firehose_sys::{Setting, SetupError, SysError};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How long frames may stay in flight without any completing before they are given up.
pub(crate) const STALL: Duration = Duration::from_secs(2);

/// Frames the copy-mode kernel transmits per sendto (TX_BATCH_SIZE in net/xdp/xsk.c).
const COPY_BATCH: u32 = 32;

/// A thread's AF_XDP socket and its prebuilt frames.
pub(crate) struct XdpSender {
    xsk: Xsk,
    frames: u32,
    /// Length of every frame (all flows carry the same payload).
    len: u32,
    next: u32,
    /// On the tx ring or in the kernel, not yet back on the completion ring.
    inflight: u32,
    copy_mode: bool,
    last_progress: Instant,
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
        let mut sock = iface.open_queue(queue, &cfg, notes)?;
        let body: Vec<u8> = (0..payload).map(|k| (k % 251) as u8).collect();
        let mut len = 0;
        for i in 0..frames {
            let mut e = path.endpoints;
            e.src.set_port(ports[(i as usize) % ports.len()]);
            let addr = sock.umem.frame_addr(i);
            let n = write_request(sock.umem.frame_mut(addr), &e, &body).ok_or_else(|| {
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
            copy_mode: !sock.zerocopy(),
            xsk: sock,
            frames,
            len: len as u32,
            next: 0,
            inflight: 0,
            last_progress: Instant::now(),
            tx_ring_full: 0,
            uncompleted: 0,
        })
    }

    /// True when zero-copy was granted; the errno name of its refusal otherwise.
    pub fn zerocopy(&self) -> (bool, Option<&str>) {
        (self.xsk.zerocopy(), self.xsk.zerocopy_refusal())
    }

    /// Frames handed to the kernel and not yet completed.
    pub fn pending(&self) -> usize {
        self.inflight as usize
    }

    /// True once frames were given up (no completion within [`STALL`]).
    pub fn gave_up(&self) -> bool {
        self.uncompleted > 0
    }

    /// Completed frames off the completion ring; returns how many.
    fn reap(&mut self) -> u32 {
        let n = self.xsk.comp.available(self.xsk.comp.size());
        self.xsk.comp.release(n);
        self.inflight = self.inflight.saturating_sub(n);
        if n > 0 {
            self.last_progress = Instant::now();
        }
        n
    }

    /// Puts up to `n` more frames (flows in turn) on the tx ring, kicks the kernel when the
    /// ring asks, and reaps; `sent` is what completed during this call.
    pub fn send(&mut self, n: usize) -> Result<Flushed, SysError> {
        let mut done = self.reap();
        let want = (n as u32).min(self.frames - self.inflight);
        let k = self.xsk.tx.free(want);
        if k < n as u32 {
            self.tx_ring_full += 1;
        }
        for i in 0..k {
            let addr = self.xsk.umem.frame_addr(self.next);
            self.next = (self.next + 1) % self.frames;
            self.xsk.tx.write(
                i,
                Desc {
                    addr,
                    len: self.len,
                    options: 0,
                },
            );
        }
        self.xsk.tx.submit(k);
        self.inflight += k;
        let mut syscalls = 0;
        if self.inflight > 0 && (!self.xsk.uses_need_wakeup() || self.xsk.tx.needs_wakeup()) {
            let kicks = if self.copy_mode {
                self.inflight.div_ceil(COPY_BATCH)
            } else {
                1
            };
            for _ in 0..kicks {
                // A refused kick (EAGAIN, EBUSY, ENOBUFS) leaves the frames for the next.
                self.xsk.kick_tx()?;
            }
            syscalls += kicks as usize;
        }
        done += self.reap();
        if done == 0 && k == 0 && self.inflight > 0 {
            if self.last_progress.elapsed() >= STALL {
                self.uncompleted += self.inflight as u64;
                self.inflight = 0;
            } else {
                // Nothing moved: wait a little for the completion ring instead of spinning.
                poll_readable([self.xsk.as_raw_fd()], 1)?;
                syscalls += 1;
            }
        }
        Ok(Flushed {
            sent: done as usize,
            syscalls,
            ..Flushed::default()
        })
    }
}
