//! Lab runs keep their files in private work directories (random names, mode 0700, made by
//! one mkdir that never follows a link): a symbolic link planted in the temporary directory
//! under the name an earlier firehose gave its directory (`/tmp/fh-lab-<pid>`, ...) is never
//! written through, as it was when those names were predictable (issue 20).

use crate::util::{bin, tempdir};
use std::process::Command;

/// The names earlier builds gave the temporary directories of a lab process `pid`.
fn predictable_names(pid: u32) -> Vec<String> {
    [
        "fh-lab-",
        "firehose-lab-xdp-",
        "firehose-lab-sink-",
        "firehose-lab-flood-",
        "fh-zone-load-",
        "fh-dns-compare-",
        "firehose-bench-",
    ]
    .iter()
    .map(|p| format!("{p}{pid}"))
    .collect()
}

/// Runs `firehose ARGS` with a link to a directory of the "attacker" planted under every
/// predictable name of its pid before it starts, and checks the run succeeds without
/// writing anything there.
fn planted_links_are_not_followed(args: &[&str], tag: &str) {
    let target = tempdir(&format!("planted-{tag}"));
    let go = target
        .join("..")
        .join(format!("fh-test-{}-go-{tag}", std::process::id()));
    // The shell waits for the links, then execs firehose, which keeps the shell's pid.
    let mut c = Command::new("sh");
    c.args([
        "-c",
        "while [ ! -e \"$1\" ]; do sleep 0.02; done; shift; exec \"$@\"",
        "sh",
    ])
    .arg(&go)
    .arg(bin())
    .args(args);
    let child = crate::util::Spawned::bounded(c);
    let links: Vec<_> = predictable_names(child.id())
        .iter()
        .map(|n| std::env::temp_dir().join(n))
        .collect();
    for l in &links {
        std::os::unix::fs::symlink(&*target, l).unwrap();
    }
    std::fs::write(&go, "").unwrap();
    let out = child.output(crate::util::LAB_LIMIT);
    let _ = std::fs::remove_file(&go);
    for l in &links {
        let _ = std::fs::remove_file(l);
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Vec<_> = std::fs::read_dir(&*target)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        written.is_empty(),
        "lab {tag} wrote through a planted link: {written:?}"
    );
}

fn two_cpus() -> bool {
    let ok = firehose_sys::cpu::allowed_cpus().is_ok_and(|c| c.contains(&0) && c.contains(&1));
    if !ok {
        eprintln!("skipping: the run puts the server on CPU 0 and the client on CPU 1");
    }
    ok
}

#[test]
fn a_compare_run_never_writes_through_a_planted_link() {
    if !two_cpus() {
        return;
    }
    let args = [
        "lab",
        "compare",
        "--servers",
        "plain",
        "--generators",
        "firehose",
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--server-cpus",
        "0",
        "--client-cpus",
        "1",
    ];
    planted_links_are_not_followed(&args, "compare");
}

#[test]
fn a_zone_load_run_never_writes_through_a_planted_link() {
    let args = [
        "lab",
        "zone-load",
        "--zone-size",
        "100K",
        "--servers",
        "firehose",
        "--repetitions",
        "1",
        "--cpus",
        "0",
    ];
    planted_links_are_not_followed(&args, "zone-load");
}
