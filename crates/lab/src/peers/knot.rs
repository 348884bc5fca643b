//! Knot DNS (`knotd`): its configuration, written once for every study that runs it (`lab
//! compare --proto dns` on sockets, `lab compare --io` in its XDP mode too, `lab zone-load`).

use std::path::Path;

/// What knotd serves and how.
#[derive(Debug, Clone)]
pub struct KnotConf<'a> {
    /// Its rundir, storage and journal (a private directory of the run).
    pub dir: &'a Path,
    pub addr: &'a str,
    pub port: u16,
    pub udp_workers: usize,
    /// `socket-affinity: on`: one SO_REUSEPORT socket per UDP worker, steered by CPU.
    pub socket_affinity: bool,
    /// Its XDP mode on this interface (`xdp: listen: IFACE@PORT`), beside the sockets.
    pub xdp_iface: Option<&'a str>,
    pub zone: &'a Path,
    /// With its trailing dot.
    pub apex: &'a str,
}

impl KnotConf<'_> {
    /// knot.conf: one TCP and one background worker, errors only to stderr, no zone
    /// file sync or journal (nothing but the zone in memory).
    pub fn text(&self) -> String {
        let d = self.dir.display();
        let affinity = if self.socket_affinity {
            "  socket-affinity: on\n"
        } else {
            ""
        };
        let xdp = self.xdp_iface.map_or(String::new(), |dev| {
            format!("xdp:\n  listen: {dev}@{}\n", self.port)
        });
        format!(
            "server:\n  rundir: \"{d}\"\n  listen: {addr}@{port}\n  udp-workers: {w}\n  tcp-workers: 1\n  \
             background-workers: 1\n{affinity}{xdp}\
             database:\n  storage: \"{d}\"\n\
             log:\n  - target: stderr\n    any: error\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
             zone:\n  - domain: {apex}\n    file: \"{zone}\"\n",
            addr = self.addr,
            port = self.port,
            w = self.udp_workers,
            apex = self.apex,
            zone = self.zone.display(),
        )
    }
}

/// knotd's command line for a config file.
pub fn argv(conf: &Path) -> Vec<String> {
    vec!["knotd".into(), "-c".into(), conf.display().to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_and_xdp_modes() {
        let mut c = KnotConf {
            dir: Path::new("/w"),
            addr: "127.0.0.1",
            port: 5353,
            udp_workers: 2,
            socket_affinity: true,
            xdp_iface: None,
            zone: Path::new("/w/z.zone"),
            apex: "bench.example.",
        };
        let t = c.text();
        assert!(
            t.contains("listen: 127.0.0.1@5353\n  udp-workers: 2\n"),
            "{t}"
        );
        assert!(
            t.contains("  socket-affinity: on\n") && !t.contains("xdp:"),
            "{t}"
        );
        assert!(t.contains("zone:\n  - domain: bench.example.\n    file: \"/w/z.zone\"\n"));
        c.socket_affinity = false;
        c.xdp_iface = Some("fhv0-1");
        let t = c.text();
        assert!(
            t.contains("xdp:\n  listen: fhv0-1@5353\n") && !t.contains("affinity"),
            "{t}"
        );
    }
}
