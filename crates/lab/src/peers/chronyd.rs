//! chronyd as a peer NTP server: one configuration written once into a directory of the
//! run's own, and as many chronyd processes as the server has workers, all bound to the
//! same port (chronyd 4 sets SO_REUSEPORT on its NTP sockets, so the kernel spreads the
//! clients over the instances, as firehose's reuseport workers share a port).
//!
//! Like for like with `firehose serve --proto ntp`: it answers every client the `allow`
//! line admits, with no rate limiting (no `ratelimit` line: chronyd limits nobody unless
//! told to) and no per-client log (`noclientlog`: the memory and lookups that only its
//! rate limiting and `chronyc clients` use). It never touches the host's clock (`-x`), has
//! no upstream sources (`local stratum N` makes it answer as a synchronised server of that
//! stratum), no command port or socket, and logs to stderr in the foreground (`-d`).

use crate::proc::Proc;
use crate::study::Lab;
use crate::topology::Side;
use crate::{LabError, LabResult};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The program and the Debian package it comes from.
pub const PROGRAM: &str = "chronyd";
pub const PACKAGE: &str = "chrony";

/// What the configuration says.
#[derive(Debug, Clone)]
pub struct ChronydConf<'a> {
    /// Where it answers NTP (address and port).
    pub listen: SocketAddr,
    /// The clients it answers: a chrony `allow` argument (`all`, an address, a subnet).
    pub allow: &'a str,
    /// The stratum it claims (`local stratum`), 1..=15.
    pub stratum: u8,
}

impl ChronydConf<'_> {
    /// The text of chrony.conf.
    pub fn text(&self) -> String {
        format!(
            "# firehose lab: chronyd as a peer NTP server (crates/lab/src/peers/chronyd.rs)\n\
             port {port}\n\
             bindaddress {addr}\n\
             allow {allow}\n\
             local stratum {stratum}\n\
             noclientlog\n\
             cmdport 0\n\
             bindcmdaddress /\n",
            port = self.listen.port(),
            addr = self.listen.ip(),
            allow = self.allow,
            stratum = self.stratum.clamp(1, 15),
        )
    }

    /// Writes chrony.conf into `dir` (the run's own), once for every instance.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join("chrony.conf");
        std::fs::write(&path, self.text())?;
        Ok(path)
    }
}

/// The command line of instance `i` (from 0) on the configuration at `conf`: the shared file
/// included, its own pid file beside it (chronyd refuses to start while the pid file names a
/// live chronyd). Root keeps root (`-u root`: its pid file is in a directory only root may
/// write); any other user is let through the root check (`-U`).
pub fn argv(conf: &Path, listen: SocketAddr, i: usize, root: bool) -> Vec<String> {
    let dir = conf.parent().unwrap_or(Path::new("."));
    let mut v = vec![
        PROGRAM.to_string(),
        "-x".into(),
        "-d".into(),
        if listen.is_ipv4() { "-4" } else { "-6" }.into(),
    ];
    if root {
        v.extend(["-u".into(), "root".into()]);
    } else {
        v.push("-U".into());
    }
    v.push(format!("include {}", conf.display()));
    v.push(format!(
        "pidfile {}",
        dir.join(format!("chronyd-{i}.pid")).display()
    ));
    v
}

/// Starts `instances` chronyd processes on `conf` (written into `dir` once) on `side` of the
/// test host, instance i confined to `cpus[i % cpus.len()]`, and waits (`within` at most)
/// until all of them have bound the port, and, on the host's own network, until it
/// answers. An instance that exits first, or a port not bound in time, is an error quoting
/// what chronyd wrote.
pub fn start(
    lab: &Lab<'_>,
    side: Side,
    cpus: &[usize],
    dir: &Path,
    conf: &ChronydConf<'_>,
    instances: usize,
    within: Duration,
) -> LabResult<Vec<Proc>> {
    let path = conf
        .write(dir)
        .map_err(|e| LabError::io(dir.display(), e))?;
    let root = firehose_sys::cpu::is_root();
    let mut procs = Vec::new();
    for i in 0..instances.max(1) {
        let cpu = [cpus[i % cpus.len().max(1)]];
        let argv = argv(&path, conf.listen, i, root);
        procs.push(lab.spawn(side, &cpu, &argv, &format!("chronyd-{i}"))?);
    }
    let port = conf.listen.port();
    let by = Instant::now() + within;
    let mut transmit = 1u64 << 62;
    loop {
        for p in procs.iter_mut() {
            if let Some(st) = p.exited() {
                return Err(LabError::Run(format!(
                    "{} exited ({st}) before answering: {}",
                    p.name(),
                    p.stderr_tail()
                )));
            }
        }
        let bound = crate::sample::sockets_on_port(procs[0].pid(), port) >= procs.len();
        transmit += 1;
        let own_net = lab.topo.netns(side).is_none();
        if bound && (!own_net || answers(conf.listen, transmit, Duration::from_millis(50))) {
            return Ok(procs);
        }
        if Instant::now() >= by {
            return Err(LabError::Run(format!(
                "{} chronyd instance(s) did not all bind and answer on {} within {:.0} s: {}",
                procs.len(),
                conf.listen,
                within.as_secs_f64(),
                procs[0].stderr_tail()
            )));
        }
        lab.sleep_until(Instant::now() + Duration::from_millis(10))?;
    }
}

/// Length of an NTP packet without extension fields.
pub const PACKET: usize = 48;

/// An NTPv4 client request (mode 3) with `transmit` as its transmit timestamp.
pub fn client_request(transmit: u64) -> [u8; PACKET] {
    let mut p = [0u8; PACKET];
    p[0] = (4 << 3) | 3;
    p[40..48].copy_from_slice(&transmit.to_be_bytes());
    p
}

/// True if `reply` answers [`client_request`]`(transmit)`: a server reply (mode 4) of at
/// least 48 bytes whose origin timestamp is the request's transmit timestamp.
pub fn is_answer(reply: &[u8], transmit: u64) -> bool {
    reply.len() >= PACKET && reply[0] & 7 == 4 && reply[24..32] == transmit.to_be_bytes()
}

/// True if the NTP server at `addr` answers one request within `timeout`.
pub fn answers(addr: SocketAddr, transmit: u64, timeout: Duration) -> bool {
    super::probe(addr, &client_request(transmit), timeout, |r| {
        is_answer(r, transmit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_config_many_instances() {
        let conf = ChronydConf {
            listen: "127.0.0.1:12300".parse().unwrap(),
            allow: "all",
            stratum: 10,
        };
        let t = conf.text();
        for line in [
            "port 12300\n",
            "bindaddress 127.0.0.1\n",
            "allow all\n",
            "local stratum 10\n",
            "noclientlog\n",
            "cmdport 0\n",
        ] {
            assert!(t.contains(line), "{line}: {t}");
        }
        assert!(!t.contains("ratelimit") && !t.contains("\nserver ") && !t.contains("pool "));
        let path = Path::new("/tmp/fh-x/chrony.conf");
        let a = argv(path, conf.listen, 0, true);
        let b = argv(path, conf.listen, 1, false);
        assert_eq!(a[..5], ["chronyd", "-x", "-d", "-4", "-u"]);
        assert!(b.contains(&"-U".to_string()));
        assert_eq!(a[a.len() - 2], "include /tmp/fh-x/chrony.conf");
        assert_eq!(
            (a.last().unwrap().as_str(), b.last().unwrap().as_str()),
            (
                "pidfile /tmp/fh-x/chronyd-0.pid",
                "pidfile /tmp/fh-x/chronyd-1.pid"
            )
        );
        let v6 = argv(path, "[::1]:123".parse().unwrap(), 0, true);
        assert_eq!(v6[3], "-6");
    }

    #[test]
    fn an_answer_is_mode_4_with_our_timestamp_as_its_origin() {
        let q = client_request(0x0102_0304_0506_0708);
        assert_eq!((q[0], q.len()), (0x23, 48));
        let mut r = [0u8; 48];
        r[0] = 0x24;
        r[24..32].copy_from_slice(&q[40..48]);
        assert!(is_answer(&r, 0x0102_0304_0506_0708));
        assert!(
            !is_answer(&r, 0x0102_0304_0506_0709),
            "another request's answer"
        );
        assert!(!is_answer(&r[..47], 0x0102_0304_0506_0708), "too short");
        r[0] = 0x23;
        assert!(!is_answer(&r, 0x0102_0304_0506_0708), "a client packet");
    }
}
