//! The one experiment framework. A study is a plan of cells (configurations to measure),
//! one trial of a cell, the figures of a trial from what it measured (the host sampled at
//! both edges of its window, and what its children counted), and the rows and page of its
//! report. [`run`] is the one repetition loop every study goes through: it makes the run's
//! [`Lab`] (work directory, test host, placement, stop flag), runs every cell R times,
//! interleaved (A B C A B C ...) so slow drifts of a shared host hit every cell alike,
//! reports progress through a callback (the binary decides how to print it), tears the test
//! host down whatever happened, and hands back what ran for the study to summarise.
//!
//! Adding a study: implement [`Study`] in a module of `crates/lab/src/studies/`, start its
//! programs through `crates/lab/src/peers/`, and give the cli a subcommand that builds it
//! and calls `run` (docs/lab.md, "Adding a study").

use crate::env::Environment;
use crate::loss::LossAttribution;
use crate::proc::{self, Proc};
use crate::report::page::{Block, List, TextList};
use crate::report::Page;
use crate::topology::{Side, Topology};
use crate::workdir::WorkDir;
use crate::{LabError, LabResult};
use firehose_sys::cpu::CpuSet;
pub use own_cpus::OffServer;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Where each side runs. The two sets are disjoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    pub server_cpus: Vec<usize>,
    pub client_cpus: Vec<usize>,
}

impl Placement {
    /// Checks an explicit placement against the CPUs this process may use.
    pub fn new(server: Vec<usize>, client: Vec<usize>, allowed: &[usize]) -> LabResult<Self> {
        if let Some(c) = server.iter().find(|c| client.contains(c)) {
            return Err(LabError::Usage(format!(
                "CPU {c} is in both --server-cpus and --client-cpus: give each side its own CPUs"
            )));
        }
        if let Some(c) = server.iter().chain(&client).find(|c| !allowed.contains(c)) {
            return Err(LabError::Usage(format!(
                "CPU {c} is not available here (allowed: {}): pick CPUs from that list",
                CpuSet::from(allowed)
            )));
        }
        Ok(Placement {
            server_cpus: server,
            client_cpus: client,
        })
    }

    /// The default: the first half of the allowed CPUs for the server (at least one), the
    /// rest for the client. On 2 CPUs: server on the first, client on the second.
    pub fn split(allowed: &[usize]) -> LabResult<Self> {
        if allowed.len() < 2 {
            return Err(LabError::Usage(format!(
                "the lab needs at least 2 CPUs to keep server and client apart; this process may use {}",
                CpuSet::from(allowed)
            )));
        }
        let half = allowed.len() / 2;
        Ok(Placement {
            server_cpus: allowed[..half].to_vec(),
            client_cpus: allowed[half..].to_vec(),
        })
    }

    /// The server and client CPUs: as given, or the allowed CPUs split in two halves.
    pub fn resolve(
        server: Option<Vec<usize>>,
        client: Option<Vec<usize>>,
        allowed: &[usize],
    ) -> LabResult<Placement> {
        if server.is_none() && client.is_none() {
            return Placement::split(allowed);
        }
        let server = match server {
            Some(s) => s,
            None => Placement::split(allowed)
                .map(|p| p.server_cpus)
                .unwrap_or_default(),
        };
        let client = match client {
            Some(c) => c,
            None => allowed
                .iter()
                .copied()
                .filter(|x| !server.contains(x))
                .collect(),
        };
        if server.is_empty() || client.is_empty() {
            return Err(LabError::Usage(
                "give both --server-cpus and --client-cpus: one side has no CPU left".into(),
            ));
        }
        Placement::new(server, client, allowed)
    }
}

/// What a study measures, and how its trials become a report.
pub trait Study {
    /// One configuration to measure.
    type Cell: Clone + Serialize;
    /// What one trial saw: host samples and the children's counts, before any arithmetic.
    type Measured;
    /// The figures of one trial.
    type Trial: Clone + Serialize;
    /// One cell over its repetitions (medians with min-max).
    type Row: Serialize;

    /// The study's name in messages, file names and reports ("sink", "compare --io").
    fn name(&self) -> String;

    /// The cells to run and those left out, with the reason. Called once, before any
    /// trial; this is where a study builds its test host (`lab.topo`) and writes the files
    /// its trials share (a zone, a query file) into `lab.workdir`.
    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Self::Cell>>;

    /// The name of a cell in progress lines, log files and rows.
    fn cell_name(&self, cell: &Self::Cell) -> String;

    /// How the repetitions are ordered.
    fn order(&self) -> Order {
        Order::Interleaved
    }

    /// Consecutive cells of one group share a setting made once before the first of them
    /// ([`Study::enter`]) and undone after the last ([`Study::leave`]): link settings, a
    /// server that several generators drive, a queue count. `None`: no group.
    fn group(&self, _cell: &Self::Cell) -> Option<String> {
        None
    }

    /// Makes the setting of `cell`'s group; `Some(why)` when the kernel or a peer refuses
    /// it (the group's cells are then not measured, this repetition and after).
    fn enter(&mut self, _lab: &mut Lab<'_>, _cell: &Self::Cell) -> LabResult<Option<String>> {
        Ok(None)
    }

    /// Undoes the setting of the group entered last; called on failure and interruption too.
    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        Ok(())
    }

    /// Runs one trial of `cell` (repetition `rep`, from 0).
    fn trial(
        &mut self,
        lab: &mut Lab<'_>,
        cell: &Self::Cell,
        rep: usize,
    ) -> LabResult<Outcome<Self::Measured>>;

    /// The figures of a trial from what it measured: pure arithmetic, so every study's
    /// figures are tested on made-up samples.
    fn metrics(&self, cell: &Self::Cell, measured: Self::Measured) -> Self::Trial;

    /// With [`Order::InTurn`]: after a cell's repetitions, may change the cells not run yet
    /// (the ladder leaves a step that hurt out of every later step) and skip some.
    fn revise(
        &mut self,
        _done: &CellRun<Self::Cell, Self::Trial>,
        _rest: &mut Vec<Self::Cell>,
        _skipped: &mut Vec<Skipped>,
    ) {
    }

    /// After every repetition, still on the test host (lab sink's perf profile per mode).
    fn finish(
        &mut self,
        _lab: &mut Lab<'_>,
        _ran: &Ran<Self::Cell, Self::Trial>,
        _progress: &mut dyn FnMut(Event<'_>),
    ) -> LabResult<()> {
        Ok(())
    }

    /// The rows of the report, one per cell (or per what the study compares).
    fn rows(&self, ran: &Ran<Self::Cell, Self::Trial>) -> Vec<Self::Row>;

    /// The report as a page: preamble, tables, lists, charts (text, Markdown and HTML are
    /// all rendered from it).
    fn page(&self, ran: &Ran<Self::Cell, Self::Trial>, rows: &[Self::Row]) -> Page;

    /// Where a trial's loss went, as the `firehose load` or `firehose sink` it ran
    /// attributed it (as root): [`page`] and [`document`] carry it for every study.
    fn loss<'t>(&self, _trial: &'t Self::Trial) -> Option<&'t LossAttribution> {
        None
    }

    /// Fields of the JSON document beside those every study writes ([`document`]): the
    /// study's settings, targets, ratios.
    fn extra(
        &self,
        _ran: &Ran<Self::Cell, Self::Trial>,
        _rows: &[Self::Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
}

/// The JSON document of a run: the study, when and where it ran (environment, load
/// average at both ends, steal, placement), the repetitions, the rows, every cell with its
/// trials (and why a cell was not measured, or which trials failed), what was skipped, the
/// notes, and the study's own fields.
pub fn document<S: Study>(
    study: &S,
    ran: &Ran<S::Cell, S::Trial>,
    rows: &[S::Row],
) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: serde_json::Result<serde_json::Value>| {
        m.insert(k.into(), v.unwrap_or(serde_json::Value::Null));
    };
    put("study", serde_json::to_value(study.name()));
    put("started_unix", serde_json::to_value(ran.started_unix));
    put("environment", serde_json::to_value(&ran.environment));
    put(
        "load_average_after",
        serde_json::to_value(ran.load_after.trim()),
    );
    put("steal_pct", serde_json::to_value(ran.steal_pct));
    put("placement", serde_json::to_value(&ran.placement));
    put("repetitions", serde_json::to_value(ran.repetitions));
    put("rows", serde_json::to_value(rows));
    put("cells", serde_json::to_value(&ran.cells));
    // Every trial, in plan order: its cell's name, its repetition, its figures.
    let trials: Vec<serde_json::Value> = ran
        .cells
        .iter()
        .flat_map(|c| {
            c.trials.iter().zip(&c.reps).map(|(t, rep)| {
                let mut v = serde_json::json!({"cell": c.name, "repetition": rep});
                if let (Some(o), Ok(serde_json::Value::Object(f))) =
                    (v.as_object_mut(), serde_json::to_value(t))
                {
                    o.extend(f);
                }
                v
            })
        })
        .collect();
    put("trials", Ok(serde_json::Value::Array(trials)));
    put("skipped", serde_json::to_value(&ran.skipped));
    put("notes", serde_json::to_value(&ran.notes));
    let losses: Vec<serde_json::Value> = losses(study, ran)
        .into_iter()
        .map(|(cell, rep, a)| {
            let mut v = serde_json::json!({"cell": cell, "repetition": rep});
            if let (Some(o), Ok(serde_json::Value::Object(f))) =
                (v.as_object_mut(), serde_json::to_value(a))
            {
                o.extend(f);
            }
            v
        })
        .collect();
    put("loss_attribution", Ok(serde_json::Value::Array(losses)));
    m.extend(study.extra(ran, rows));
    serde_json::Value::Object(m)
}

/// Every trial's loss attribution, in plan order: its cell's name, its repetition.
pub fn losses<'r, S: Study>(
    study: &S,
    ran: &'r Ran<S::Cell, S::Trial>,
) -> Vec<(&'r str, usize, &'r LossAttribution)> {
    ran.cells
        .iter()
        .flat_map(|c| {
            c.trials
                .iter()
                .zip(&c.reps)
                .filter_map(|(t, rep)| Some((c.name.as_str(), *rep, study.loss(t)?)))
        })
        .collect()
}

/// The study's page, and after it where each trial's loss went (the trials that lost
/// something or whose kernel dropped something; nothing without root).
pub fn page<S: Study>(study: &S, ran: &Ran<S::Cell, S::Trial>, rows: &[S::Row]) -> Page {
    let mut page = study.page(ran, rows);
    let items: Vec<String> = losses(study, ran)
        .into_iter()
        .filter(|(_, _, a)| a.lost > 0 || a.drops > 0)
        .map(|(cell, rep, a)| format!("{cell}, repetition {rep}: {}", a.line()))
        .collect();
    if !items.is_empty() {
        page.blocks.push(Block::List(List {
            title: "Where the loss went".into(),
            items,
            text: TextList::Lines {
                heading: Some("where the loss went (kernel drop reasons):".into()),
                prefix: "  ".into(),
                blank_before: true,
            },
        }));
    }
    page
}

/// A configuration that was not run, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

impl Skipped {
    /// A server configuration of `workers` when only `cpus` are the server's.
    pub fn too_few_cpus(name: String, workers: usize, cpus: &[usize]) -> Skipped {
        Skipped {
            name,
            reason: format!(
                "needs {workers} server CPUs apart from the client's, only {cpus:?} given"
            ),
        }
    }

    /// `program` is not installed: the reason names the package that brings it.
    pub fn not_installed(program: &str) -> Skipped {
        Skipped {
            name: program.into(),
            reason: format!("not installed ({})", crate::cmd::install_hint(program)),
        }
    }
}

/// The plan of a study.
#[derive(Debug, Clone)]
pub struct Plan<C> {
    pub cells: Vec<C>,
    /// Cells left out before the run, and why (a peer not installed, a pairing that
    /// cannot work).
    pub skipped: Vec<Skipped>,
    /// Lines the report carries about how the run was made.
    pub notes: Vec<String>,
}

impl<C> Plan<C> {
    pub fn of(cells: Vec<C>) -> Plan<C> {
        Plan {
            cells,
            skipped: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The plan of a comparison, or a usage error naming why every cell was left out.
    pub fn compare(cells: Vec<C>, skipped: Vec<Skipped>, notes: Vec<String>) -> LabResult<Self> {
        if cells.is_empty() {
            let why: Vec<String> = skipped
                .iter()
                .map(|s| format!("{}: {}", s.name, s.reason))
                .collect();
            return Err(LabError::Usage(format!(
                "nothing to compare, every configuration was skipped ({})",
                why.join("; ")
            )));
        }
        Ok(Plan {
            cells,
            skipped,
            notes,
        })
    }
}

/// How a trial ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<M> {
    Done(M),
    /// The cell cannot run here (a mode the kernel refuses, with its errno; a peer's
    /// mode that is not built in): not tried again, and the row says why.
    Skip(String),
    /// This trial failed; the row lists it and the cell is tried again next repetition.
    Failed(String),
}

/// The order of the trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Every cell once per repetition, in turn: A B C A B C.
    Interleaved,
    /// Each cell's repetitions in a row, then [`Study::revise`]: A A B B C C.
    InTurn,
}

/// A cell and what its trials gave.
#[derive(Debug, Clone, Serialize)]
pub struct CellRun<C, T> {
    pub name: String,
    pub cell: C,
    /// The document lists every trial once, in `trials`.
    #[serde(skip)]
    pub trials: Vec<T>,
    /// The repetition (from 1) of each of `trials`.
    #[serde(skip)]
    pub reps: Vec<usize>,
    /// Why the cell was not (or no longer) measured.
    pub skipped: Option<String>,
    /// Trials that failed, with the reason.
    pub failures: Vec<String>,
}

/// What a run produced, for the study to summarise.
#[derive(Debug, Clone)]
pub struct Ran<C, T> {
    pub cells: Vec<CellRun<C, T>>,
    pub skipped: Vec<Skipped>,
    pub notes: Vec<String>,
    pub repetitions: usize,
    pub started_unix: u64,
    /// The host when the run started (its load average among its facts).
    pub environment: Environment,
    /// /proc/loadavg when the run ended.
    pub load_after: String,
    /// Share of all CPU time the hypervisor gave to other guests during the run (steal,
    /// /proc/stat); a large share makes every figure noisy.
    pub steal_pct: Option<f64>,
    pub placement: Placement,
}

impl<C, T> CellRun<C, T> {
    /// A cell with no trial yet.
    fn new(name: String, cell: C) -> Self {
        CellRun {
            name,
            cell,
            trials: Vec::new(),
            reps: Vec::new(),
            skipped: None,
            failures: Vec::new(),
        }
    }
}

impl<C, T> Ran<C, T> {
    /// "host: kernel K, N x CPU, load average A -> B[, steal S%]": the line every page
    /// carries, so no figure travels without the load it was measured under.
    pub fn host_line(&self) -> String {
        let e = &self.environment;
        let load = |l: &str| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
        let steal = self
            .steal_pct
            .filter(|s| *s >= 0.05)
            .map_or(String::new(), |s| format!(", steal {s:.1}% of CPU time"));
        format!(
            "host: kernel {}, {} x {}, load average {} at start, {} at end{steal}",
            e.kernel,
            e.nproc,
            e.cpu_model,
            load(&e.loadavg),
            load(&self.load_after)
        )
    }

    /// The cell named `name`.
    pub fn cell(&self, name: &str) -> Option<&CellRun<C, T>> {
        self.cells.iter().find(|c| c.name == name)
    }
}

/// Where a run is, for the binary to print.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Trials finished so far.
    pub done: usize,
    pub total: usize,
    /// The trial about to start.
    pub cell: String,
    pub repetition: usize,
    pub repetitions: usize,
    /// Estimated from the trials so far (from `guess_s` per trial before the first).
    pub seconds_left: f64,
}

/// What a run tells the binary while it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// A trial is about to start.
    Trial(&'a Progress),
    /// Something the reader should know now (a cell left out, a profiling run).
    Note(&'a str),
}

/// How a run reaches the outside.
pub struct Context<'a> {
    /// The `firehose` binary the lab starts.
    pub bin: PathBuf,
    /// Set by SIGINT and SIGTERM: the run stops, cleans up and returns `Interrupted`.
    pub stop: &'a AtomicBool,
    /// Where logs go: a directory the user chose (kept), or `None` for a private one
    /// (removed at the end; kept, and named in the error, when the run fails).
    pub logs: Option<PathBuf>,
    pub placement: Placement,
    /// Repetitions of every cell.
    pub repetitions: usize,
    /// Seconds a trial takes, for the time left before the first trial ends.
    pub guess_s: f64,
}

/// The run's resources, lent to the study's hooks.
pub struct Lab<'a> {
    pub bin: PathBuf,
    pub stop: &'a AtomicBool,
    /// Where every child's log and result file goes.
    pub workdir: PathBuf,
    /// The test host: loopback unless the study builds a veth pair in `plan`.
    pub topo: Topology,
    pub placement: Placement,
}

impl Lab<'_> {
    /// A command running `program` on `side` of the test host, confined to `cpus`.
    pub fn command(&self, side: Side, cpus: &[usize], program: impl AsRef<Path>) -> Command {
        self.topo
            .command(side, cpus, &program.as_ref().to_string_lossy())
    }

    /// `argv` placed on `side`, confined to `cpus`.
    pub fn placed(&self, side: Side, cpus: &[usize], argv: &[String]) -> Command {
        let mut c = self.command(side, cpus, &argv[0]);
        c.args(&argv[1..]);
        c
    }

    /// Starts `argv` on `side`, confined to `cpus`, its output in `workdir/TAG.{out,err}`.
    pub fn spawn(&self, side: Side, cpus: &[usize], argv: &[String], tag: &str) -> LabResult<Proc> {
        Proc::spawn(self.placed(side, cpus, argv), tag, &self.workdir)
    }

    /// Runs `argv` on `side`, confined to `cpus`, to its exit, `within` at most (then it
    /// is stopped and the run fails). Its CPU time is the growth of this process's reaped
    /// children time across reaping it: exact to its exit, whatever the program. A failed
    /// exit is an error quoting the end of its stderr.
    pub fn run_to_end(
        &self,
        side: Side,
        cpus: &[usize],
        argv: &[String],
        tag: &str,
        within: Duration,
    ) -> LabResult<Finished> {
        let me = std::process::id();
        let cpu_before = crate::cputime::seconds(me, crate::cputime::Scope::Reaped)?;
        let started = Instant::now();
        let mut proc = self.spawn(side, cpus, argv, tag)?;
        let Some(status) = proc.wait_until(started + within, Some(self.stop))? else {
            return Err(LabError::Run(format!(
                "{} did not finish within {:.1} s",
                argv.join(" "),
                within.as_secs_f64()
            )));
        };
        let wall_s = started.elapsed().as_secs_f64();
        let cpu_s =
            (crate::cputime::seconds(me, crate::cputime::Scope::Reaped)? - cpu_before).max(0.0);
        if !status.success() {
            return Err(LabError::Run(format!(
                "{} exited with {status}: {}",
                argv.join(" "),
                proc.stderr_tail()
            )));
        }
        Ok(Finished {
            proc,
            cpu_s,
            wall_s,
        })
    }

    /// Starts `cmd` (already placed), its output in `workdir/TAG.{out,err}`.
    pub fn start(&self, cmd: Command, tag: &str) -> LabResult<Proc> {
        Proc::spawn(cmd, tag, &self.workdir)
    }

    /// `Interrupted` once the stop flag is set.
    pub fn check(&self) -> LabResult<()> {
        proc::check(Some(self.stop))
    }

    /// Sleeps until `t`, returning `Interrupted` early once the stop flag is set.
    pub fn sleep_until(&self, t: Instant) -> LabResult<()> {
        proc::sleep_until(t, Some(self.stop))
    }

    /// The firehose binary and `args`, as an argv.
    pub fn firehose(&self, args: &[&str]) -> Vec<String> {
        std::iter::once(self.bin.to_string_lossy().into_owned())
            .chain(args.iter().map(|s| s.to_string()))
            .collect()
    }
}

/// A child [`Lab::run_to_end`] ran: its output is still readable.
pub struct Finished {
    pub proc: Proc,
    /// CPU seconds it used, to its exit.
    pub cpu_s: f64,
    pub wall_s: f64,
}

/// Runs `study`: plans it, runs every trial in order, tears the test host down whatever
/// happened, and returns what ran. A failure keeps the private work directory for its
/// reader and names it; an interruption returns `Interrupted` after cleaning up.
pub fn run<S: Study>(
    study: &mut S,
    ctx: Context<'_>,
    progress: &mut dyn FnMut(Event<'_>),
) -> LabResult<Ran<S::Cell, S::Trial>> {
    if ctx.repetitions == 0 {
        return Err(LabError::Usage("--repetitions must be at least 1".into()));
    }
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let environment = Environment::capture();
    let stat_before = cpu_total();
    let (workdir, mut temp) = match &ctx.logs {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| LabError::io(d.display(), e))?;
            (d.clone(), None)
        }
        None => {
            let t = WorkDir::new(&study.name().replace([' ', '-'], ""))?;
            (t.to_path_buf(), Some(t))
        }
    };
    let mut lab = Lab {
        bin: ctx.bin,
        stop: ctx.stop,
        workdir,
        topo: Topology::loopback(),
        placement: ctx.placement,
    };
    let result = study
        .plan(&mut lab)
        .and_then(|plan| {
            // The lab's own waits stay off the server's CPUs while trials run (own_cpus).
            let _off = OffServer::enter(&lab.placement.server_cpus)?;
            repeat(
                study,
                &mut lab,
                plan,
                ctx.repetitions,
                ctx.guess_s,
                progress,
            )
        })
        .and_then(|mut ran| {
            study.finish(&mut lab, &ran, progress)?;
            ran.started_unix = started_unix;
            ran.environment = environment;
            ran.load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            ran.steal_pct = match (stat_before, cpu_total()) {
                (Some(a), Some(b)) => Some(firehose_host::procfs::stat::split(&a, &b).steal),
                _ => None,
            };
            ran.placement = lab.placement.clone();
            Ok(ran)
        });
    // The test host goes first, whatever happened.
    let torn = lab.topo.teardown();
    let interrupted = lab.stop.load(std::sync::atomic::Ordering::Relaxed);
    match result {
        Err(_) if interrupted => {
            drop(temp);
            torn.map_err(|e| {
                LabError::Command(format!("interrupted; removing the test host: {e}"))
            })?;
            Err(LabError::Interrupted)
        }
        Err(e) => {
            if let Some(t) = temp.as_mut() {
                t.keep();
            }
            let logs = lab.workdir.display();
            let name = study.name();
            Err(match e {
                LabError::Usage(m) => LabError::Usage(m),
                other => LabError::Run(format!("lab {name} failed (logs in {logs}): {other}")),
            })
        }
        Ok(ran) => {
            torn.map_err(|e| LabError::Command(format!("removing the test host: {e}")))?;
            Ok(ran)
        }
    }
}

/// All CPUs' times from /proc/stat.
fn cpu_total() -> Option<firehose_host::procfs::stat::CpuTimes> {
    firehose_host::procfs::read("/proc/stat", firehose_host::procfs::stat::parse)
        .ok()
        .map(|s| s.total)
}

/// The repetition loop.
fn repeat<S: Study>(
    study: &mut S,
    lab: &mut Lab<'_>,
    plan: Plan<S::Cell>,
    repetitions: usize,
    guess_s: f64,
    progress: &mut dyn FnMut(Event<'_>),
) -> LabResult<Ran<S::Cell, S::Trial>> {
    let mut ran = Ran {
        cells: Vec::new(),
        skipped: plan.skipped,
        notes: plan.notes,
        repetitions,
        started_unix: 0,
        environment: Environment::default(),
        load_after: String::new(),
        steal_pct: None,
        placement: lab.placement.clone(),
    };
    let mut clock = Clock {
        started: Instant::now(),
        done: 0,
        total: plan.cells.len() * repetitions,
        guess_s,
        repetitions,
    };
    match study.order() {
        Order::Interleaved => {
            ran.cells = plan
                .cells
                .into_iter()
                .map(|cell| CellRun::new(study.cell_name(&cell), cell))
                .collect();
            for rep in 0..repetitions {
                let all: Vec<usize> = (0..ran.cells.len()).collect();
                in_groups(study, lab, &mut ran.cells, &all, rep, &mut clock, progress)?;
            }
        }
        Order::InTurn => {
            let mut rest = plan.cells;
            rest.reverse();
            while let Some(cell) = rest.pop() {
                ran.cells.push(CellRun::new(study.cell_name(&cell), cell));
                let i = ran.cells.len() - 1;
                for rep in 0..repetitions {
                    in_groups(study, lab, &mut ran.cells, &[i], rep, &mut clock, progress)?;
                }
                rest.reverse();
                let before = rest.len();
                study.revise(&ran.cells[i], &mut rest, &mut ran.skipped);
                // Cells dropped by the revision will not run: the estimate shrinks.
                clock.total -= before.saturating_sub(rest.len()) * repetitions;
                rest.reverse();
            }
        }
    }
    Ok(ran)
}

/// Time left, from the trials so far.
struct Clock {
    started: Instant,
    done: usize,
    total: usize,
    guess_s: f64,
    repetitions: usize,
}

impl Clock {
    fn progress(&self, cell: &str, rep: usize) -> Progress {
        let per_trial = if self.done == 0 {
            self.guess_s
        } else {
            self.started.elapsed().as_secs_f64() / self.done as f64
        };
        Progress {
            done: self.done,
            total: self.total,
            cell: cell.to_string(),
            repetition: rep + 1,
            repetitions: self.repetitions,
            seconds_left: per_trial * self.total.saturating_sub(self.done) as f64,
        }
    }
}

/// One repetition of the cells `which`, entering and leaving their groups in turn.
fn in_groups<S: Study>(
    study: &mut S,
    lab: &mut Lab<'_>,
    cells: &mut [CellRun<S::Cell, S::Trial>],
    which: &[usize],
    rep: usize,
    clock: &mut Clock,
    progress: &mut dyn FnMut(Event<'_>),
) -> LabResult<()> {
    let mut group: Option<Option<String>> = None;
    let mut refused: Option<String> = None;
    let result = (|| {
        for &i in which {
            lab.check()?;
            let g = study.group(&cells[i].cell);
            if group.as_ref() != Some(&g) {
                if group.take().is_some_and(|old| old.is_some()) {
                    study.leave(lab)?;
                }
                refused = match &g {
                    Some(_) => study.enter(lab, &cells[i].cell)?,
                    None => None,
                };
                group = Some(g);
            }
            let c = &mut cells[i];
            if let (Some(why), None) = (&refused, &c.skipped) {
                progress(Event::Note(&format!("{}: not measured: {why}", c.name)));
                c.skipped = Some(why.clone());
            }
            if c.skipped.is_some() {
                clock.done += 1;
                continue;
            }
            progress(Event::Trial(&clock.progress(&c.name, rep)));
            let outcome = study.trial(lab, &c.cell, rep)?;
            clock.done += 1;
            match outcome {
                Outcome::Done(m) => {
                    let t = study.metrics(&c.cell, m);
                    c.trials.push(t);
                    c.reps.push(rep + 1);
                }
                Outcome::Skip(why) => {
                    progress(Event::Note(&format!("{}: not measured: {why}", c.name)));
                    c.skipped = Some(why);
                }
                Outcome::Failed(why) => {
                    progress(Event::Note(&format!("{}: failed: {why}", c.name)));
                    c.failures.push(why);
                }
            }
        }
        Ok(())
    })();
    // The group's setting is undone however the repetition ended.
    let left = match group {
        Some(Some(_)) => study.leave(lab),
        _ => Ok(()),
    };
    result.and(left)
}

mod own_cpus;
#[cfg(test)]
pub(crate) mod tests;
