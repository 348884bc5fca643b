//! perf_event_open(2) on a tracepoint: the event a BPF program is attached to, and the
//! sampling path (one ring per CPU of raw tracepoint records) used where BPF is refused.
//!
//! Both are held by fds: closing them (process exit, SIGKILL included) detaches the program
//! and frees the rings, so nothing outlives the process.

use crate::{cvt, SysResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// The event's id first in every sample, to tell the events sharing a ring apart.
const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `_IOR('$', 7, __u64 *)`: the id that samples carry.
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// The `disabled` bit of perf_event_attr's flag word.
const ATTR_DISABLED: u64 = 1;
/// The `watermark` bit: wake up by bytes (`wakeup_watermark`) rather than events.
const ATTR_WATERMARK: u64 = 1 << 14;

/// `struct perf_event_attr`, PERF_ATTR_SIZE_VER8 (136 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    _reserved2: u16,
    aux_sample_size: u32,
    _reserved3: u32,
    sig_data: u64,
    config3: u64,
}

fn open(attr: &mut PerfEventAttr, cpu: i32, what: impl FnOnce() -> String) -> SysResult<OwnedFd> {
    attr.size = std::mem::size_of::<PerfEventAttr>() as u32;
    // SAFETY: attr is a live perf_event_attr of the size it declares; the kernel reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *mut PerfEventAttr,
            -1 as libc::pid_t,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    let fd = cvt(fd, what)?;
    // SAFETY: the kernel returned a new fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn ioctl(fd: RawFd, req: libc::c_ulong, arg: libc::c_ulong, what: &str) -> SysResult<()> {
    // SAFETY: these perf ioctls take an integer argument, not a pointer.
    let r = unsafe { libc::ioctl(fd, req as _, arg) };
    cvt(r, || what.to_string()).map(|_| ())
}

/// A BPF program attached to a tracepoint through a perf event; detached when dropped.
#[derive(Debug)]
pub struct TracepointLink {
    _event: OwnedFd,
}

/// Attaches the loaded tracepoint program `prog` to tracepoint `id` (the `id` file of
/// tracefs). The program runs on every CPU: the kernel keeps tracepoint programs on the
/// tracepoint itself, whichever CPU the event was opened on.
///
/// The event is a counting one (no sample period): the program passes every event on to
/// perf for other users of the tracepoint, and a sampling event with no ring would cost a
/// failed output per event on its CPU for nothing.
pub fn attach_tracepoint(prog: RawFd, id: u64, name: &str) -> SysResult<TracepointLink> {
    let mut attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        config: id,
        flags: ATTR_DISABLED,
        ..Default::default()
    };
    let event = open(&mut attr, 0, || {
        format!("perf_event_open(tracepoint {name}, id {id})")
    })?;
    ioctl(
        event.as_raw_fd(),
        PERF_EVENT_IOC_SET_BPF,
        prog as libc::c_ulong,
        &format!("ioctl(PERF_EVENT_IOC_SET_BPF) on tracepoint {name}"),
    )?;
    ioctl(
        event.as_raw_fd(),
        PERF_EVENT_IOC_ENABLE,
        0,
        &format!("ioctl(PERF_EVENT_IOC_ENABLE) on tracepoint {name}"),
    )?;
    Ok(TracepointLink { _event: event })
}

/// The id of an event's samples (PERF_EVENT_IOC_ID).
fn event_id(fd: RawFd, name: &str) -> SysResult<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer, which lives across
    // the call.
    let r = unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ID as _, &mut id as *mut u64) };
    cvt(r, || {
        format!("ioctl(PERF_EVENT_IOC_ID) on tracepoint {name}")
    })?;
    Ok(id)
}

/// One record taken from a ring.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A sample of the event with sample id `id` ([`PerfRing::id`], [`PerfRing::also`]):
    /// the raw tracepoint record (common fields first, as the `format` file lays out).
    Sample { id: u64, raw: &'a [u8] },
    /// The kernel could not write this many samples: the ring was full.
    Lost(u64),
}

/// One CPU's sampling event on a tracepoint and its mmap ring.
pub struct PerfRing {
    fd: OwnedFd,
    /// Other tracepoints sampled into this ring ([`PerfRing::also`]).
    others: Vec<OwnedFd>,
    id: u64,
    base: *mut u8,
    /// Bytes mapped: one header page plus the data area.
    len: usize,
    data_size: usize,
    /// A record that wraps around the end of the ring is copied here first.
    scratch: Vec<u8>,
}

// SAFETY: the mapping belongs to this value alone; moving it to another thread moves sole
// ownership, and the kernel side is synchronised through data_head/data_tail.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// Samples every hit of tracepoint `id` on `cpu` into a ring of `pages` pages (a power
    /// of two), waking a reader once a quarter of it is full.
    pub fn open(id: u64, name: &str, cpu: usize, pages: usize) -> SysResult<Self> {
        let page = super::page_size();
        let data_size = pages.next_power_of_two() * page;
        let fd = sampling(id, name, cpu, (data_size / 4) as u32)?;
        let len = page + data_size;
        let base = crate::map_shared(fd.as_raw_fd(), len, 0, 0, || {
            format!("mmap(perf ring of tracepoint {name}, cpu {cpu}, {len} bytes)")
        })?;
        let id = event_id(fd.as_raw_fd(), name)?;
        let ring = PerfRing {
            fd,
            others: Vec::new(),
            id,
            base,
            len,
            data_size,
            scratch: Vec::new(),
        };
        ioctl(
            ring.fd.as_raw_fd(),
            PERF_EVENT_IOC_ENABLE,
            0,
            &format!("ioctl(PERF_EVENT_IOC_ENABLE) on tracepoint {name}, cpu {cpu}"),
        )?;
        Ok(ring)
    }

    /// The sample id of the ring's own tracepoint.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Samples tracepoint `id` on the same CPU into this ring too, and returns the sample
    /// id its records carry. Records of one CPU land in the order the events fired, so a
    /// reader can pair an event with the one that follows it.
    pub fn also(&mut self, id: u64, name: &str, cpu: usize) -> SysResult<u64> {
        let fd = sampling(id, name, cpu, 0)?;
        ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_SET_OUTPUT,
            self.fd.as_raw_fd() as libc::c_ulong,
            &format!("ioctl(PERF_EVENT_IOC_SET_OUTPUT) of tracepoint {name}, cpu {cpu}"),
        )?;
        let sample_id = event_id(fd.as_raw_fd(), name)?;
        ioctl(
            fd.as_raw_fd(),
            PERF_EVENT_IOC_ENABLE,
            0,
            &format!("ioctl(PERF_EVENT_IOC_ENABLE) on tracepoint {name}, cpu {cpu}"),
        )?;
        self.others.push(fd);
        Ok(sample_id)
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: data_head is a naturally aligned u64 at offset 1024 of the mapped header
        // page (struct perf_event_mmap_page), alive as long as self.
        unsafe { &*(self.base.add(1024) as *const AtomicU64) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: data_tail is a naturally aligned u64 at offset 1032 of the header page.
        unsafe { &*(self.base.add(1032) as *const AtomicU64) }
    }

    fn data(&self) -> &[u8] {
        let page = super::page_size();
        // SAFETY: the data area is the `data_size` bytes after the header page, mapped for
        // the life of self. The kernel writes only between data_tail and data_head's
        // future, which we never read before seeing data_head advance.
        unsafe { std::slice::from_raw_parts(self.base.add(page), self.data_size) }
    }

    /// Hands every record written since the last call to `f`, then frees their space.
    pub fn drain(&mut self, mut f: impl FnMut(Record<'_>)) {
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        let size = self.data_size as u64;
        let mut scratch = std::mem::take(&mut self.scratch);
        while tail + 8 <= head {
            let data = self.data();
            let at = (tail % size) as usize;
            let mut hdr = [0u8; 8];
            copy_wrapped(data, at, &mut hdr);
            let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len = u16::from_ne_bytes([hdr[6], hdr[7]]) as usize;
            if len < 8 || tail + len as u64 > head {
                break;
            }
            scratch.resize(len, 0);
            copy_wrapped(data, at, &mut scratch);
            let body = &scratch[8..];
            match kind {
                PERF_RECORD_SAMPLE if body.len() >= 12 => {
                    let id = u64::from_ne_bytes(body[..8].try_into().expect("8 bytes"));
                    let n = u32::from_ne_bytes(body[8..12].try_into().expect("4 bytes")) as usize;
                    if let Some(raw) = body.get(12..12 + n) {
                        f(Record::Sample { id, raw });
                    }
                }
                PERF_RECORD_LOST if body.len() >= 16 => {
                    let mut n = [0u8; 8];
                    n.copy_from_slice(&body[8..16]);
                    f(Record::Lost(u64::from_ne_bytes(n)));
                }
                _ => {}
            }
            tail += len as u64;
        }
        self.scratch = scratch;
        self.tail().store(tail, Ordering::Release);
    }
}

/// A sampling event on tracepoint `id` on `cpu`: every hit, its id and raw record; with
/// `watermark` bytes, the reader is woken by bytes rather than by events.
fn sampling(id: u64, name: &str, cpu: usize, watermark: u32) -> SysResult<OwnedFd> {
    let mut attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        config: id,
        sample_period: 1,
        sample_type: PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_RAW,
        wakeup: watermark,
        flags: ATTR_DISABLED | if watermark > 0 { ATTR_WATERMARK } else { 0 },
        ..Default::default()
    };
    open(&mut attr, cpu as i32, || {
        format!("perf_event_open(tracepoint {name}, id {id}, cpu {cpu})")
    })
}

/// Copies `out.len()` bytes starting at `at` of the ring `data`, wrapping at its end.
fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    let first = out.len().min(data.len() - at);
    out[..first].copy_from_slice(&data[at..at + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

impl AsRawFd for PerfRing {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in open, unmapped once here.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

impl std::fmt::Debug for PerfRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfRing")
            .field("fd", &self.fd.as_raw_fd())
            .field("data_size", &self.data_size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_across_the_end_of_the_ring_is_joined() {
        let data = [5u8, 6, 7, 0, 0, 0, 1, 2, 3, 4];
        let mut out = [0u8; 7];
        copy_wrapped(&data, 6, &mut out);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn the_attr_is_the_size_the_kernel_knows() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 136);
    }
}
