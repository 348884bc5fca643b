//! `lab ladder`: the NTT talk's ladder (the steps are in [`steps`]). Each step runs its
//! repetitions in turn and is judged against the last step kept before it; a step whose
//! verdict is `hurt` is left out of every later step, as the talk reverted RPS and went on
//! (a later step that needs it is skipped with the reason). With `--keep-hurt` every step
//! builds on all those above it, and the steps are interleaved.

pub mod steps;

use crate::report::Page;
use crate::stats::Effect;
use crate::studies::echo::report::{self, Row};
use crate::studies::echo::{Cell, Defaults, Echo, EchoOptions, Generator, Measured, Trial};
use crate::study::{CellRun, Lab, Order, Outcome, Placement, Plan, Ran, Skipped, Study};
use crate::topology::{Kind, Side};
use crate::LabResult;
use steps::Step;

/// A ladder run.
pub struct Ladder {
    pub echo: Echo,
    steps: Vec<Step>,
    skipped: Vec<Skipped>,
    keep_hurt: bool,
    /// The server's veth (the `xdp` rung serves on it), set in `plan`.
    veth: Option<String>,
    /// Steps that hurt, left out of every later step.
    reverted: Vec<&'static str>,
    /// The row of the last step kept, the base of the next verdict.
    kept: Option<Row>,
}

impl Ladder {
    /// The chosen steps (all the topology allows by default), checked before anything is
    /// built.
    pub fn new(
        o: &EchoOptions,
        placement: &Placement,
        steps: Option<&str>,
        keep_hurt: bool,
    ) -> LabResult<Ladder> {
        let kind = o.topology.unwrap_or(Kind::Loopback);
        let (steps, skipped) = steps::select(steps, kind)?;
        let pin_at = steps::STEPS.iter().position(|x| x.name == "pin");
        let pins = steps
            .iter()
            .any(|st| steps::STEPS.iter().position(|x| x == st) >= pin_at)
            .then_some("the pin step pins");
        let defaults = Defaults {
            flows: 16,
            window: Some(4),
            rate: None,
            pins,
        };
        Ok(Ladder {
            echo: Echo::new(o, defaults, placement)?,
            steps,
            skipped,
            keep_hurt,
            veth: None,
            reverted: Vec::new(),
            kept: None,
        })
    }

    /// The cell of a step, without the `reverted` steps' techniques.
    fn cell(&self, st: &Step, reverted: &[&'static str]) -> Cell {
        let mut describe = match steps::talk_figure(st.name) {
            Some(t) => format!("{} (the talk: {t})", st.describe),
            None => st.describe.into(),
        };
        if !reverted.is_empty() {
            describe += &format!("; without {} (hurt, reverted)", reverted.join(", "));
        }
        let veth = self.veth.as_deref();
        Cell {
            name: st.name.into(),
            describe,
            server: steps::server_for(st, self.echo.workers, reverted, veth),
            generator: Generator::Firehose,
            knobs: veth.map(|_| steps::knobs_for(st, reverted)),
        }
    }
}

/// The ladder's rows: each judged against the last step kept before it; a reverted step
/// is marked and never the base of a later one.
pub fn ladder_rows(cells: &[CellRun<Cell, Trial>], reverted: &[&str]) -> Vec<Row> {
    let mut rows = report::rows(cells);
    let mut base: Option<Row> = None;
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

impl Study for Ladder {
    type Cell = Cell;
    type Measured = Measured;
    type Trial = Trial;
    type Row = Row;

    fn name(&self) -> String {
        "ladder".into()
    }

    fn plan(&mut self, lab: &mut Lab<'_>) -> LabResult<Plan<Cell>> {
        self.echo.build(lab)?;
        self.veth = (self.echo.kind == Kind::Veth).then(|| lab.topo.dev(Side::Server));
        let cells = self.steps.iter().map(|st| self.cell(st, &[])).collect();
        let note = if self.keep_hurt {
            "--keep-hurt: every step builds on all those above it, a step that hurt included; steps interleaved"
        } else {
            "a step that hurt is reverted before the next one (shown as 'hurt, reverted'); each step runs its repetitions in a row, since what it builds on depends on the verdicts above it (--keep-hurt interleaves all steps and keeps every step)"
        };
        Ok(Plan {
            cells,
            skipped: self.skipped.clone(),
            notes: vec![note.to_string()],
        })
    }

    fn cell_name(&self, c: &Cell) -> String {
        c.name.clone()
    }

    fn order(&self) -> Order {
        if self.keep_hurt {
            Order::Interleaved
        } else {
            Order::InTurn
        }
    }

    fn trial(&mut self, lab: &mut Lab<'_>, c: &Cell, rep: usize) -> LabResult<Outcome<Measured>> {
        self.echo.trial(lab, c, rep)
    }

    fn metrics(&self, _c: &Cell, m: Measured) -> Trial {
        self.echo.metrics(m)
    }

    /// A step whose verdict against the last step kept is `hurt` is left out of every
    /// later step: those are rebuilt without it, and a step that needs it is skipped.
    fn revise(
        &mut self,
        done: &CellRun<Cell, Trial>,
        rest: &mut Vec<Cell>,
        skipped: &mut Vec<Skipped>,
    ) {
        let mut row = Row::from_trials(&done.cell, &done.trials);
        let hurt = self.kept.as_ref().is_some_and(|k| {
            row.compare_with(k);
            row.verdict == Effect::Hurt
        });
        let Some(step) = steps::STEPS.iter().find(|s| s.name == done.cell.name) else {
            return;
        };
        if !hurt {
            self.kept = Some(row);
            return;
        }
        self.reverted.push(step.name);
        let mut next = Vec::new();
        for c in rest.drain(..) {
            let Some(st) = steps::STEPS.iter().find(|s| s.name == c.name) else {
                next.push(c);
                continue;
            };
            match steps::needs(st).filter(|n| self.reverted.contains(n)) {
                Some(n) => skipped.push(Skipped {
                    name: st.name.into(),
                    reason: format!("needs {n}, which hurt and was reverted"),
                }),
                None => next.push(self.cell(st, &self.reverted)),
            }
        }
        *rest = next;
    }

    fn loss<'t>(&self, t: &'t Trial) -> Option<&'t crate::loss::LossAttribution> {
        t.loss.as_ref()
    }

    fn rows(&self, ran: &Ran<Cell, Trial>) -> Vec<Row> {
        ladder_rows(&ran.cells, &self.reverted)
    }

    fn page(&self, ran: &Ran<Cell, Trial>, rows: &[Row]) -> Page {
        report::page("ladder", &self.echo, ran, rows, &[])
    }

    fn extra(
        &self,
        _ran: &Ran<Cell, Trial>,
        _rows: &[Row],
    ) -> serde_json::Map<String, serde_json::Value> {
        self.echo.extra()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ServerKind;
    use crate::studies::echo::report::tests::{cell, echo, trial};

    #[test]
    fn a_step_that_hurt_is_reverted_before_the_next() {
        let (steps, _) = steps::select(Some("shared,reuseport,steer,pin"), Kind::Loopback).unwrap();
        let mut l = Ladder {
            echo: echo(),
            steps: steps.clone(),
            skipped: Vec::new(),
            keep_hurt: false,
            veth: None,
            reverted: Vec::new(),
            kept: None,
        };
        // Made-up medians: reuseport halves tps (hurt), pin on top of shared adds 10%; steer
        // cannot run without reuseport.
        let tps = |name: &str| match name {
            "shared" => 100_000.0,
            "reuseport" => 50_000.0,
            _ => 110_000.0,
        };
        let run = |c: Cell| {
            let trials: Vec<Trial> = (0..3)
                .map(|rep| trial(&c.name, rep, tps(&c.name) + rep as f64 * 100.0, false))
                .collect();
            CellRun {
                name: c.name.clone(),
                cell: c,
                reps: vec![1, 2, 3],
                trials,
                skipped: None,
                failures: Vec::new(),
            }
        };
        let mut rest: Vec<Cell> = steps.iter().rev().map(|s| l.cell(s, &[])).collect();
        let (mut ran, mut skipped) = (Vec::new(), Vec::new());
        while let Some(c) = rest.pop() {
            let done = run(c);
            rest.reverse();
            l.revise(&done, &mut rest, &mut skipped);
            rest.reverse();
            ran.push(done);
        }
        let names: Vec<&str> = ran.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["shared", "reuseport", "pin"]);
        assert_eq!(l.reverted, ["reuseport"]);
        assert_eq!(
            (skipped[0].name.as_str(), skipped[0].reason.as_str()),
            ("steer", "needs reuseport, which hurt and was reverted")
        );
        let ServerKind::Firehose { flags } = &ran[2].cell.server else {
            panic!("{:?}", ran[2].cell.server)
        };
        let flags = flags.join(" ");
        assert!(
            flags.contains("--sockets shared --steer none --cpus auto"),
            "{flags}"
        );
        assert!(ran[2]
            .cell
            .describe
            .contains("without reuseport (hurt, reverted)"));
        let rows = ladder_rows(&ran, &l.reverted);
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
        assert!(report::cells(&rows[1]).contains(&"hurt, reverted".to_string()));
        // --keep-hurt: nothing reverted, each row against the one before.
        let rows = ladder_rows(&ran, &[]);
        assert!(rows.iter().all(|r| !r.reverted));
        assert!((rows[2].gain.unwrap() - 2.2).abs() < 0.01);
        let _ = cell("x");
    }
}
