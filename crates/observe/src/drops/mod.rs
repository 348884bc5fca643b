//! `firehose drops`: every skb the kernel frees as dropped (`skb:kfree_skb`), counted by
//! reason, kernel location, and where it can tell, port, socket, network namespace and
//! process.
//!
//! Two ways to count, chosen once at start: a BPF program on the tracepoint that counts in
//! per-CPU maps ([`bpf`]; nothing leaves the kernel per drop), or where BPF is refused, perf
//! sampling of every hit into per-CPU rings decoded here ([`perf`]; reason and location,
//! the port of UDP receive-queue drops only, and a ring that overflows says how many it
//! lost). Reason names come from the
//! tracepoint's `format` file, so a kernel that adds reasons needs no code change; locations
//! are named with /proc/kallsyms ([`report`]).

pub mod bpf;
pub mod perf;
pub mod report;

use crate::error::ObserveError;
use firehose_host::kernel::tracepoint::{self, Format};
use firehose_sys::trace::prog::DropKey;
use firehose_sys::trace::tracefs::TraceFs;
use std::collections::BTreeMap;

/// How to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// BPF, else perf.
    Auto,
    Bpf,
    Perf,
}

/// What the watch asked of the kernel, for the report's first line and the JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Method {
    /// `bpf` or `perf`.
    pub via: &'static str,
    /// Where tracefs was read.
    pub tracefs: String,
    /// Why BPF was not used, when perf was chosen by `Auto`.
    pub bpf_refused: Option<String>,
    /// What this way of counting cannot tell (no BTF, an older tracepoint, perf).
    pub limits: Vec<String>,
}

/// Cumulative counts since the watch started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub by_key: BTreeMap<DropKey, u64>,
    /// Drops counted but not by key: the BPF map was full.
    pub unkeyed: u64,
    /// Drops the perf rings could not hold (perf only).
    pub lost: u64,
    /// Tracepoint hits the kernel did not run the program for (another BPF program was
    /// running on that CPU), as it reports them.
    pub missed: u64,
}

impl Counts {
    /// Every drop seen, keyed or not (lost and missed ones are not seen).
    pub fn total(&self) -> u64 {
        self.by_key.values().sum::<u64>() + self.unkeyed
    }

    /// The counts since `earlier` (a snapshot of the same watch).
    pub fn since(&self, earlier: &Counts) -> Counts {
        let by_key = self
            .by_key
            .iter()
            .filter_map(|(k, v)| {
                let d = v.saturating_sub(earlier.by_key.get(k).copied().unwrap_or(0));
                (d > 0).then_some((*k, d))
            })
            .collect();
        Counts {
            by_key,
            unkeyed: self.unkeyed.saturating_sub(earlier.unkeyed),
            lost: self.lost.saturating_sub(earlier.lost),
            missed: self.missed.saturating_sub(earlier.missed),
        }
    }
}

enum Backend {
    Bpf(bpf::BpfDrops),
    Perf(perf::PerfDrops),
}

/// A running watch of `skb:kfree_skb`; stops (and leaves nothing attached) when dropped.
pub struct DropWatch {
    backend: Backend,
    format: Format,
    method: Method,
}

/// Options of a watch.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub via: Via,
    /// Keep BPF run-time statistics on while the watch runs (the program's own cost).
    pub prog_stats: bool,
}

const NEEDS_TRACEFS: &str =
    "CAP_SYS_ADMIN (root) to mount tracefs, which is not mounted on this host";
const NEEDS_BPF: &str = "CAP_BPF and CAP_PERFMON (or root) for BPF";
const NEEDS_PERF: &str = "CAP_PERFMON (or root), or kernel.perf_event_paranoid=-1, for perf";

impl DropWatch {
    /// Starts counting.
    pub fn start(opts: Options) -> Result<DropWatch, ObserveError> {
        let tracefs = TraceFs::open().map_err(|e| {
            let needs = if e.what.starts_with("fsopen") {
                NEEDS_TRACEFS
            } else {
                "root: tracefs is readable by root only"
            };
            ObserveError::from_sys(e, needs)
        })?;
        let text = tracefs
            .format("skb", "kfree_skb")
            .map_err(|e| match e.errno() {
                Some(2) => ObserveError::Unsupported(
                    "this kernel has no skb:kfree_skb tracepoint (tracefs events/skb/kfree_skb)"
                        .into(),
                ),
                _ => ObserveError::from_sys(e, "read access to tracefs (root)"),
            })?;
        let format = tracepoint::parse(&text)
            .map_err(|e| ObserveError::Parse(format!("skb:kfree_skb format: {e}")))?;
        for need in ["reason", "location", "skbaddr"] {
            if format.field(need).is_none() {
                return Err(ObserveError::Unsupported(format!(
                    "skb:kfree_skb has no `{need}` field on this kernel (drop reasons need 5.17 or newer)"
                )));
            }
        }
        let id = match format.id {
            Some(id) => id,
            None => tracefs.id("skb", "kfree_skb")?,
        };
        let tracefs_at = tracefs.source().to_string();
        let mut bpf_refused = None;
        if opts.via != Via::Perf {
            match bpf::BpfDrops::start(&format, id, opts.prog_stats) {
                Ok((b, limits)) => {
                    return Ok(DropWatch {
                        backend: Backend::Bpf(b),
                        format,
                        method: Method {
                            via: "bpf",
                            tracefs: tracefs_at,
                            bpf_refused: None,
                            limits,
                        },
                    })
                }
                Err(e) if opts.via == Via::Auto && e.is_permission() => {
                    bpf_refused = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        let (p, limits) =
            perf::PerfDrops::start(&format, id).map_err(|e| match (&bpf_refused, e) {
                (Some(b), ObserveError::Permission { what, needs }) => ObserveError::Permission {
                    what: format!("BPF refused ({b}) and perf refused ({what})"),
                    needs,
                },
                (_, e) => e,
            })?;
        Ok(DropWatch {
            backend: Backend::Perf(p),
            format,
            method: Method {
                via: "perf",
                tracefs: tracefs_at,
                bpf_refused,
                limits,
            },
        })
    }

    /// How the watch counts.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The tracepoint's format (reason names).
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// The counts so far.
    pub fn counts(&mut self) -> Result<Counts, ObserveError> {
        match &mut self.backend {
            Backend::Bpf(b) => b.counts(),
            Backend::Perf(p) => Ok(p.counts()),
        }
    }

    /// The BPF program's id and cost so far (run count and time need `prog_stats`).
    pub fn prog_stats(&self) -> Option<firehose_sys::trace::ProgStats> {
        match &self.backend {
            Backend::Bpf(b) => b.stats(),
            Backend::Perf(_) => None,
        }
    }
}

pub(crate) const NEEDS: [&str; 3] = [NEEDS_TRACEFS, NEEDS_BPF, NEEDS_PERF];
