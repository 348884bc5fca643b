//! Carrying out a plan and undoing it. Every change is journaled before it is made and read
//! back after; revert restores old values in reverse order and leaves alone any value that
//! someone else changed after us.

use super::journal::{Entry, Identity, Journal, JournalError};
use super::plan::{self, Phase, Step, Target};
use super::Row;
use crate::fs::HostFs;
use crate::nic::Nic;
use firehose_sys::netdev::Netdev;

/// A refused read or write, with the errno when the kernel gave one.
#[derive(Debug, Clone, PartialEq)]
pub struct ActError {
    pub message: String,
    pub errno: Option<i32>,
}

impl std::fmt::Display for ActError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Reads and writes targets; the seam that lets tests run apply/revert on a fake host.
pub trait Actuator {
    /// The current value, exactly as the host shows it.
    fn read(&self, target: &Target) -> Result<String, ActError>;
    /// Sets a value.
    fn write(&self, target: &Target, value: &str) -> Result<(), ActError>;
}

/// The running host: files through [`HostFs`], offloads and RSS through ethtool, services
/// through systemctl.
pub struct LiveActuator<'a> {
    pub fs: &'a HostFs,
    pub nic: &'a dyn Nic,
}

fn fs_err(e: crate::fs::FsError) -> ActError {
    ActError {
        message: e.to_string(),
        errno: e.errno,
    }
}

fn sys_err(e: firehose_sys::SysError) -> ActError {
    ActError {
        errno: e.errno(),
        message: e.to_string(),
    }
}

/// EOPNOTSUPP, without a libc dependency in this crate.
fn libc_eopnotsupp() -> i32 {
    95
}

fn nic_err(e: crate::nic::NicError) -> ActError {
    ActError {
        message: e.to_string(),
        errno: e.errno,
    }
}

impl Actuator for LiveActuator<'_> {
    fn read(&self, target: &Target) -> Result<String, ActError> {
        match target {
            Target::File { path, .. } => self.fs.read(path).map_err(fs_err),
            Target::Feature { iface, feature } => self
                .nic
                .feature(iface, *feature)
                .map(|on| if on { "on" } else { "off" }.to_string())
                .map_err(nic_err),
            Target::Rss { iface } => self
                .nic
                .rss_table(iface)
                .map(|t| t.iter().map(u32::to_string).collect::<Vec<_>>().join(" "))
                .map_err(nic_err),
            Target::Config { path } => match self.fs.read(path) {
                Err(e) if e.is_absent() => Ok(plan::ABSENT.into()),
                r => r.map_err(fs_err),
            },
            Target::Napi { napi, param, .. } => {
                let n = Netdev::open()
                    .and_then(|mut nd| nd.napi(*napi))
                    .map_err(sys_err)?;
                param.of(&n).map(|v| v.to_string()).ok_or_else(|| ActError {
                    message: format!(
                        "napi-get id {napi} does not report {} (a kernel before 6.13)",
                        param.name()
                    ),
                    errno: Some(libc_eopnotsupp()),
                })
            }
            Target::Service { name } => {
                let out = std::process::Command::new("systemctl")
                    .args(["is-active", name])
                    .output()
                    .map_err(|e| ActError {
                        message: format!("systemctl is-active {name}: {e}"),
                        errno: e.raw_os_error(),
                    })?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            }
        }
    }

    fn write(&self, target: &Target, value: &str) -> Result<(), ActError> {
        match target {
            Target::File { path, .. } => self.fs.write(path, value).map_err(fs_err),
            Target::Config { path } if value == plan::ABSENT => {
                self.fs.remove(path).map_err(fs_err)
            }
            Target::Config { path } => self.fs.write_file(path, value).map_err(fs_err),
            Target::Feature { iface, feature } => self
                .nic
                .set_feature(iface, *feature, value.trim() == "on")
                .map_err(nic_err),
            Target::Rss { iface } => {
                let table = value
                    .split_whitespace()
                    .map(|q| q.parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| ActError {
                        message: format!("bad RSS table {value:?}"),
                        errno: None,
                    })?;
                self.nic.set_rss_table(iface, &table).map_err(nic_err)
            }
            Target::Napi { napi, param, .. } => {
                let v = value.trim().parse::<u64>().map_err(|_| ActError {
                    message: format!("bad NAPI setting {value:?}"),
                    errno: None,
                })?;
                Netdev::open()
                    .and_then(|mut nd| nd.set(*napi, *param, v))
                    .map_err(sys_err)
            }
            Target::Service { name } => {
                let verb = if value.trim() == "active" {
                    "start"
                } else {
                    "stop"
                };
                let st = std::process::Command::new("systemctl")
                    .args([verb, name])
                    .status()
                    .map_err(|e| ActError {
                        message: format!("systemctl {verb} {name}: {e}"),
                        errno: e.raw_os_error(),
                    })?;
                if st.success() {
                    Ok(())
                } else {
                    Err(ActError {
                        message: format!("systemctl {verb} {name}: {st}"),
                        errno: None,
                    })
                }
            }
        }
    }
}

/// Picks the steps to carry out from the audit rows: those of the named checks (all when
/// none is named) on the named interfaces (all when none is named; host-wide steps always
/// pass). Duplicate targets are dropped. Pinning IRQs pulls in stopping irqbalance, which
/// would move them back. The result is in phase order.
pub fn select(rows: &[Row], checks: &[String], ifaces: &[String]) -> Vec<Step> {
    let wanted = |s: &Step| {
        (checks.is_empty() || checks.iter().any(|c| c == s.check))
            && (ifaces.is_empty() || s.iface.as_ref().is_none_or(|i| ifaces.contains(i)))
    };
    let mut steps: Vec<Step> = Vec::new();
    let all = rows.iter().flat_map(|r| r.steps.iter());
    for s in all.clone().filter(|s| wanted(s)) {
        if !steps.iter().any(|t| t.target == s.target) {
            steps.push(s.clone());
        }
    }
    if steps.iter().any(|s| s.phase == Phase::IrqAffinity) {
        for s in all.filter(|s| s.phase == Phase::Irqbalance) {
            if !steps.iter().any(|t| t.target == s.target) {
                steps.push(s.clone());
            }
        }
    }
    plan::order(steps)
}

/// What happened to one step or journal entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "result", content = "note", rename_all = "lowercase")]
pub enum StepResult {
    /// Changed and read back as intended (apply), or restored (revert).
    Done(String),
    /// Deliberately not changed: already set, already higher, refused IRQ, changed by others.
    Skipped(String),
    /// Tried and failed.
    Failed(String),
}

/// One line of an apply or revert report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    pub check: String,
    pub target: String,
    pub command: String,
    pub old: Option<String>,
    pub new: String,
    #[serde(flatten)]
    pub result: StepResult,
}

impl Outcome {
    pub fn failed(&self) -> bool {
        matches!(self.result, StepResult::Failed(_))
    }
    pub fn skipped(&self) -> bool {
        matches!(self.result, StepResult::Skipped(_))
    }
}

fn show(v: &str) -> String {
    v.trim().to_string()
}

/// The plan as it would run now: each step with its current value and whether it would be
/// skipped. Changes nothing.
pub fn dry_run(steps: &[Step], act: &dyn Actuator) -> Vec<Outcome> {
    steps
        .iter()
        .map(|s| preflight(s, act).0)
        .map(|mut o| {
            if matches!(o.result, StepResult::Done(_)) {
                o.result = StepResult::Done("would change".into());
            }
            o
        })
        .collect()
}

/// Reads the current value and decides whether the step needs doing: returns the outcome so
/// far and, when the change is to be made, the exact old value to journal.
fn preflight(s: &Step, act: &dyn Actuator) -> (Outcome, Option<String>) {
    let mut o = Outcome {
        check: s.check.to_string(),
        target: s.target.label(),
        command: s.command(),
        old: None,
        new: s.value.clone(),
        result: StepResult::Done(String::new()),
    };
    let old = match act.read(&s.target) {
        Ok(v) => v,
        Err(e) => {
            o.result = StepResult::Failed(format!("cannot read: {e}"));
            return (o, None);
        }
    };
    o.old = Some(show(&old));
    if s.target.kind().same(&old, &s.value) {
        o.result = StepResult::Skipped("already set".into());
        return (o, None);
    }
    if s.raise_only && plan::would_lower(&old, &s.value) {
        o.result = StepResult::Skipped(format!("already higher ({}); never lowered", show(&old)));
        return (o, None);
    }
    (o, Some(old))
}

/// Carries out the steps in order: journal, change, read back. Stops at the first journal
/// failure (no change is made that could not be undone).
pub fn apply(
    steps: &[Step],
    act: &dyn Actuator,
    journal: &Journal,
    id: &Identity,
    now: u64,
) -> Result<Vec<Outcome>, JournalError> {
    let existing = journal.read()?;
    journal.check_identity(&existing.entries, id)?;
    let mut seq = existing.entries.iter().map(|e| e.seq).max().unwrap_or(0);
    let mut out: Vec<Outcome> = existing
        .torn
        .map(|l| torn(journal, l))
        .into_iter()
        .collect();
    let mut irqbalance_running = false;
    for s in steps {
        let (mut o, old) = preflight(s, act);
        if irqbalance_running && s.phase == Phase::IrqAffinity {
            // Pinning now would be undone within seconds; leave the IRQ as it is.
            o.result = StepResult::Skipped(
                "irqbalance could not be stopped and would move this IRQ back".into(),
            );
            out.push(o);
            continue;
        }
        let Some(old) = old else {
            out.push(o);
            continue;
        };
        seq += 1;
        journal.append(&Entry {
            seq,
            check: s.check.to_string(),
            target: s.target.clone(),
            old: old.clone(),
            new: s.value.clone(),
            id: id.clone(),
            time: now,
        })?;
        o.result = match act.write(&s.target, &s.value) {
            Err(e) if is_irq(&s.target) && matches!(e.errno, Some(5) | Some(1)) => {
                StepResult::Skipped(format!("the kernel will not move this IRQ: {e}"))
            }
            Err(e) => StepResult::Failed(e.to_string()),
            Ok(()) => match act.read(&s.target) {
                Ok(back) if s.target.kind().same(&back, &s.value) => {
                    StepResult::Done(format!("reads back {}", show(&back)))
                }
                Ok(back) => {
                    StepResult::Failed(format!("wrote {} but reads back {}", s.value, show(&back)))
                }
                Err(e) => StepResult::Failed(format!("cannot read back: {e}")),
            },
        };
        irqbalance_running |= s.phase == Phase::Irqbalance && o.failed();
        out.push(o);
    }
    Ok(out)
}

fn is_irq(t: &Target) -> bool {
    matches!(t, Target::File { path, .. } if path.starts_with("/proc/irq/"))
}

/// The report line of a torn last journal line, which was ignored.
fn torn(journal: &Journal, line: usize) -> Outcome {
    Outcome {
        check: "journal".into(),
        target: journal.path().display().to_string(),
        command: String::new(),
        old: None,
        new: String::new(),
        result: StepResult::Skipped(format!(
            "line {line} is torn (cut short by a crash while it was written, before its change was made): ignored"
        )),
    }
}

/// The keys (`net.core.rmem_max`) a `--persist` file's text sets.
fn persisted_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .collect()
}

/// Whether `e`, written in another boot, still describes the host: the `--persist` file
/// (on disk, it survived the reboot) and the sysctls it set again at boot. Everything else
/// was reset by the reboot. `persisted` holds the keys of every persist file journaled.
fn survives_reboot(e: &Entry, persisted: &[String]) -> bool {
    match &e.target {
        Target::Config { .. } => true,
        Target::File { path, .. } => path
            .strip_prefix("/proc/sys/")
            .is_some_and(|k| persisted.contains(&plan::sysctl_key(k))),
        _ => false,
    }
}

/// Restores the journal's old values, newest first. A value that no longer reads as what we
/// set was changed by someone else: it is reported and left alone. Entries from another
/// boot are replayed only where they survive a reboot (the `--persist` file, and the
/// sysctls it set at boot, in the namespace that set them); the rest is reported as reset
/// by the reboot. The journal is retired (renamed `.reverted`) unless a restore failed, so
/// a failed revert can be retried.
pub fn revert(
    act: &dyn Actuator,
    journal: &Journal,
    id: &Identity,
) -> Result<Vec<Outcome>, JournalError> {
    let contents = journal.read()?;
    let entries = contents.entries;
    if entries.is_empty() {
        return Err(JournalError::Missing {
            path: journal.path().to_path_buf(),
        });
    }
    for e in entries.iter().filter(|e| e.id.boot_id == id.boot_id) {
        journal.check_netns(e, id)?;
    }
    let persisted: Vec<String> = entries
        .iter()
        .filter(|e| matches!(e.target, Target::Config { .. }))
        .flat_map(|e| persisted_keys(&e.new))
        .collect();
    let mut out: Vec<Outcome> = contents
        .torn
        .map(|l| torn(journal, l))
        .into_iter()
        .collect();
    for e in entries.iter().rev() {
        let kind = e.target.kind();
        let mut o = Outcome {
            check: e.check.clone(),
            target: e.target.label(),
            command: e.target.command(e.old.trim()),
            old: None,
            new: show(&e.old),
            result: StepResult::Done(String::new()),
        };
        if e.id.boot_id != id.boot_id {
            let file = matches!(e.target, Target::Config { .. });
            if !survives_reboot(e, &persisted) {
                o.result = StepResult::Skipped(format!(
                    "set in boot {}; the reboot reset it",
                    e.id.boot_id
                ));
                out.push(o);
                continue;
            }
            if !file && e.id.netns != id.netns {
                o.result = StepResult::Skipped(format!(
                    "set at boot from the --persist file in network namespace {}, this is {}; left as is",
                    e.id.netns, id.netns
                ));
                out.push(o);
                continue;
            }
        }
        let cur = match act.read(&e.target) {
            Ok(c) => c,
            Err(err) => {
                o.result = StepResult::Failed(format!("cannot read: {err}"));
                out.push(o);
                continue;
            }
        };
        o.old = Some(show(&cur));
        o.result = if cur == e.old {
            StepResult::Done("already at its old value".into())
        } else if !kind.same(&cur, &e.new) && !kind.same(&cur, &e.old) {
            StepResult::Skipped(format!(
                "changed by someone else since apply (now {}, doctor set {}); left as is",
                show(&cur),
                show(&e.new)
            ))
        } else {
            match act.write(&e.target, &e.old) {
                Err(err) => StepResult::Failed(err.to_string()),
                Ok(()) => match act.read(&e.target) {
                    Ok(back) if back == e.old => StepResult::Done("restored exactly".into()),
                    Ok(back) if kind.same(&back, &e.old) => {
                        StepResult::Done(format!("restored (reads {})", show(&back)))
                    }
                    Ok(back) => StepResult::Failed(format!(
                        "wrote {} but reads back {}",
                        show(&e.old),
                        show(&back)
                    )),
                    Err(err) => StepResult::Failed(format!("cannot read back: {err}")),
                },
            }
        };
        out.push(o);
    }
    if !out.iter().any(Outcome::failed) {
        journal.retire()?;
    }
    Ok(out)
}
