//! The DNS servers the lab compares, started one way: ours (`firehose serve --proto dns`),
//! Knot DNS and NSD, each over one zone, with its config written into a private directory,
//! and ready once it answers the apex SOA (the zone is loaded). `lab compare --proto dns`,
//! `lab compare --io --proto dns` and `lab zone-load` all start their servers here.

use super::{knot::KnotConf, nsd::NsdConf};
use crate::proc::Proc;
use crate::server::ServerKind;
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use firehose_dnswire::{question_end, rtype, Header, QueryBuilder, HEADER};
use std::path::Path;
use std::time::{Duration, Instant};

/// Everything a DNS server start needs.
#[derive(Debug, Clone)]
pub struct DnsServer<'a> {
    pub kind: &'a ServerKind,
    /// The firehose binary (for ours).
    pub firehose: &'a Path,
    /// Workers: firehose's, knotd's udp-workers, nsd's server-count.
    pub workers: usize,
    /// The server's config files (a directory the run owns).
    pub dir: &'a Path,
    pub addr: &'a str,
    pub port: u16,
    pub zone: &'a Path,
    /// With its trailing dot.
    pub apex: &'a str,
    /// TCP connections the server must take at once (a TCP load), `None`: its default.
    pub tcp_limit: Option<usize>,
    /// Serve over AF_XDP on this interface (firehose `--io xdp`, knotd's XDP mode).
    pub xdp_iface: Option<&'a str>,
}

impl DnsServer<'_> {
    /// The command line, its config file written into `dir` first.
    pub fn argv(&self) -> LabResult<Vec<String>> {
        let write = |name: &str, text: String| {
            let conf = self.dir.join(name);
            std::fs::write(&conf, text).map_err(|e| LabError::io(conf.display(), e))?;
            Ok::<_, LabError>(conf)
        };
        Ok(match self.kind {
            ServerKind::FirehoseDns => {
                let mut v: Vec<String> = [
                    "serve",
                    "--proto",
                    "dns",
                    "--zone",
                    &self.zone.display().to_string(),
                    "--listen",
                    &format!("{}:{}", self.addr, self.port),
                ]
                .map(String::from)
                .to_vec();
                match self.xdp_iface {
                    Some(dev) => v.extend(
                        ["--io", "xdp", "--iface", dev, "--profile", "xdp"].map(String::from),
                    ),
                    None => {
                        let w = self.workers.to_string();
                        v.extend(
                            ["--profile", "tuned", "--workers", &w, "--cpus", "auto"]
                                .map(String::from),
                        )
                    }
                }
                if let Some(n) = self.tcp_limit {
                    let n = n.to_string();
                    v.extend(["--tcp-max-conns", &n, "--tcp-max-per-client", &n].map(String::from));
                }
                std::iter::once(self.firehose.display().to_string())
                    .chain(v)
                    .collect()
            }
            ServerKind::Knot => {
                let conf = KnotConf {
                    dir: self.dir,
                    addr: self.addr,
                    port: self.port,
                    udp_workers: self.workers,
                    socket_affinity: true,
                    xdp_iface: self.xdp_iface,
                    zone: self.zone,
                    apex: self.apex,
                };
                super::knot::argv(&write("knot.conf", conf.text())?)
            }
            ServerKind::Nsd => {
                let conf = NsdConf {
                    dir: self.dir,
                    addr: self.addr,
                    port: self.port,
                    servers: self.workers,
                    tcp_count: self.tcp_limit.unwrap_or(10),
                    zone: self.zone,
                    apex: self.apex,
                };
                super::nsd::argv(&write("nsd.conf", conf.text())?)
            }
            other => {
                return Err(LabError::Usage(format!(
                    "{} is not a DNS server (use firehose, knotd or nsd)",
                    other.name()
                )))
            }
        })
    }
}

/// Waits until the server `proc` answers the apex SOA on `addr:port`, at most `within`:
/// from this process on loopback, otherwise from the client's side of the test host
/// (`firehose lab answers`, the same check run there). `Ok(Err(why))` when the server
/// exited or never answered: the reason quotes what it wrote.
pub fn wait_answering(
    lab: &Lab<'_>,
    proc: &mut Proc,
    addr: &str,
    port: u16,
    apex: &str,
    within: Duration,
) -> LabResult<Result<(), String>> {
    let by = Instant::now() + within;
    let mut probe = match lab.topo.netns(Side::Client) {
        None => None,
        Some(_) => {
            let target = format!("{addr}:{port}");
            let secs = format!("{}s", within.as_secs_f64());
            let argv = lab.firehose(&[
                "lab", "answers", "--target", &target, "--apex", apex, "--within", &secs,
            ]);
            let cpus = lab.placement.client_cpus.clone();
            Some(lab.spawn(Side::Client, &cpus, &argv, &format!("answers-{port}"))?)
        }
    };
    loop {
        if let Some(st) = proc.exited() {
            return Ok(Err(format!(
                "{} exited ({st}) before answering: {}",
                proc.name(),
                proc.stderr_tail()
            )));
        }
        let answered = match probe.as_mut() {
            None => answers_soa(addr, port, apex, Duration::from_millis(20)),
            Some(p) => match p.exited() {
                Some(st) if st.success() => true,
                Some(_) => {
                    return Ok(Err(format!(
                        "{} did not answer {apex} SOA on {addr}:{port} within {:.0} s: {} {}",
                        proc.name(),
                        within.as_secs_f64(),
                        proc.stderr_tail(),
                        p.stderr_tail()
                    )))
                }
                None => false,
            },
        };
        if answered {
            return Ok(Ok(()));
        }
        // The probe keeps its own deadline; give it time to say so.
        let grace = Duration::from_secs(if probe.is_some() { 5 } else { 0 });
        if Instant::now() >= by + grace {
            return Ok(Err(format!(
                "{} did not answer {apex} SOA on {addr}:{port} within {:.0} s: {}",
                proc.name(),
                within.as_secs_f64(),
                proc.stderr_tail()
            )));
        }
        lab.sleep_until(Instant::now() + Duration::from_millis(10))?;
    }
}

/// Connections a server must take at once under a TCP load of `connections`: a closing
/// client reconnects before the server has seen its old connection close, so well above.
pub fn tcp_limit(connections: usize) -> usize {
    (4 * connections).max(128)
}

/// True if `addr:port` answers an SOA query for `apex` with NOERROR and AA within
/// `timeout`: the zone is loaded and served.
pub fn answers_soa(addr: &str, port: u16, apex: &str, timeout: Duration) -> bool {
    let mut q = Vec::new();
    let b = QueryBuilder {
        id: 0x5151,
        ..QueryBuilder::default()
    };
    if b.write(apex, rtype::SOA, &mut q).is_err() {
        return false;
    }
    let Ok(ip) = addr.parse::<std::net::IpAddr>() else {
        return false;
    };
    let qe = q.len();
    // Our id, a NOERROR authoritative response echoing our question (name case aside).
    super::probe((ip, port).into(), &q, timeout, |r| {
        Header::parse(r)
            .is_some_and(|h| h.id == 0x5151 && h.qr && h.aa && h.rcode == 0 && h.qdcount == 1)
            && question_end(r) == Some(qe)
            && r[HEADER..qe].eq_ignore_ascii_case(&q[HEADER..qe])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn start<'a>(kind: &'a ServerKind, dir: &'a Path) -> DnsServer<'a> {
        DnsServer {
            kind,
            firehose: Path::new("/bin/firehose"),
            workers: 2,
            dir,
            addr: "127.0.0.1",
            port: 5353,
            zone: Path::new("/z/bench.zone"),
            apex: "bench.example.",
            tcp_limit: None,
            xdp_iface: None,
        }
    }

    #[test]
    fn each_server_gets_its_command_and_config() {
        let dir = crate::workdir::WorkDir::new("test").unwrap();
        let fh = ServerKind::FirehoseDns;
        let mut s = start(&fh, &dir);
        assert_eq!(
            s.argv().unwrap().join(" "),
            "/bin/firehose serve --proto dns --zone /z/bench.zone --listen 127.0.0.1:5353 \
             --profile tuned --workers 2 --cpus auto"
        );
        s.xdp_iface = Some("fhv0-1");
        s.tcp_limit = Some(256);
        assert!(s.argv().unwrap().join(" ").ends_with(
            "--io xdp --iface fhv0-1 --profile xdp --tcp-max-conns 256 --tcp-max-per-client 256"
        ));
        let k = ServerKind::Knot;
        let a = start(&k, &dir).argv().unwrap();
        assert_eq!(a[..2], ["knotd", "-c"]);
        let conf = std::fs::read_to_string(&a[2]).unwrap();
        assert!(conf.contains("udp-workers: 2\n") && conf.contains("socket-affinity: on"));
        let n = ServerKind::Nsd;
        let a = start(&n, &dir).argv().unwrap();
        assert_eq!(a[..3], ["nsd", "-d", "-c"]);
        assert!(std::fs::read_to_string(&a[3])
            .unwrap()
            .contains("tcp-count: 10\n"));
        assert_eq!(tcp_limit(64), 256);
        assert!(start(&ServerKind::Sockperf, &dir).argv().is_err());
    }

    #[test]
    fn nothing_listening_is_not_an_answer() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = s.local_addr().unwrap().port();
        assert!(!answers_soa(
            "127.0.0.1",
            port,
            "x.example.",
            Duration::from_millis(20)
        ));
    }
}
