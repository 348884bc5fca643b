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
        // Symbols are read at the end: a run starts as fast as the watch attaches.
        let namer = Namer::load();
        let mut rows = report::rows(&c, self.watch.format(), &namer, true);
        rows.retain(|r| keep(r));
        let m = self.watch.method();
        let mut notes = m.limits.clone();
        notes.extend(namer.note.clone());
        Ok(Attribution {
            via: m.via.to_string(),
            drops: rows.iter().map(|r| r.count).sum(),
            lines: report::attribution(&rows, 5),
            rows,
            notes,
        })
    }
}
