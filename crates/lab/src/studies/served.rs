//! What the request/response comparisons against a peer server share (`compare --proto
//! radius`, `--proto ntp`): a trial's figures per request from the CPU seconds of one
//! generator run, and the page (the table, the ratios, the notes, what was skipped).

use crate::report::page::{Block, Column, List, Page, Table, TextList, TextTable};
use crate::study::Skipped;
use serde::Serialize;

/// What a trial's figures per request are computed from.
pub trait Costs {
    /// Requests completed (answered and validated).
    fn completed(&self) -> u64;
    /// CPU seconds over the generator's run: the server's, the whole host's busy time, the
    /// generator's own; and the run's wall time.
    fn seconds(&self) -> (f64, f64, f64, f64);
}

/// The figures of one trial: what was measured, and per request.
#[derive(Debug, Clone, Serialize)]
pub struct PerRequest<M> {
    #[serde(flatten)]
    pub measured: M,
    pub server_cpu_us_per_req: Option<f64>,
    pub host_cpu_us_per_req: Option<f64>,
    pub client_cpu_us_per_req: Option<f64>,
    /// CPUs busy (1.0 = one CPU): the server's and the generator's.
    pub server_util: f64,
    pub client_util: f64,
}

/// `m`'s CPU per request (none without a completed request) and utilisation.
pub fn per_request<M: Costs>(m: M) -> PerRequest<M> {
    let n = m.completed();
    let (server_s, host_s, client_s, wall_s) = m.seconds();
    let per_req = |secs: f64| (n > 0).then(|| secs * 1e6 / n as f64);
    let util = |secs: f64| if wall_s > 0.0 { secs / wall_s } else { 0.0 };
    PerRequest {
        server_cpu_us_per_req: per_req(server_s),
        host_cpu_us_per_req: per_req(host_s),
        client_cpu_us_per_req: per_req(client_s),
        server_util: util(server_s),
        client_util: util(client_s),
        measured: m,
    }
}

/// A comparison's page: the preamble, the table (`columns`: header, width on the terminal,
/// left-aligned), then the ratios, the notes and what was skipped.
pub fn page(
    title: &str,
    preamble: Vec<String>,
    columns: &[(&str, usize, bool)],
    rows: Vec<Vec<String>>,
    ratios: Vec<String>,
    notes: &[String],
    skipped: &[Skipped],
) -> Page {
    let table = Table {
        title: None,
        columns: Column::fixed_all(columns),
        rows,
        dim: Vec::new(),
        text: TextTable::Padded {
            gap: 1,
            blank_before: false,
        },
    };
    let list = |title: &str, items: Vec<String>, prefix: &str| {
        Block::List(List {
            title: title.into(),
            items,
            text: TextList::prefixed(prefix),
        })
    };
    Page {
        title: title.into(),
        preamble,
        blocks: vec![
            Block::Table(table),
            list("Ratios", ratios, ""),
            list("Notes", notes.to_vec(), "note: "),
            list(
                "Skipped",
                skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.name, s.reason))
                    .collect(),
                "skipped: ",
            ),
        ],
    }
}
