//! `firehose doctor`: audit the host for high-rate UDP work, apply fixes with a journal,
//! revert them. The checks, plan and journal live in crates/host; this file parses the
//! arguments, decides what runs, and prints (table or JSON).

use crate::args::{parse_duration, parse_port, Usage};
use anyhow::Result;
use clap::Args;
use firehose_host::doctor::{
    self,
    apply::{self, LiveActuator, Outcome, StepResult},
    journal::{Identity, Journal, DEFAULT_PATH},
    plan, Row, Scope, Status,
};
use firehose_host::fs::HostFs;
use firehose_host::nic::LiveNic;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The drop counters' window when --sample is not given: short, so the doctor stays quick.
const DEFAULT_SAMPLE: Duration = Duration::from_millis(500);

#[derive(Debug, Args)]
#[command(
    after_help = "Exit code 1 when a check is bad (or a change failed), 0 otherwise.\n\n\
EXAMPLES:\n  \
  firehose doctor                      audit, one line per check\n  \
  firehose doctor --verbose rmem       why and from where\n  \
  firehose doctor --port 9000 --sample 2\n  \
  firehose doctor ntp-clock ntp-port   before serve --proto ntp\n  \
  firehose doctor --apply --dry-run    the plan; then as root: firehose doctor --apply\n  \
  firehose doctor --apply --persist    also keep the sysctls across reboots\n  \
  firehose doctor --revert             undo what --apply changed"
)]
pub struct DoctorArgs {
    /// Checks to run or apply (default: all). `firehose doctor --list` names them.
    #[arg(value_name = "CHECK")]
    checks: Vec<String>,
    /// Interface to audit and fix (repeatable; default: every NIC with a device).
    #[arg(long = "iface", value_name = "NAME")]
    ifaces: Vec<String>,
    /// UDP port of a server: check its sockets' drops and reuseport steering.
    #[arg(long, value_parser = parse_port)]
    port: Option<u16>,
    /// Judge the drop counters over this window (e.g. 2, 500ms) [default: 500ms for the
    /// audit; totals since boot are shown beside them, as context].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    sample: Option<Duration>,
    /// The audit (host, summary, checks), or what --apply/--revert did, as one JSON
    /// document instead of the table.
    #[command(flatten)]
    json: crate::meta::JsonArgs,
    /// Say why and from where for every check, not only for warn and bad.
    #[arg(short, long)]
    verbose: bool,
    /// Apply the fixes of failing checks (only the named CHECKs, only --iface ones).
    #[arg(long, conflicts_with = "revert")]
    apply: bool,
    /// With --apply: print the plan and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// With --apply: also write the sysctl settings it changed to /etc/sysctl.d/90-firehose.conf
    /// (read at boot; journaled, so --revert removes or restores the file).
    #[arg(long, requires = "apply")]
    persist: bool,
    /// Restore every value the journal recorded, newest first.
    #[arg(long)]
    revert: bool,
    /// Journal file for --apply/--revert.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_PATH)]
    journal: PathBuf,
    /// List the checks and exit.
    #[arg(long)]
    list: bool,
}

/// Runs the subcommand; returns the exit code (0 ok, 1 a bad check or a failed change).
pub fn run(a: DoctorArgs) -> Result<i32> {
    if a.list {
        for (name, what, _) in doctor::CHECKS {
            say!("{name:<15} {what}");
        }
        return Ok(0);
    }
    if let Some(bad) = a.checks.iter().find(|c| !doctor::is_check(c)) {
        return Err(Usage(format!(
            "unknown check '{bad}' (firehose doctor --list names them)"
        ))
        .into());
    }
    if a.dry_run && !a.apply {
        return Err(Usage("--dry-run goes with --apply".into()).into());
    }
    if a.apply && (a.sample.is_some() || a.port.is_some()) {
        return Err(Usage(
            "--sample and --port only feed the audit; --apply fixes settings, not counters".into(),
        )
        .into());
    }
    if a.revert && (!a.checks.is_empty() || a.sample.is_some() || a.port.is_some()) {
        return Err(Usage(
            "--revert restores the whole journal: it takes no CHECK, --port or --sample".into(),
        )
        .into());
    }
    let mut doc = a.json.open()?;
    let json = doc.wanted();
    let fs = HostFs::live();
    for i in &a.ifaces {
        if i.is_empty() || i.contains('/') || !fs.exists(&format!("/sys/class/net/{i}")) {
            return Err(Usage(format!("--iface {i}: no such interface (see ip link)")).into());
        }
    }
    if (a.apply && !a.dry_run) || a.revert {
        let uid = fs
            .read("/proc/self/status")
            .ok()
            .and_then(|s| firehose_host::text::effective_uid(&s));
        if uid != Some(0) {
            let what = if a.revert { "--revert" } else { "--apply" };
            return Err(Usage(format!(
                "doctor {what} changes kernel settings and needs root (effective uid {}); run it as root, or use --apply --dry-run to see the plan",
                uid.map_or("unknown".into(), |u| u.to_string())
            ))
            .into());
        }
    }
    let nic = LiveNic::new();
    let act = LiveActuator { fs: &fs, nic: &nic };
    let journal = Journal::new(&a.journal);
    let id = Identity::read(&fs);
    if a.revert {
        let out = apply::revert(&act, &journal, &id)?;
        print_outcomes(&mut doc, &out, "revert")?;
        let clean = out.iter().all(|o| matches!(o.result, StepResult::Done(_)));
        if !json && !out.iter().any(Outcome::failed) {
            say!("journal retired to {}.reverted", journal.path().display());
        }
        return Ok(i32::from(!clean));
    }
    let scope = Scope {
        ifaces: a.ifaces.clone(),
        port: a.port,
        // The audit judges drops happening now; --apply only reads settings.
        sample: a.sample.or((!a.apply).then_some(DEFAULT_SAMPLE)),
    };
    // The audit's window is also watched by the drop watch of `firehose drops` (as root),
    // so the live checks name the kernel's reason for each drop, not only its count.
    let watch =
        (!a.apply && scope.sample.is_some()).then(firehose_observe::attribution::LossWatch::start);
    let mut facts = doctor::gather(&fs, &nic, &scope);
    facts.drop_reasons = watch.map(|w| drop_reasons(w, a.port));
    if !a.apply {
        let rows = doctor::audit(&facts, &a.checks);
        if json {
            doc.write(&audit_document(&rows))?;
        } else {
            pipe_ok(print_rows(&rows, a.verbose))?;
        }
        return Ok(doctor::exit_code(&rows));
    }
    let rows = doctor::audit(&facts, &[]);
    let steps = apply::select(&rows, &a.checks, &a.ifaces);
    if steps.is_empty() {
        if json {
            print_outcomes(&mut doc, &[], "apply")?;
        } else {
            say!("nothing to apply: no failing check with an automatic fix in this scope");
        }
        return Ok(0);
    }
    if a.dry_run {
        let mut steps = steps;
        if a.persist {
            let planned: Vec<_> = steps
                .iter()
                .map(|s| (s.target.clone(), s.value.clone()))
                .collect();
            steps.extend(plan::persist_step(&planned));
        }
        let out = apply::dry_run(&steps, &act);
        print_outcomes(&mut doc, &out, "plan")?;
        return Ok(0);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = apply::apply(&steps, &act, &journal, &id, now)?;
    if a.persist {
        // Only what was changed and read back goes into the boot-time file: a setting
        // skipped as already higher must not be lowered at the next boot.
        let changed: Vec<_> = steps
            .iter()
            .zip(&out)
            .filter(|(_, o)| matches!(o.result, StepResult::Done(_)))
            .map(|(s, _)| (s.target.clone(), s.value.clone()))
            .collect();
        if let Some(step) = plan::persist_step(&changed) {
            out.extend(apply::apply(&[step], &act, &journal, &id, now)?);
        }
    }
    print_outcomes(&mut doc, &out, "apply")?;
    if !json {
        say!(
            "journal: {} (undo with: firehose doctor --revert --journal {})",
            journal.path().display(),
            journal.path().display()
        );
    }
    Ok(i32::from(out.iter().any(Outcome::failed)))
}

/// A reader that went away (`firehose doctor | head`) is not an error of the doctor.
/// The watch's drops over the window: at `port`, or all of them.
fn drop_reasons(
    w: Result<firehose_observe::attribution::LossWatch, firehose_observe::ObserveError>,
    port: Option<u16>,
) -> Result<doctor::DropReasons, String> {
    let w = w.map_err(|e| e.to_string())?;
    let a = match port {
        Some(p) => w.finish(&firehose_observe::attribution::Scope {
            ports: vec![p],
            pids: Vec::new(),
        }),
        None => w.finish_all(),
    }
    .map_err(|e| e.to_string())?;
    Ok(doctor::DropReasons {
        via: a.via,
        total: a.drops,
        lines: a.lines,
    })
}

fn pipe_ok(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// The counts of a verdict, in the order they are shown: bad, warn, ok, n/a.
const ORDER: [Status; 4] = [Status::Bad, Status::Warn, Status::Ok, Status::NotApplicable];

fn summary(rows: &[Row]) -> String {
    ORDER
        .iter()
        .map(|s| {
            let n = rows.iter().filter(|r| r.status == *s).count();
            format!("{n} {}", s.as_str())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The verdict first, then one line per check grouped bad, warn, ok (the n/a checks named on
/// one line unless `--verbose`); why, where from
/// and the fix (the command alone, safe to paste) under warn and bad, or every row with
/// `--verbose`; last, how to apply the automatic fixes.
fn print_rows(rows: &[Row], verbose: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let hint = if verbose {
        ""
    } else {
        " (--verbose: why each matters, where read)"
    };
    writeln!(
        out,
        "firehose doctor on {}: {}{hint}",
        hostname(),
        summary(rows)
    )?;
    for status in ORDER {
        if status == Status::NotApplicable && !verbose {
            // What does not apply here is named on one line; --verbose says why for each.
            let names: Vec<&str> = rows
                .iter()
                .filter(|r| r.status == status)
                .map(|r| r.check)
                .collect();
            if !names.is_empty() {
                writeln!(out, "n/a   {}", names.join(", "))?;
            }
            continue;
        }
        for r in rows.iter().filter(|r| r.status == status) {
            writeln!(
                out,
                "{:<4}  {:<14} {:<8} {}",
                r.status.as_str(),
                r.check,
                r.subject,
                r.value
            )?;
            if verbose {
                writeln!(out, "      why:  {}", r.why)?;
                writeln!(out, "      from: {}", r.source)?;
            }
            if let (Some(fix), true) = (&r.fix, verbose || status >= Status::Warn) {
                writeln!(out, "      fix:  {fix}")?;
            }
        }
    }
    let mut auto: Vec<&str> = rows
        .iter()
        .filter(|r| !r.steps.is_empty())
        .map(|r| r.check)
        .collect();
    auto.dedup();
    if !auto.is_empty() {
        writeln!(
            out,
            "to apply the fixes marked automatic (root; journaled, undone by --revert):\n  \
             firehose doctor --apply {}",
            auto.join(" ")
        )?;
    }
    if rows
        .iter()
        .any(|r| r.fix.as_deref().is_some_and(|f| f.contains("sysctl -w")))
    {
        writeln!(
            out,
            "note: sysctl changes last until reboot; `firehose doctor --apply --persist` also \
             writes them to /etc/sysctl.d/90-firehose.conf (undone by --revert)"
        )?;
    }
    out.flush()
}

/// What `doctor --json` prints: the host, the build, the verdict counts and every row.
#[derive(serde::Serialize)]
struct AuditDocument<'a> {
    host: String,
    summary: std::collections::BTreeMap<&'static str, usize>,
    checks: &'a [Row],
}

fn audit_document(rows: &[Row]) -> AuditDocument<'_> {
    AuditDocument {
        host: hostname(),
        summary: ORDER
            .iter()
            .map(|s| (s.as_str(), rows.iter().filter(|r| r.status == *s).count()))
            .collect(),
        checks: rows,
    }
}

/// What `doctor --apply/--revert --json` writes: one row per step.
#[derive(serde::Serialize)]
struct OutcomesDocument<'a> {
    /// "apply", "plan" (--dry-run) or "revert".
    action: &'a str,
    outcomes: &'a [Outcome],
}

/// The outcomes as a table, or as the JSON document when one was asked for.
fn print_outcomes(
    doc: &mut crate::meta::JsonOut,
    outcomes: &[Outcome],
    what: &str,
) -> anyhow::Result<()> {
    if doc.wanted() {
        return doc.write(&OutcomesDocument {
            action: what,
            outcomes,
        });
    }
    Ok(pipe_ok(print_table(outcomes, what))?)
}

fn print_table(outcomes: &[Outcome], what: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for o in outcomes {
        let (word, note) = match &o.result {
            StepResult::Done(n) if what == "plan" => ("plan", n),
            StepResult::Done(n) => ("done", n),
            StepResult::Skipped(n) => ("skip", n),
            StepResult::Failed(n) => ("FAIL", n),
        };
        if let StepResult::Skipped(n) = &o.result {
            writeln!(out, "{word:<4}  {:<13} {}: {n}", o.check, o.target)?;
            continue;
        }
        let old = o.old.as_deref().map_or("?".into(), one_line);
        writeln!(
            out,
            "{word:<4}  {:<13} {}: {old} -> {}",
            o.check,
            o.target,
            one_line(&o.new)
        )?;
        let note = if note.is_empty() {
            String::new()
        } else {
            format!("  ({note})")
        };
        writeln!(out, "      {}{note}", o.command)?;
    }
    out.flush()
}

/// A value for one line of the table: a whole file (the --persist file) as its line count.
fn one_line(v: &str) -> String {
    match v.trim().lines().count() {
        0 | 1 => v.trim().to_string(),
        n => format!("({n} lines)"),
    }
}
