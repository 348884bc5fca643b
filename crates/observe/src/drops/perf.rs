//! The perf way, where BPF is refused: every hit of `skb:kfree_skb` is sampled into a ring
//! per online CPU and decoded here with the offsets of the tracepoint's format. A thread
//! empties the rings every few milliseconds; a ring that fills anyway makes the kernel
//! count what it could not write, and that count is reported as lost.

use super::{Counts, NEEDS};
use crate::error::ObserveError;
use firehose_host::kernel::tracepoint::Format;
use firehose_sys::trace::perf::{PerfRing, Record};
use firehose_sys::trace::prog::{DropKey, PortFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Pages per CPU ring (256 KiB with 4 KiB pages: about 4000 records).
const RING_PAGES: usize = 64;
/// How often the thread empties the rings.
const DRAIN_EVERY: Duration = Duration::from_millis(10);

struct Shared {
    rings: Vec<PerfRing>,
    counts: Counts,
}

pub(crate) struct PerfDrops {
    layout: Layout,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where the two fields the perf path reads are in a raw record.
#[derive(Clone, Copy)]
struct Layout {
    reason: (usize, usize),
    location: (usize, usize),
}

/// The key of one raw record, or None if it is too short for the format.
fn decode(raw: &[u8], l: Layout) -> Option<DropKey> {
    let get = |(off, size): (usize, usize)| -> Option<u64> {
        let b = raw.get(off..off + size)?;
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(b);
        Some(u64::from_ne_bytes(v))
    };
    Some(DropKey {
        reason: get(l.reason)? as u32,
        port: 0,
        port_from: PortFrom::None,
        ip_proto: 0,
        location: get(l.location)?,
        ino: 0,
        netns: 0,
    })
}

fn drain(s: &mut Shared, l: Layout) {
    let Shared { rings, counts } = s;
    for r in rings.iter_mut() {
        r.drain(|rec| match rec {
            Record::Sample(raw) => {
                if let Some(k) = decode(raw, l) {
                    *counts.by_key.entry(k).or_default() += 1;
                }
            }
            Record::Lost(n) => counts.lost += n,
        });
    }
}

fn online_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| firehose_sys::cpu::CpuSet::parse_list(t.trim()).ok())
        .map(|s| s.to_vec())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

impl PerfDrops {
    pub(crate) fn start(f: &Format, id: u64) -> Result<PerfDrops, ObserveError> {
        let at = |n: &str| {
            let d = f.field(n).expect("checked by the caller");
            (d.offset as usize, (d.size as usize).min(8))
        };
        let layout = Layout {
            reason: at("reason"),
            location: at("location"),
        };
        let mut rings = Vec::new();
        for cpu in online_cpus() {
            let r = PerfRing::open(id, "skb:kfree_skb", cpu, RING_PAGES)
                .map_err(|e| ObserveError::from_sys(e, NEEDS[2]))?;
            rings.push(r);
        }
        let shared = Arc::new(Mutex::new(Shared {
            rings,
            counts: Counts::default(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, stop2) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("drops-perf".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    drain(&mut s2.lock().unwrap_or_else(|p| p.into_inner()), layout);
                    std::thread::sleep(DRAIN_EVERY);
                }
            })
            .map_err(|e| {
                ObserveError::Sys(firehose_sys::SysError {
                    what: "spawning the perf reader thread".into(),
                    source: e,
                })
            })?;
        Ok(PerfDrops {
            layout,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Empties the rings, then returns the totals.
    pub(crate) fn counts(&mut self) -> Counts {
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        drain(&mut s, self.layout);
        s.counts.clone()
    }
}

impl Drop for PerfDrops {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_decodes_by_the_format_offsets() {
        let mut raw = vec![0u8; 40];
        raw[16..24].copy_from_slice(&0xffff_ffff_8200_0000u64.to_ne_bytes());
        raw[36..40].copy_from_slice(&6u32.to_ne_bytes());
        let l = Layout {
            reason: (36, 4),
            location: (16, 8),
        };
        let k = decode(&raw, l).unwrap();
        assert_eq!((k.reason, k.location), (6, 0xffff_ffff_8200_0000));
        assert!(decode(&raw[..30], l).is_none());
    }
}
