//! The report of a stream run: per flow, per side, and the ROI figures. Serialises to the
//! JSON `--json` prints and deserialises from the receiver's answer on flow 0.

use crate::cpu::{HostCpu, Power, ProcessCpu};
use firehose_sys::tcp_info::TcpInfo;

/// Zero-copy send counters (MSG_ZEROCOPY or io_uring SEND_ZC).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ZeroCopyCounts {
    /// Zero-copy send calls or requests.
    pub sends: u64,
    /// Completion notifications received (MSG_ZEROCOPY coalesces ranges into one).
    pub notifications: u64,
    /// Sends those notifications released (all of `sends` at the end of a clean run).
    pub completed: u64,
    /// Sends the kernel reported it copied anyway.
    pub copied: u64,
    /// MSG_ZEROCOPY only: ENOBUFS waits (net.core.optmem_max reached).
    pub enobufs: u64,
}

/// TCP_ZEROCOPY_RECEIVE counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MmapCounts {
    /// Bytes mapped instead of copied.
    pub mapped_bytes: u64,
    /// Bytes read with recv because they could not be mapped.
    pub copied_bytes: u64,
    /// getsockopt calls that left bytes to read with recv (the per-chunk fallback).
    pub fallbacks: u64,
    pub calls: u64,
}

/// io_uring receive counters.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UringRecvCounts {
    /// True when one multishot recv with a provided-buffer ring was used.
    pub multishot: bool,
    pub cqes: u64,
    /// Times the receive was armed (1 when multishot never ended early).
    pub arms: u64,
}

/// One flow, one side.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FlowReport {
    pub flow: u32,
    pub bytes: u64,
    pub gbps: f64,
    /// SO_SNDBUF / SO_RCVBUF as granted (the kernel doubles requests).
    pub sndbuf: i32,
    pub rcvbuf: i32,
    /// TCP_MAXSEG read back after connect.
    pub mss: i32,
    pub tcp_info: Option<TcpInfo>,
    pub zerocopy: Option<ZeroCopyCounts>,
    pub mmap: Option<MmapCounts>,
    pub uring_recv: Option<UringRecvCounts>,
}

/// CPU over a side's measured window.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuReport {
    pub process: ProcessCpu,
    /// The CPUs the run used (busy: wall time less /proc/stat idle); includes softirq and
    /// anything else that ran there.
    pub host: Option<HostCpu>,
    /// Process CPU seconds per GB (1e9 bytes) moved.
    pub process_cpu_s_per_gb: f64,
    /// Host CPU seconds per GB, when the host figure exists.
    pub host_cpu_s_per_gb: Option<f64>,
}

/// One side of a run (sender or receiver).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SideReport {
    /// "sender" or "receiver".
    pub role: String,
    pub mode: String,
    pub bytes: u64,
    pub seconds: f64,
    pub gbps: f64,
    pub flows: Vec<FlowReport>,
    pub cpu: CpuReport,
    pub power: Power,
    /// Receiver: every byte matched the pattern. Sender: buffers were rewritten per message.
    pub checked: bool,
    /// Where each flow's thread was pinned (empty: not pinned).
    pub cpus: Vec<usize>,
    /// What the counters say about the path taken (see [`notes`]).
    pub notes: Vec<String>,
}

/// ROI = (Gbit/s)^2 / CPU cores, the Bloomberg talk's throughput-per-CPU figure (n = 2).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Roi {
    /// The throughput used: the receiver's when it answered, else the sender's.
    pub gbps: f64,
    /// Over the sender process's CPU.
    pub sender: Option<f64>,
    /// Over the receiver process's CPU.
    pub receiver: Option<f64>,
    /// Over both processes' CPU.
    pub processes: Option<f64>,
    /// Over the host's busy CPU on the CPUs used (softirq included), as the talk sums CPUs.
    pub host: Option<f64>,
    /// (Gbit/s)^2 / W, only with a measured power figure.
    pub power: Option<f64>,
    /// Why `power` is missing, or where the watts came from.
    pub power_source: String,
}

/// Everything a sender run produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StreamReport {
    pub target: String,
    pub flows: u32,
    pub msg_size: usize,
    pub congestion: String,
    pub sender: SideReport,
    pub receiver: Option<SideReport>,
    /// Why there is no receiver report, if there is none.
    pub receiver_missing: Option<String>,
    pub roi: Roi,
    /// The sender's interval lines.
    #[serde(default)]
    pub intervals: Vec<crate::Interval>,
}

impl StreamReport {
    /// Computes the ROI block from the two sides.
    pub fn compute_roi(sender: &SideReport, receiver: Option<&SideReport>) -> Roi {
        let gbps = receiver.map_or(sender.gbps, |r| r.gbps);
        let s = sender.cpu.process.cores;
        let r = receiver.map(|r| r.cpu.process.cores);
        Roi {
            gbps,
            sender: crate::cpu::roi(gbps, s),
            receiver: r.and_then(|r| crate::cpu::roi(gbps, r)),
            processes: r.and_then(|r| crate::cpu::roi(gbps, s + r)),
            host: sender
                .cpu
                .host
                .as_ref()
                .and_then(|h| crate::cpu::roi(gbps, h.busy)),
            power: sender
                .power
                .watts
                .and_then(|w| (w > 0.0).then(|| gbps * gbps / w)),
            power_source: sender.power.source.clone(),
        }
    }
}

/// Builds a side's CPU block.
pub(crate) fn cpu_report(
    process: ProcessCpu,
    host: Option<HostCpu>,
    bytes: u64,
    secs: f64,
) -> CpuReport {
    let gb = bytes as f64 / 1e9;
    let per_gb = |cores: f64| if gb > 0.0 { cores * secs / gb } else { 0.0 };
    CpuReport {
        process_cpu_s_per_gb: per_gb(process.cores),
        host_cpu_s_per_gb: host.as_ref().map(|h| per_gb(h.busy)),
        process,
        host,
    }
}

/// Plain-language readings of a side's counters, so a reader of a table of Gbit/s knows
/// which path the bytes really took.
pub fn notes(flows: &[FlowReport]) -> Vec<String> {
    let mut out = Vec::new();
    let (mut done, mut copied) = (0, 0);
    for z in flows.iter().filter_map(|f| f.zerocopy.as_ref()) {
        done += z.completed;
        copied += z.copied;
    }
    if done > 0 && copied == done {
        out.push("the kernel copied every zero-copy send: delivery to a local socket (loopback, veth) copies, so zero-copy only adds notifications here".into());
    }
    let (mut mapped, mut fell) = (0, 0);
    let mut mmap = false;
    for m in flows.iter().filter_map(|f| f.mmap.as_ref()) {
        mmap = true;
        mapped += m.mapped_bytes;
        fell += m.copied_bytes;
    }
    if mmap && mapped == 0 && fell > 0 {
        out.push("TCP_ZEROCOPY_RECEIVE mapped nothing: the payload sat in page fragments (a copying sender), so every byte took the recv fallback".into());
    }
    if flows
        .iter()
        .filter_map(|f| f.uring_recv.as_ref())
        .any(|u| !u.multishot)
    {
        out.push(
            "no provided-buffer ring on this kernel: io_uring receive used single-shot RECV".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_read_the_counters() {
        let zc = |completed, copied| FlowReport {
            zerocopy: Some(ZeroCopyCounts {
                sends: completed,
                completed,
                copied,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(notes(&[zc(10, 10)]).len(), 1);
        assert!(notes(&[zc(10, 3)]).is_empty());
        let mm = FlowReport {
            mmap: Some(MmapCounts {
                copied_bytes: 5,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(notes(&[mm])[0].contains("mapped nothing"));
        assert!(notes(&[]).is_empty());
    }
}

/// `firehose stream --target ... --json`: the envelope and a [`SenderRun`].
pub type SenderDocument = firehose_host::document::Document<SenderRun>;

/// `firehose stream --listen ... --json`: the envelope and a [`ReceiverRun`].
pub type ReceiverDocument = firehose_host::document::Document<ReceiverRun>;

/// A sender run as its document records it: both sides' report and the host.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SenderRun {
    #[serde(flatten)]
    pub report: StreamReport,
    /// As root: where the kernel dropped the run's segments (what TCP retransmitted), at
    /// the target's port or of this process's sockets; null without root or with
    /// `--no-drops`.
    pub loss_attribution: Option<firehose_observe::attribution::Attribution>,
    pub environment: firehose_host::env::Environment,
}

/// What a receiver served until it stopped (one entry per sender run) and the host.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReceiverRun {
    pub runs: Vec<SideReport>,
    pub environment: firehose_host::env::Environment,
}
