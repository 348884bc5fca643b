//! `firehose doctor`: audit the host for high-rate UDP work, apply fixes with a journal,
//! revert them. The checks, plan and journal live in crates/host; this file parses the
//! arguments, decides what runs, and prints (table or JSON).

use crate::args::{parse_duration, Usage};
use anyhow::Result;
use clap::Args;
use firehose_host::doctor::{
    self,
    apply::{self, LiveActuator, Outcome, Verdict},
    journal::{Identity, Journal, DEFAULT_PATH},
    Row, Scope, Status,
};
use firehose_host::fs::HostFs;
use firehose_host::nic::LiveNic;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
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
    /// Sample live counters for this long (e.g. 2, 500ms) and judge deltas.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    sample: Option<Duration>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Apply the fixes of failing checks (only the named CHECKs, only --iface ones).
    #[arg(long, conflicts_with = "revert")]
    apply: bool,
    /// With --apply: print the plan and change nothing.
    #[arg(long)]
    dry_run: bool,
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

fn parse_port(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("'{s}' is not a UDP port (1-65535)")),
    }
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
        pipe_ok(print_outcomes(&out, a.json, "revert"))?;
        let clean = out.iter().all(|o| matches!(o.result, Verdict::Done(_)));
        if !a.json && !out.iter().any(Outcome::failed) {
            say!("journal retired to {}.reverted", journal.path().display());
        }
        return Ok(i32::from(!clean));
    }
    let scope = Scope {
        ifaces: a.ifaces.clone(),
        port: a.port,
        sample: a.sample,
    };
    let facts = doctor::gather(&fs, &nic, &scope);
    if !a.apply {
        let rows = doctor::audit(&facts, &a.checks);
        pipe_ok(print_rows(&rows, a.json))?;
        return Ok(doctor::exit_code(&rows));
    }
    let rows = doctor::audit(&facts, &[]);
    let steps = apply::select(&rows, &a.checks, &a.ifaces);
    if steps.is_empty() {
        if a.json {
            say!("[]");
        } else {
            say!("nothing to apply: no failing check with an automatic fix in this scope");
        }
        return Ok(0);
    }
    if a.dry_run {
        let out = apply::dry_run(&steps, &act);
        pipe_ok(print_outcomes(&out, a.json, "plan"))?;
        return Ok(0);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let out = apply::apply(&steps, &act, &journal, &id, now)?;
    pipe_ok(print_outcomes(&out, a.json, "apply"))?;
    if !a.json {
        say!(
            "journal: {} (undo with: firehose doctor --revert --journal {})",
            journal.path().display(),
            journal.path().display()
        );
    }
    Ok(i32::from(out.iter().any(Outcome::failed)))
}

/// A reader that went away (`firehose doctor | head`) is not an error of the doctor.
fn pipe_ok(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

fn print_rows(rows: &[Row], json: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, rows)?;
        writeln!(out)?;
        return out.flush();
    }
    for r in rows {
        writeln!(
            out,
            "{:<4}  {:<14} {:<8} {}",
            r.status.as_str(),
            r.check,
            r.subject,
            r.value
        )?;
        writeln!(out, "      from: {}", r.source)?;
        writeln!(out, "      why:  {}", r.why)?;
        if let Some(fix) = &r.fix {
            let auto = if r.steps.is_empty() { "" } else { " [--apply]" };
            writeln!(out, "      fix:  {fix}{auto}")?;
        }
    }
    let count = |s: Status| rows.iter().filter(|r| r.status == s).count();
    writeln!(
        out,
        "{} ok, {} warn, {} bad, {} n/a",
        count(Status::Ok),
        count(Status::Warn),
        count(Status::Bad),
        count(Status::NotApplicable)
    )?;
    out.flush()
}

fn print_outcomes(outcomes: &[Outcome], json: bool, what: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, outcomes)?;
        writeln!(out)?;
        return out.flush();
    }
    for o in outcomes {
        let (word, note) = match &o.result {
            Verdict::Done(n) if what == "plan" => ("plan", n),
            Verdict::Done(n) => ("done", n),
            Verdict::Skipped(n) => ("skip", n),
            Verdict::Failed(n) => ("FAIL", n),
        };
        if let Verdict::Skipped(n) = &o.result {
            writeln!(out, "{word:<4}  {:<13} {}: {n}", o.check, o.target)?;
            continue;
        }
        let old = o.old.as_deref().unwrap_or("?");
        writeln!(
            out,
            "{word:<4}  {:<13} {}: {old} -> {}",
            o.check, o.target, o.new
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
