//! `firehose doctor --apply/--revert` for real, inside a network namespace the test creates,
//! on namespace-scoped settings only: veth GRO, RPS/XPS masks, rp_filter and accept_local.
//! Needs root (skips with a reason otherwise); the namespace is deleted by a Drop guard.

use crate::util::{bin, root_or_skip, tempdir, Netns, TempDir};
use std::process::{Command, Output};

/// A network namespace with a 4-queue veth pair `va`/`vb` and a scratch directory for the
/// journal; both removed on drop ([`Netns`], [`TempDir`]).
struct DoctorNs {
    ns: Netns,
    dir: TempDir,
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl DoctorNs {
    fn new(tag: &str) -> DoctorNs {
        let dir = tempdir(&format!("doctor-{tag}"));
        let ns = DoctorNs {
            ns: Netns::new(&format!("doc{tag}")),
            dir,
        };
        ok(Command::new("ip").args([
            "-n",
            &ns.ns.name,
            "link",
            "add",
            "va",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "vb",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
        ]));
        ok(Command::new("ip").args(["-n", &ns.ns.name, "link", "set", "va", "up"]));
        ok(Command::new("ip").args(["-n", &ns.ns.name, "link", "set", "vb", "up"]));
        // Start from a host that needs fixing: GRO on, source validation on.
        ns.sh("ethtool -K va gro on && sysctl -qw net.ipv4.conf.all.rp_filter=1 net.ipv4.conf.va.rp_filter=1");
        ns
    }

    fn exec(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns.name]).args(args);
        c
    }

    fn sh(&self, script: &str) -> String {
        ok(&mut self.exec(&["sh", "-c", script]))
    }

    fn doctor(&self, args: &[&str]) -> Output {
        self.exec(&[bin(), "doctor"])
            .args(args)
            .output()
            .expect("spawn firehose")
    }

    fn journal(&self) -> String {
        self.dir.join("journal").display().to_string()
    }

    /// Every value the tests touch, as exact bytes: file contents and the GRO flag.
    fn snapshot(&self) -> String {
        self.sh(
            "for f in /sys/class/net/va/queues/*/rps_cpus /sys/class/net/va/queues/*/xps_cpus \
             /proc/sys/net/ipv4/conf/all/rp_filter /proc/sys/net/ipv4/conf/va/rp_filter \
             /proc/sys/net/ipv4/conf/all/accept_local /proc/sys/net/ipv4/conf/va/accept_local; \
             do printf '%s=' $f; cat $f; done; ethtool -k va | grep generic-receive-offload",
        )
    }

    fn read(&self, path: &str) -> String {
        self.sh(&format!("cat {path}")).trim().to_string()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const CHECKS: &[&str] = &["gro", "rps", "xps", "rp-filter", "accept-local"];

fn apply_args<'a>(ns: &'a DoctorNs, journal: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let _ = ns;
    let mut v = vec!["--apply", "--iface", "va", "--journal", journal];
    v.extend_from_slice(extra);
    v.extend_from_slice(CHECKS);
    v
}

#[test]
fn apply_changes_values_and_revert_restores_them_byte_for_byte() {
    if !root_or_skip() {
        return;
    }
    let ns = DoctorNs::new("a");
    let journal = ns.journal();
    let before = ns.snapshot();
    assert!(before.contains("generic-receive-offload: on"), "{before}");

    let out = ns.doctor(&apply_args(&ns, &journal, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let after = ns.snapshot();
    assert_ne!(after, before);
    assert!(after.contains("generic-receive-offload: off"), "{after}");
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/all/rp_filter"), "0");
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/va/rp_filter"), "0");
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/va/accept_local"), "1");
    // veth has no RSS table: only rx-0 receives, so RPS spreads it over every CPU.
    assert_ne!(
        ns.read("/sys/class/net/va/queues/rx-0/rps_cpus")
            .trim_start_matches(['0', ',']),
        ""
    );
    for q in 0..4 {
        let m = ns.read(&format!("/sys/class/net/va/queues/tx-{q}/xps_cpus"));
        assert_ne!(m.trim_start_matches(['0', ',']), "", "tx-{q} xps_cpus {m}");
    }
    // vb was not named: untouched.
    assert_eq!(
        ns.read("/sys/class/net/vb/queues/tx-0/xps_cpus")
            .trim_start_matches(['0', ',']),
        ""
    );
    let lines = std::fs::read_to_string(&journal).unwrap();
    assert!(lines.lines().count() >= 9, "{lines}");
    assert!(lines.contains("\"boot_id\""), "{lines}");

    // Applying again changes nothing more and journals nothing.
    let again = ns.doctor(&apply_args(&ns, &journal, &[]));
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(
        text(&again).contains("nothing to apply"),
        "{}",
        text(&again)
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), lines);

    let out = ns.doctor(&["--revert", "--journal", &journal]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(ns.snapshot(), before);
    assert!(!std::path::Path::new(&journal).exists());
    assert!(std::path::Path::new(&format!("{journal}.reverted")).exists());

    // Nothing left to revert.
    let out = ns.doctor(&["--revert", "--journal", &journal]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("nothing to revert"), "{}", text(&out));
}

#[test]
fn revert_leaves_a_value_changed_by_someone_else_and_reports_it() {
    if !root_or_skip() {
        return;
    }
    let ns = DoctorNs::new("b");
    let journal = ns.journal();
    let before = ns.snapshot();
    let out = ns.doctor(&apply_args(&ns, &journal, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // A third party sets va's rp_filter to loose mode after our apply.
    ns.sh("sysctl -qw net.ipv4.conf.va.rp_filter=2");

    let out = ns.doctor(&["--revert", "--journal", &journal]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("changed by someone else"), "{t}");
    assert!(t.contains("/proc/sys/net/ipv4/conf/va/rp_filter"), "{t}");
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/va/rp_filter"), "2");
    // Everything else is back.
    let expected = before.replace(
        "/proc/sys/net/ipv4/conf/va/rp_filter=1",
        "/proc/sys/net/ipv4/conf/va/rp_filter=2",
    );
    assert_eq!(ns.snapshot(), expected);
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    if !root_or_skip() {
        return;
    }
    let ns = DoctorNs::new("c");
    let journal = ns.journal();
    let before = ns.snapshot();
    let out = ns.doctor(&apply_args(&ns, &journal, &["--dry-run"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("ethtool -K va gro off"), "{t}");
    assert!(t.contains("sysctl -w net.ipv4.conf.va.rp_filter=0"), "{t}");
    assert!(t.contains("/sys/class/net/va/queues/tx-3/xps_cpus"), "{t}");
    assert_eq!(ns.snapshot(), before);
    assert!(!std::path::Path::new(&journal).exists());
}

#[test]
fn a_journal_from_another_boot_replays_only_what_survives_a_reboot() {
    if !root_or_skip() {
        return;
    }
    let ns = DoctorNs::new("d");
    let journal = ns.journal();
    let netns = ns.sh("readlink /proc/self/ns/net").trim().to_string();
    let entry = serde_json::json!({
        "seq": 1, "check": "rp-filter",
        "target": {"type": "file", "path": "/proc/sys/net/ipv4/conf/va/rp_filter", "kind": "text"},
        "old": "0\n", "new": "1", "boot_id": "00000000-dead-beef-0000-000000000000",
        "netns": netns, "time": 1
    });
    std::fs::write(&journal, format!("{entry}\n")).unwrap();
    std::fs::set_permissions(
        &journal,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    // --apply refuses to add to it.
    let out = ns.doctor(&apply_args(&ns, &journal, &[]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--revert` first"), "{}", text(&out));
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/va/rp_filter"), "1");
    // --revert leaves what the reboot reset, says so, and retires the journal.
    let out = ns.doctor(&["--revert", "--journal", &journal]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("the reboot reset it"), "{}", text(&out));
    assert_eq!(ns.read("/proc/sys/net/ipv4/conf/va/rp_filter"), "1");
    assert!(!std::path::Path::new(&journal).exists());
}

#[test]
fn audit_of_a_veth_in_a_namespace_says_na_where_it_cannot_check() {
    if !root_or_skip() {
        return;
    }
    let ns = DoctorNs::new("e");
    let out = ns.doctor(&["--iface", "va", "--json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = doc["checks"].as_array().unwrap();
    let find = |c: &str| {
        rows.iter()
            .find(|r| r["check"] == c)
            .unwrap_or_else(|| panic!("no {c} row"))
    };
    assert_eq!(find("irq-affinity")["status"], "n/a");
    assert!(find("irq-affinity")["value"]
        .as_str()
        .unwrap()
        .contains("software device"));
    assert_eq!(find("rss-table")["status"], "n/a");
    assert!(find("rss-table")["value"]
        .as_str()
        .unwrap()
        .contains("EOPNOTSUPP"));
    assert_eq!(find("gro")["status"], "warn");
    assert_eq!(find("xps")["status"], "bad");
    assert_eq!(out.status.code(), Some(1));
}

/// Runs `firehose doctor ARGS` as user nobody.
fn doctor_as_nobody(args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            bin(),
            "doctor",
        ])
        .args(args)
        .output()
        .expect("spawn setpriv")
}

#[test]
fn apply_and_revert_without_root_stop_with_a_clear_error() {
    if !root_or_skip() {
        return;
    }
    for args in [&["--apply", "gro"][..], &["--revert"][..]] {
        let out = doctor_as_nobody(args);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("needs root"), "{}", text(&out));
    }
    // The audit and the dry run work without root.
    let out = doctor_as_nobody(&["--json", "backlog"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["checks"][0]["check"], "backlog");
    let out = doctor_as_nobody(&["--apply", "--dry-run", "backlog"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
