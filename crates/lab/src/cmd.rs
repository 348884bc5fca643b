//! Running the external tools the lab drives (ip, ethtool, sysctl, kill, perf), with errors
//! that name the command line and quote what it printed.

use crate::{LabError, LabResult};
use std::process::{Command, Stdio};

/// Renders a command line for messages.
pub fn display(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// Runs a command to completion and returns its stdout; a non-zero exit is an error that
/// quotes stderr.
pub fn run(program: &str, args: &[&str]) -> LabResult<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                format!(" ({program} is not installed: {})", install_hint(program))
            } else {
                String::new()
            };
            LabError::Command(format!("{}: {e}{hint}", display(program, args)))
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(LabError::Command(format!(
            "{} failed ({}): {}",
            display(program, args),
            out.status,
            err.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when `program` can be found on PATH.
pub fn installed(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        let p = dir.join(program);
        p.is_file()
    })
}

/// The Debian package that provides a tool the lab uses.
pub fn install_hint(program: &str) -> String {
    if program == "ntpd" {
        // Debian's ntpsec conflicts with chrony (both provide time-daemon): mk/deps unpacks
        // its ntpd instead of installing the package.
        return format!(
            "as root, sh mk/deps lab unpacks ntpsec's ntpd into {}",
            crate::peers::ntpd::UNPACKED
        );
    }
    let pkg = match program {
        "ip" => "iproute2",
        "ethtool" => "ethtool",
        "sockperf" => "sockperf",
        "perf" => "linux-perf",
        "taskset" | "kill" => "util-linux procps",
        "sysctl" => "procps",
        "chromium" => "chromium",
        "knotd" => "knot",
        "chronyd" => "chrony",
        other => other,
    };
    format!("apt-get install -y {pkg}")
}

/// Sends a signal (by name, e.g. "INT", "KILL") to a process; a process that is already
/// gone is not an error.
pub fn signal(pid: u32, sig: &str) -> LabResult<()> {
    kill(sig, &pid.to_string(), pid)
}

/// Sends a signal to the process group `pgid` (a child the lab started as a group leader);
/// a group whose leader is gone is not an error.
pub fn signal_group(pgid: u32, sig: &str) -> LabResult<()> {
    kill(sig, &format!("-{pgid}"), pgid)
}

/// `kill -s SIG -- TARGET`; a failure while `pid` still lives is an error.
fn kill(sig: &str, target: &str, pid: u32) -> LabResult<()> {
    let line = format!("kill -s {sig} -- {target}");
    let status = Command::new("kill")
        .args(["-s", sig, "--", target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| LabError::Command(format!("{line}: {e}")))?;
    if status.success() || !process_alive(pid) {
        Ok(())
    } else {
        Err(LabError::Command(format!("{line} failed ({status})")))
    }
}

/// True when a process with this pid exists (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => firehose_host::procfs::pidstat::parse(&text)
            .map(|s| s.state != 'Z' && s.state != 'X')
            .unwrap_or(true),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_command_names_itself_and_quotes_stderr() {
        let e = run("sh", &["-c", "echo nope >&2; exit 3"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sh -c echo nope"), "{e}");
        assert!(e.contains("nope"), "{e}");
        assert_eq!(run("sh", &["-c", "echo yes"]).unwrap(), "yes\n");
    }

    #[test]
    fn missing_program_gets_an_install_hint() {
        let e = run("fh-no-such-tool", &[]).unwrap_err().to_string();
        assert!(e.contains("apt-get install"), "{e}");
        assert!(!installed("fh-no-such-tool"));
        assert!(installed("sh"));
    }

    #[test]
    fn liveness_of_self_and_of_a_reaped_child() {
        assert!(process_alive(std::process::id()));
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
