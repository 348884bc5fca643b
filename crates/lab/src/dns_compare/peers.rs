//! The DNS servers under comparison as child processes: ours, Knot DNS and NSD, each
//! with a generated config in a temp dir, pinned with `taskset`, and stopped with its whole
//! process group (NSD forks its servers), the dir removed, when dropped.

use crate::proc::{self, Proc};
use crate::server::ServerKind;
use crate::{LabError, LabResult};
use firehose_dnswire::{question_end, rtype, Header, QueryBuilder, HEADER};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

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
    /// Driven over TCP: connection limits raised to fit the load.
    pub tcp: Option<super::TcpLoad>,
    /// Scratch directory (created and removed by the server's guard).
    pub dir: PathBuf,
    /// How long the server may take to answer its first query (to load the zone).
    pub ready_within: Duration,
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
         logfile: \"{d}/nsd.log\"\n  verbosity: 0\n  tcp-count: {tcp}\n  \
         rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n\
         remote-control:\n  control-enable: no\n\
         zone:\n  name: {apex}\n  zonefile: \"{zone}\"\n",
        port = p.port,
        w = p.workers,
        apex = p.apex,
        zone = p.zone.display(),
        tcp = tcp_limit(p).unwrap_or(10)
    )
}

/// Connections a server must take at once under a TCP load: a closing client reconnects
/// before the server has seen its old connection close, so well above the count.
fn tcp_limit(p: &ServerPlan<'_>) -> Option<usize> {
    p.tcp.map(|t| (4 * t.connections).max(128))
}

/// Starts a server pinned to `plan.cpus` and waits until it answers the apex SOA.
pub fn start(plan: &ServerPlan<'_>, stop: Option<&AtomicBool>) -> LabResult<Proc> {
    if let Some((prog, pkg)) = plan.kind.program() {
        if !crate::cmd::installed(prog) {
            return Err(LabError::Command(format!(
                "{prog} is not installed (apt-get install {pkg})"
            )));
        }
    }
    std::fs::create_dir_all(&plan.dir).map_err(|e| LabError::io(plan.dir.display(), e))?;
    let write = |name: &str, text: String| {
        let conf = plan.dir.join(name);
        std::fs::write(&conf, text).map_err(|e| LabError::io(conf.display(), e))?;
        Ok::<_, LabError>(conf)
    };
    let cmd = match plan.kind {
        ServerKind::FirehoseDns => {
            let mut c = proc::pinned(plan.cpus, plan.firehose);
            c.args(["serve", "--proto", "dns", "--zone"]);
            c.arg(plan.zone);
            c.args([
                "--listen",
                &format!("127.0.0.1:{}", plan.port),
                "--profile",
                "tuned",
            ]);
            c.args(["--workers", &plan.workers.to_string(), "--cpus", "auto"]);
            if let Some(n) = tcp_limit(plan) {
                let n = n.to_string();
                c.args(["--tcp-max-conns", &n, "--tcp-max-per-client", &n]);
            }
            c
        }
        ServerKind::Knot => {
            let mut c = proc::pinned(plan.cpus, "knotd");
            c.arg("-c").arg(write("knot.conf", knot_conf(plan))?);
            c
        }
        ServerKind::Nsd => {
            let mut c = proc::pinned(plan.cpus, "nsd");
            c.arg("-d")
                .arg("-c")
                .arg(write("nsd.conf", nsd_conf(plan))?);
            c
        }
        ref other => {
            return Err(LabError::Usage(format!(
                "{} is not a DNS server (use firehose, knotd or nsd)",
                other.name()
            )))
        }
    };
    let mut proc = Proc::spawn(cmd, plan.kind.name(), &plan.dir)?.owning(plan.dir.clone());
    let deadline = Instant::now() + plan.ready_within;
    while Instant::now() < deadline {
        if answers_soa(plan.port, plan.apex) {
            return Ok(proc);
        }
        if let Some(status) = proc.exited() {
            return Err(LabError::Run(format!(
                "{} exited with {status} before answering: {}",
                plan.kind.name(),
                proc.stderr_tail()
            )));
        }
        proc::sleep_until(Instant::now() + Duration::from_millis(10), stop)?;
    }
    Err(LabError::Run(format!(
        "{} did not answer {} SOA on 127.0.0.1:{} within {:.0} s: {}",
        plan.kind.name(),
        plan.apex,
        plan.port,
        plan.ready_within.as_secs_f64(),
        proc.stderr_tail()
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
    let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_port_workers_and_zone() {
        let mut plan = ServerPlan {
            kind: ServerKind::Nsd,
            workers: 2,
            cpus: &[0, 1],
            port: 5353,
            zone: Path::new("/z/bench.zone"),
            apex: "bench.example.",
            firehose: Path::new("/bin/firehose"),
            tcp: None,
            dir: PathBuf::from("/tmp/x"),
            ready_within: Duration::from_secs(10),
        };
        let n = nsd_conf(&plan);
        assert!(n.contains("tcp-count: 10\n"));
        plan.tcp = Some(super::super::TcpLoad {
            connections: 64,
            queries_per_conn: None,
        });
        // Room for clients that reconnect before the server saw them close.
        assert!(nsd_conf(&plan).contains("tcp-count: 256\n"));
        plan.tcp = None;
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
