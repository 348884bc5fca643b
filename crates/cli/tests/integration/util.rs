//! Helpers shared by the integration tests: the real `firehose` binary run to completion or
//! as a server child, scratch paths, and the checks that decide whether a test can run here.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Path of the binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_firehose")
}

/// Runs firehose with arguments to completion.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("spawn firehose")
}

/// A child's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A scratch path unique to this test process: every module names its own `name`.
pub fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fh-test-{}-{name}", std::process::id()))
}

/// A fresh, empty scratch directory (see [`tmp`]).
pub fn tempdir(name: &str) -> TempDir {
    let d = tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// A scratch directory of one test, removed with everything in it when the test ends.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The JSON document in `path`.
pub fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// True when `program` is on PATH.
pub fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// True when the namespace tests can run here: as root, with ethtool installed (they set
/// veth offloads with it). Otherwise prints that the calling test (libtest names its thread
/// after it) is skipped, and why.
pub fn root_or_skip() -> bool {
    let why = if !firehose_sys::cpu::is_root() {
        "needs root to create network namespaces"
    } else if !installed("ethtool") {
        "ethtool is not installed (apt-get install ethtool, or `sh mk/deps test`)"
    } else {
        return true;
    };
    let test = std::thread::current().name().unwrap_or("test").to_string();
    eprintln!("skipping {test}: {why}");
    false
}

/// `args` followed by the flags of the shortest useful lab run (one repetition of one
/// second, no warm-up) writing its JSON to `json`.
pub fn short_run(args: &[&str], json: &Path) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    for s in [
        "--repetitions",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--json-file",
    ] {
        v.push(s.into());
    }
    v.push(json.display().to_string());
    v
}

/// A `firehose serve` child, stopped with SIGTERM by [`Served::stop`], killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    pub stdout: BufReader<std::process::ChildStdout>,
}

impl Served {
    /// Starts `firehose serve ARGS` and waits for its "listening on" line.
    pub fn start(args: &[&str]) -> Served {
        let mut child = Command::new(bin())
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn firehose serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("firehose serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .parse()
            .unwrap();
        Served {
            child,
            addr,
            stdout,
        }
    }

    /// Starts one `tuned` worker on a free loopback port, plus `extra` flags.
    pub fn tuned(extra: &[&str]) -> Served {
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--profile",
            "tuned",
            "--workers",
            "1",
        ];
        args.extend_from_slice(extra);
        Served::start(&args)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and returns the rest of stdout.
    pub fn stop(self) -> String {
        self.stop_with("TERM")
    }

    /// Sends `signal` (a name for kill(1): TERM, INT) and returns the rest of stdout.
    pub fn stop_with(self, signal: &str) -> String {
        signal_pid(self.pid(), signal);
        self.rest()
    }

    /// Waits for the server to exit by itself (`--duration`) and returns the rest of stdout.
    pub fn rest(mut self) -> String {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.stdout, &mut rest);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
        rest
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `signal` (a name for kill(1): TERM, INT, STOP, CONT) to process `pid`.
pub fn signal_pid(pid: u32, signal: &str) {
    let st = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{signal} {pid}");
}

/// Waits for `child` to exit, at most `within`; kills it and fails the test after that.
pub fn wait_exit(
    child: &mut std::process::Child,
    within: std::time::Duration,
) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} did not exit in {within:?}", child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits until a UDP socket is bound to `port` in namespace `netns` (None: this one), at most
/// 30 s; a test sends only after that, never after a guessed sleep (a sink that sets up its
/// drop watch first binds a second or more after it starts on a busy host).
pub fn wait_udp_bound(netns: Option<&str>, port: u16) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let filter = format!("sport = :{port}");
    loop {
        let mut c = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "ss"]);
                c
            }
            None => Command::new("ss"),
        };
        let out = c.args(["-Hnuap", &filter]).output().expect("run ss");
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing bound UDP port {port} in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
