//! Child processes of an experiment (servers, generators, peers, perf), one wrapper for all.
//!
//! Every child starts in its own process group, with stdin from /dev/null and stdout and
//! stderr in log files named after it, so an error can quote the end of what it wrote. It
//! is stopped by signalling the whole group (a graceful signal, then SIGKILL after a grace
//! period), so the processes a peer forks (NSD's servers) go with it, and it is stopped the
//! same way when the wrapper is dropped, whatever ended the run. Being in their own group,
//! children do not see a terminal's Ctrl-C: the program that runs them stops them.
//!
//! The leader is reaped only after its group got SIGKILL: while it is an unreaped zombie its
//! pid cannot be reused, so the group signal cannot reach a stranger.

use crate::cmd;
use crate::{LabError, LabResult};
use firehose_sys::pidfd::PidFd;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often waits look at the child and at the stop flag.
const POLL: Duration = Duration::from_millis(10);

/// How often a wait for a child's exit (which sleeps until it) looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

/// A running child; stopped (its whole process group) when dropped.
pub struct Proc {
    child: Child,
    name: String,
    stdout: PathBuf,
    stderr: PathBuf,
    status: Option<ExitStatus>,
    /// A directory removed once the process is gone (a peer's generated config).
    owned_dir: Option<PathBuf>,
}

/// The command line of `cmd`, for messages and reports.
pub fn argv(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A command that runs `program` confined to `cpus` with taskset (which execs, so the
/// child's pid is the program's).
pub fn pinned(cpus: &[usize], program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("taskset");
    c.arg("-c")
        .arg(firehose_sys::cpu::CpuSet::from(cpus).to_string())
        .arg(program);
    c
}

/// Returns `Interrupted` once `stop` is set.
pub fn check(stop: Option<&AtomicBool>) -> LabResult<()> {
    if stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps until `deadline`, returning early with `Interrupted` once `stop` is set.
pub fn sleep_until(deadline: Instant, stop: Option<&AtomicBool>) -> LabResult<()> {
    loop {
        check(stop)?;
        let now = Instant::now();
        if now >= deadline {
            return Ok(());
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}

impl Proc {
    /// Starts `cmd` in a new process group; its output goes to `logs/NAME.out` and
    /// `logs/NAME.err`.
    pub fn spawn(mut cmd: Command, name: &str, logs: &Path) -> LabResult<Proc> {
        let stdout = logs.join(format!("{name}.out"));
        let stderr = logs.join(format!("{name}.err"));
        let open = |p: &Path| File::create(p).map_err(|e| LabError::io(p.display(), e));
        cmd.stdin(Stdio::null())
            .stdout(open(&stdout)?)
            .stderr(open(&stderr)?)
            .process_group(0);
        let child = cmd.spawn().map_err(|e| {
            let program = cmd.get_program().to_string_lossy().into_owned();
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                format!(" ({})", cmd::install_hint(&program))
            } else {
                String::new()
            };
            LabError::Run(format!("cannot start {name} ({}): {e}{hint}", argv(&cmd)))
        })?;
        Ok(Proc {
            child,
            name: name.to_string(),
            stdout,
            stderr,
            status: None,
            owned_dir: None,
        })
    }

    /// Removes `dir` once the process is gone.
    pub fn owning(mut self, dir: PathBuf) -> Proc {
        self.owned_dir = Some(dir);
        self
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The last lines the process wrote to stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        let text = self.stderr();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }

    /// The exit status once the process has ended (the rest of its group is killed then).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() && !cmd::process_alive(self.pid()) {
            self.reap();
        }
        self.status
    }

    /// Kills what is left of the group, then reaps the leader. The leader also gets
    /// SIGKILL directly, so that a missing `kill` program cannot leave the wait hanging.
    fn reap(&mut self) {
        let _ = cmd::signal_group(self.pid(), "KILL");
        let _ = self.child.kill();
        if let Ok(s) = self.child.wait() {
            self.status = Some(s);
        }
    }

    /// Waits for exit until `deadline`; `None` when still running then. `Interrupted` once
    /// `stop` is set.
    pub fn wait_until(
        &mut self,
        deadline: Instant,
        stop: Option<&AtomicBool>,
    ) -> LabResult<Option<ExitStatus>> {
        // Sleeps until the exit rather than looking every POLL: the lab's thread may share
        // a CPU with what it measures, and each look is a wake-up there (issue 25).
        let pidfd = PidFd::open(self.pid()).ok();
        loop {
            if let Some(s) = self.exited() {
                return Ok(Some(s));
            }
            check(stop)?;
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            match &pidfd {
                Some(fd) => {
                    // A signal cuts the wait short; STOP_CHECK bounds it for one that went
                    // to another thread.
                    let _ = fd.wait_exit((deadline - now).min(STOP_CHECK));
                }
                None => std::thread::sleep(POLL),
            }
        }
    }

    /// Waits until the process has written `needle` to stdout; an error if it exits first
    /// or `deadline` passes.
    pub fn wait_for_output(
        &mut self,
        needle: &str,
        deadline: Instant,
        stop: Option<&AtomicBool>,
    ) -> LabResult<String> {
        loop {
            let text = self.stdout();
            if text.contains(needle) {
                return Ok(text);
            }
            if let Some(st) = self.exited() {
                return Err(LabError::Run(format!(
                    "{} exited ({st}) before printing '{needle}': {}",
                    self.name,
                    self.stderr_tail()
                )));
            }
            check(stop)?;
            if Instant::now() >= deadline {
                return Err(LabError::Run(format!(
                    "{} did not print '{needle}' in time: {}",
                    self.name,
                    self.stderr_tail()
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Sends `signal` (e.g. "INT", "TERM") to the group and waits `grace` for the leader to
    /// exit; then SIGKILL to whatever is left of the group.
    pub fn stop(&mut self, signal: &str, grace: Duration) -> ExitStatus {
        if let Some(s) = self.exited() {
            return s;
        }
        let _ = cmd::signal_group(self.pid(), signal);
        let deadline = Instant::now() + grace;
        while cmd::process_alive(self.pid()) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        self.reap();
        match self.status {
            Some(s) => s,
            // wait() itself failed: the child is not ours to reap any more.
            None => std::os::unix::process::ExitStatusExt::from_raw(0),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SIGTERM first, so a peer can stop the servers it forked; then SIGKILL.
        self.stop("TERM", Duration::from_secs(3));
        if let Some(d) = &self.owned_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A port free for both UDP and TCP on 127.0.0.1 (knotd and nsd listen on both; the echo
/// servers need only UDP).
pub fn free_port() -> LabResult<u16> {
    firehose_sys::socket::free_port(std::net::Ipv4Addr::LOCALHOST.into())
        .map_err(|e| LabError::io("finding a free port on 127.0.0.1", e))
}

/// A field of the calling thread's /proc status (`key` with its colon), for tests.
#[cfg(test)]
pub(crate) fn own_status(key: &str) -> String {
    let s = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log directory per test, removed when the test ends (even on failure).
    fn logs(test: &str) -> crate::workdir::WorkDir {
        crate::workdir::WorkDir::new(&format!("test-{test}")).unwrap()
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn stderr_tail_and_output_are_kept() {
        let dir = logs("output");
        let mut p = Proc::spawn(sh("echo ready; echo oops >&2; exit 3"), "t1", &dir).unwrap();
        let st = p
            .wait_until(Instant::now() + Duration::from_secs(10), None)
            .unwrap()
            .unwrap();
        assert_eq!(st.code(), Some(3));
        assert_eq!(p.stdout(), "ready\n");
        assert_eq!(p.stderr_tail(), "oops");
        let e = Proc::spawn(Command::new("fh-no-such-tool"), "t2", &dir)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("apt-get install"), "{e}");
    }

    /// The calling thread's voluntary context switches so far (each one a sleep).
    fn own_sleeps() -> u64 {
        own_status("voluntary_ctxt_switches:").parse().unwrap()
    }

    /// Waiting for a child sleeps until its exit: the waiting thread wakes a few times a
    /// second (to look at the stop flag), not every 10 ms (100 wake-ups a second, each one
    /// taking a CPU from what the lab measures there).
    #[test]
    fn a_wait_for_exit_does_not_wake_every_few_milliseconds() {
        let dir = logs("quiet-wait");
        let mut p = Proc::spawn(sh("sleep 1"), "t4", &dir).unwrap();
        let (t, before) = (Instant::now(), own_sleeps());
        let st = p
            .wait_until(Instant::now() + Duration::from_secs(60), None)
            .unwrap()
            .unwrap();
        let (took, sleeps) = (t.elapsed().as_secs_f64(), own_sleeps() - before);
        assert!(st.success());
        assert!(
            took >= 0.9,
            "returned after {took} s, before the child's end"
        );
        // One look per STOP_CHECK (5 a second) and a few for the exit itself.
        assert!(
            (sleeps as f64) <= 10.0 * took + 5.0,
            "{sleeps} sleeps in {took:.2} s of waiting"
        );
    }

    #[test]
    fn stopping_kills_the_forked_processes_too() {
        let dir = logs("group");
        // The leader forks a sleeper and ignores SIGTERM, as a stubborn peer would.
        let mut p = Proc::spawn(sh("trap '' TERM; sleep 30 & echo $!; wait"), "t3", &dir).unwrap();
        let out = p
            .wait_for_output("\n", Instant::now() + Duration::from_secs(10), None)
            .unwrap();
        let forked: u32 = out.trim().parse().unwrap();
        assert!(cmd::process_alive(forked));
        let t = Instant::now();
        p.stop("TERM", Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(p.exited().is_some());
        let gone_by = Instant::now() + Duration::from_secs(5);
        while cmd::process_alive(forked) && Instant::now() < gone_by {
            std::thread::sleep(POLL);
        }
        assert!(
            !cmd::process_alive(forked),
            "the forked sleeper outlived its group"
        );
    }

    #[test]
    fn a_dropped_proc_takes_its_group_and_dir_along() {
        let dir = logs("drop");
        let owned = dir.join("owned");
        std::fs::create_dir_all(&owned).unwrap();
        let p = Proc::spawn(sh("sleep 30"), "t4", &dir)
            .unwrap()
            .owning(owned.clone());
        let pid = p.pid();
        drop(p);
        assert!(!cmd::process_alive(pid));
        assert!(!owned.exists());
    }

    #[test]
    fn waits_end_on_the_stop_flag() {
        let dir = logs("stop_flag");
        let stop = AtomicBool::new(true);
        let mut p = Proc::spawn(sh("sleep 30"), "t5", &dir).unwrap();
        let r = p.wait_until(Instant::now() + Duration::from_secs(30), Some(&stop));
        assert!(matches!(r, Err(LabError::Interrupted)));
        assert!(matches!(
            sleep_until(Instant::now() + Duration::from_secs(30), Some(&stop)),
            Err(LabError::Interrupted)
        ));
    }

    #[test]
    fn free_port_is_free_for_udp_and_tcp() {
        let p = free_port().unwrap();
        std::net::UdpSocket::bind(("127.0.0.1", p)).unwrap();
        std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
    }
}
