//! A loss attributed: a drop watch held across a run (a load, a sink), then the drops that
//! concern it, as the one-line form summaries print (`lost 2325: 2325 SOCKET_RCVBUFF at
//! udp_queue_rcv_one_skb, port 9000 (firehose serve pid 123)`) and as rows for the JSON.

use crate::drops::report::{self, DropRow, Namer};
use crate::drops::{Counts, DropWatch, Options, Via};
use crate::error::ObserveError;

/// Which drops concern a run: those at these ports, or of sockets these processes hold.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub ports: Vec<u16>,
    pub pids: Vec<u32>,
}

/// Where a run's packets were dropped.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Attribution {
    /// `bpf` or `perf`.
    pub via: String,
    /// The drops in scope.
    pub drops: u64,
    /// One line per reason, function, port and process, busiest first (at most 5, the rest
    /// summed).
    pub lines: Vec<String>,
    pub rows: Vec<DropRow>,
    /// What the watch could not tell (perf: no ports), and the window it covered.
    pub notes: Vec<String>,
}

/// A drop watch running for the length of a run.
pub struct LossWatch {
    watch: DropWatch,
    before: Counts,
}

impl LossWatch {
    /// Attaches (BPF, else perf); fails without the permission.
    pub fn start() -> Result<LossWatch, ObserveError> {
        let mut watch = DropWatch::start(Options {
            via: Via::Auto,
            prog_stats: false,
        })?;
        let before = watch.counts()?;
        Ok(LossWatch { watch, before })
    }

    /// The drops since start that concern `scope`; detaches the watch.
    pub fn finish(self, scope: &Scope) -> Result<Attribution, ObserveError> {
        self.finish_where(|r| {
            r.port.is_some_and(|p| scope.ports.contains(&p))
                || r.process
                    .as_ref()
                    .is_some_and(|o| scope.pids.contains(&o.pid))
        })
    }

    /// Every drop since start, wherever it was (the doctor's host-wide window).
    pub fn finish_all(self) -> Result<Attribution, ObserveError> {
        self.finish_where(|_| true)
    }

    fn finish_where(
        mut self,
        keep: impl Fn(&DropRow) -> bool,
    ) -> Result<Attribution, ObserveError> {
        let c = self.watch.counts()?.since(&self.before);
        // Symbols are read at the end (a run starts as fast as the watch attaches), and
        // only when a drop concerns the run.
        let (rows, note) = concerning(&c, self.watch.format(), keep, Namer::load);
        let m = self.watch.method();
        let mut notes = m.limits.clone();
        notes.extend(note);
        Ok(Attribution {
            via: m.via.to_string(),
            drops: rows.iter().map(|r| r.count).sum(),
            lines: report::attribution(&rows, 5),
            rows,
            notes,
        })
    }
}

/// The rows of `counts` that `keep` wants, busiest first, their locations named by the
/// namer `load` gives, and its note. /proc/kallsyms is read only when a row is kept: a
/// run that lost nothing (the common case) skips the read, about 70 ms of CPU on a
/// 2-vCPU VM, which counts in the generator's CPU per request (`lab compare`'s client
/// figure is the whole process's CPU).
fn concerning(
    counts: &Counts,
    format: &firehose_host::kernel::tracepoint::Format,
    keep: impl Fn(&DropRow) -> bool,
    load: impl FnOnce() -> Namer,
) -> (Vec<DropRow>, Option<String>) {
    let kept = |namer: &Namer| {
        let mut rows = report::rows(counts, format, namer, true);
        rows.retain(|r| keep(r));
        rows
    };
    let rows = kept(&Namer::none());
    if rows.is_empty() {
        return (rows, None);
    }
    let namer = load();
    (kept(&namer), namer.note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_sys::trace::prog::{DropKey, PortFrom};
    use std::cell::Cell;

    fn format() -> firehose_host::kernel::tracepoint::Format {
        firehose_host::kernel::tracepoint::parse(
            "name: kfree_skb\nformat:\n\tfield:enum skb_drop_reason reason;\toffset:36;\tsize:4;\tsigned:0;\n\nprint fmt: \"%s\", __print_symbolic(REC->reason, { 6, \"SOCKET_RCVBUFF\" })\n",
        )
        .unwrap()
    }

    fn counts() -> Counts {
        let mut c = Counts::default();
        let key = DropKey {
            reason: 6,
            port: 9000,
            port_from: PortFrom::Socket,
            ip_proto: 17,
            location: 0x10,
            ino: 0,
            netns: 7,
        };
        c.by_key.insert(key, 25);
        c
    }

    /// Drops elsewhere on the host (another port) leave kallsyms unread; a drop at the
    /// run's port has it read once, and its rows named by it.
    #[test]
    fn kallsyms_is_read_only_when_a_drop_concerns_the_run() {
        let loads = Cell::new(0);
        let load = || {
            loads.set(loads.get() + 1);
            Namer::none()
        };
        let (rows, note) = concerning(&counts(), &format(), |r| r.port == Some(9001), load);
        assert!(rows.is_empty() && note.is_none());
        assert_eq!(loads.get(), 0, "kallsyms read for a run that lost nothing");
        let (rows, _) = concerning(&counts(), &format(), |r| r.port == Some(9000), load);
        assert_eq!(loads.get(), 1);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].count, rows[0].reason.as_str()),
            (25, "SOCKET_RCVBUFF")
        );
    }
}
