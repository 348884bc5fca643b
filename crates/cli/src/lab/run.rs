//! How every lab study is run from the command line: the stop flag (SIGINT and SIGTERM)
//! installed before anything is built, progress on stderr, the page printed, the JSON
//! document written where `--json`/`--json-file` asked and, with `--report DIR`, the run's
//! logs in `DIR/runs`, `report.md`, `report.html` and `results.json` there.

use crate::args::Usage;
use crate::meta::{JsonArgs, JsonOut};
use anyhow::{Context, Result};
use firehose_lab::study::Placement;
use firehose_lab::study::{self, Event, Study};
use firehose_lab::LabError;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Turns a lab error into the binary's: usage errors exit 2.
pub(crate) fn lab_err(e: LabError) -> anyhow::Error {
    match e {
        LabError::Usage(m) => Usage(m).into(),
        other => other.into(),
    }
}

/// A flag set by SIGINT and SIGTERM, installed before any test host exists so that no
/// signal can leave one behind.
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    Ok(stop)
}

/// Prints a run's progress: on a terminal one line rewritten in place, otherwise a line
/// per trial; notes (a cell not measured) on their own line either way.
struct Progress {
    tty: bool,
    dirty: bool,
}

impl Progress {
    fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            dirty: false,
        }
    }

    fn event(&mut self, e: Event<'_>) {
        match e {
            Event::Trial(p) => {
                let line = format!(
                    "firehose lab: run {} of {}: {} (repetition {} of {}), about {:.0} s left",
                    p.done + 1,
                    p.total,
                    p.cell,
                    p.repetition,
                    p.repetitions,
                    p.seconds_left
                );
                if self.tty {
                    eprint!("\r\x1b[K{line}");
                    self.dirty = true;
                } else {
                    eprintln!("{line}");
                }
            }
            Event::Note(n) => {
                self.clear();
                eprintln!("firehose lab: {n}");
            }
        }
        let _ = std::io::stderr().flush();
    }

    fn clear(&mut self) {
        if self.dirty {
            eprint!("\r\x1b[K");
            self.dirty = false;
        }
    }
}

/// What a study's run needs from the command line.
pub(crate) struct StudyRun<'a> {
    pub json: &'a JsonArgs,
    pub report: Option<&'a Path>,
    pub placement: Placement,
    pub repetitions: usize,
    /// Seconds one trial takes, for the time left before the first trial ends.
    pub guess_s: f64,
    /// The firehose binary to start (this one unless the study measures another).
    pub bin: Option<std::path::PathBuf>,
}

/// Runs `study`, prints its page, writes its document and report.
pub(crate) fn run_study<S: Study>(study: &mut S, r: StudyRun<'_>) -> Result<()> {
    let mut json = r.json.open()?;
    let stop = stop_flag()?;
    let bin = match r.bin {
        Some(b) => b,
        None => std::env::current_exe().context("locating the firehose binary")?,
    };
    let ctx = study::Context {
        bin,
        stop: &stop,
        logs: r.report.map(|d| d.join("runs")),
        placement: r.placement,
        repetitions: r.repetitions,
        guess_s: r.guess_s,
    };
    let mut progress = Progress::new();
    let res = study::run(study, ctx, &mut |e| progress.event(e));
    progress.clear();
    let ran = res.map_err(lab_err)?;
    let rows = study.rows(&ran);
    let page = study::page(study, &ran, &rows);
    print!("{}", page.text());
    let doc = study::document(study, &ran, &rows);
    write_outputs(&mut json, &doc, r.report, |dir| {
        firehose_lab::report::write_pages(dir, &page.markdown(), &page.html()?)
    })
}

/// Writes a run's document where --json/--json-file asked and, with --report DIR, the
/// pages (`pages`) and a copy of the document there; says where each went.
pub(crate) fn write_outputs<T: serde::Serialize>(
    json: &mut JsonOut,
    doc: &T,
    report: Option<&Path>,
    pages: impl FnOnce(&Path) -> Result<(), LabError>,
) -> Result<()> {
    json.write(doc)?;
    if let Some(p) = json.path() {
        println!("results: {}", p.display());
    }
    if let Some(dir) = report {
        pages(dir).map_err(lab_err)?;
        // The directory's copy carries the build, like every document.
        JsonOut::File(dir.join("results.json")).write(doc)?;
        println!("report: {}", dir.join("report.html").display());
    }
    Ok(())
}

/// `--firehose-bin`, checked: the binary that serves and loads instead of this one.
pub fn firehose_bin(given: &Option<std::path::PathBuf>) -> Result<Option<std::path::PathBuf>> {
    match given {
        Some(p) if !p.is_file() => Err(crate::args::Usage(format!(
            "--firehose-bin {}: no such file; give the path of a firehose binary",
            p.display()
        ))
        .into()),
        other => Ok(other.clone()),
    }
}
