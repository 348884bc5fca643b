//! Apply and revert over an in-memory host: journal before change, read-back, raise-only,
//! refused IRQs, third-party changes, failed restores and foreign journals. (The same code
//! runs for real in crates/cli/tests/integration/doctor_netns.rs.)

use firehose_host::doctor::apply::{self, ActError, Actuator, StepResult};
use firehose_host::doctor::journal::{Identity, Journal, JournalError};
use firehose_host::doctor::plan::{Kind, Phase, Step, Target};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Files in memory. Masks read back zero-padded to 8 digits, like the kernel does, and
/// writes to targets listed in `refuse` fail with that errno.
#[derive(Default)]
struct Mem {
    files: RefCell<BTreeMap<String, String>>,
    refuse: RefCell<BTreeMap<String, i32>>,
}

impl Mem {
    fn with(files: &[(&str, &str)]) -> Mem {
        let m = Mem::default();
        for (k, v) in files {
            m.files.borrow_mut().insert(k.to_string(), v.to_string());
        }
        m
    }
    fn get(&self, path: &str) -> String {
        self.files.borrow()[path].clone()
    }
    fn set(&self, path: &str, v: &str) {
        self.files.borrow_mut().insert(path.into(), v.into());
    }
}

impl Actuator for Mem {
    fn read(&self, t: &Target) -> Result<String, ActError> {
        self.files
            .borrow()
            .get(&t.label())
            .cloned()
            .ok_or(ActError {
                message: format!("{}: No such file or directory (ENOENT)", t.label()),
                errno: Some(2),
            })
    }
    fn write(&self, t: &Target, value: &str) -> Result<(), ActError> {
        if let Some(e) = self.refuse.borrow().get(&t.label()) {
            return Err(ActError {
                message: format!("{}: refused (errno {e})", t.label()),
                errno: Some(*e),
            });
        }
        let stored = match t.kind() {
            Kind::Mask => format!("{:0>8}\n", value.trim()),
            _ => format!("{}\n", value.trim()),
        };
        self.files.borrow_mut().insert(t.label(), stored);
        Ok(())
    }
}

fn id() -> Identity {
    Identity {
        boot_id: "boot-1".into(),
        netns: "net:[1]".into(),
    }
}

struct TempJournal(PathBuf);

impl TempJournal {
    fn new(tag: &str) -> Self {
        let p =
            std::env::temp_dir().join(format!("fh-doctor-{}-{tag}.journal", std::process::id()));
        let _ = std::fs::remove_file(&p);
        TempJournal(p)
    }
    fn journal(&self) -> Journal {
        Journal::new(&self.0)
    }
}

impl Drop for TempJournal {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("journal.reverted"));
    }
}

const XPS: &str = "/sys/class/net/eth0/queues/tx-0/xps_cpus";
const RMEM: &str = "/proc/sys/net/core/rmem_max";
const RP: &str = "/proc/sys/net/ipv4/conf/eth0/rp_filter";
const IRQ: &str = "/proc/irq/42/smp_affinity_list";

fn steps() -> Vec<Step> {
    vec![
        Step::set(
            "irq-affinity",
            Phase::IrqAffinity,
            Target::file(IRQ, Kind::CpuList),
            "3",
        ),
        Step::set("xps", Phase::Steering, Target::file(XPS, Kind::Mask), "1"),
        Step::set(
            "rmem",
            Phase::Sysctl,
            Target::file(RMEM, Kind::Text),
            "16777216",
        )
        .raise(),
        Step::set(
            "rp-filter",
            Phase::Sysctl,
            Target::file(RP, Kind::Text),
            "0",
        ),
    ]
}

fn host() -> Mem {
    Mem::with(&[
        (IRQ, "0-3\n"),
        (XPS, "00000000,00000000\n"),
        (RMEM, "212992\n"),
        (RP, "1\n"),
    ])
}

#[test]
fn apply_journals_then_changes_and_revert_restores_exact_bytes() {
    let m = host();
    let before = m.files.borrow().clone();
    let tj = TempJournal::new("a");
    let out = apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    assert!(
        out.iter().all(|o| matches!(o.result, StepResult::Done(_))),
        "{out:#?}"
    );
    assert_eq!(
        m.get(XPS),
        "00000001\n",
        "the mask reads back reformatted and still verifies"
    );
    assert_eq!(m.get(RMEM), "16777216\n");
    let entries = tj.journal().entries().unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(
        entries[1].old, "00000000,00000000\n",
        "old value kept byte for byte"
    );
    assert_eq!(entries[1].id, id());

    let out = apply::revert(&m, &tj.journal(), &id()).unwrap();
    assert!(
        out.iter()
            .all(|o| o.result == StepResult::Done("restored exactly".into())),
        "{out:#?}"
    );
    assert_eq!(out[0].target, RP, "newest first");
    assert_eq!(*m.files.borrow(), before);
    assert!(!tj.0.exists(), "journal retired");
}

#[test]
fn irqs_are_left_alone_when_irqbalance_cannot_be_stopped() {
    let m = host();
    let svc = Target::Service {
        name: "irqbalance".into(),
    };
    m.set(&svc.label(), "active\n");
    m.refuse.borrow_mut().insert(svc.label(), 1);
    let mut plan = vec![Step::set("irqbalance", Phase::Irqbalance, svc, "inactive")];
    plan.extend(steps());
    let tj = TempJournal::new("f");
    let out = apply::apply(&plan, &m, &tj.journal(), &id(), 7).unwrap();
    assert!(out[0].failed(), "{:?}", out[0]);
    assert!(
        matches!(&out[1].result, StepResult::Skipped(n) if n.contains("irqbalance could not be stopped")),
        "{:?}",
        out[1]
    );
    assert_eq!(m.get(IRQ), "0-3\n");
    assert!(
        matches!(out[2].result, StepResult::Done(_)),
        "other steps still run"
    );
}

#[test]
fn raise_only_never_lowers_and_already_set_is_skipped() {
    let m = host();
    m.set(RMEM, "33554432\n");
    m.set(RP, "0\n");
    let tj = TempJournal::new("b");
    let out = apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    assert_eq!(
        out[2].result,
        StepResult::Skipped("already higher (33554432); never lowered".into())
    );
    assert_eq!(out[3].result, StepResult::Skipped("already set".into()));
    assert_eq!(m.get(RMEM), "33554432\n");
    assert_eq!(
        tj.journal().entries().unwrap().len(),
        2,
        "skipped steps are not journaled"
    );
}

#[test]
fn refused_irq_is_skipped_with_a_note_and_other_failures_fail() {
    let m = host();
    m.refuse.borrow_mut().insert(IRQ.into(), 5); // EIO: a managed interrupt
    m.refuse.borrow_mut().insert(RP.into(), 22); // EINVAL
    let tj = TempJournal::new("c");
    let out = apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    assert!(
        matches!(&out[0].result, StepResult::Skipped(n) if n.contains("will not move this IRQ")),
        "{:?}",
        out[0]
    );
    assert!(out[3].failed());
    assert_eq!(m.get(IRQ), "0-3\n");
    // Both were journaled before the attempt; revert finds them at their old values.
    assert_eq!(tj.journal().entries().unwrap().len(), 4);
    m.refuse.borrow_mut().clear();
    let out = apply::revert(&m, &tj.journal(), &id()).unwrap();
    assert_eq!(
        out[0].result,
        StepResult::Done("already at its old value".into())
    );
    assert_eq!(m.get(XPS), "00000000,00000000\n");
}

#[test]
fn revert_skips_third_party_changes_and_keeps_a_journal_whose_restore_failed() {
    let m = host();
    let tj = TempJournal::new("d");
    apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    m.set(RMEM, "8388608\n"); // someone else
    m.refuse.borrow_mut().insert(XPS.into(), 1);
    let out = apply::revert(&m, &tj.journal(), &id()).unwrap();
    let by = |t: &str| out.iter().find(|o| o.target == t).unwrap();
    assert!(
        matches!(&by(RMEM).result, StepResult::Skipped(n) if n.contains("changed by someone else"))
    );
    assert_eq!(m.get(RMEM), "8388608\n", "not overwritten");
    assert!(by(XPS).failed());
    assert!(
        tj.0.exists(),
        "a failed restore keeps the journal for another try"
    );
    m.refuse.borrow_mut().clear();
    let out = apply::revert(&m, &tj.journal(), &id()).unwrap();
    assert_eq!(
        by_target(&out, XPS),
        StepResult::Done("restored exactly".into())
    );
    assert_eq!(
        by_target(&out, RP),
        StepResult::Done("already at its old value".into())
    );
    assert_eq!(m.get(XPS), "00000000,00000000\n");
    assert!(!tj.0.exists());
}

fn by_target(out: &[apply::Outcome], t: &str) -> StepResult {
    out.iter().find(|o| o.target == t).unwrap().result.clone()
}

#[test]
fn foreign_journals_are_refused() {
    let m = host();
    let tj = TempJournal::new("e");
    apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    let changed = m.files.borrow().clone();
    let other_boot = Identity {
        boot_id: "boot-2".into(),
        ..id()
    };
    let e = apply::apply(&steps(), &m, &tj.journal(), &other_boot, 8).unwrap_err();
    assert!(matches!(e, JournalError::OtherBoot { .. }), "{e}");
    assert!(e.to_string().contains("--revert` first"), "{e}");
    let other_ns = Identity {
        netns: "net:[2]".into(),
        ..id()
    };
    assert!(matches!(
        apply::revert(&m, &tj.journal(), &other_ns),
        Err(JournalError::OtherNetns { .. })
    ));
    assert_eq!(*m.files.borrow(), changed, "nothing replayed or applied");
    std::fs::write(&tj.0, "{not json\n").unwrap();
    let e = apply::revert(&m, &tj.journal(), &id()).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    std::fs::remove_file(&tj.0).unwrap();
    assert!(matches!(
        apply::revert(&m, &tj.journal(), &id()),
        Err(JournalError::Missing { .. })
    ));
}

#[test]
fn dry_run_reads_but_never_writes() {
    let m = host();
    let before = m.files.borrow().clone();
    let out = apply::dry_run(&steps(), &m);
    assert_eq!(out.len(), 4);
    assert_eq!(out[1].old.as_deref(), Some("00000000,00000000"));
    assert_eq!(out[1].command, format!("echo 1 > {XPS}"));
    assert_eq!(out[2].command, "sysctl -w net.core.rmem_max=16777216");
    assert!(out
        .iter()
        .all(|o| o.result == StepResult::Done("would change".into())));
    assert_eq!(*m.files.borrow(), before);
}

/// An actuator that, before every write, reads the journal from disk and records whether
/// it already holds an entry for that target with the value about to be replaced.
struct JournalFirst<'a> {
    host: &'a Mem,
    journal: PathBuf,
    seen: RefCell<Vec<(String, bool)>>,
}

impl Actuator for JournalFirst<'_> {
    fn read(&self, t: &Target) -> Result<String, ActError> {
        self.host.read(t)
    }
    fn write(&self, t: &Target, value: &str) -> Result<(), ActError> {
        let now = self.host.get(&t.label());
        let entries = Journal::new(&self.journal).entries().unwrap_or_default();
        let journaled = entries
            .iter()
            .any(|e| e.target.label() == t.label() && e.old == now && e.new == value);
        self.seen.borrow_mut().push((t.label(), journaled));
        self.host.write(t, value)
    }
}

#[test]
fn every_change_is_journaled_on_disk_before_it_is_made() {
    let m = host();
    let tj = TempJournal::new("first");
    let act = JournalFirst {
        host: &m,
        journal: tj.0.clone(),
        seen: RefCell::new(Vec::new()),
    };
    let out = apply::apply(&steps(), &act, &tj.journal(), &id(), 7).unwrap();
    assert!(
        out.iter().all(|o| matches!(o.result, StepResult::Done(_))),
        "{out:#?}"
    );
    let seen = act.seen.into_inner();
    assert_eq!(seen.len(), 4, "every step wrote: {seen:?}");
    for (target, journaled) in seen {
        assert!(
            journaled,
            "{target} was changed before its journal entry was on disk"
        );
    }
}

/// `--apply --persist`: the boot-time file holds only the sysctls, is journaled like every
/// change, and `--revert` removes it (it was absent) or restores its bytes (it existed).
#[test]
fn the_persist_file_is_journaled_and_reverted_exactly() {
    use firehose_host::doctor::apply::LiveActuator;
    use firehose_host::doctor::plan::{persist_step, ABSENT, PERSIST_PATH};
    use firehose_host::fs::HostFs;
    use firehose_host::nic::LiveNic;

    let changed = [
        (
            Target::file("/proc/sys/net/core/rmem_max", Kind::Text),
            "16777216".to_string(),
        ),
        (
            Target::file("/proc/sys/net/ipv4/tcp_rmem", Kind::Words),
            "4096 131072 67108864".to_string(),
        ),
        (
            Target::file("/sys/class/net/eth0/queues/rx-0/rps_cpus", Kind::Mask),
            "3".to_string(),
        ),
    ];
    assert_eq!(persist_step(&changed[2..]), None, "no sysctl, no file");
    let step = persist_step(&changed).unwrap();
    assert!(step
        .value
        .ends_with("net.core.rmem_max = 16777216\nnet.ipv4.tcp_rmem = 4096 131072 67108864\n"));
    assert!(!step.value.contains("rps_cpus"));

    let root = std::env::temp_dir().join(format!("fh-persist-{}", std::process::id()));
    let file = root.join(PERSIST_PATH.trim_start_matches('/'));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let fs = HostFs::new(&root);
    let nic = LiveNic::new();
    let act = LiveActuator { fs: &fs, nic: &nic };
    for before in [None, Some("# the operator's own\nvm.swappiness = 10\n")] {
        let _ = std::fs::remove_file(&file);
        if let Some(text) = before {
            std::fs::write(&file, text).unwrap();
        }
        let tj = TempJournal::new("persist");
        let j = tj.journal();
        let out = apply::apply(std::slice::from_ref(&step), &act, &j, &id(), 1).unwrap();
        assert!(matches!(out[0].result, StepResult::Done(_)), "{out:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), step.value);
        let entries = j.entries().unwrap();
        assert_eq!(entries[0].old, before.unwrap_or(ABSENT));
        let back = apply::revert(&act, &j, &id()).unwrap();
        assert!(matches!(back[0].result, StepResult::Done(_)), "{back:?}");
        match before {
            None => assert!(!file.exists(), "the file doctor created is removed"),
            Some(text) => assert_eq!(std::fs::read_to_string(&file).unwrap(), text),
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A host tree under a temp directory, served by the live actuator (files only).
struct TempHost {
    root: PathBuf,
}

impl TempHost {
    fn new(tag: &str, files: &[(&str, &str)]) -> TempHost {
        let root = std::env::temp_dir().join(format!("fh-host-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let p = root.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::create_dir_all(root.join("etc/sysctl.d")).unwrap();
        TempHost { root }
    }
    fn fs(&self) -> firehose_host::fs::HostFs {
        firehose_host::fs::HostFs::new(&self.root)
    }
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(path.trim_start_matches('/'))).ok()
    }
    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.root.join(path.trim_start_matches('/')), text).unwrap();
    }
}

impl Drop for TempHost {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `--apply --persist`, then a reboot: the sysctls come back from the persist file at boot,
/// the rest is reset. Revert in the new boot removes the file and restores the persisted
/// sysctls, and says the rest was reset by the reboot. (Before: "written in boot ...,
/// remove it", and the file stayed for every later boot.)
#[test]
fn persist_is_reverted_after_a_reboot() {
    use firehose_host::doctor::apply::LiveActuator;
    use firehose_host::doctor::plan::{persist_step, PERSIST_PATH};
    use firehose_host::nic::LiveNic;
    let h = TempHost::new(
        "reboot",
        &[(RMEM, "212992\n"), (XPS, "00000000\n"), (IRQ, "0-3\n")],
    );
    let (fs, nic) = (h.fs(), LiveNic::new());
    let act = LiveActuator { fs: &fs, nic: &nic };
    let tj = TempJournal::new("reboot");
    let plan = [
        Step::set(
            "irq-affinity",
            Phase::IrqAffinity,
            Target::file(IRQ, Kind::CpuList),
            "3",
        ),
        Step::set("xps", Phase::Steering, Target::file(XPS, Kind::Text), "1"),
        Step::set(
            "rmem",
            Phase::Sysctl,
            Target::file(RMEM, Kind::Text),
            "16777216",
        ),
    ];
    let out = apply::apply(&plan, &act, &tj.journal(), &id(), 1).unwrap();
    assert!(
        out.iter().all(|o| matches!(o.result, StepResult::Done(_))),
        "{out:?}"
    );
    let changed: Vec<_> = plan
        .iter()
        .map(|s| (s.target.clone(), s.value.clone()))
        .collect();
    let persist = persist_step(&changed).unwrap();
    apply::apply(&[persist], &act, &tj.journal(), &id(), 1).unwrap();
    assert!(h
        .read(PERSIST_PATH)
        .unwrap()
        .contains("net.core.rmem_max = 16777216"));

    // The reboot: /sys and /proc/irq back to their defaults, rmem set from the file.
    h.write(XPS, "00000000\n");
    h.write(IRQ, "0-3\n");
    let boot2 = Identity {
        boot_id: "boot-2".into(),
        ..id()
    };
    let out = apply::revert(&act, &tj.journal(), &boot2).unwrap();
    assert_eq!(
        by_target(&out, PERSIST_PATH),
        StepResult::Done("restored exactly".into())
    );
    assert_eq!(
        h.read(PERSIST_PATH),
        None,
        "the file doctor created is gone"
    );
    assert_eq!(
        by_target(&out, RMEM),
        StepResult::Done("restored exactly".into())
    );
    assert_eq!(h.read(RMEM).unwrap(), "212992\n");
    for t in [XPS, IRQ] {
        assert_eq!(
            by_target(&out, t),
            StepResult::Skipped("set in boot boot-1; the reboot reset it".into()),
            "{t}"
        );
    }
    assert_eq!(
        h.read(XPS).unwrap(),
        "00000000\n",
        "what the reboot reset is not touched"
    );
    assert!(!tj.0.exists(), "journal retired");
}

/// A crash while an entry is written leaves a torn last line; its change was never made.
/// Revert and apply both go on, saying so, and the next entry starts on a line of its own.
/// (Before: "line 3: EOF while parsing" blocked both.)
#[test]
fn a_torn_last_line_blocks_neither_revert_nor_apply() {
    let m = host();
    let before = m.files.borrow().clone();
    let tj = TempJournal::new("torn");
    apply::apply(&steps()[..2], &m, &tj.journal(), &id(), 7).unwrap();
    let text = std::fs::read_to_string(&tj.0).unwrap();
    let second = text.lines().nth(1).unwrap().to_string();
    let torn = &second[..second.len() / 2];
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&tj.0)
        .unwrap();
    std::io::Write::write_all(&mut f, torn.as_bytes()).unwrap();
    drop(f);

    // Apply goes on: the torn tail is cut off before the next entry.
    let out = apply::apply(&steps()[2..], &m, &tj.journal(), &id(), 8).unwrap();
    assert!(
        matches!(&out[0].result, StepResult::Skipped(n) if n.contains("line 3 is torn")),
        "{out:?}"
    );
    assert!(
        out[1..]
            .iter()
            .all(|o| matches!(o.result, StepResult::Done(_))),
        "{out:?}"
    );
    let entries = tj.journal().entries().unwrap();
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );

    // Torn again, then revert: every change undone, the torn line reported.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&tj.0)
        .unwrap();
    std::io::Write::write_all(&mut f, torn.as_bytes()).unwrap();
    drop(f);
    let out = apply::revert(&m, &tj.journal(), &id()).unwrap();
    assert!(matches!(&out[0].result, StepResult::Skipped(n) if n.contains("line 5 is torn")));
    assert!(
        out[1..]
            .iter()
            .all(|o| matches!(o.result, StepResult::Done(_))),
        "{out:?}"
    );
    assert_eq!(*m.files.borrow(), before);
}

/// A journal line doctor could not have written (a path outside /proc/sys, /sys, /proc/irq
/// and /etc/sysctl.d, a unit it does not manage) stops the whole revert before anything is
/// written. (Before: revert wrote the "old value" to any path, and ran `systemctl start`
/// on any unit.)
#[test]
fn revert_replays_nothing_from_a_journal_with_a_foreign_entry() {
    let m = host();
    m.set("/etc/passwd", "root:x:0:0::/root:/bin/sh\n");
    m.set("sshd.service", "inactive\n");
    let tj = TempJournal::new("evil");
    apply::apply(&steps(), &m, &tj.journal(), &id(), 7).unwrap();
    let changed = m.files.borrow().clone();
    let good = std::fs::read_to_string(&tj.0).unwrap();
    let first = good.lines().next().unwrap();
    for (what, line) in [
        (
            "/etc/passwd",
            first
                .replace(IRQ, "/etc/passwd")
                .replace(
                    "\"old\":\"0-3\\n\"",
                    "\"old\":\"root::0:0::/root:/bin/sh\\n\"",
                )
                .replace("\"new\":\"3\"", "\"new\":\"root:x:0:0::/root:/bin/sh\\n\""),
        ),
        (
            "sshd",
            r#"{"seq":9,"check":"irqbalance","target":{"type":"service","name":"sshd"},"old":"active","new":"inactive","boot_id":"boot-1","netns":"net:[1]","time":7}"#
                .to_string(),
        ),
    ] {
        std::fs::write(&tj.0, format!("{good}{line}\n")).unwrap();
        let e = apply::revert(&m, &tj.journal(), &id()).unwrap_err();
        assert!(
            matches!(e, JournalError::Corrupt { line: 5, .. }),
            "{what}: {e}"
        );
        assert!(e.to_string().contains(what), "{e}");
        assert_eq!(*m.files.borrow(), changed, "{what}: nothing replayed");
    }
}

/// The journal is created 0600, and one that others could have written (group or world
/// writable, a link, someone else's) is refused. (Before: created 0644 and trusted as found.)
#[test]
fn only_a_private_journal_of_our_own_is_trusted() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let m = host();
    let tj = TempJournal::new("mode");
    apply::apply(&steps()[..1], &m, &tj.journal(), &id(), 7).unwrap();
    let meta = std::fs::metadata(&tj.0).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600, "created private");
    std::fs::set_permissions(&tj.0, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = apply::revert(&m, &tj.journal(), &id()).unwrap_err();
    assert!(matches!(e, JournalError::Untrusted { .. }), "{e}");
    assert!(e.to_string().contains("chmod 600"), "{e}");
    std::fs::set_permissions(&tj.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = TempJournal::new("link");
    std::os::unix::fs::symlink(&tj.0, &link.0).unwrap();
    let e = apply::revert(&m, &link.journal(), &id()).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    if meta.uid() == 0 {
        std::os::unix::fs::chown(&tj.0, Some(65534), None).unwrap();
        let e = apply::revert(&m, &tj.journal(), &id()).unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
    } else {
        println!("skipped the ownership case: not root, cannot give the journal away");
    }
}
