//! Helpers shared by the `lab*` integration tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the real binary to completion.
pub fn firehose<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_firehose"))
        .args(args)
        .output()
        .expect("spawn firehose")
}

/// `args` followed by the flags of the shortest useful run (one repetition of one second,
/// no warm-up) writing its JSON to `json`.
pub fn short_run(args: &[&str], json: &Path) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    for s in [
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--json",
    ] {
        v.push(s.into());
    }
    v.push(json.display().to_string());
    v
}

/// True when `program` is on PATH.
pub fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
