//! NSD: its configuration (no chroot, no privilege drop, no database, files in the run's
//! private directory, response rate limiting off), written once for every study.

use std::path::Path;

/// What nsd serves and how.
#[derive(Debug, Clone)]
pub struct NsdConf<'a> {
    pub dir: &'a Path,
    pub addr: &'a str,
    pub port: u16,
    /// `server-count`: the server processes NSD forks, each with its SO_REUSEPORT socket.
    pub servers: usize,
    /// `tcp-count`: TCP connections at once.
    pub tcp_count: usize,
    pub zone: &'a Path,
    pub apex: &'a str,
}

impl NsdConf<'_> {
    /// nsd.conf. Debian's NSD limits responses to 200/s per client netblock unless told
    /// not to (rrl-ratelimit 0).
    pub fn text(&self) -> String {
        let d = self.dir.display();
        format!(
            "server:\n  ip-address: {addr}@{port}\n  port: {port}\n  server-count: {w}\n  reuseport: yes\n  \
             do-ip6: no\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  \
             database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  \
             logfile: \"{d}/nsd.log\"\n  verbosity: 0\n  tcp-count: {tcp}\n  \
             rrl-ratelimit: 0\n  rrl-whitelist-ratelimit: 0\n\
             remote-control:\n  control-enable: no\n\
             zone:\n  name: {apex}\n  zonefile: \"{zone}\"\n",
            addr = self.addr,
            port = self.port,
            w = self.servers,
            apex = self.apex,
            zone = self.zone.display(),
            tcp = self.tcp_count,
        )
    }
}

/// nsd in the foreground (`-d`) with a config file.
pub fn argv(conf: &Path) -> Vec<String> {
    vec![
        "nsd".into(),
        "-d".into(),
        "-c".into(),
        conf.display().to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_port_servers_zone_and_no_rate_limit() {
        let n = NsdConf {
            dir: Path::new("/tmp/x"),
            addr: "127.0.0.1",
            port: 5353,
            servers: 2,
            tcp_count: 256,
            zone: Path::new("/z/bench.zone"),
            apex: "bench.example.",
        }
        .text();
        assert!(n.contains("server-count: 2\n") && n.contains("reuseport: yes"));
        assert!(n.contains("127.0.0.1@5353") && n.contains("tcp-count: 256\n"));
        assert!(n.contains("zonefile: \"/z/bench.zone\""));
        assert!(n.contains("rrl-ratelimit: 0\n"));
    }
}
