use super::*;
use std::sync::atomic::Ordering;

/// A run of `cells` as the loop would hand it back, for tests of rows and pages.
pub(crate) fn ran<C, T>(cells: Vec<CellRun<C, T>>) -> Ran<C, T> {
    Ran {
        cells,
        skipped: Vec::new(),
        notes: Vec::new(),
        repetitions: 1,
        started_unix: 0,
        environment: Environment {
            kernel: "6.1".into(),
            cpu_model: "AMD EPYC".into(),
            nproc: 2,
            loadavg: "0.50 0.40 0.30 1/100 42".into(),
            ..Environment::default()
        },
        load_after: "0.60 0.40 0.30 1/100 43".into(),
        steal_pct: None,
        placement: Placement {
            server_cpus: vec![0],
            client_cpus: vec![1],
        },
    }
}

/// A study of made-up cells that records what the loop asked of it.
struct Fake {
    cells: Vec<&'static str>,
    order: Order,
    /// Every hook call, in order.
    log: Vec<String>,
    /// Cells whose trial says it cannot run here, or fails once.
    skip: &'static str,
    fail_once: &'static str,
    failed: bool,
    /// A group whose setting is refused.
    refuse: Option<&'static str>,
    /// After this cell's repetitions, drop every later cell but the last.
    revise_after: Option<&'static str>,
    /// Set the stop flag during this cell's trial.
    stop_at: Option<&'static str>,
    stop: Option<&'static AtomicBool>,
    /// The lab thread's CPUs as /proc said during each trial (Cpus_allowed_list).
    cpus_seen: Vec<String>,
}

impl Fake {
    fn new(cells: &[&'static str]) -> Fake {
        Fake {
            cells: cells.to_vec(),
            order: Order::Interleaved,
            log: Vec::new(),
            skip: "",
            fail_once: "",
            failed: false,
            refuse: None,
            revise_after: None,
            stop_at: None,
            stop: None,
            cpus_seen: Vec::new(),
        }
    }
}

impl Study for Fake {
    type Cell = &'static str;
    type Measured = usize;
    type Trial = String;
    type Row = String;

    fn name(&self) -> String {
        "fake".into()
    }

    fn plan(&mut self, _lab: &mut Lab<'_>) -> LabResult<Plan<&'static str>> {
        Ok(Plan::of(self.cells.clone()))
    }

    fn cell_name(&self, cell: &&'static str) -> String {
        cell.to_string()
    }

    fn order(&self) -> Order {
        self.order
    }

    fn group(&self, cell: &&'static str) -> Option<String> {
        // Cells "g1-..." share group g1.
        cell.split_once('-').map(|(g, _)| g.to_string())
    }

    fn enter(&mut self, _lab: &mut Lab<'_>, cell: &&'static str) -> LabResult<Option<String>> {
        let g = self.group(cell).unwrap();
        self.log.push(format!("enter {g}"));
        Ok((self.refuse == Some(g.as_str())).then(|| "EOPNOTSUPP".to_string()))
    }

    fn leave(&mut self, _lab: &mut Lab<'_>) -> LabResult<()> {
        self.log.push("leave".into());
        Ok(())
    }

    fn trial(
        &mut self,
        _lab: &mut Lab<'_>,
        cell: &&'static str,
        rep: usize,
    ) -> LabResult<Outcome<usize>> {
        self.log.push(format!("{cell}{rep}"));
        self.cpus_seen.push(own_cpus_list());
        if self.stop_at == Some(*cell) {
            self.stop.unwrap().store(true, Ordering::Relaxed);
        }
        if *cell == self.skip {
            return Ok(Outcome::Skip("not here".into()));
        }
        if *cell == self.fail_once && !self.failed {
            self.failed = true;
            return Ok(Outcome::Failed("flaky".into()));
        }
        Ok(Outcome::Done(rep))
    }

    fn metrics(&self, cell: &&'static str, rep: usize) -> String {
        format!("{cell}@{rep}")
    }

    fn revise(
        &mut self,
        done: &CellRun<&'static str, String>,
        rest: &mut Vec<&'static str>,
        skipped: &mut Vec<Skipped>,
    ) {
        if self.revise_after == Some(done.cell) {
            let last = rest.pop();
            for c in rest.drain(..) {
                skipped.push(Skipped {
                    name: c.into(),
                    reason: format!("{} said so", done.cell),
                });
            }
            rest.extend(last);
        }
    }

    fn rows(&self, ran: &Ran<&'static str, String>) -> Vec<String> {
        ran.cells.iter().map(|c| c.trials.join(",")).collect()
    }

    fn page(&self, _ran: &Ran<&'static str, String>, _rows: &[String]) -> Page {
        Page::default()
    }
}

fn ctx(stop: &AtomicBool, repetitions: usize) -> Context<'_> {
    Context {
        bin: "firehose".into(),
        stop,
        logs: None,
        placement: Placement {
            server_cpus: vec![0],
            client_cpus: vec![1],
        },
        repetitions,
        guess_s: 1.0,
    }
}

fn go(f: &mut Fake, reps: usize) -> (LabResult<Ran<&'static str, String>>, Vec<String>) {
    let stop = Box::leak(Box::new(AtomicBool::new(false)));
    f.stop = Some(stop);
    let mut seen = Vec::new();
    let r = run(f, ctx(stop, reps), &mut |e| match e {
        Event::Trial(p) => seen.push(format!("{}/{} {}", p.done + 1, p.total, p.cell)),
        Event::Note(n) => seen.push(n.to_string()),
    });
    (r, seen)
}

#[test]
fn placement_rules() {
    let p = Placement::split(&[0, 1]).unwrap();
    assert_eq!((p.server_cpus, p.client_cpus), (vec![0], vec![1]));
    let p = Placement::split(&[0, 1, 2, 3, 4]).unwrap();
    assert_eq!((p.server_cpus, p.client_cpus), (vec![0, 1], vec![2, 3, 4]));
    assert!(Placement::split(&[0])
        .unwrap_err()
        .to_string()
        .contains("at least 2"));
    let e = Placement::new(vec![0, 1], vec![1], &[0, 1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("CPU 1 is in both"), "{e}");
    let e = Placement::new(vec![0], vec![7], &[0, 1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("CPU 7 is not available"), "{e}");
    let p = Placement::resolve(None, None, &[0, 1, 2, 3]).unwrap();
    assert_eq!((p.server_cpus, p.client_cpus), (vec![0, 1], vec![2, 3]));
    let p = Placement::resolve(Some(vec![3]), None, &[0, 1, 2, 3]).unwrap();
    assert_eq!((p.server_cpus, p.client_cpus), (vec![3], vec![0, 1, 2]));
    let e = Placement::resolve(None, Some(vec![0]), &[0, 1, 2, 3]).unwrap_err();
    assert!(e.to_string().contains("CPU 0 is in both"), "{e}");
    let e = Placement::resolve(Some(vec![0]), None, &[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no CPU left"), "{e}");
}

#[test]
fn cells_are_interleaved_and_figures_come_from_metrics() {
    let mut f = Fake::new(&["a", "b", "c"]);
    let (r, seen) = go(&mut f, 2);
    let ran = r.unwrap();
    assert_eq!(f.log, ["a0", "b0", "c0", "a1", "b1", "c1"]);
    assert_eq!(ran.cells[0].reps, [1, 2]);
    assert_eq!(seen[0], "1/6 a");
    assert_eq!(seen[5], "6/6 c");
    assert_eq!(ran.cells[1].trials, ["b@0", "b@1"]);
    assert_eq!(f.rows(&ran), ["a@0,a@1", "b@0,b@1", "c@0,c@1"]);
    assert!(ran.environment.nproc > 0, "the environment is recorded");
}

#[test]
fn a_cell_that_cannot_run_is_not_tried_again_and_a_failure_is_kept() {
    let mut f = Fake::new(&["a", "b", "c"]);
    (f.skip, f.fail_once) = ("b", "c");
    let (r, seen) = go(&mut f, 3);
    let ran = r.unwrap();
    assert_eq!(f.log, ["a0", "b0", "c0", "a1", "c1", "a2", "c2"]);
    assert_eq!(ran.cells[1].skipped.as_deref(), Some("not here"));
    assert!(ran.cells[1].trials.is_empty());
    assert_eq!(ran.cells[2].failures, ["flaky"]);
    assert_eq!(ran.cells[2].trials, ["c@1", "c@2"]);
    assert!(seen.contains(&"b: not measured: not here".to_string()));
    assert!(seen.contains(&"c: failed: flaky".to_string()));
}

#[test]
fn groups_are_entered_once_per_repetition_and_left_after() {
    let mut f = Fake::new(&["g1-a", "g1-b", "g2-a", "x"]);
    f.refuse = Some("g2");
    let (r, _) = go(&mut f, 2);
    let ran = r.unwrap();
    assert_eq!(
        f.log,
        [
            "enter g1", "g1-a0", "g1-b0", "leave", "enter g2", "leave", "x0", //
            "enter g1", "g1-a1", "g1-b1", "leave", "enter g2", "leave", "x1",
        ]
    );
    assert_eq!(ran.cells[2].skipped.as_deref(), Some("EOPNOTSUPP"));
}

#[test]
fn in_turn_runs_each_cells_repetitions_in_a_row_and_revises_the_rest() {
    let mut f = Fake::new(&["a", "b", "c", "d"]);
    f.order = Order::InTurn;
    f.revise_after = Some("a");
    let (r, seen) = go(&mut f, 2);
    let ran = r.unwrap();
    assert_eq!(f.log, ["a0", "a1", "d0", "d1"]);
    let names: Vec<&str> = ran.skipped.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["b", "c"]);
    // The total shrank when b and c were dropped.
    assert_eq!(seen.last().unwrap(), "4/4 d");
}

#[test]
fn the_stop_flag_ends_the_run_interrupted_and_leaves_the_group() {
    let mut f = Fake::new(&["g1-a", "g1-b"]);
    f.stop_at = Some("g1-a");
    let (r, _) = go(&mut f, 2);
    assert!(matches!(r, Err(LabError::Interrupted)), "{:?}", r.err());
    assert_eq!(f.log, ["enter g1", "g1-a0", "leave"]);
}

/// The calling thread's CPUs as the kernel reports them.
fn own_cpus_list() -> String {
    crate::proc::own_status("Cpus_allowed_list:")
}

/// While trials run, the lab's own thread may not run on the server's CPUs, where its
/// wake-ups would take the CPU from a busy-polling worker (issue 25); it gets its CPUs back
/// after the run.
#[test]
fn the_lab_thread_keeps_off_the_server_cpus_during_trials() {
    let allowed = firehose_sys::cpu::allowed_cpus().unwrap();
    if allowed.len() < 2 || allowed[0] != 0 {
        eprintln!("skipped: needs CPU 0 and another CPU allowed (allowed: {allowed:?})");
        return;
    }
    // In a thread of its own, so a failure cannot leave the test harness's thread confined.
    std::thread::spawn(move || {
        let before = own_cpus_list();
        let mut f = Fake::new(&["a", "b"]);
        let (r, _) = go(&mut f, 2);
        r.unwrap();
        let rest = CpuSet::from(&allowed[1..]).to_string();
        assert_eq!(f.cpus_seen.len(), 4);
        for seen in &f.cpus_seen {
            assert_eq!(
                seen, &rest,
                "the server's CPU 0 is not among the lab's during a trial"
            );
        }
        assert_eq!(
            own_cpus_list(),
            before,
            "the lab thread's CPUs are given back"
        );
    })
    .join()
    .unwrap();
}
