//! The integration tests' helpers, in one place: the real `firehose` binary run to completion
//! or as a child ([`Spawned`], and [`Served`] over it: killed on drop, every wait with a
//! deadline), the root skip with a printed reason ([`root_or_skip`]), network namespaces and
//! veth pairs removed on drop even when a setup step fails half-way ([`Netns`], [`veth`]),
//! free ports, waiting for a bound port or an exit, and scratch paths.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub use firehose_lab::topology::{Side, Topology};

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

/// True when this kernel lets io_uring run opcode `op` ("recvmsg", "recv", "send",
/// "send_zc"); otherwise prints that the calling test is skipped, and the kernel's reason
/// (kernel.io_uring_disabled, seccomp, an older kernel) with its errno.
pub fn uring_or_skip(op: &str) -> bool {
    match firehose_sys::uring::UringSupport::probe().require(op) {
        Ok(()) => true,
        Err(e) => {
            let test = std::thread::current().name().unwrap_or("test").to_string();
            eprintln!("skipping {test}: io_uring unavailable: {e}");
            false
        }
    }
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

/// A `firehose serve` child (a [`Spawned`]: killed when dropped): its address, what it
/// printed at start-up and the rest of its stdout. [`Served::stop`] and its kin signal it
/// and wait for its exit with a deadline.
pub struct Served {
    pub child: Spawned,
    pub addr: SocketAddr,
    /// The start-up lines read so far (see the constructors).
    pub banner: String,
    pub stdout: BufReader<std::process::ChildStdout>,
}

/// How long a server may take to print its start-up lines, or to exit after a signal or
/// its `--duration`.
const SERVE_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

impl Served {
    /// Starts `firehose serve ARGS` and waits for its "listening on" line.
    pub fn start(args: &[&str]) -> Served {
        let mut cmd = Command::new(bin());
        cmd.arg("serve").args(args);
        Served::spawn(cmd, |_| true)
    }

    /// Starts `firehose serve ARGS` in network namespace `ns` and reads its start-up lines
    /// up to its first worker's: the AF_XDP backend's line with `--io xdp`, else the first
    /// socket's.
    pub fn start_in(ns: &str, args: &[&str]) -> Served {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, bin(), "serve"]).args(args);
        let xdp = args.contains(&"xdp");
        Served::spawn(cmd, move |line| {
            line.contains("backend af_xdp") || line.contains("socket 0:") && !xdp
        })
    }

    /// One `naive` worker on 127.0.0.1:`port` in namespace `ns`, frozen (SIGSTOP, every
    /// thread) once it listens, so its socket fills and overflows.
    pub fn frozen(ns: &str, port: u16) -> Served {
        let listen = format!("127.0.0.1:{port}");
        let srv = Served::start_in(
            ns,
            &["--listen", &listen, "--workers", "1", "--profile", "naive"],
        );
        freeze(srv.pid());
        srv
    }

    /// Starts one worker of `--proto PROTO` on a free loopback port, plus `extra` flags.
    pub fn proto(proto: &str, extra: &[&str]) -> Served {
        let mut args = vec![
            "--proto",
            proto,
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ];
        args.extend_from_slice(extra);
        Served::start(&args)
    }

    /// An NTP server on loopback serving the local clock at stratum 10 (so it answers
    /// whatever the host clock's state), writing its exit document to `json`, with
    /// `extra` flags (an I/O path).
    pub fn local_ntp_on(json: &std::path::Path, extra: &[&str]) -> Served {
        let json = json.to_str().unwrap();
        let base = ["--ntp-local-stratum", "10", "--json-file", json];
        Served::proto("ntp", &[&base[..], extra].concat())
    }

    /// Starts one `tuned` echo worker on a free loopback port, plus `extra` flags.
    pub fn tuned(extra: &[&str]) -> Served {
        Served::proto("echo", &[&["--profile", "tuned"], extra].concat())
    }

    /// Spawns `cmd` (a `firehose serve`, stderr inherited) and reads stdout up to the line
    /// `last` accepts, within [`SERVE_WITHIN`]; the first line says where it listens.
    fn spawn(mut cmd: Command, last: impl Fn(&str) -> bool + Send + 'static) -> Served {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let mut child = Spawned::of(child);
        let mut stdout = BufReader::new(child.child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut banner = String::new();
            loop {
                let mut line = String::new();
                if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                    let _ = tx.send(Err(banner));
                    return;
                }
                banner.push_str(&line);
                if last(&line) {
                    let _ = tx.send(Ok((stdout, banner)));
                    return;
                }
            }
        });
        let (stdout, banner) = match rx.recv_timeout(SERVE_WITHIN) {
            Ok(Ok(read)) => read,
            Ok(Err(banner)) => panic!("serve ended during start-up: {banner:?}"),
            Err(_) => panic!("serve's start-up lines not within {SERVE_WITHIN:?}"),
        };
        let first = banner.lines().next().unwrap_or_default();
        let addr = first
            .strip_prefix("firehose serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .parse()
            .unwrap();
        Served {
            child,
            addr,
            banner,
            stdout,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and returns the rest of stdout; the exit must be clean.
    pub fn stop(self) -> String {
        self.stop_with("TERM")
    }

    /// Sends `signal` (a name for kill(1): TERM, INT) and returns the rest of stdout; the
    /// exit must be clean.
    pub fn stop_with(self, signal: &str) -> String {
        signal_pid(self.pid(), signal);
        self.rest()
    }

    /// Sends `signal` (KILL too) and returns the rest of stdout and the exit status.
    pub fn stop_status(self, signal: &str) -> (String, std::process::ExitStatus) {
        signal_pid(self.pid(), signal);
        self.exit()
    }

    /// Waits for the server to exit by itself (`--duration`) and returns the rest of stdout;
    /// the exit must be clean.
    pub fn rest(self) -> String {
        let (rest, status) = self.exit();
        assert!(status.success(), "serve exited with {status}: {rest}");
        rest
    }

    /// The rest of stdout and the exit status, within [`SERVE_WITHIN`] (past it the server is
    /// killed and the test fails).
    fn exit(self) -> (String, std::process::ExitStatus) {
        let Served {
            mut child,
            mut stdout,
            ..
        } = self;
        let reader = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
            rest
        });
        let status = child.wait(SERVE_WITHIN);
        (reader.join().unwrap_or_default(), status)
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

/// How long a stopped lab run may take to clean up after SIGTERM before it gets SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs firehose with `args` to completion within `limit` (see [`Spawned::bounded`]).
pub fn run_within<S: AsRef<OsStr>>(args: &[S], limit: std::time::Duration) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    Spawned::bounded(c).output(limit)
}

/// How long any lab run of a test may take before it is stopped and the test fails.
pub const LAB_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `firehose ARGS` (a lab or bench run) within [`LAB_LIMIT`].
pub fn lab_run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run_within(args, LAB_LIMIT)
}

/// Runs `cmd` (a shell around a lab run) within [`LAB_LIMIT`].
pub fn lab_cmd(cmd: Command) -> Output {
    Spawned::bounded(cmd).output(LAB_LIMIT)
}

/// What a bounded `lab compare` run left: what it printed, its JSON document, and its
/// report.md and report.html.
pub struct LabCompare {
    pub stdout: String,
    pub doc: serde_json::Value,
    pub md: String,
    pub html: String,
}

/// Runs `firehose lab compare --proto PROTO` bounded (one repetition of 1 s, one worker,
/// then `extra`: flows, window, servers, topology...) within [`LAB_LIMIT`], with its JSON
/// and report in a scratch directory of the call's own (removed after reading); fails the
/// test when the run fails or leaves a process behind that names that directory.
pub fn lab_compare<S: AsRef<OsStr>>(proto: &str, extra: &[S]) -> LabCompare {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = tempdir(&format!("lab-compare-{proto}-{n}"));
    let (json, report) = (dir.join("run.json"), dir.join("report"));
    let mut args: Vec<&OsStr> = ["lab", "compare", "--proto", proto, "--repetitions", "1"]
        .iter()
        .chain(&["--duration", "1", "--workers", "1"])
        .copied()
        .map(OsStr::new)
        .collect();
    args.extend(extra.iter().map(AsRef::as_ref));
    args.extend([
        OsStr::new("--json-file"),
        json.as_os_str(),
        OsStr::new("--report"),
        report.as_os_str(),
    ]);
    let out = lab_run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", stderr(&out));
    let left = Command::new("pgrep")
        .args(["-f", &dir.display().to_string()])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "left running: {:?}", left.stdout);
    LabCompare {
        stdout,
        doc: json_of(&json),
        md: std::fs::read_to_string(report.join("report.md")).unwrap_or_default(),
        html: std::fs::read_to_string(report.join("report.html")).unwrap_or_default(),
    }
}

/// A port on `ip` free right now for UDP and TCP.
pub fn free_port(ip: &str) -> u16 {
    firehose_sys::socket::free_port(ip.parse().expect("an IP address")).expect("a free port")
}

/// Waits until process `pid` has a UDP socket bound to `port` (read from its own
/// /proc/PID/net/udp and udp6, so it works inside the process's network namespace), at most
/// `within`. A server prints its start line before some tests can see it; a client started
/// before the bind would lose its first window.
pub fn wait_for_udp_port(pid: u32, port: u16, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    let needle = format!(":{port:04X} ");
    let bound = || {
        ["udp", "udp6"].iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{t}"))
                .is_ok_and(|text| text.lines().skip(1).any(|l| l.contains(&needle)))
        })
    };
    while !bound() {
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} did not bind UDP port {port} within {within:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `ip ARGS`; its stdout, or what it said when it failed.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace this test created (`fh` + a tag + the pid, so parallel runs never
/// collide), deleted on drop with every interface in it.
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates the namespace, with its loopback up.
    pub fn new(tag: &str) -> Netns {
        let name = format!("fh{tag}{}", std::process::id());
        ip(&["netns", "add", &name]).unwrap();
        // Armed from here on: a later step that fails still deletes the namespace.
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS ARGS`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        ip(&[&["-n", &self.name], args].concat()).unwrap()
    }

    /// `PROGRAM` run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// `firehose ARGS` inside the namespace.
    pub fn firehose(&self, args: &[&str]) -> Command {
        let mut c = self.command(bin());
        c.args(args);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// The lab's test host for a test: two namespaces joined by a veth pair with `queues` rx
/// and tx queues per end, addressed and up ([`Topology::veth`]: the same host `firehose lab`
/// builds, deleted on drop with what still runs in it, and a step that fails half-way leaves
/// nothing). `tag` (at most 2 characters: interface names are short) keeps the pairs of one
/// test process apart.
pub fn veth(tag: &str, queues: usize) -> Topology {
    Topology::veth(&format!("{}-{tag}", std::process::id()), queues)
        .unwrap_or_else(|e| panic!("veth pair {tag}: {e}"))
}

/// A child process the test started, the one kind the tests have: stopped and reaped when
/// dropped, so a failing test leaves no process behind, and every wait has a deadline.
/// [`Spawned::bounded`] children (lab runs) get SIGTERM first and a grace period to remove
/// the namespaces, processes and files they made, then SIGKILL; the others get SIGKILL.
pub struct Spawned {
    pub child: Child,
    /// stdout and stderr, read to the end by threads as the child runs (bounded children).
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
    /// SIGTERM and this long before SIGKILL, when stopped.
    grace: Option<std::time::Duration>,
}

/// A thread that reads `r` to its end.
fn drain(mut r: Box<dyn std::io::Read + Send>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

impl Spawned {
    /// Starts `cmd` with stdout and stderr piped.
    pub fn start(mut cmd: Command) -> Spawned {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        Spawned {
            child,
            out: None,
            err: None,
            grace: None,
        }
    }

    /// Starts `cmd` (a lab run) with no stdin and its output collected as it runs; stopped
    /// with SIGTERM and a grace period (see the type).
    pub fn bounded(mut cmd: Command) -> Spawned {
        cmd.stdin(Stdio::null());
        let mut s = Spawned::start(cmd);
        s.out = Some(drain(Box::new(s.child.stdout.take().unwrap())));
        s.err = Some(drain(Box::new(s.child.stderr.take().unwrap())));
        s.grace = Some(STOP_GRACE);
        s
    }

    /// Starts `cmd` and waits (at most `within`) for its first byte of stdout, the start line
    /// a server prints once it listens; the rest of stdout is drained in the background.
    pub fn started(cmd: Command, within: std::time::Duration) -> Spawned {
        let mut s = Spawned::start(cmd);
        let mut out = s.child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut first = [0u8; 1];
            let n = std::io::Read::read(&mut out, &mut first).unwrap_or(0);
            let _ = tx.send(n);
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut out, &mut rest);
        });
        match rx.recv_timeout(within) {
            Ok(1) => s,
            Ok(_) => panic!("the child printed nothing: {}", s.stderr_now()),
            Err(_) => panic!("no start line within {within:?}"),
        }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// A child spawned by the caller with stdio of its own choosing.
    pub fn of(child: Child) -> Spawned {
        Spawned {
            child,
            out: None,
            err: None,
            grace: None,
        }
    }

    /// What the child wrote to stderr, once it has been stopped (what came within 5 s: a
    /// grandchild may hold the pipe open).
    fn stderr_now(&mut self) -> String {
        self.stop();
        let reader = match (self.err.take(), self.child.stderr.take()) {
            (Some(t), _) => t,
            (None, Some(p)) => drain(Box::new(p)),
            (None, None) => return String::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(reader.join().unwrap_or_default());
        });
        let bytes = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits for the child to exit, at most `within`; past it the child is stopped and the
    /// test fails, quoting what it wrote to stderr.
    pub fn wait(&mut self, within: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if std::time::Instant::now() >= deadline {
                let err = self.stderr_now();
                panic!(
                    "process {} did not exit in {within:?}; stopped. stderr:\n{err}",
                    self.child.id()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits for the exit (at most `within`, see [`Spawned::wait`]) and returns the status,
    /// stdout (what was not already read) and stderr.
    pub fn output(mut self, within: std::time::Duration) -> Output {
        // Read both pipes while waiting, so a chatty child never blocks on a full pipe.
        if let Some(p) = self.child.stdout.take() {
            self.out = Some(drain(Box::new(p)));
        }
        if let Some(p) = self.child.stderr.take() {
            self.err = Some(drain(Box::new(p)));
        }
        let status = self.wait(within);
        let join = |t: Option<std::thread::JoinHandle<Vec<u8>>>| {
            t.map(|t| t.join().unwrap_or_default()).unwrap_or_default()
        };
        Output {
            status,
            stdout: join(self.out.take()),
            stderr: join(self.err.take()),
        }
    }

    /// SIGKILL now (nothing can run in the child: what it made is left behind); reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and the grace period when it has one, then SIGKILL; reaps the child.
    fn stop(&mut self) {
        if let (Some(grace), Ok(None)) = (self.grace, self.child.try_wait()) {
            signal_pid(self.child.id(), "TERM");
            let by = std::time::Instant::now() + grace;
            while matches!(self.child.try_wait(), Ok(None)) && std::time::Instant::now() < by {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        self.kill();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until `done()` holds, checking every 10 ms, at most 20 s.
pub fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} within 20 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How many times the thread at `task` (/proc/PID/task/TID) has slept
/// (`voluntary_ctxt_switches` in its status), if it is there.
pub fn voluntary_switches(task: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(task.join("status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// SIGSTOP to `pid`, then waits until every thread of it is stopped (state T in
/// /proc/PID/task/*/stat): kill(2) returns before a thread running on another CPU stops.
pub fn freeze(pid: u32) {
    signal_pid(pid, "STOP");
    until("every thread stopped", || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .all(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                // The state follows the parenthesised command name.
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('T'))
            })
    });
}

/// The DNS tests' zone (example.com, in the proto crate's test data).
pub fn example_zone() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../proto/tests/data/example.zone")
        .display()
        .to_string()
}

/// A query for www.example.com A with ID `id`, framed for DNS over TCP (length first).
pub fn framed_query(id: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in ["www", "example", "com"] {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut framed = (m.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&m);
    framed
}

/// A `--firehose-bin` for lab runs that lose: `firehose serve` with its receive buffer
/// squeezed to the kernel's minimum (`--rcvbuf 1`), every other subcommand as it is. Written
/// into `dir`.
pub fn squeezed_serve(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let wrapper = dir.join("firehose-small-rcvbuf");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = serve ]; then shift; exec {} serve --rcvbuf 1 \"$@\"; fi\nexec {} \"$@\"\n",
            bin(),
            bin()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

/// The document's first `loss_attribution` (a lab document's list of them), checked to
/// name SOCKET_RCVBUFF, with `lost` as given, and the same line in `text`: that line.
pub fn rcvbuf_line(v: &serde_json::Value, by: &str, lost: u64, text: &str) -> String {
    let a = &v["loss_attribution"][0];
    assert_eq!(a["by"], by, "{v}");
    assert_eq!(a["lost"], lost, "{a}");
    assert!(a["drops"].as_u64().unwrap() > 0, "{a}");
    let line = a["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .find(|l| l.contains(" SOCKET_RCVBUFF at "))
        .unwrap_or_else(|| panic!("no SOCKET_RCVBUFF line: {a}"))
        .to_string();
    assert!(text.contains("where the loss went"), "{text}");
    assert!(text.contains(&line), "{text}");
    line
}

/// Sends `n` datagrams of `len` bytes (byte `i as u8`, datagram `i` from source port
/// `i % ports`) to `to` over loopback without ever overflowing the kernel's backlog, which
/// would drop them before any socket: from one thread pinned to one CPU (whose backlog is
/// first in, first out), in batches of 100, each followed by a datagram to a socket of the
/// test that must arrive before the next batch goes. An event, not a pause: it holds however
/// slowly a busy host runs the softirq.
pub fn send_paced(to: SocketAddr, n: usize, len: usize, ports: usize) {
    std::thread::spawn(move || {
        let cpu = firehose_sys::cpu::current_cpu().unwrap();
        firehose_sys::cpu::pin_current_thread(cpu).unwrap();
        let any: SocketAddr = if to.is_ipv6() {
            "[::1]:0".parse().unwrap()
        } else {
            "127.0.0.1:0".parse().unwrap()
        };
        let socks: Vec<_> = (0..ports)
            .map(|_| std::net::UdpSocket::bind(any).unwrap())
            .collect();
        let mark = std::net::UdpSocket::bind(any).unwrap();
        mark.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mark_at = mark.local_addr().unwrap();
        for i in 0..n {
            socks[i % ports].send_to(&vec![i as u8; len], to).unwrap();
            if i % 100 == 99 || i + 1 == n {
                socks[i % ports].send_to(b"mark", mark_at).unwrap();
                let mut b = [0u8; 8];
                firehose_sys::retry_interrupted(|| mark.recv(&mut b))
                    .expect("the batch's mark within 30 s");
            }
        }
    })
    .join()
    .unwrap();
}
