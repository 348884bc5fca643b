//! `firehose report`: work on the reports other subcommands wrote. `report merge` adds the
//! `load --json` reports of several agents (generators on several machines) into one: a row
//! per agent, a total row, then the summary `firehose load` prints, for the whole.

use crate::args::{thousands, Usage};
use crate::load::print_summary;
use anyhow::Result;
use clap::{Args, Subcommand};
use firehose_load::document::{AgentRow, LoadDocument, LoadRun, LoadSettings, MergedRun};
use firehose_load::merge::{merge, MergeError};
use firehose_load::LoadReport;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Arguments of `firehose report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    command: ReportCommand,
}

#[derive(Debug, Subcommand)]
enum ReportCommand {
    /// Add the `load --json` reports of several agents into one: counts summed, latency
    /// histograms added exactly, tps over the span of all their windows.
    Merge(MergeArgs),
}

/// Arguments of `firehose report merge`.
#[derive(Debug, Args)]
#[command(
    after_help = "Each agent runs `firehose load ... --start-at T --json-file FILE`; gather the files and\n\
merge them. tps is all completions over the span from the earliest agent's start to the\n\
latest one's end, so agents that did not run together are never overstated.\n\n\
EXAMPLES:\n  \
  firehose report merge a.json b.json\n  \
  firehose report merge agent-*.json --json-file merged.json"
)]
struct MergeArgs {
    /// Reports written by `firehose load --json`, one per agent.
    #[arg(required = true, value_name = "REPORT.json")]
    reports: Vec<PathBuf>,
    /// The merged report as JSON: the keys of `load`'s document, plus `agents`.
    #[command(flatten)]
    json: crate::meta::JsonArgs,
}

/// One agent's document as read.
struct Agent {
    source: String,
    run: LoadRun,
}

/// Runs `firehose report`.
pub fn run(a: ReportArgs) -> Result<()> {
    match a.command {
        ReportCommand::Merge(m) => run_merge(m),
    }
}

/// Reads a report `firehose load --json` wrote; anything else is bad input.
fn read_agent(path: &Path) -> Result<Agent> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| Usage(format!("{name}: {e}")))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        Usage(format!(
            "{name} is not JSON ({e}); give files written by `firehose load --json`"
        ))
    })?;
    if v.get("completed").is_none() || v.get("latency_us").is_none() {
        return Err(Usage(format!(
            "{name} is not a load report; give files written by `firehose load --json`"
        ))
        .into());
    }
    if v.get("latency_histogram").is_none() {
        return Err(Usage(format!(
            "{name} has no latency_histogram; rerun that agent with this firehose's `load --json`"
        ))
        .into());
    }
    let doc = LoadDocument::deserialize(&v).map_err(|e| {
        Usage(format!(
            "{name} is not a load report this firehose reads: {e}"
        ))
    })?;
    Ok(Agent {
        source: name.to_string(),
        run: doc.body,
    })
}

fn run_merge(a: MergeArgs) -> Result<()> {
    let mut json = a.json.open()?;
    let agents = a
        .reports
        .iter()
        .map(|p| read_agent(p))
        .collect::<Result<Vec<_>>>()?;
    let reports: Vec<LoadReport> = agents.iter().map(|g| g.run.report.clone()).collect();
    let merged = merge(&reports).map_err(|e| match e {
        MergeError::Histogram { index, source } => Usage(format!(
            "{}: its latency_histogram is unreadable: {source}",
            agents[index].source
        )),
        MergeError::Empty => Usage("give at least one report".into()),
    })?;
    let r = &merged.report;
    let common = agents
        .iter()
        .all(|g| g.run.config == agents[0].run.config)
        .then(|| agents[0].run.config.clone());
    // The agents' common target and mode, if they share one.
    let config_str = |key: &str, field: fn(&LoadSettings) -> &str| {
        let first = field(&agents[0].run.config);
        if agents.iter().all(|g| field(&g.run.config) == first) {
            first.to_string()
        } else {
            format!("({key}s differ)")
        }
    };
    print_table(&agents, r);
    if merged.overlap_s < 0.95 * r.duration_s {
        say!(
            "  note: the agents measured together for {:.2} s of the {:.2} s span; tps is over the span (start them with --start-at)",
            merged.overlap_s,
            r.duration_s
        );
    }
    print_summary(
        &config_str("target", |c| &c.target),
        &config_str("mode", |c| &c.mode),
        None,
        r,
    );
    if json.wanted() {
        let doc = MergedRun {
            report: r.clone(),
            overlap_s: merged.overlap_s,
            config: common,
            environment: None,
            agents: agents
                .iter()
                .map(|g| AgentRow::of(&g.source, &g.run))
                .collect(),
        };
        json.write(&doc)?;
    }
    Ok(())
}

/// A row per agent and a total row; start times relative to the earliest agent's.
fn print_table(agents: &[Agent], total: &LoadReport) {
    let w = agents
        .iter()
        .map(|g| g.source.len())
        .chain([5])
        .max()
        .unwrap_or(5);
    say!(
        "firehose report merge: {} agent(s), {:.2} s from Unix time {:.3}",
        agents.len(),
        total.duration_s,
        total.start_unix
    );
    say!(
        "  {:<w$}  {:>8}  {:>8}  {:>12}  {:>11}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {:>9}",
        "agent",
        "start s",
        "window s",
        "tps",
        "completed",
        "lost",
        "stray",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max us"
    );
    let row = |name: &str, r: &LoadReport| {
        let l = &r.latency_us;
        say!(
            "  {:<w$}  {:>+8.3}  {:>8.2}  {:>12}  {:>11}  {:>8}  {:>8}  {:>8.1}  {:>8.1}  {:>9.1}  {:>9.1}",
            name,
            r.start_unix - total.start_unix,
            r.duration_s,
            thousands(r.tps),
            r.completed,
            r.lost,
            r.stray,
            l.p50,
            l.p99,
            l.p999,
            l.max
        );
    };
    for g in agents {
        row(&g.source, &g.run.report);
    }
    row("total", total);
}
