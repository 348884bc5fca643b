//! XDP errors: `xdp:xdp_exception` (a program returned XDP_ABORTED or an invalid action, or
//! a driver could not carry out its verdict) and `xdp:xdp_redirect_err` (a redirect that
//! failed, with its errno), counted by a BPF program per tracepoint with the fields named
//! in its format. A kernel without one of them simply has nothing to count there.

use crate::error::ObserveError;
use firehose_host::kernel::tracepoint::{self, Format};
use firehose_sys::bpf_map::{MapKind, PerCpuMap};
use firehose_sys::trace::perf::{attach_tracepoint, TracepointLink};
use firehose_sys::trace::prog::{self, Field};
use firehose_sys::trace::tracefs::TraceFs;
use firehose_sys::trace::{self as systrace, TraceProg};
use std::os::fd::AsRawFd;

/// The tracepoints and the fields counted by.
const EVENTS: [(&str, &[&str]); 2] = [
    ("xdp_exception", &["prog_id", "act", "ifindex"]),
    ("xdp_redirect_err", &["prog_id", "act", "ifindex", "err"]),
];

struct Counter {
    event: &'static str,
    format: Format,
    fields: &'static [&'static str],
    map: PerCpuMap,
    overflow: PerCpuMap,
    _prog: TraceProg,
    _link: TracepointLink,
}

/// One (event, program, action, interface, error) and its count.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct XdpErrorRow {
    /// `xdp_exception` or `xdp_redirect_err`.
    pub event: &'static str,
    pub prog_id: u32,
    /// `ABORTED`, `DROP`, ... as the format names the action.
    pub action: String,
    pub ifindex: u32,
    /// The interface's name in this namespace, when it has one here.
    pub iface: Option<String>,
    /// For a redirect error, the errno (positive).
    pub errno: Option<i32>,
    pub count: u64,
}

/// Counters on the XDP error tracepoints; detached when dropped.
pub struct XdpWatch {
    counters: Vec<Counter>,
    /// Tracepoints this kernel lacks.
    pub absent: Vec<&'static str>,
}

impl XdpWatch {
    /// Attaches a counter to each XDP error tracepoint the kernel has.
    pub fn start(fs: &TraceFs) -> Result<XdpWatch, ObserveError> {
        let needs = "CAP_BPF and CAP_PERFMON (or root) for BPF";
        let mut counters = Vec::new();
        let mut absent = Vec::new();
        for (event, names) in EVENTS {
            let Ok(text) = fs.format("xdp", event) else {
                absent.push(event);
                continue;
            };
            let format = tracepoint::parse(&text)
                .map_err(|e| ObserveError::Parse(format!("xdp:{event} format: {e}")))?;
            let mut fields = Vec::new();
            for n in names {
                let d = format.field(n).ok_or_else(|| {
                    ObserveError::Unsupported(format!("xdp:{event} has no `{n}` field"))
                })?;
                fields.push(Field {
                    offset: d.offset,
                    size: d.size.min(8) as u8,
                });
            }
            let id = match format.id {
                Some(id) => id,
                None => fs.id("xdp", event)?,
            };
            let map = PerCpuMap::new(MapKind::PerCpuHash, 8 * fields.len(), 1024, "fh_xdp_err")
                .map_err(|e| ObserveError::from_sys(e, needs))?;
            let overflow = PerCpuMap::new(MapKind::PerCpuArray, 4, 1, "fh_xdp_err_full")
                .map_err(|e| ObserveError::from_sys(e, needs))?;
            let insns = prog::fields(&fields, map.as_raw_fd(), overflow.as_raw_fd());
            let p = systrace::load(&insns, "fh_xdp_err")
                .map_err(|e| ObserveError::from_sys(e, needs))?;
            let link = attach_tracepoint(p.as_raw_fd(), id, &format!("xdp:{event}"))
                .map_err(|e| ObserveError::from_sys(e, needs))?;
            counters.push(Counter {
                event,
                format,
                fields: names,
                map,
                overflow,
                _prog: p,
                _link: link,
            });
        }
        Ok(XdpWatch { counters, absent })
    }

    /// Every error counted so far (cumulative).
    pub fn rows(&self) -> Result<Vec<XdpErrorRow>, ObserveError> {
        let mut out = Vec::new();
        for c in &self.counters {
            for (key, count) in c.map.sums()? {
                let v = |name: &str| {
                    let i = c.fields.iter().position(|f| *f == name)?;
                    Some(u64::from_ne_bytes(
                        key.get(8 * i..8 * i + 8)?.try_into().ok()?,
                    ))
                };
                let act = v("act").unwrap_or(0) as u32;
                let ifindex = v("ifindex").unwrap_or(0) as u32;
                out.push(XdpErrorRow {
                    event: c.event,
                    prog_id: v("prog_id").unwrap_or(0) as u32,
                    action: c
                        .format
                        .symbol("act", act as i64)
                        .map_or_else(|| format!("action {act}"), str::to_string),
                    ifindex,
                    iface: iface_name(ifindex),
                    errno: v("err").map(|e| -(e as u32 as i32)),
                    count,
                });
            }
            let full = c.overflow.sum(&0u32.to_ne_bytes())?;
            if full > 0 {
                out.push(XdpErrorRow {
                    event: c.event,
                    prog_id: 0,
                    action: "(map full: not keyed)".into(),
                    ifindex: 0,
                    iface: None,
                    errno: None,
                    count: full,
                });
            }
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.count));
        Ok(out)
    }
}

/// The name of interface `ifindex` in this namespace (/sys/class/net/*/ifindex).
pub fn iface_name(ifindex: u32) -> Option<String> {
    if ifindex == 0 {
        return None;
    }
    std::fs::read_dir("/sys/class/net")
        .ok()?
        .flatten()
        .find_map(|e| {
            let n = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
            (n.trim().parse::<u32>().ok()? == ifindex)
                .then(|| e.file_name().to_string_lossy().into())
        })
}
