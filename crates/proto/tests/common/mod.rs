//! Shared by the DNS tests: a responder on loopback, an independent decoder
//! (hickory-proto), and a Knot DNS child process for differential checks.
#![allow(dead_code)]

use firehose_engine::{Profile, ServeConfig, Server};
use firehose_proto::dns::{load_zones, DnsHandler, DEFAULT_MAX_UDP};
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name, RecordType};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The test zones, by file name.
pub fn zone_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
}

pub const ZONES: [&str; 2] = ["example.zone", "reverse.zone"];

/// A handler over the test zones.
pub fn handler() -> DnsHandler {
    let paths: Vec<PathBuf> = ZONES.iter().map(|z| zone_path(z)).collect();
    DnsHandler::new(
        load_zones(&paths).expect("test zones load"),
        DEFAULT_MAX_UDP,
    )
}

/// Our responder on 127.0.0.1 with one worker.
pub fn start_server() -> Server {
    let cfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 1);
    let h = handler();
    Server::start(&cfg, move |_| h.clone()).expect("server starts")
}

/// Sends a datagram and waits up to a second for the answer.
pub fn exchange(server: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s.send_to(req, server).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = s.recv(&mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// A query built by hickory, with EDNS (payload `edns`) or without.
pub fn query(name: &str, t: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(0x4242);
    m.set_recursion_desired(false);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

/// Asks `server` and decodes the answer with hickory.
pub fn ask(server: SocketAddr, name: &str, t: RecordType, edns: Option<u16>) -> Message {
    let resp = exchange(server, &query(name, t, edns)).expect("an answer");
    Message::from_vec(&resp).expect("hickory decodes the answer")
}

/// A section as sorted text lines, names lower-cased (DNS compares names ignoring case).
pub fn section(recs: &[hickory_proto::rr::Record]) -> Vec<String> {
    let mut v: Vec<String> = recs
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {}",
                r.name().to_ascii().to_ascii_lowercase(),
                r.ttl(),
                r.record_type(),
                r.data()
            )
        })
        .collect();
    v.sort();
    v
}

/// A free UDP+TCP port on 127.0.0.1 (knotd listens on both).
pub fn free_port() -> u16 {
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// knotd serving the test zones from a temp dir; killed on drop.
pub struct Knot {
    child: Child,
    dir: PathBuf,
    pub addr: SocketAddr,
}

impl Knot {
    /// Starts knotd and waits until it answers. `None` (with the reason printed) only when
    /// knotd is not installed; a knotd that is installed but fails to start or to answer
    /// fails the test, since a broken reference must not pass as a skipped comparison.
    pub fn start() -> Option<Knot> {
        if Command::new("knotd").arg("--version").output().is_err() {
            eprintln!("skipped: knotd is not installed (Debian package knot)");
            return None;
        }
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("fh-knot-test-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut conf = format!(
            "server:\n  rundir: \"{d}\"\n  listen: 127.0.0.1@{port}\n  udp-workers: 1\n  tcp-workers: 1\n  background-workers: 1\n\
             database:\n  storage: \"{d}\"\n\
             log:\n  - target: stderr\n    any: error\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n    journal-content: none\n\
             zone:\n",
            d = dir.display()
        );
        for (apex, file) in [
            ("example.com", "example.zone"),
            ("2.0.192.in-addr.arpa", "reverse.zone"),
        ] {
            conf += &format!(
                "  - domain: {apex}\n    file: \"{}\"\n",
                zone_path(file).display()
            );
        }
        std::fs::write(dir.join("knot.conf"), conf).unwrap();
        let child = Command::new("knotd")
            .arg("-c")
            .arg(dir.join("knot.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("knotd is installed but cannot be started: {e}"));
        let mut knot = Knot {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        // Ready once it answers the apex SOA authoritatively.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = knot.child.try_wait() {
                panic!("knotd is installed but exited at start ({status}); its stderr is above");
            }
            if let Some(r) = exchange(knot.addr, &query("example.com.", RecordType::SOA, None)) {
                if Message::from_vec(&r).is_ok_and(|m| m.authoritative()) {
                    return Some(knot);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("knotd started but did not answer the example.com SOA within 20 s");
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
