//! One watch of everything `firehose drops` reports, from start to report: the drop
//! tracepoint, the XDP error tracepoints and the host's loss counters, subtracted over the
//! window and joined into one [`Report`].

use crate::counters::{self, Delta, Snapshot};
use crate::drops::report::{self, DropRow, Namer};
use crate::drops::{Counts, DropWatch, Method, Options as DropOptions, Via};
use crate::error::ObserveError;
use crate::xdp::{XdpErrorRow, XdpWatch};
use std::time::Instant;

/// What to watch.
#[derive(Debug, Clone)]
pub struct Options {
    pub via: Via,
    /// Keep BPF run-time statistics on (the drop program's own cost per run).
    pub prog_stats: bool,
    /// Interfaces whose counters are read (empty: all of this namespace).
    pub ifaces: Vec<String>,
}

/// Which drops a report keeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter {
    pub port: Option<u16>,
    /// A network namespace's inode.
    pub netns: Option<u32>,
}

/// The drop program's cost over the window (with `prog_stats`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProgCost {
    pub id: u32,
    pub runs: u64,
    pub run_time_ns: u64,
    pub ns_per_run: Option<f64>,
}

/// Everything seen over one window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub seconds: f64,
    pub method: Method,
    /// Drops the filter kept.
    pub drops: u64,
    /// Drops host-wide (every reason, port and namespace).
    pub drops_all: u64,
    /// Drops counted without a key (the map was full).
    pub unkeyed: u64,
    /// Drops the perf rings lost (perf only).
    pub lost: u64,
    /// Tracepoint hits the kernel skipped (another BPF program running on that CPU).
    pub missed: u64,
    pub rows: Vec<DropRow>,
    /// The drops in one line each, as summaries print them.
    pub attribution: Vec<String>,
    pub program: Option<ProgCost>,
    pub xdp_errors: Vec<XdpErrorRow>,
    pub counters: Delta,
    pub notes: Vec<String>,
}

/// A running watch; detaches everything when dropped.
pub struct Session {
    drops: DropWatch,
    xdp: Option<XdpWatch>,
    ifaces: Vec<String>,
    before: Snapshot,
    drops_before: Counts,
    xdp_before: Vec<XdpErrorRow>,
    prog_before: Option<firehose_sys::trace::ProgStats>,
    prog_stats: bool,
    started: Instant,
    namer: Namer,
    notes: Vec<String>,
}

fn xdp_key(r: &XdpErrorRow) -> (&'static str, u32, &str, u32, Option<i32>) {
    (r.event, r.prog_id, &r.action, r.ifindex, r.errno)
}

impl Session {
    /// Attaches and takes the first readings.
    pub fn start(opts: &Options) -> Result<Session, ObserveError> {
        let mut drops = DropWatch::start(DropOptions {
            via: opts.via,
            prog_stats: opts.prog_stats,
        })?;
        let mut notes = Vec::new();
        let xdp = if drops.method().via == "bpf" {
            let fs = firehose_sys::trace::tracefs::TraceFs::open()?;
            match XdpWatch::start(&fs) {
                Ok(x) => {
                    for e in &x.absent {
                        notes.push(format!("this kernel has no xdp:{e} tracepoint"));
                    }
                    Some(x)
                }
                Err(e) => {
                    notes.push(format!("XDP errors not counted: {e}"));
                    None
                }
            }
        } else {
            notes.push("XDP errors are counted on the BPF path only".into());
            None
        };
        let namer = Namer::load();
        notes.extend(namer.note.clone());
        let before = counters::read(&opts.ifaces);
        let drops_before = drops.counts()?;
        let xdp_before = match &xdp {
            Some(x) => x.rows()?,
            None => Vec::new(),
        };
        Ok(Session {
            prog_before: drops.prog_stats(),
            prog_stats: opts.prog_stats,
            drops,
            xdp,
            ifaces: opts.ifaces.clone(),
            before,
            drops_before,
            xdp_before,
            started: Instant::now(),
            namer,
            notes,
        })
    }

    /// How drops are counted.
    pub fn method(&self) -> &Method {
        self.drops.method()
    }

    /// What happened since start, kept by `filter`; `owners` looks up sockets' processes.
    pub fn report(
        &mut self,
        filter: Filter,
        owners: bool,
        limit: usize,
    ) -> Result<Report, ObserveError> {
        let c = self.drops.counts()?.since(&self.drops_before);
        let after = counters::read(&self.ifaces);
        let seconds = self.started.elapsed().as_secs_f64();
        let mut rows = report::rows(&c, self.drops.format(), &self.namer, owners);
        report::filter(&mut rows, filter.port, filter.netns);
        let kept: u64 = rows.iter().map(|r| r.count).sum();
        let attribution = report::attribution(&rows, limit);
        let xdp_errors = match &self.xdp {
            Some(x) => x
                .rows()?
                .into_iter()
                .filter_map(|mut r| {
                    let old = self
                        .xdp_before
                        .iter()
                        .find(|o| xdp_key(o) == xdp_key(&r))
                        .map_or(0, |o| o.count);
                    r.count = r.count.saturating_sub(old);
                    (r.count > 0).then_some(r)
                })
                .collect(),
            None => Vec::new(),
        };
        let program = self
            .drops
            .prog_stats()
            .filter(|_| self.prog_stats)
            .map(|s| {
                let b = self.prog_before.unwrap_or_default();
                let runs = s.run_cnt.saturating_sub(b.run_cnt);
                let ns = s.run_time_ns.saturating_sub(b.run_time_ns);
                ProgCost {
                    id: s.id,
                    runs,
                    run_time_ns: ns,
                    ns_per_run: (runs > 0).then(|| ns as f64 / runs as f64),
                }
            });
        let mut notes = self.notes.clone();
        notes.extend(self.drops.method().limits.iter().cloned());
        notes.extend(after.notes.iter().cloned());
        notes.dedup();
        Ok(Report {
            seconds,
            method: self.drops.method().clone(),
            drops: kept,
            drops_all: c.total(),
            unkeyed: c.unkeyed,
            lost: c.lost,
            missed: c.missed,
            rows,
            attribution,
            program,
            xdp_errors,
            counters: after.since(&self.before),
            notes,
        })
    }
}
