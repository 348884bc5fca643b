//! What `firehose load --json` writes ([`LoadDocument`]) and what `firehose report merge`
//! writes from several of them ([`MergedDocument`]), as types every reader parses into: a
//! missing field is an error, never 0 (docs/json.md).

use crate::report::{LoadReport, Summary};
use firehose_host::document::{required, Document};
use firehose_host::env::Environment;
use firehose_observe::attribution::Attribution;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `firehose load --json`.
pub type LoadDocument = Document<LoadRun>;

/// `firehose report merge --json`.
pub type MergedDocument = Document<MergedRun>;

/// A load run: its figures, its settings, the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRun {
    #[serde(flatten)]
    pub report: LoadReport,
    pub config: LoadSettings,
    /// Where the kernel dropped packets of this run (null without root or with `--no-drops`).
    #[serde(deserialize_with = "required")]
    pub loss_attribution: Option<Attribution>,
    pub environment: Environment,
}

/// A run's settings, as the document records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSettings {
    pub target: String,
    /// "echo" or "dns".
    pub proto: String,
    /// "closed" or "open" (with a rate).
    pub mode: String,
    pub flows: usize,
    pub window: usize,
    #[serde(deserialize_with = "required")]
    pub rate: Option<f64>,
    pub threads: usize,
    #[serde(deserialize_with = "required")]
    pub cpus: Option<Vec<usize>>,
    /// Request payload bytes; only echo has a fixed size (DNS queries vary with the name).
    #[serde(deserialize_with = "required")]
    pub size: Option<usize>,
    #[serde(deserialize_with = "required")]
    pub queries: Option<String>,
    pub timeout_s: f64,
    pub warmup_s: f64,
    pub batch: usize,
    /// Open loop, sleeping between wake-ups: requests per wake-up in force (`--per-wake`,
    /// or the wake-up budget's choice); null in closed loop or with `--spin`.
    #[serde(deserialize_with = "required")]
    pub per_wake: Option<usize>,
    /// The wake-up period those requests share, in µs; null where `per_wake` is.
    #[serde(default)]
    pub wake_period_us: Option<f64>,
    pub spin: bool,
    pub gso: bool,
    /// Latency taken apart by kernel timestamps (`--stamps`).
    pub stamps: bool,
    /// Open loop: the schedule's shape ("uniform", "poisson", "burst:N"); null in closed loop.
    #[serde(deserialize_with = "required")]
    pub arrivals: Option<String>,
    /// "socket", "xdp" or "uring".
    pub io: String,
    /// What the kernel granted for `--io xdp` (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<BTreeMap<String, String>>,
}

/// Several agents' runs added into one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedRun {
    #[serde(flatten)]
    pub report: LoadReport,
    /// Seconds all agents measured at once.
    pub overlap_s: f64,
    /// The agents' common settings, when they all ran with the same (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<LoadSettings>,
    /// Null: the load ran on the agents, not here; each agent's is in its row.
    #[serde(deserialize_with = "required")]
    pub environment: Option<Environment>,
    pub agents: Vec<AgentRow>,
}

/// One agent's row in a [`MergedRun`]: its summary as its own document gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRow {
    /// The file the agent's document was read from.
    pub source: String,
    #[serde(flatten)]
    pub summary: Summary,
    pub config: LoadSettings,
    pub environment: Environment,
}

impl AgentRow {
    /// The row of the agent whose document `source` held `run`.
    pub fn of(source: &str, run: &LoadRun) -> AgentRow {
        AgentRow {
            source: source.to_string(),
            summary: run.report.summary.clone(),
            config: run.config.clone(),
            environment: run.environment.clone(),
        }
    }
}
