//! Shared by the DNS tests: a responder on loopback, an independent decoder
//! (hickory-proto), and a Knot DNS child process for differential checks.
#![allow(dead_code)]

use firehose_engine::{Profile, ServeConfig, Server};
use firehose_proto::dns::{load_zones_limited, DnsHandler, Limits, DEFAULT_MAX_UDP};
use firehose_sys::retry_interrupted;
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

/// The operator cases (DNAME, DS at cuts, a child zone, big additional sections), as
/// (apex, file).
pub const OPERATOR_ZONES: [(&str, &str); 2] =
    [("op.test", "op.zone"), ("child.op.test", "child.zone")];

/// The tests' limits: zones signed with a few NSEC3 iterations load, to compare their
/// denials with Knot's (the default refuses any, as RFC 9276 asks).
pub const TEST_LIMITS: Limits = Limits {
    zone_max_size: firehose_proto::dns::DEFAULT_ZONE_MAX_SIZE,
    nsec3_max_iterations: 10,
};

/// A handler over the test zones.
pub fn handler() -> DnsHandler {
    handler_for(&ZONES)
}

/// A handler over the named test zone files.
pub fn handler_for(zones: &[&str]) -> DnsHandler {
    let paths: Vec<PathBuf> = zones.iter().map(|z| zone_path(z)).collect();
    DnsHandler::new(
        load_zones_limited(&paths, &TEST_LIMITS).expect("test zones load"),
        DEFAULT_MAX_UDP,
    )
}

/// Our responder on 127.0.0.1 with one worker.
pub fn start_server() -> Server {
    start_server_for(&ZONES)
}

/// Our responder on 127.0.0.1 with one worker, serving the named test zone files.
pub fn start_server_for(zones: &[&str]) -> Server {
    let cfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 1);
    let h = handler_for(zones);
    Server::start(&cfg, move |_| h.clone()).expect("server starts")
}

/// Sends a datagram and waits up to a second for the answer.
pub fn exchange(server: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s.send_to(req, server).unwrap();
    let mut buf = vec![0u8; 65536];
    let n = retry_interrupted(|| s.recv(&mut buf)).ok()?;
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
    firehose_sys::socket::free_port(std::net::Ipv4Addr::LOCALHOST.into()).unwrap()
}

/// knotd serving the test zones from a temp dir; killed on drop.
pub struct Knot {
    child: Child,
    dir: PathBuf,
    pub addr: SocketAddr,
}

impl Knot {
    /// Starts knotd on the test zones; see [`Knot::start_with`].
    pub fn start() -> Option<Knot> {
        Self::start_with(&[
            ("example.com", "example.zone"),
            ("2.0.192.in-addr.arpa", "reverse.zone"),
        ])
    }

    /// Starts knotd serving `zones` as (apex, test data file) and waits until it
    /// answers. `None` (with the reason printed) only when knotd is not installed; a
    /// knotd that is installed but fails to start or to answer fails the test, since a
    /// broken reference must not pass as a skipped comparison.
    pub fn start_with(zones: &[(&str, &str)]) -> Option<Knot> {
        Self::start_conf(zones, false)
    }

    /// Like [`Knot::start_with`], letting 127.0.0.1 transfer every zone.
    pub fn start_with_transfers(zones: &[(&str, &str)]) -> Option<Knot> {
        Self::start_conf(zones, true)
    }

    fn start_conf(zones: &[(&str, &str)], transfers: bool) -> Option<Knot> {
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
             {acl}zone:\n",
            d = dir.display(),
            acl = if transfers {
                "acl:\n  - id: xfr\n    address: 127.0.0.1\n    action: transfer\n"
            } else {
                ""
            }
        );
        for &(apex, file) in zones {
            conf += &format!(
                "  - domain: {apex}\n    file: \"{}\"\n",
                zone_path(file).display()
            );
            if transfers {
                conf += "    acl: xfr\n";
            }
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
            let apex = format!("{}.", zones[0].0);
            if let Some(r) = exchange(knot.addr, &query(&apex, RecordType::SOA, None)) {
                if Message::from_vec(&r).is_ok_and(|m| m.authoritative()) {
                    return Some(knot);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "knotd started but did not answer the {} SOA within 20 s",
            zones[0].0
        );
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Our responder on 127.0.0.1 over UDP and TCP, serving `zones` (test data file names).
pub fn start_udp_tcp(
    zones: &[&str],
    cfg: firehose_proto::dns::TcpConfig,
) -> (Server, firehose_proto::dns::TcpServer) {
    let paths: Vec<PathBuf> = zones.iter().map(|z| zone_path(z)).collect();
    let zones = load_zones_limited(&paths, &TEST_LIMITS).expect("test zones load");
    let live = firehose_proto::dns::LiveZones::new(zones);
    let ucfg = ServeConfig::profile(Profile::Naive, "127.0.0.1:0".parse().unwrap(), 1);
    // The kernel picks a free UDP port; its TCP twin may be taken (by another test's
    // connection): then try another port.
    for _ in 0..20 {
        let h = DnsHandler::live(live.clone(), DEFAULT_MAX_UDP).with_transfers(&cfg.allow_transfer);
        let udp = Server::start(&ucfg, move |_| h.clone()).expect("server starts");
        match firehose_proto::dns::TcpServer::start(udp.local_addr(), live.clone(), cfg.clone()) {
            Ok(tcp) => return (udp, tcp),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                udp.shutdown().expect("no worker failed");
            }
            Err(e) => panic!("tcp listens: {e}"),
        }
    }
    panic!("no port free for both UDP and TCP in 20 tries");
}

/// Writes `msgs` to a TCP stream as one burst of length-prefixed messages.
pub fn send_framed(s: &mut std::net::TcpStream, msgs: &[Vec<u8>]) {
    use std::io::Write;
    let mut out = Vec::new();
    for m in msgs {
        out.extend_from_slice(&(m.len() as u16).to_be_bytes());
        out.extend_from_slice(m);
    }
    s.write_all(&out).unwrap();
}

/// Reads one length-prefixed message, or `None` at end of stream.
pub fn read_framed(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut m = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut m).ok()?;
    Some(m)
}

/// A TCP connection to `addr` that gives up reading after 5 s.
pub fn connect(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s
}

/// Pulls a zone: every message's records, until the closing SOA.
pub fn axfr(
    addr: std::net::SocketAddr,
    zone: &str,
) -> (
    hickory_proto::op::ResponseCode,
    Vec<hickory_proto::rr::Record>,
) {
    transfer(addr, &query(zone, RecordType::AXFR, None))
}

/// Sends the transfer query `req` over TCP and reads every message's records, until
/// the closing SOA, or a reply that is a single SOA (an IXFR client that is current).
pub fn transfer(
    addr: std::net::SocketAddr,
    req: &[u8],
) -> (
    hickory_proto::op::ResponseCode,
    Vec<hickory_proto::rr::Record>,
) {
    let mut s = connect(addr);
    send_framed(&mut s, &[req.to_vec()]);
    let mut recs = Vec::new();
    loop {
        let m = Message::from_vec(&read_framed(&mut s).expect("transfer continues")).unwrap();
        if m.response_code() != hickory_proto::op::ResponseCode::NoError {
            return (m.response_code(), recs);
        }
        assert!(m.authoritative());
        recs.extend(m.answers().iter().cloned());
        let soa_only = recs.len() == 1 && recs[0].record_type() == RecordType::SOA;
        if soa_only || recs.len() > 1 && recs.last().unwrap().record_type() == RecordType::SOA {
            return (hickory_proto::op::ResponseCode::NoError, recs);
        }
    }
}

/// An IXFR query for `zone` carrying the client's SOA with `serial` in the authority
/// section (RFC 1995 §3), or none.
pub fn ixfr_query(zone: &str, serial: Option<u32>) -> Vec<u8> {
    use hickory_proto::rr::rdata::SOA;
    use hickory_proto::rr::{RData, Record};
    let mut m = Message::from_vec(&query(zone, RecordType::IXFR, None)).unwrap();
    if let Some(serial) = serial {
        let apex = Name::from_ascii(zone).unwrap();
        let soa = SOA::new(apex.clone(), apex.clone(), serial, 7200, 3600, 1209600, 300);
        m.add_name_server(Record::from_rdata(apex, 3600, RData::SOA(soa)));
    }
    m.to_vec().unwrap()
}

/// Signed copies of test zones in a temp dir, removed on drop (a failing test included).
pub struct Signed {
    dir: PathBuf,
    /// (apex, signed file).
    pub zones: Vec<(String, PathBuf)>,
}

impl Drop for Signed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a test zone is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// ldns-signzone with NSEC.
    LdnsNsec,
    /// ldns-signzone -n: NSEC3 with `iterations` and salt `abcd`; `opt_out` sets the
    /// opt-out flag on every NSEC3 (ldns still gives each delegation its NSEC3).
    LdnsNsec3 { iterations: u16, opt_out: bool },
    /// BIND's dnssec-signzone -3 -A: NSEC3 with opt-out, insecure delegations (and
    /// the empty non-terminals only they make) left out of the chain.
    BindNsec3OptOut,
}

/// Signs `files` (test data) with fresh keys in a temp dir using ldns, or says why not.
pub fn signed_copies(files: &[(&str, &str)]) -> Result<Signed, String> {
    signed_with(files, Signer::LdnsNsec)
}

/// Signs `files` (test data) with fresh keys (made by ldns-keygen) in a temp dir with
/// `signer`, or says why not.
pub fn signed_with(files: &[(&str, &str)], signer: Signer) -> Result<Signed, String> {
    use std::process::Command;
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("fh-dnssec-{}-{k}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut out = Signed {
        dir: dir.clone(),
        zones: Vec::new(),
    };
    let missing =
        |tool: &str, package: &str| format!("{tool} is not installed (Debian package {package})");
    for (apex, file) in files {
        let keygen = |extra: &[&str]| -> Result<String, String> {
            let o = Command::new("ldns-keygen")
                .current_dir(&dir)
                .args(["-a", "ECDSAP256SHA256"])
                .args(extra)
                .arg(apex)
                .output()
                .map_err(|_| missing("ldns-keygen", "ldnsutils"))?;
            Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let ksk = keygen(&["-k"])?;
        let zsk = keygen(&[])?;
        let src = zone_path(file);
        let dst = dir.join(format!("{file}.signed"));
        let status = match signer {
            Signer::LdnsNsec | Signer::LdnsNsec3 { .. } => {
                let mut c = Command::new("ldns-signzone");
                if let Signer::LdnsNsec3 {
                    iterations,
                    opt_out,
                } = signer
                {
                    c.args(["-n", "-s", "abcd", "-t", &iterations.to_string()]);
                    if opt_out {
                        c.arg("-p");
                    }
                }
                c.current_dir(&dir)
                    .args(["-o", apex, "-f"])
                    .arg(&dst)
                    .arg(&src)
                    .args([&ksk, &zsk])
                    .status()
                    .map_err(|_| missing("ldns-signzone", "ldnsutils"))?
            }
            Signer::BindNsec3OptOut => {
                // dnssec-signzone wants the DNSKEYs in the zone.
                let mut text = std::fs::read_to_string(&src).unwrap();
                for key in [&ksk, &zsk] {
                    text += &std::fs::read_to_string(dir.join(format!("{key}.key"))).unwrap();
                }
                let input = dir.join(format!("{file}.keys"));
                std::fs::write(&input, text).unwrap();
                Command::new("dnssec-signzone")
                    .current_dir(&dir)
                    .args(["-q", "-3", "abcd", "-H", "0", "-A", "-o", apex, "-f"])
                    .arg(&dst)
                    .args(["-k", &ksk])
                    .arg(&input)
                    .arg(&zsk)
                    .stdout(Stdio::null())
                    .status()
                    .map_err(|_| missing("dnssec-signzone", "bind9-utils"))?
            }
        };
        assert!(status.success(), "signing {file} with {signer:?} failed");
        out.zones.push((apex.to_string(), dst));
    }
    Ok(out)
}

/// The public KSK of a zone signed by [`signed_copies`], as a delv trust anchor line.
pub fn trust_anchor(signed_file: &std::path::Path, apex: &str) -> String {
    let dir = signed_file.parent().unwrap();
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with(&format!("K{apex}.")) && name.ends_with(".key") {
            let text = std::fs::read_to_string(&p).unwrap();
            let f: Vec<&str> = text.split_whitespace().collect();
            // owner IN DNSKEY flags proto alg key
            if f.len() >= 7 && f[3] == "257" {
                lines.push(format!(
                    "  {apex}. static-key 257 {} {} \"{}\";",
                    f[4], f[5], f[6]
                ));
            }
        }
    }
    format!("trust-anchors {{\n{}\n}};\n", lines.join("\n"))
}

/// The two test zones with DNSSEC cases (wildcards, DNAME, delegations), signed, or
/// `None` after printing why the test is skipped.
pub fn signed_test_zones() -> Option<Signed> {
    match signed_copies(&[("example.com", "example.zone"), ("op.test", "op.zone")]) {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Mixes the case of a name deterministically, to check case-insensitive matching.
pub fn mix_case(name: &str, shift: usize) -> String {
    name.chars()
        .enumerate()
        .map(|(i, c)| {
            if (i + shift).is_multiple_of(3) {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// Lower-cases names inside RDATA too: a server may compress an RDATA name against
/// the question, which then carries the client's case. TXT data keeps its case.
pub fn fold(lines: Vec<String>) -> Vec<String> {
    let mut v: Vec<String> = lines
        .into_iter()
        .map(|l| {
            if l.contains(" TXT ") {
                l
            } else {
                l.to_ascii_lowercase()
            }
        })
        .collect();
    v.sort();
    v
}

/// An answer as compared with Knot's: rcode, flags, answer and authority as text, the
/// additional records apart (as lines, and each line's record), and the length.
pub struct Trimmed {
    pub head: String,
    pub additional: Vec<(String, hickory_proto::rr::Record)>,
    pub len: usize,
}

/// Our answer or Knot's to `req` as a [`Trimmed`]; `None` when none came.
pub fn summary_trimmed(server: SocketAddr, req: &[u8]) -> Option<Trimmed> {
    let resp = exchange(server, req)?;
    let m = Message::from_vec(&resp).expect("decodes");
    let head = format!(
        "rcode={} aa={} tc={}\n  answer: {:?}\n  authority: {:?}",
        m.response_code(),
        m.authoritative(),
        m.truncated(),
        fold(section(m.answers())),
        fold(section(m.name_servers())),
    );
    let mut additional: Vec<_> = m
        .additionals()
        .iter()
        .map(|r| (fold(section(std::slice::from_ref(r))).remove(0), r.clone()))
        .collect();
    additional.sort_by(|a, b| a.0.cmp(&b.0));
    Some(Trimmed {
        head,
        additional,
        len: resp.len(),
    })
}

/// Sends `req` over TCP and reads one answer.
pub fn exchange_tcp(server: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    let mut s = std::net::TcpStream::connect(server).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    send_framed(&mut s, &[req.to_vec()]);
    read_framed(&mut s)
}

/// The size limit of a UDP answer to `req`, for Knot and for us: the EDNS payload size
/// clamped to 512..1232 (both servers' maximum), 512 without EDNS.
fn udp_limit(req: &[u8]) -> usize {
    let m = Message::from_vec(req).expect("a query we built");
    m.extensions()
        .as_ref()
        .map_or(512, |e| e.max_payload().clamp(512, 1232) as usize)
}

/// The difference between Knot's and our answer to `req`, if any. The rcode, flags,
/// answer and authority sections must be equal. The additional sections too, except
/// where an answer was trimmed to fit (RFC 2181 §9; Knot skips a record that does not
/// fit and tries the next, we stop at the first, and Knot keeps some bytes spare):
/// then each side's records must be among Knot's untrimmed ones (asked over TCP), and
/// a side may lack records only if the largest it lacks would not have fitted.
pub fn compare_trimmed(
    knot: SocketAddr,
    ours: SocketAddr,
    req: &[u8],
    what: &str,
) -> Option<String> {
    use hickory_proto::serialize::binary::BinEncodable;
    let (k, o) = (summary_trimmed(knot, req), summary_trimmed(ours, req));
    let show = |t: &Option<Trimmed>| match t {
        Some(t) => {
            let lines: Vec<&String> = t.additional.iter().map(|(l, _)| l).collect();
            format!("{} ({} bytes)\n   additional: {lines:?}", t.head, t.len)
        }
        None => "no answer".into(),
    };
    let report = |why: &str| {
        Some(format!(
            "{what}: {why}\n knot: {}\n ours: {}",
            show(&k),
            show(&o)
        ))
    };
    // Both silent is a difference too: a comparison needs two answers.
    let (Some(kt), Some(ot)) = (&k, &o) else {
        return report("an answer is missing");
    };
    if kt.head != ot.head {
        return report("answers differ");
    }
    let lines = |t: &Trimmed| {
        t.additional
            .iter()
            .map(|(l, _)| l.clone())
            .collect::<Vec<_>>()
    };
    if lines(kt) == lines(ot) {
        return None;
    }
    let Some(full) = exchange_tcp(knot, req).and_then(|r| Message::from_vec(&r).ok()) else {
        return report("Knot did not answer over TCP");
    };
    let full: Vec<(String, usize)> = full
        .additionals()
        .iter()
        .map(|r| {
            let line = fold(section(std::slice::from_ref(r))).remove(0);
            (line, r.to_bytes().map_or(0, |b| b.len()))
        })
        .collect();
    let limit = udp_limit(req);
    for (side, t) in [("knot", kt), ("ours", ot)] {
        let sent = |l: &String| t.additional.iter().any(|(a, _)| a == l);
        if let Some((l, _)) = t
            .additional
            .iter()
            .find(|(l, _)| !full.iter().any(|(f, _)| f == l))
        {
            return report(&format!("{side} sends {l}, not in Knot's untrimmed answer"));
        }
        // Written alone, a record is at least as long as in the answer.
        let largest_missing = full.iter().filter(|(l, _)| !sent(l)).map(|(_, n)| *n).max();
        if largest_missing.is_some_and(|n| t.len + n <= limit) {
            return report(&format!(
                "{side} left out additional records that fit ({} of {limit} bytes)",
                t.len
            ));
        }
    }
    None
}

/// Rcode, flags and each section as a sorted set of lines (a record sent twice counts
/// once); "no answer" when none came.
pub fn summary_sets(server: SocketAddr, req: &[u8]) -> String {
    let Some(resp) = exchange(server, req) else {
        return "no answer".into();
    };
    let m = Message::from_vec(&resp).expect("decodes");
    let set = |recs: &[hickory_proto::rr::Record]| {
        let mut v = fold(section(recs));
        v.dedup();
        v
    };
    format!(
        "rcode={} aa={} tc={}\n  answer: {:?}\n  authority: {:?}\n  additional: {:?}",
        m.response_code(),
        m.authoritative(),
        m.truncated(),
        set(m.answers()),
        set(m.name_servers()),
        set(m.additionals()),
    )
}

/// The difference between Knot's and our answer to `req` with sections compared as
/// sets: in a CNAME/DNAME loop Knot repeats a synthesized CNAME, where we stop before
/// writing a record twice, or write its DNAME again.
pub fn compare_sets(knot: SocketAddr, ours: SocketAddr, req: &[u8], what: &str) -> Option<String> {
    let (k, o) = (summary_sets(knot, req), summary_sets(ours, req));
    (k != o || k == "no answer").then(|| format!("{what}\n knot: {k}\n ours: {o}"))
}

/// A query with EDNS 1232 and DO set.
pub fn query_do(name: &str, t: RecordType) -> Vec<u8> {
    let mut q = query(name, t, Some(1232));
    let at = q.len() - 11 + 7;
    q[at] |= 0x80;
    q
}

/// Fails with every difference listed, if there is any.
pub fn no_differences(diffs: &[String], n: usize) {
    assert!(
        diffs.is_empty(),
        "{} of {n} answers differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Owners in the test zones, plus names that exercise wildcards, delegations,
/// NXDOMAIN, empty non-terminals and names outside both zones.
pub const NAMES: &[&str] = &[
    "example.com.",
    "ns1.example.com.",
    "mail.example.com.",
    "www.example.com.",
    "web.example.com.",
    "mixed.case.example.com.",
    "alias-out.example.com.",
    "alias-nx.example.com.",
    "chain1.example.com.",
    "chain2.example.com.",
    "_sip._udp.example.com.",
    "_udp.example.com.",
    "sip.example.com.",
    "ptr.example.com.",
    "txt2.example.com.",
    "*.wild.example.com.",
    "a.wild.example.com.",
    "a.b.wild.example.com.",
    "wild.example.com.",
    "x.cw.example.com.",
    "a.b.c.example.com.",
    "b.c.example.com.",
    "c.example.com.",
    "sub.example.com.",
    "ns.sub.example.com.",
    "deep.below.sub.example.com.",
    "nothere.example.com.",
    "x.ns1.example.com.",
    "big.example.com.",
    "2.0.192.in-addr.arpa.",
    "1.2.0.192.in-addr.arpa.",
    "80.2.0.192.in-addr.arpa.",
    "99.2.0.192.in-addr.arpa.",
    "example.org.",
    "com.",
    "zzz.example.com.",
    "loop1.example.com.",
    "x.ent.deep.example.com.",
    "ent.deep.example.com.",
    "deep.example.com.",
    "y.deep.example.com.",
];

/// Names of the operator zones: DNAME (below it, at it, outside target), DS at a cut
/// and at a child zone served here too, 20 MX with big additional sections, a CNAME
/// into a delegation.
pub const OPERATOR_NAMES: &[&str] = &[
    "op.test.",
    "mx.op.test.",
    "m07.op.test.",
    "olddept.op.test.",
    "www.olddept.op.test.",
    "a.b.olddept.op.test.",
    "nx.olddept.op.test.",
    "newdept.op.test.",
    "www.newdept.op.test.",
    "x.outside.op.test.",
    "x.s.op.test.",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.s.op.test.",
    "deleg.op.test.",
    "ns.deleg.op.test.",
    "host.deleg.op.test.",
    "cdeleg.op.test.",
    "child.op.test.",
    "www.child.op.test.",
    "ns.child.op.test.",
    "nope.op.test.",
];

/// Asks `knot` and `ours` every name (in mixed case) for every type, with DO and
/// without; returns the differences (each headed by `label`) and the number of queries.
pub fn compare_with_do<'a>(
    knot: SocketAddr,
    ours: SocketAddr,
    names: impl Iterator<Item = &'a str>,
    types: &[RecordType],
    label: &str,
) -> (Vec<String>, usize) {
    let (mut diffs, mut n) = (Vec::new(), 0);
    for (i, name) in names.enumerate() {
        for (j, &t) in types.iter().enumerate() {
            let name = mix_case(name, i + j);
            for (dnssec, req) in [
                (true, query_do(&name, t)),
                (false, query(&name, t, Some(1232))),
            ] {
                n += 1;
                let what = format!("{label}{name} {t} do={dnssec}");
                diffs.extend(compare_trimmed(knot, ours, &req, &what));
            }
        }
    }
    (diffs, n)
}

/// What BIND's delv prints (stdout and stderr) for `name` `t`, asking our server on
/// 127.0.0.1:`port` and validating with the key of `apex` in `signed`.
pub fn delv(port: u16, signed: &Signed, apex: &str, name: &str, t: &str) -> String {
    let file = &signed.zones.iter().find(|(a, _)| a == apex).unwrap().1;
    let anchor = file.with_extension("anchor");
    std::fs::write(&anchor, trust_anchor(file, apex)).unwrap();
    let out = Command::new("delv")
        .args(["@127.0.0.1", "-p", &port.to_string(), "-a"])
        .arg(&anchor)
        .arg(format!("+root={apex}"))
        .args([name, t])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}
