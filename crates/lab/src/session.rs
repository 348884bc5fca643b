//! One `lab ladder` or `lab compare` run from options to report: fill in defaults, check
//! them before anything is built, build the test host, run the cells, tear the host down
//! whatever happened, and summarise. The binary parses the command line into
//! [`RunOptions`], installs the stop flag, and prints what comes back.

use crate::env::Environment;
use crate::experiment::{self, Cell, Progress};
use crate::report::{self, LabReport, Skipped};
use crate::runner::{self, Generator, LoadSpec, Placement, Runner, Trial};
use crate::stats::Effect;
use crate::topology::{self, Kind, Topology};
use crate::{cmd, compare, ladder, LabError, LabResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// What a measured run was asked for; `None` takes the default.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub topology: Option<Kind>,
    pub queues: Option<usize>,
    pub repetitions: usize,
    pub duration_s: u64,
    pub warmup_s: Option<u64>,
    pub server_cpus: Option<Vec<usize>>,
    pub client_cpus: Option<Vec<usize>>,
    /// One count for ladder and compare (a list only for `compare --proto dns`).
    pub workers: Option<Vec<usize>>,
    pub threads: Option<usize>,
    pub flows: Option<usize>,
    pub window: Option<usize>,
    pub rate: Option<u64>,
    pub size: Option<usize>,
    pub timeout_ms: Option<u64>,
    /// `--report DIR`: logs go to DIR/runs and are kept.
    pub report: Option<PathBuf>,
}

impl RunOptions {
    pub fn topology(&self) -> Kind {
        self.topology.unwrap_or(Kind::Loopback)
    }
}

/// The server and client CPUs: as given, or the allowed CPUs split in two halves.
pub fn placement(
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

/// Defaults that differ between ladder and compare.
struct Defaults {
    flows: usize,
    window: Option<usize>,
    rate: Option<u64>,
    /// What pins one worker per server CPU in this run, if anything does.
    pins: Option<&'static str>,
}

/// Settings of a run once defaults are filled in, and its test host.
struct Setup {
    topo: Topology,
    placement: Placement,
    workers: usize,
    load: LoadSpec,
    workdir: PathBuf,
    /// Temporary work directory to delete at the end (no --report).
    temp: bool,
}

fn usage<T>(m: String) -> LabResult<T> {
    Err(LabError::Usage(m))
}

/// Fills in defaults and checks them, then builds the test host (last, so that a refused
/// argument leaves nothing behind).
fn setup(r: &RunOptions, d: Defaults) -> LabResult<Setup> {
    let allowed = firehose_sys::cpu::allowed_cpus()
        .map_err(|e| LabError::Run(format!("reading the allowed CPUs: {e}")))?;
    let placement = placement(r.server_cpus.clone(), r.client_cpus.clone(), &allowed)?;
    let workers =
        match r.workers.as_deref() {
            None => placement.server_cpus.len(),
            Some([w]) => *w,
            Some(_) => return usage(
                "--workers takes one count here; a list of counts is for lab compare --proto dns"
                    .into(),
            ),
        };
    if let Some(what) = d.pins {
        if workers > placement.server_cpus.len() {
            return usage(format!(
                "--workers {workers} is more than the {} server CPU(s), but {what} one worker per CPU: give more --server-cpus or fewer --workers",
                placement.server_cpus.len()
            ));
        }
    }
    let threads = r.threads.unwrap_or(placement.client_cpus.len());
    let size = r.size.unwrap_or(100);
    let flows = r.flows.unwrap_or(d.flows.max(threads));
    if flows < threads {
        return usage(format!(
            "--flows {flows} is fewer than --threads {threads}: each thread needs a flow"
        ));
    }
    if size < 20 {
        return usage(format!(
            "--size {size}: echo requests carry a 20-byte header; use 20 or more"
        ));
    }
    if r.queues.is_some() && r.topology() == Kind::Loopback {
        return usage("--queues sets the veth pair's queues: use it with --topology veth".into());
    }
    let load = LoadSpec {
        flows,
        window: r.window.or(d.window),
        rate: r.rate.or(d.rate),
        threads,
        size,
        duration_s: r.duration_s,
        warmup_s: r.warmup_s.unwrap_or(1),
        timeout_ms: r.timeout_ms.unwrap_or(200),
    };
    let (workdir, temp) = match &r.report {
        Some(d) => (d.join("runs"), false),
        None => (runner::temp_workdir(std::process::id()), true),
    };
    let topo = match r.topology() {
        Kind::Loopback => Topology::loopback(),
        Kind::Veth => {
            let q = r.queues.unwrap_or(allowed.len());
            Topology::veth(&topology::run_id(None), q)?
        }
    };
    std::fs::create_dir_all(&workdir).map_err(|e| LabError::io(workdir.display(), e))?;
    Ok(Setup {
        topo,
        placement,
        workers,
        load,
        workdir,
        temp,
    })
}

/// What to run, what was left out and why, and notes for the report.
struct Plan {
    cells: Vec<Cell>,
    skipped: Vec<Skipped>,
    notes: Vec<String>,
    drive: Drive,
}

/// How the cells of a plan are run.
enum Drive {
    /// Every cell `repetitions` times, interleaved (A B C A B C ...).
    Interleaved,
    /// The ladder one step at a time (each step's repetitions in a row), a step that hurt
    /// reverted before the next; each step's cell is built for `workers` (and its OS knobs
    /// set on a veth topology, whose server interface is `veth`) from the steps reverted
    /// so far.
    Climb {
        steps: Vec<ladder::Step>,
        workers: usize,
        veth: Option<String>,
    },
}

/// What a drive ran: the cells as run, the trials in run order, the steps reverted, and
/// the steps left out because a step they need was reverted.
struct Ran {
    cells: Vec<Cell>,
    trials: Vec<Trial>,
    reverted: Vec<&'static str>,
    skipped: Vec<Skipped>,
}

/// Climbs `steps`: `run_step` measures a step's cell (given the trials run before it) with
/// its repetitions in a row, and a step whose verdict against the last kept step is hurt is
/// left out of every later step.
fn climb(
    steps: &[ladder::Step],
    cell_for: &dyn Fn(&ladder::Step, &[&'static str]) -> Cell,
    run_step: &mut dyn FnMut(&Cell, usize) -> LabResult<Vec<Trial>>,
) -> LabResult<Ran> {
    let mut ran = Ran {
        cells: Vec::new(),
        trials: Vec::new(),
        reverted: Vec::new(),
        skipped: Vec::new(),
    };
    let mut kept: Option<report::Row> = None;
    for st in steps {
        if let Some(n) = ladder::needs(st).filter(|n| ran.reverted.contains(n)) {
            ran.skipped.push(Skipped {
                name: st.name.into(),
                reason: format!("needs {n}, which hurt and was reverted"),
            });
            continue;
        }
        let cell = cell_for(st, &ran.reverted);
        let trials = run_step(&cell, ran.trials.len())?;
        let mut row = report::rows(std::slice::from_ref(&cell), &trials).remove(0);
        let hurt = kept.as_ref().is_some_and(|k| {
            row.compare_with(k);
            row.verdict == Effect::Hurt
        });
        if hurt {
            ran.reverted.push(st.name);
        } else {
            kept = Some(row);
        }
        ran.cells.push(cell);
        ran.trials.extend(trials);
    }
    Ok(ran)
}

/// The cell of a ladder step, without the `reverted` steps' techniques.
/// `veth` is the server's interface on a veth topology (the `xdp` rung serves on it).
fn ladder_cell(
    st: &ladder::Step,
    workers: usize,
    veth: Option<&str>,
    reverted: &[&'static str],
) -> Cell {
    let mut describe = match ladder::talk_figure(st.name) {
        Some(t) => format!("{} (the talk: {t})", st.describe),
        None => st.describe.into(),
    };
    if !reverted.is_empty() {
        describe += &format!("; without {} (hurt, reverted)", reverted.join(", "));
    }
    Cell {
        name: st.name.into(),
        describe,
        server: ladder::server_for(st, workers, reverted, veth),
        generator: Generator::Firehose,
        knobs: veth.map(|_| ladder::knobs_for(st, reverted)),
    }
}

/// The ladder's rows: each judged against the last step kept before it; a reverted step
/// is marked and never the base of a later one.
fn ladder_rows(cells: &[Cell], trials: &[Trial], reverted: &[&str]) -> Vec<report::Row> {
    let mut rows = report::rows(cells, trials);
    let mut base: Option<report::Row> = None;
    for row in rows.iter_mut() {
        if let Some(b) = &base {
            row.compare_with(b);
        }
        row.reverted = reverted.contains(&row.name.as_str());
        if !row.reverted {
            base = Some(row.clone());
        }
    }
    rows
}

/// How a run reaches the outside: the `firehose` binary to start, the stop flag (set by
/// SIGINT/SIGTERM), and where progress goes.
pub struct Context<'a> {
    pub bin: PathBuf,
    pub stop: &'a AtomicBool,
    pub progress: &'a mut dyn FnMut(&Progress),
}

/// Runs the cells, tears the host down, and summarises the trials into a report.
fn execute(
    kind: &str,
    r: &RunOptions,
    ctx: Context<'_>,
    mut s: Setup,
    plan: Plan,
    make_rows: impl Fn(&Ran) -> (Vec<report::Row>, Vec<report::Ratio>),
) -> LabResult<LabReport> {
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let environment = Environment::capture();
    let result = match r.topology() {
        Kind::Loopback => crate::proc::free_port(),
        Kind::Veth => Ok(runner::VETH_PORT),
    }
    .and_then(|port| {
        let runner = Runner {
            bin: ctx.bin,
            topo: &s.topo,
            placement: s.placement.clone(),
            load: s.load.clone(),
            workdir: s.workdir.clone(),
            stop: ctx.stop,
            port,
        };
        match &plan.drive {
            Drive::Interleaved => {
                experiment::run(&runner, &s.topo, &plan.cells, r.repetitions, ctx.progress).map(
                    |trials| Ran {
                        cells: plan.cells.clone(),
                        trials,
                        reverted: Vec::new(),
                        skipped: Vec::new(),
                    },
                )
            }
            Drive::Climb {
                steps,
                workers,
                veth,
            } => {
                let total = steps.len() * r.repetitions;
                let progress = ctx.progress;
                let mut run_step = |c: &Cell, before: usize| {
                    // Progress over the whole climb, not this step's part of it.
                    let mut whole = |p: &Progress| {
                        let per_trial = p.seconds_left / (p.total - p.done).max(1) as f64;
                        progress(&Progress {
                            done: before + p.done,
                            total,
                            seconds_left: per_trial * (total - before - p.done) as f64,
                            ..p.clone()
                        })
                    };
                    let one = std::slice::from_ref(c);
                    experiment::run(&runner, &s.topo, one, r.repetitions, &mut whole)
                };
                let cell = |st: &ladder::Step, rev: &[&'static str]| {
                    ladder_cell(st, *workers, veth.as_deref(), rev)
                };
                climb(steps, &cell, &mut run_step)
            }
        }
    });
    // Tear the test host down before anything else, whatever happened.
    let teardown = s.topo.teardown();
    let remove_temp = |s: &Setup| {
        if s.temp {
            let _ = std::fs::remove_dir_all(&s.workdir);
        }
    };
    let ran = match result {
        Ok(t) => t,
        Err(_) if ctx.stop.load(Ordering::Relaxed) => {
            remove_temp(&s);
            teardown.map_err(|e| {
                LabError::Command(format!("interrupted; removing the test host: {e}"))
            })?;
            return Err(LabError::Interrupted);
        }
        Err(e) => {
            let logs = s.workdir.display();
            return Err(match e {
                LabError::Usage(m) => {
                    LabError::Usage(format!("lab {kind} failed (logs in {logs}): {m}"))
                }
                other => LabError::Run(format!("lab {kind} failed (logs in {logs}): {other}")),
            });
        }
    };
    teardown.map_err(|e| LabError::Command(format!("removing the test host: {e}")))?;
    remove_temp(&s);
    let (rows, ratios) = make_rows(&ran);
    let trials = ran.trials;
    let mut skipped = plan.skipped;
    skipped.extend(ran.skipped);
    Ok(LabReport {
        kind: kind.into(),
        started_unix,
        topology: r.topology().name().into(),
        queues: s.topo.queues(),
        workers: s.workers,
        repetitions: r.repetitions,
        placement: s.placement,
        load: s.load,
        environment,
        rows,
        skipped,
        ratios,
        notes: plan.notes,
        trials,
    })
}

/// `lab ladder`: the chosen steps (all the topology allows by default), each judged
/// against the last step kept before it. A step that hurt is reverted before the next one
/// (the steps then run one after another); with `keep_hurt` every step builds on all
/// those above it, and all steps are interleaved.
pub fn ladder(
    r: &RunOptions,
    steps: Option<&str>,
    keep_hurt: bool,
    ctx: Context<'_>,
) -> LabResult<LabReport> {
    let (steps, skipped) = ladder::select(steps, r.topology())?;
    let pin_at = ladder::STEPS.iter().position(|x| x.name == "pin");
    let pins = steps
        .iter()
        .any(|st| ladder::STEPS.iter().position(|x| x == st) >= pin_at)
        .then_some("the pin step pins");
    let defaults = Defaults {
        flows: 16,
        window: Some(4),
        rate: None,
        pins,
    };
    let s = setup(r, defaults)?;
    let veth = (r.topology() == Kind::Veth).then(|| s.topo.dev(topology::Side::Server));
    let cells: Vec<Cell> = steps
        .iter()
        .map(|st| ladder_cell(st, s.workers, veth.as_deref(), &[]))
        .collect();
    let (drive, note) = if keep_hurt {
        (
            Drive::Interleaved,
            "--keep-hurt: every step builds on all those above it, a step that hurt included; steps interleaved",
        )
    } else {
        (
            Drive::Climb {
                steps,
                workers: s.workers,
                veth,
            },
            "a step that hurt is reverted before the next one (shown as 'hurt, reverted'); each step runs its repetitions in a row, since what it builds on depends on the verdicts above it (--keep-hurt interleaves all steps and keeps every step)",
        )
    };
    let plan = Plan {
        cells,
        skipped,
        notes: vec![note.to_string()],
        drive,
    };
    execute("ladder", r, ctx, s, plan, |ran| {
        (
            ladder_rows(&ran.cells, &ran.trials, &ran.reverted),
            Vec::new(),
        )
    })
}

/// `lab compare` (echo): servers under generators, all at the same open-loop rate, each
/// judged on its cost against the plain echo server under the same generator.
pub fn compare(
    r: &RunOptions,
    servers: Option<&str>,
    generators: Option<&str>,
    ctx: Context<'_>,
) -> LabResult<LabReport> {
    let servers = servers.unwrap_or("naive,tuned,plain,sockperf");
    let generators = generators.unwrap_or("firehose,sockperf");
    let sockperf = cmd::installed("sockperf");
    // Validate names before building anything.
    compare::plan(servers, generators, 1, sockperf)?;
    let pins = servers
        .split(',')
        .any(|x| matches!(x.trim(), "steered" | "tuned" | "latency"))
        .then_some("the steered, tuned and latency profiles pin");
    let defaults = Defaults {
        flows: 1,
        window: None,
        rate: Some(10_000),
        pins,
    };
    let s = setup(r, defaults)?;
    let (cells, skipped) = compare::plan(servers, generators, s.workers, sockperf)?;
    if cells.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .map(|s| format!("{}: {}", s.name, s.reason))
            .collect();
        return usage(format!(
            "nothing to compare, every configuration was skipped ({})",
            why.join("; ")
        ));
    }
    let mut notes = vec![
        "sockperf ping-pong sends at --mps (= --rate) and keeps one request in flight; firehose load runs open loop at the same rate".to_string(),
        "the generators are compared as a blocking pair: firehose load waits in epoll_wait and sockperf ping-pong in recvfrom (neither spins); the spinning pair is measured by firehose bench".to_string(),
    ];
    if !cmd::installed("perf") {
        notes.push(format!(
            "peer servers' syscalls/txn are unknown without perf ({})",
            cmd::install_hint("perf")
        ));
    }
    let plan = Plan {
        cells,
        skipped,
        notes,
        drive: Drive::Interleaved,
    };
    execute("compare", r, ctx, s, plan, |ran| {
        let mut rows = report::rows(&ran.cells, &ran.trials);
        for g in [Generator::Firehose, Generator::Sockperf] {
            let base = rows
                .iter()
                .find(|r| r.generator == g && r.name.starts_with("plain/"))
                .or_else(|| rows.iter().find(|r| r.generator == g))
                .cloned();
            if let Some(base) = base {
                for r in rows
                    .iter_mut()
                    .filter(|r| r.generator == g && r.name != base.name)
                {
                    // Open loop: all reach the rate, so judge the cost.
                    r.compare_cost_with(&base);
                }
            }
        }
        let ratios = compare::ratios(&rows);
        (rows, ratios)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::trial;
    use crate::server::ServerKind;

    #[test]
    fn a_step_that_hurt_is_reverted_before_the_next() {
        let (steps, _) =
            ladder::select(Some("shared,reuseport,steer,pin"), Kind::Loopback).unwrap();
        // Made-up medians: reuseport halves tps (hurt), pin on top of shared adds 10%; steer
        // cannot run without reuseport.
        let tps = |name: &str| match name {
            "shared" => 100_000.0,
            "reuseport" => 50_000.0,
            _ => 110_000.0,
        };
        let mut seen = Vec::new();
        let mut run_step = |c: &Cell, before: usize| {
            seen.push((c.name.clone(), before));
            Ok((0..3)
                .map(|rep| trial(&c.name, rep, tps(&c.name) + rep as f64 * 100.0, false))
                .collect())
        };
        let cell = |st: &ladder::Step, rev: &[&'static str]| ladder_cell(st, 1, None, rev);
        let ran = climb(&steps, &cell, &mut run_step).unwrap();
        assert_eq!(
            seen,
            [
                ("shared".into(), 0),
                ("reuseport".into(), 3),
                ("pin".into(), 6)
            ]
        );
        assert_eq!(ran.reverted, ["reuseport"]);
        assert_eq!(
            (ran.skipped[0].name.as_str(), ran.skipped[0].reason.as_str()),
            ("steer", "needs reuseport, which hurt and was reverted")
        );
        let ServerKind::Firehose { flags } = &ran.cells[2].server else {
            panic!("{:?}", ran.cells[2].server)
        };
        let flags = flags.join(" ");
        assert!(
            flags.contains("--sockets shared --steer none --cpus auto"),
            "{flags}"
        );
        assert!(ran.cells[2]
            .describe
            .contains("without reuseport (hurt, reverted)"));

        let rows = ladder_rows(&ran.cells, &ran.trials, &ran.reverted);
        assert_eq!(
            rows.iter()
                .map(|r| (r.verdict, r.reverted))
                .collect::<Vec<_>>(),
            [
                (Effect::Baseline, false),
                (Effect::Hurt, true),
                (Effect::Helped, false)
            ]
        );
        // pin is judged against shared, the last step kept.
        assert!(
            (rows[2].gain.unwrap() - 1.1).abs() < 0.01,
            "{:?}",
            rows[2].gain
        );
        assert!(crate::report::table::cells(&rows[1]).contains(&"hurt, reverted".to_string()));
        // --keep-hurt: nothing reverted, each row against the one before.
        let rows = ladder_rows(&ran.cells, &ran.trials, &[]);
        assert!(rows.iter().all(|r| !r.reverted));
        assert!((rows[2].gain.unwrap() - 2.2).abs() < 0.01);
    }

    #[test]
    fn placement_defaults_and_refusals() {
        let p = placement(None, None, &[0, 1, 2, 3]).unwrap();
        assert_eq!((p.server_cpus, p.client_cpus), (vec![0, 1], vec![2, 3]));
        let p = placement(Some(vec![3]), None, &[0, 1, 2, 3]).unwrap();
        assert_eq!((p.server_cpus, p.client_cpus), (vec![3], vec![0, 1, 2]));
        let e = placement(None, Some(vec![0]), &[0, 1, 2, 3]).unwrap_err();
        assert!(e.to_string().contains("CPU 0 is in both"), "{e}");
        let e = placement(Some(vec![0]), None, &[0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no CPU left"), "{e}");
    }

    #[test]
    fn arguments_are_refused_before_anything_is_built() {
        let base = RunOptions {
            repetitions: 1,
            duration_s: 1,
            server_cpus: Some(vec![0]),
            client_cpus: Some(vec![1]),
            ..RunOptions::default()
        };
        let d = || Defaults {
            flows: 1,
            window: None,
            rate: None,
            pins: Some("the pin step pins"),
        };
        let refuse = |r: RunOptions, says: &str| {
            let e = setup(&r, d()).err().expect("refused").to_string();
            assert!(e.contains(says), "{e}");
        };
        if firehose_sys::cpu::allowed_cpus().map_or(0, |c| c.len()) < 2 {
            eprintln!("skipped: needs 2 allowed CPUs");
            return;
        }
        refuse(
            RunOptions {
                workers: Some(vec![1, 2]),
                ..base.clone()
            },
            "a list of counts is for lab compare --proto dns",
        );
        refuse(
            RunOptions {
                workers: Some(vec![2]),
                ..base.clone()
            },
            "the pin step pins one worker per CPU",
        );
        refuse(
            RunOptions {
                threads: Some(4),
                flows: Some(2),
                ..base.clone()
            },
            "--flows 2 is fewer than --threads 4",
        );
        refuse(
            RunOptions {
                size: Some(10),
                ..base.clone()
            },
            "20-byte header",
        );
        refuse(
            RunOptions {
                queues: Some(2),
                ..base
            },
            "--queues",
        );
    }
}
