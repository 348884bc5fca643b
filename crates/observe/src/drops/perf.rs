//! The perf way, where BPF is refused: every hit of `skb:kfree_skb` is sampled into a ring
//! per online CPU and decoded here with the offsets of the tracepoint's format. A thread
//! empties the rings every few milliseconds; a ring that fills anyway makes the kernel
//! count what it could not write, and that count is reported as lost.
//!
//! perf cannot follow the record's pointers into the kernel, so a sample has no socket. A
//! UDP socket's receive-queue drops still get their port: `udp:udp_fail_queue_rcv_skb`
//! (local port in `dport`, `lport` on kernels before 6.10) fires in `__udp_queue_rcv_skb`
//! just before the same skb is freed with that socket as `rx_sk`, on the same CPU. Both
//! events share each CPU's ring, where records keep the order they fired in, so a drop
//! with a receiving socket that directly follows that event is that socket's drop.

use super::{Counts, NEEDS};
use crate::error::ObserveError;
use firehose_host::kernel::tracepoint::{self, Format};
use firehose_sys::trace::perf::{PerfRing, Record};
use firehose_sys::trace::prog::{DropKey, PortFrom};
use firehose_sys::trace::tracefs::TraceFs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Pages per CPU ring (256 KiB with 4 KiB pages: about 4000 records).
const RING_PAGES: usize = 64;
/// How often the thread empties the rings.
const DRAIN_EVERY: Duration = Duration::from_millis(10);

struct Shared {
    rings: Vec<Ring>,
    counts: Counts,
}

/// One CPU's ring, and the port of a receive-queue failure waiting for its drop.
struct Ring {
    ring: PerfRing,
    /// The sample id of `udp:udp_fail_queue_rcv_skb` in this ring, when it is sampled.
    udp_fail: Option<u64>,
    pending: Option<u16>,
}

pub(crate) struct PerfDrops {
    layout: Layout,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A field's (offset, size) in a raw record.
type At = (usize, usize);

/// Where the fields the perf path reads are in the raw records.
#[derive(Clone, Copy)]
struct Layout {
    reason: At,
    location: At,
    /// kfree_skb's receiving socket (kernels from 6.12).
    rx_sk: Option<At>,
    /// udp_fail_queue_rcv_skb's local port, when that event is sampled.
    udp_port: Option<At>,
}

/// The field at `at` of `raw`, zero-extended, or None if the record is too short.
fn get(raw: &[u8], (off, size): At) -> Option<u64> {
    let b = raw.get(off..off + size)?;
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(b);
    Some(u64::from_ne_bytes(v))
}

/// The key of one kfree_skb record, or None if it is too short for the format. `port` is
/// the local port of a receive-queue failure just before on this CPU: the drop is that
/// socket's when it has a receiving socket (or the kernel does not record one).
fn decode(raw: &[u8], l: Layout, port: Option<u16>) -> Option<DropKey> {
    let rx_sk = match l.rx_sk {
        Some(at) => get(raw, at)?,
        None => 1,
    };
    let port = port.filter(|_| rx_sk != 0);
    Some(DropKey {
        reason: get(raw, l.reason)? as u32,
        port: port.unwrap_or(0),
        port_from: if port.is_some() {
            PortFrom::Socket
        } else {
            PortFrom::None
        },
        ip_proto: 0,
        location: get(raw, l.location)?,
        ino: 0,
        netns: 0,
    })
}

fn drain(s: &mut Shared, l: Layout) {
    let Shared { rings, counts } = s;
    for r in rings.iter_mut() {
        let Ring {
            ring,
            udp_fail,
            pending,
        } = r;
        ring.drain(|rec| match rec {
            Record::Sample { id, raw } if Some(id) == *udp_fail => {
                *pending = l.udp_port.and_then(|at| get(raw, at)).map(|p| p as u16);
            }
            Record::Sample { raw, .. } => {
                if let Some(k) = decode(raw, l, pending.take()) {
                    *counts.by_key.entry(k).or_default() += 1;
                }
            }
            Record::Lost(n) => {
                *pending = None;
                counts.lost += n;
            }
        });
    }
}

/// `udp:udp_fail_queue_rcv_skb`'s id and where its local port is, when this kernel has it.
fn udp_fail_event() -> Option<(u64, At)> {
    let tracefs = TraceFs::open().ok()?;
    let f = tracepoint::parse(&tracefs.format("udp", "udp_fail_queue_rcv_skb").ok()?).ok()?;
    let d = f.field("dport").or_else(|| f.field("lport"))?;
    let id = match f.id {
        Some(id) => id,
        None => tracefs.id("udp", "udp_fail_queue_rcv_skb").ok()?,
    };
    (d.size == 2).then_some((id, (d.offset as usize, 2)))
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
    /// Starts sampling; also returns what the samples cannot tell.
    pub(crate) fn start(f: &Format, id: u64) -> Result<(PerfDrops, Vec<String>), ObserveError> {
        let at = |n: &str| {
            let d = f.field(n)?;
            Some((d.offset as usize, (d.size as usize).min(8)))
        };
        let udp = udp_fail_event();
        let mut layout = Layout {
            reason: at("reason").expect("checked by the caller"),
            location: at("location").expect("checked by the caller"),
            rx_sk: at("rx_sk"),
            udp_port: udp.map(|(_, at)| at),
        };
        let mut rings = Vec::new();
        for cpu in online_cpus() {
            let ring = PerfRing::open(id, "skb:kfree_skb", cpu, RING_PAGES)
                .map_err(|e| ObserveError::from_sys(e, NEEDS[2]))?;
            rings.push(Ring {
                ring,
                udp_fail: None,
                pending: None,
            });
        }
        let mut limits = vec![
            "perf samples carry no socket (perf cannot follow the record's pointers): no socket, process or network namespace per drop"
                .to_string(),
        ];
        let mut refused = None;
        if let Some((udp_id, _)) = udp {
            for (r, cpu) in rings.iter_mut().zip(online_cpus()) {
                match r.ring.also(udp_id, "udp:udp_fail_queue_rcv_skb", cpu) {
                    Ok(sample_id) => r.udp_fail = Some(sample_id),
                    Err(e) => refused = Some(e.to_string()),
                }
            }
        }
        match (udp, refused) {
            (Some(_), None) => limits.push(
                "ports only for UDP receive-queue drops (SOCKET_RCVBUFF, PROTO_MEM), from udp:udp_fail_queue_rcv_skb just before them"
                    .into(),
            ),
            (_, why) => {
                for r in &mut rings {
                    r.udp_fail = None;
                }
                layout.udp_port = None;
                limits.push(format!(
                    "no ports: udp:udp_fail_queue_rcv_skb {}",
                    why.unwrap_or_else(|| "is not on this kernel (or has no local port)".into())
                ));
            }
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
        Ok((
            PerfDrops {
                layout,
                shared,
                stop,
                thread: Some(thread),
            },
            limits,
        ))
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

    const LAYOUT: Layout = Layout {
        reason: (36, 4),
        location: (16, 8),
        rx_sk: Some((24, 8)),
        udp_port: Some((14, 2)),
    };

    fn kfree_skb(reason: u32, rx_sk: u64) -> Vec<u8> {
        let mut raw = vec![0u8; 40];
        raw[16..24].copy_from_slice(&0xffff_ffff_8200_0000u64.to_ne_bytes());
        raw[24..32].copy_from_slice(&rx_sk.to_ne_bytes());
        raw[36..40].copy_from_slice(&reason.to_ne_bytes());
        raw
    }

    #[test]
    fn a_record_decodes_by_the_format_offsets() {
        let raw = kfree_skb(6, 0);
        let k = decode(&raw, LAYOUT, None).unwrap();
        assert_eq!((k.reason, k.location), (6, 0xffff_ffff_8200_0000));
        assert_eq!(k.port_from, PortFrom::None);
        assert!(decode(&raw[..30], LAYOUT, None).is_none());
    }

    #[test]
    fn a_drop_with_a_socket_right_after_a_queue_failure_has_its_port() {
        let k = decode(&kfree_skb(6, 0xffff_8880_0000_1000), LAYOUT, Some(9000)).unwrap();
        assert_eq!((k.port, k.port_from), (9000, PortFrom::Socket));
        // No receiving socket: not that socket's drop.
        let k = decode(&kfree_skb(3, 0), LAYOUT, Some(9000)).unwrap();
        assert_eq!((k.port, k.port_from), (0, PortFrom::None));
        // A kernel without rx_sk: the event just before is all there is.
        let old = Layout {
            rx_sk: None,
            ..LAYOUT
        };
        let k = decode(&kfree_skb(6, 0), old, Some(53)).unwrap();
        assert_eq!((k.port, k.port_from), (53, PortFrom::Socket));
    }
}
