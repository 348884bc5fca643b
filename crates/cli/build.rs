//! Records what `firehose --version` and every JSON document report about the build: the
//! git commit (with `-dirty` when tracked files differ from it), the rustc version and the
//! target. Outside a git checkout (a source tarball, `cargo install` from a copy) the
//! commit is "unknown"; nothing here fails the build.

use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| s.trim().to_string())
}

fn main() {
    let commit = run("git", &["rev-parse", "--short=12", "HEAD"]);
    // --no-optional-locks: a plain `git status` refreshes the index file, which this script
    // watches below, so every build would schedule the next one.
    let dirty = run(
        "git",
        &[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ],
    )
    .is_some_and(|s| !s.is_empty());
    let commit = match commit {
        Some(c) if dirty => format!("{c}-dirty"),
        Some(c) => c,
        None => "unknown".into(),
    };
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc = run(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=FIREHOSE_COMMIT={commit}");
    println!("cargo:rustc-env=FIREHOSE_RUSTC={rustc}");
    println!("cargo:rustc-env=FIREHOSE_TARGET={target}");
    // A new commit, a checkout or a staged change moves HEAD or the index; edits to the
    // cli's own sources rebuild it anyway.
    for what in ["HEAD", "index"] {
        if let Some(p) = run("git", &["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(r) = run("git", &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = run("git", &["rev-parse", "--git-path", &r]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
}
