//! The TPACKET_V3 receive ring: block-based, frames packed back to back in a block, a block
//! handed to user space when full or when its retire timeout expires.

use super::{page_size, PacketSock, RingMap};
use crate::SysResult;
use std::marker::PhantomData;
use std::mem;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Geometry of a receive ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxRingConfig {
    /// Bytes per block: a multiple of the page size (the kernel refuses others, EINVAL).
    pub block_size: usize,
    /// Number of blocks.
    pub block_nr: usize,
    /// The frame size the kernel uses to size the ring (V3 packs frames tighter).
    pub frame_size: usize,
    /// A block not yet full is handed over after this long (whole milliseconds, >= 1).
    pub retire: Duration,
}

impl Default for RxRingConfig {
    /// 64 blocks of 256 KiB (16 MiB), 2 KiB frames, 10 ms retire timeout.
    fn default() -> Self {
        RxRingConfig {
            block_size: 256 << 10,
            block_nr: 64,
            frame_size: 2048,
            retire: Duration::from_millis(10),
        }
    }
}

/// A packet socket with a TPACKET_V3 receive ring mapped.
#[derive(Debug)]
pub struct RxRing {
    // Declared first: the mapping goes before the socket that owns the ring.
    map: RingMap,
    sock: PacketSock,
    cfg: RxRingConfig,
    cur: usize,
}

impl RxRing {
    /// Switches `sock` to TPACKET_V3 and sets up and maps its receive ring. The socket is
    /// not bound yet: set filter and fanout, then [`PacketSock::bind`] (fanout after bind).
    pub fn new(sock: PacketSock, cfg: RxRingConfig) -> SysResult<Self> {
        sock.set_int(
            libc::PACKET_VERSION,
            libc::tpacket_versions::TPACKET_V3 as i32,
            "PACKET_VERSION=TPACKET_V3",
        )?;
        let page = page_size();
        let frame_nr = cfg.block_size / cfg.frame_size.max(1) * cfg.block_nr;
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.block_nr as u32,
            tp_frame_size: cfg.frame_size as u32,
            tp_frame_nr: frame_nr as u32,
            tp_retire_blk_tov: cfg.retire.as_millis().max(1) as u32,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        crate::sockopt::set(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
            || {
                format!(
                    "PACKET_RX_RING: {} blocks of {} bytes, frame {}, page {page}",
                    cfg.block_nr, cfg.block_size, cfg.frame_size
                )
            },
        )?;
        let map = RingMap::new(
            sock.as_raw_fd(),
            cfg.block_size * cfg.block_nr,
            "PACKET_RX_RING",
        )?;
        Ok(RxRing {
            map,
            sock,
            cfg,
            cur: 0,
        })
    }

    /// The socket, for options, binding, statistics and poll.
    pub fn sock(&self) -> &PacketSock {
        &self.sock
    }

    /// The geometry in force.
    pub fn config(&self) -> RxRingConfig {
        self.cfg
    }

    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block i lies within the mapping; its descriptor starts with `version`
        // (u32) then `offset_to_priv` (u32), then the v1 header whose first field is the
        // u32 block_status, 4-byte aligned, which the kernel and we access atomically.
        unsafe {
            let desc = self.map.ptr.add(i * self.cfg.block_size) as *mut libc::tpacket_block_desc;
            let status = std::ptr::addr_of_mut!((*desc).hdr.bh1.block_status);
            AtomicU32::from_ptr(status)
        }
    }

    /// The next block the kernel has handed over, if any (no waiting). Dropping the view
    /// gives the block back to the kernel.
    pub fn next_block(&mut self) -> Option<RxBlock<'_>> {
        let status = self.block_status(self.cur).load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let bs = self.cfg.block_size;
        // SAFETY: block `cur` is within the mapping, and the kernel does not write it while
        // TP_STATUS_USER is set; the view borrows the ring mutably so no second view exists.
        let block = unsafe { std::slice::from_raw_parts(self.map.ptr.add(self.cur * bs), bs) };
        // SAFETY: the descriptor is at the block start; the kernel filled it before
        // publishing TP_STATUS_USER (read with Acquire above).
        let (num, first) = unsafe {
            let desc = block.as_ptr() as *const libc::tpacket_block_desc;
            (
                (*desc).hdr.bh1.num_pkts,
                (*desc).hdr.bh1.offset_to_first_pkt,
            )
        };
        Some(RxBlock {
            block,
            num: num as usize,
            first: first as usize,
            timed_out: status & libc::TP_STATUS_BLK_TMO != 0,
            ring: self as *mut RxRing,
            _ring: PhantomData,
        })
    }

    /// Waits until a block is ready (or `timeout`); false when none came.
    pub fn wait(&mut self, timeout: Duration) -> SysResult<bool> {
        if self.block_status(self.cur).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0 {
            return Ok(true);
        }
        self.sock.poll(false, timeout)
    }

    fn release(&mut self) {
        self.block_status(self.cur)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.cfg.block_nr;
    }
}

/// A block of received frames, lent by the kernel until dropped.
pub struct RxBlock<'a> {
    pub(super) block: &'a [u8],
    pub(super) num: usize,
    pub(super) first: usize,
    timed_out: bool,
    ring: *mut RxRing,
    _ring: PhantomData<&'a mut RxRing>,
}

impl RxBlock<'_> {
    /// Number of frames in the block.
    pub fn len(&self) -> usize {
        self.num
    }

    /// True for a block the kernel retired empty (by timeout).
    pub fn is_empty(&self) -> bool {
        self.num == 0
    }

    /// True when the retire timeout, not a full block, handed it over.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// The frames, in arrival order. A frame header pointing outside the block (never
    /// seen from a sane kernel) ends the iteration.
    pub fn frames(&self) -> impl Iterator<Item = RxFrame<'_>> + '_ {
        let hdr_len = mem::size_of::<libc::tpacket3_hdr>();
        let sll_at = (hdr_len + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);
        let mut off = self.first;
        let mut left = self.num;
        std::iter::from_fn(move || {
            if left == 0 || off + sll_at + mem::size_of::<libc::sockaddr_ll>() > self.block.len() {
                return None;
            }
            left -= 1;
            // SAFETY: off + header size is within the block (checked above); read_unaligned
            // because the offsets come from the kernel.
            let h: libc::tpacket3_hdr = unsafe {
                std::ptr::read_unaligned(self.block.as_ptr().add(off) as *const libc::tpacket3_hdr)
            };
            // SAFETY: as above, for the sockaddr_ll that follows the aligned header.
            let sll: libc::sockaddr_ll = unsafe {
                std::ptr::read_unaligned(
                    self.block.as_ptr().add(off + sll_at) as *const libc::sockaddr_ll
                )
            };
            let start = off + h.tp_mac as usize;
            let end = start + h.tp_snaplen as usize;
            if end > self.block.len() {
                left = 0;
                return None;
            }
            let frame = RxFrame {
                data: &self.block[start..end],
                len: h.tp_len,
                pkttype: sll.sll_pkttype,
            };
            off += h.tp_next_offset as usize;
            if h.tp_next_offset == 0 {
                left = 0;
            }
            Some(frame)
        })
    }
}

impl Drop for RxBlock<'_> {
    fn drop(&mut self) {
        // SAFETY: the block view was created from a `&mut RxRing` that it borrows for its
        // whole life, so the pointer is valid and nothing else uses the ring now.
        unsafe { (*self.ring).release() }
    }
}

/// One received frame.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// The frame from its link-layer header, as captured (up to the snap length).
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub len: u32,
    /// `sll_pkttype`: host, broadcast, outgoing ([`super::PKTTYPE_OUTGOING`]), ...
    pub pkttype: u8,
}
