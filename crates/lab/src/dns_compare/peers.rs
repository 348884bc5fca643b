//! The DNS servers under comparison as child processes: ours, Knot DNS and NSD, each
//! with a generated config in a temp dir, pinned with `taskset`, and killed (dir removed)
//! when dropped. CPU time is summed over the whole process tree (NSD forks its servers).

use crate::LabError;
use firehose_dnswire::{question_end, rtype, Header, QueryBuilder, HEADER};
use firehose_host::procfs::pidstat;
use firehose_sys::cpu::CpuSet;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The servers compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// `firehose serve --proto dns --profile tuned`.
    Firehose,
    /// knotd with `udp-workers N` and `socket-affinity: on`.
    Knot,
    /// nsd with `server-count N`, `reuseport: yes` and response rate limiting off.
    Nsd,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Firehose => "firehose",
            ServerKind::Knot => "knotd",
            ServerKind::Nsd => "nsd",
        }
    }

    /// By the name the command line uses (the program's).
    pub fn from_name(s: &str) -> Option<ServerKind> {
        [ServerKind::Firehose, ServerKind::Knot, ServerKind::Nsd]
            .into_iter()
            .find(|k| k.name() == s)
    }

    /// The configuration knob that sets the worker count, as the row shows it.
    pub fn config(self, workers: usize) -> String {
        match self {
            ServerKind::Firehose => format!("tuned, workers {workers}"),
            ServerKind::Knot => format!("udp-workers {workers}, socket-affinity on"),
            ServerKind::Nsd => format!("server-count {workers}, reuseport"),
        }
    }

    /// The program that must be installed (and its Debian package).
    pub fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            ServerKind::Firehose => None,
            ServerKind::Knot => Some(("knotd", "knot")),
            ServerKind::Nsd => Some(("nsd", "nsd")),
        }
    }
}

/// A child process killed on drop, with an optional directory removed with it.
pub struct Proc {
    child: Child,
    dir: Option<PathBuf>,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SIGTERM first so NSD can stop its forked servers; SIGKILL if it lingers.
        let _ = Command::new("kill").arg(self.pid().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A port free for both UDP and TCP on 127.0.0.1 (knotd and nsd listen on both).
pub fn free_port() -> Result<u16, LabError> {
    for _ in 0..100 {
        let udp = UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| LabError::Run(format!("cannot bind a UDP socket on 127.0.0.1: {e}")))?;
        let port = udp
            .local_addr()
            .map_err(|e| LabError::Run(e.to_string()))?
            .port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(LabError::Run(
        "no port free for both UDP and TCP on 127.0.0.1".into(),
    ))
}

/// Where a server runs and what it serves.
pub struct ServerPlan<'a> {
    pub kind: ServerKind,
    pub workers: usize,
    pub cpus: &'a [usize],
    pub port: u16,
    pub zone: &'a Path,
    /// Apex of the zone, with a trailing dot.
    pub apex: &'a str,
    pub firehose: &'a Path,
    /// Scratch directory (created and removed by the server's guard).
    pub dir: PathBuf,
}

fn knot_conf(p: &ServerPlan<'_>) -> String {
    let d = p.dir.display();
    format!(
        "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  udp-workers: {w}\n  tcp-workers: 1\n  \
         background-workers: 1\n  socket-affinity: on\n\
         database:\n  storage: \"{d}\"\n\
         log:\n  - target: stderr\n    any: error\n\
         template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
         zone:\n  - domain: {apex}\n    file: \"{zone}\"\n",
        port = p.port,
        w = p.workers,
        apex = p.apex,
        zone = p.zone.display()
    )
}

fn nsd_conf(p: &ServerPlan<'_>) -> String {
    let d = p.dir.display();
    format!(
        "server:\n  ip-address: 127.0.0.1@{port}\n  port: {port}\n  server-count: {w}\n  reuseport: yes\n  \
         do-ip6: no\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  \
         database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  \
         logfile: \"{d}/nsd.log\"\n  verbosity: 0\n  tcp-count: 10\n  \
         rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n\
         remote-control:\n  control-enable: no\n\
         zone:\n  name: {apex}\n  zonefile: \"{zone}\"\n",
        port = p.port,
        w = p.workers,
        apex = p.apex,
        zone = p.zone.display()
    )
}

/// Starts a server pinned to `plan.cpus` and waits until it answers the apex SOA.
pub fn start(plan: &ServerPlan<'_>) -> Result<Proc, LabError> {
    if let Some((prog, pkg)) = plan.kind.program() {
        if Command::new(prog).arg("-v").output().is_err() {
            return Err(LabError::Command(format!(
                "{prog} is not installed (apt-get install {pkg})"
            )));
        }
    }
    std::fs::create_dir_all(&plan.dir).map_err(|e| LabError::io(plan.dir.display(), e))?;
    let mut cmd = Command::new("taskset");
    cmd.arg("-c").arg(CpuSet::from(plan.cpus).to_string());
    match plan.kind {
        ServerKind::Firehose => {
            cmd.arg(plan.firehose)
                .args(["serve", "--proto", "dns", "--zone"]);
            cmd.arg(plan.zone);
            cmd.args([
                "--listen",
                &format!("127.0.0.1:{}", plan.port),
                "--profile",
                "tuned",
            ]);
            cmd.args(["--workers", &plan.workers.to_string(), "--pin", "auto"]);
        }
        ServerKind::Knot => {
            let conf = plan.dir.join("knot.conf");
            std::fs::write(&conf, knot_conf(plan)).map_err(|e| LabError::io(conf.display(), e))?;
            cmd.arg("knotd").arg("-c").arg(conf);
        }
        ServerKind::Nsd => {
            let conf = plan.dir.join("nsd.conf");
            std::fs::write(&conf, nsd_conf(plan)).map_err(|e| LabError::io(conf.display(), e))?;
            cmd.arg("nsd").arg("-d").arg("-c").arg(conf);
        }
    }
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::Run(format!("cannot start {}: {e}", plan.kind.name())))?;
    let mut proc = Proc {
        child,
        dir: Some(plan.dir.clone()),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if answers_soa(plan.port, plan.apex) {
            return Ok(proc);
        }
        if let Ok(Some(status)) = proc.child.try_wait() {
            return Err(LabError::Run(format!(
                "{} exited with {status} before answering (config in {})",
                plan.kind.name(),
                plan.dir.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LabError::Run(format!(
        "{} did not answer {} SOA on 127.0.0.1:{} within 10 s",
        plan.kind.name(),
        plan.apex,
        plan.port
    )))
}

/// True if 127.0.0.1:`port` answers an SOA query for `apex` with NOERROR and AA.
fn answers_soa(port: u16, apex: &str) -> bool {
    let mut q = Vec::new();
    let b = QueryBuilder {
        id: 0x5151,
        ..QueryBuilder::default()
    };
    if b.write(apex, rtype::SOA, &mut q).is_err() {
        return false;
    }
    let Ok(s) = UdpSocket::bind("127.0.0.1:0") else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    if s.send_to(&q, ("127.0.0.1", port)).is_err() {
        return false;
    }
    let mut buf = [0u8; 512];
    let Ok(n) = s.recv(&mut buf) else {
        return false;
    };
    let r = &buf[..n];
    let qe = q.len();
    // Our id, a NOERROR authoritative response echoing our question (name case aside).
    Header::parse(r)
        .is_some_and(|h| h.id == 0x5151 && h.qr && h.aa && h.rcode == 0 && h.qdcount == 1)
        && question_end(r) == Some(qe)
        && r[HEADER..qe].eq_ignore_ascii_case(&q[HEADER..qe])
}

/// /proc/PID/stat of a process, if it is still there.
fn stat_of(pid: u32) -> Option<pidstat::PidStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    pidstat::parse(&text).ok()
}

/// `root` and every process descending from it.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(st) = stat_of(pid) {
                parent.push((pid, st.ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent.iter().filter(|&&(_, pp)| pp == p).map(|&(c, _)| c));
        i += 1;
    }
    tree
}

/// CPU ticks (utime + stime) used so far by `root` and its descendants.
pub fn tree_ticks(root: u32) -> u64 {
    process_tree(root)
        .into_iter()
        .filter_map(stat_of)
        .map(|s| s.utime + s.stime)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_is_in_its_tree() {
        let me = std::process::id();
        assert_eq!(process_tree(me)[0], me);
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(
            tree_ticks(me) >= 5,
            "100 ms of CPU is at least 5 ticks of 10 ms"
        );
    }

    #[test]
    fn configs_name_port_workers_and_zone() {
        let plan = ServerPlan {
            kind: ServerKind::Nsd,
            workers: 2,
            cpus: &[0, 1],
            port: 5353,
            zone: Path::new("/z/bench.zone"),
            apex: "bench.example.",
            firehose: Path::new("/bin/firehose"),
            dir: PathBuf::from("/tmp/x"),
        };
        let n = nsd_conf(&plan);
        assert!(
            n.contains("server-count: 2\n")
                && n.contains("reuseport: yes")
                && n.contains("127.0.0.1@5353")
        );
        assert!(n.contains("zonefile: \"/z/bench.zone\""));
        // Debian's NSD limits responses to 200/s per client netblock unless told not to.
        assert!(n.contains("rrl-ratelimit: 0\n"));
        let k = knot_conf(&plan);
        assert!(
            k.contains("udp-workers: 2\n")
                && k.contains("socket-affinity: on")
                && k.contains("listen: 127.0.0.1@5353")
        );
    }
}
