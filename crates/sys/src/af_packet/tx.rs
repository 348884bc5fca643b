//! The TPACKET_V2 transmit ring: frames written in place, marked TP_STATUS_SEND_REQUEST,
//! and handed to the kernel by one send() for all of them.
//!
//! Counting: the kernel takes marked frames in ring order, so the frames it has taken are
//! those before the first still marked for sending. A frame the device refused (ENOBUFS,
//! a full queue with PACKET_QDISC_BYPASS) is marked for sending again by the kernel and
//! goes with the next send(): nothing is lost, the refusal is counted.

use super::{page_size, PacketSock, RingMap};
use crate::{cvt, SysError, SysResult};
use std::mem;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Geometry of a transmit ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxRingConfig {
    /// Bytes per frame slot, header included: a multiple of 16, at least the frame + 32.
    pub frame_size: usize,
    /// Number of frame slots.
    pub frame_nr: usize,
}

impl Default for TxRingConfig {
    /// 4096 slots of 2 KiB (8 MiB).
    fn default() -> Self {
        TxRingConfig {
            frame_size: 2048,
            frame_nr: 4096,
        }
    }
}

impl TxRingConfig {
    /// At least `frame_nr` slots, each the smallest power of two (128 bytes or more) that
    /// holds a `frame_len`-byte frame and the slot header: small frames pack densely, so
    /// the ring's frames and status words share fewer cache lines and pages.
    pub fn for_frames(frame_len: usize, frame_nr: usize) -> Self {
        TxRingConfig {
            frame_size: (DATA_AT + frame_len).next_power_of_two().max(128),
            frame_nr,
        }
    }
}

/// What one [`TxRing::send`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxSent {
    /// Frames the kernel took from the ring in this call.
    pub frames: usize,
    /// The errno if send() was refused (ENOBUFS: device queue full; frames stay marked).
    pub error: Option<i32>,
}

/// A packet socket with a TPACKET_V2 transmit ring mapped.
#[derive(Debug)]
pub struct TxRing {
    map: RingMap,
    sock: PacketSock,
    cfg: TxRingConfig,
    /// Next slot to fill.
    head: usize,
    /// Oldest slot marked for sending and not yet seen taken by the kernel.
    tail: usize,
    /// Slots marked and not yet taken.
    marked: usize,
}

/// Offset of the frame data in a slot: the aligned tpacket2_hdr (the sockaddr_ll slot
/// is only used on receive).
const DATA_AT: usize = (mem::size_of::<libc::tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1)
    & !(libc::TPACKET_ALIGNMENT - 1);

impl TxRing {
    /// Switches `sock` to TPACKET_V2 and sets up and maps its transmit ring, then binds it.
    pub fn new(sock: PacketSock, cfg: TxRingConfig) -> SysResult<Self> {
        sock.set_int(
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V2 as i32,
            "PACKET_VERSION=TPACKET_V2",
        )?;
        let block_size = page_size().max(cfg.frame_size).next_power_of_two();
        let per_block = block_size / cfg.frame_size.max(1);
        let block_nr = cfg.frame_nr.div_ceil(per_block.max(1));
        let frame_nr = block_nr * per_block;
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: block_nr as u32,
            tp_frame_size: cfg.frame_size as u32,
            tp_frame_nr: frame_nr as u32,
        };
        crate::sockopt::set(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &req,
            || {
                format!(
                "PACKET_TX_RING: {frame_nr} frames of {} bytes in {block_nr} blocks of {block_size}",
                cfg.frame_size
            )
            },
        )?;
        let map = RingMap::new(sock.as_raw_fd(), block_size * block_nr, "PACKET_TX_RING")?;
        sock.bind()?;
        Ok(TxRing {
            map,
            sock,
            cfg: TxRingConfig {
                frame_size: cfg.frame_size,
                frame_nr,
            },
            head: 0,
            tail: 0,
            marked: 0,
        })
    }

    /// The socket, for options.
    pub fn sock(&self) -> &PacketSock {
        &self.sock
    }

    /// Slot count (the request rounded up to whole blocks).
    pub fn slots(&self) -> usize {
        self.cfg.frame_nr
    }

    /// The largest frame a slot holds.
    pub fn max_frame(&self) -> usize {
        self.cfg.frame_size - DATA_AT
    }

    fn hdr(&self, i: usize) -> *mut libc::tpacket2_hdr {
        // Frames never straddle blocks: block_size is a multiple of frame_size, so slot i
        // is at i * frame_size.
        // SAFETY: i < frame_nr, so the slot lies within the mapping.
        unsafe { self.map.ptr.add(i * self.cfg.frame_size) as *mut libc::tpacket2_hdr }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first u32 of slot i's header, 4-byte aligned, shared
        // with the kernel and accessed atomically by both.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.hdr(i)).tp_status)) }
    }

    /// The next free slot's data area for writing a frame, or None while the kernel still
    /// holds it (the ring is full: send, then try again).
    pub fn frame_mut(&mut self) -> Option<&mut [u8]> {
        if self.status(self.head).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
            return None;
        }
        let len = self.max_frame();
        // SAFETY: the slot is AVAILABLE, so the kernel does not read it until we mark it;
        // the data area lies within the slot; &mut self prevents a second view.
        Some(unsafe {
            std::slice::from_raw_parts_mut((self.hdr(self.head) as *mut u8).add(DATA_AT), len)
        })
    }

    /// Writes the frame `frame(i)` into every slot i once, before anything is sent: the
    /// kernel only reads a slot's data on transmit, so a sender whose frames repeat with
    /// the slots afterwards only marks them ([`Self::mark`]), with no copy per frame.
    /// Returns the largest length written; fails if a frame exceeds a slot.
    pub fn prefill<'a>(&mut self, frame: impl Fn(usize) -> &'a [u8]) -> SysResult<usize> {
        if self.marked > 0 {
            return Err(SysError {
                what: "PACKET_TX_RING: prefill with frames marked for sending".into(),
                source: std::io::Error::from_raw_os_error(libc::EBUSY),
            });
        }
        let mut longest = 0;
        for i in 0..self.cfg.frame_nr {
            let f = frame(i);
            if f.len() > self.max_frame() {
                return Err(SysError {
                    what: format!(
                        "PACKET_TX_RING: a {}-byte frame exceeds the {}-byte slots",
                        f.len(),
                        self.max_frame()
                    ),
                    source: std::io::Error::from_raw_os_error(libc::EMSGSIZE),
                });
            }
            // SAFETY: nothing is marked, so the kernel holds no slot; the data area of
            // slot i lies within the mapping and is at least max_frame() long.
            unsafe {
                let dst = (self.hdr(i) as *mut u8).add(DATA_AT);
                std::ptr::copy_nonoverlapping(f.as_ptr(), dst, f.len());
                (*self.hdr(i)).tp_len = f.len() as u32;
                (*self.hdr(i)).tp_snaplen = f.len() as u32;
            }
            longest = longest.max(f.len());
        }
        Ok(longest)
    }

    /// Marks the next slot for sending as it stands (the frame [`Self::prefill`] put there
    /// and its length); false while the kernel still holds it (the ring is full).
    pub fn mark(&mut self) -> bool {
        let st = self.status(self.head);
        if st.load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
            return false;
        }
        st.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.cfg.frame_nr;
        self.marked += 1;
        true
    }

    /// Marks the slot last returned by [`Self::frame_mut`] for sending with `len` bytes.
    pub fn commit(&mut self, len: usize) {
        let h = self.hdr(self.head);
        // SAFETY: the slot is ours (AVAILABLE, checked by frame_mut); tp_len is written
        // before the Release store of the status publishes the slot to the kernel.
        unsafe {
            (*h).tp_len = len.min(self.max_frame()) as u32;
            (*h).tp_snaplen = (*h).tp_len;
        }
        self.status(self.head)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.cfg.frame_nr;
        self.marked += 1;
    }

    /// Frames marked and not yet taken by the kernel.
    pub fn marked(&self) -> usize {
        self.marked
    }

    /// Asks the kernel to send every marked frame (one send(), not waiting for completion)
    /// and counts the frames it took. A malformed frame (TP_STATUS_WRONG_FORMAT) is an error.
    pub fn send(&mut self) -> SysResult<TxSent> {
        let mut out = TxSent::default();
        if self.marked == 0 {
            return Ok(out);
        }
        // SAFETY: a send with no buffer on a packet socket with a TX ring: the kernel reads
        // only the ring, which stays mapped.
        let ret = unsafe {
            libc::send(
                self.sock.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
            )
        };
        if let Err(e) = cvt(ret, || "send(PACKET_TX_RING)".into()) {
            match e.errno() {
                Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => out.error = e.errno(),
                _ => return Err(e),
            }
        }
        while self.marked > 0 {
            match self.status(self.tail).load(Ordering::Acquire) {
                libc::TP_STATUS_SEND_REQUEST => break,
                libc::TP_STATUS_WRONG_FORMAT => {
                    return Err(SysError {
                        what: format!(
                            "PACKET_TX_RING: frame in slot {} refused as malformed",
                            self.tail
                        ),
                        source: std::io::Error::from_raw_os_error(libc::EINVAL),
                    })
                }
                _ => {
                    out.frames += 1;
                    self.marked -= 1;
                    self.tail = (self.tail + 1) % self.cfg.frame_nr;
                }
            }
        }
        Ok(out)
    }

    /// Sends until nothing is marked or `deadline` passes; returns the frames taken and
    /// the refusals met on the way.
    pub fn flush(&mut self, deadline: Instant) -> SysResult<(usize, usize)> {
        let (mut frames, mut refused) = (0, 0);
        while self.marked > 0 && Instant::now() < deadline {
            let s = self.send()?;
            frames += s.frames;
            if s.error == Some(libc::ENOBUFS) {
                refused += 1;
            }
            if s.frames == 0 {
                self.sock.poll(true, Duration::from_millis(1))?;
            }
        }
        Ok((frames, refused))
    }
}
