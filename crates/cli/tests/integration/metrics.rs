//! `serve --metrics`: a serving process scraped while `firehose load` drives it. The text
//! passes `promtool check metrics`, counters never fall between scrapes, and once the load
//! has stopped the scrape equals what the server prints at exit (`--json-file`).

use crate::util::{installed, json_of, tmp, Served, Spawned};
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Samples of one scrape: `name{labels}` -> value.
type Scrape = BTreeMap<String, f64>;

/// Starts `serve ARGS` with two workers on a free loopback port, its exit document in
/// `json` and metrics on another free port, whose address it reads from stdout.
pub(crate) fn serve_with_metrics(args: &[&str], json: &Path) -> (Served, SocketAddr) {
    let js = json.display().to_string();
    let mut a = args.to_vec();
    a.extend_from_slice(&[
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--json-file",
        &js,
    ]);
    a.extend_from_slice(&["--metrics", "127.0.0.1:0"]);
    let mut srv = Served::start(&a);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            srv.stdout.read_line(&mut line).unwrap() > 0,
            "no metrics line"
        );
        if let Some(rest) = line.trim().strip_prefix("metrics: http://") {
            let addr = rest.trim_end_matches("/metrics").parse().unwrap();
            return (srv, addr);
        }
    }
}

/// The body of `GET /metrics`.
pub(crate) fn scrape_text(addr: SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split_once("\r\n\r\n").unwrap().1.to_string()
}

pub(crate) fn parse(text: &str) -> Scrape {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// The sum of a counter family over its label sets.
pub(crate) fn sum(s: &Scrape, family: &str) -> u64 {
    s.iter()
        .filter(|(k, _)| k.as_str() == family || k.starts_with(&format!("{family}{{")))
        .map(|(_, v)| *v as u64)
        .sum()
}

/// Runs promtool on a scrape; false (with the reason printed) when promtool is missing.
fn promtool_check(text: &str) -> bool {
    if !installed("promtool") {
        let test = std::thread::current().name().unwrap_or("test").to_string();
        eprintln!("{test}: promtool check skipped: promtool is not installed (Debian package prometheus, or `sh mk/deps test`)");
        return false;
    }
    let p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Spawned::of(p);
    p.child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = p.output(Duration::from_secs(30));
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

/// Every counter in `after` is at least its value in `before`, and some rose.
fn assert_monotonic(before: &Scrape, after: &Scrape, rising: &str) {
    for (k, v) in before {
        if k.contains("_total") || k.contains("_bucket") || k.ends_with("_count") {
            let w = after.get(k).unwrap_or_else(|| panic!("{k} vanished"));
            assert!(w >= v, "{k} fell from {v} to {w}");
        }
    }
    assert!(
        sum(after, rising) > sum(before, rising),
        "{rising} did not rise under load"
    );
}

/// Starts `firehose load ARGS` in the background (killed if the test fails first).
fn load(args: &[&str]) -> Spawned {
    let mut c = Command::new(crate::util::bin());
    c.arg("load").args(args).arg("--quiet");
    Spawned::start(c)
}

/// Scrapes twice under `gen`'s load, then once after it ends; the server is then stopped
/// and its exit document returned with the last scrape.
fn scrape_under_load(
    srv: Served,
    addr: SocketAddr,
    mut gen: Spawned,
    json: &Path,
) -> (Scrape, serde_json::Value) {
    let mut first = None;
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let s = parse(&scrape_text(addr));
        if sum(&s, "firehose_packets_received_total") > 0 {
            first = Some(s);
            break;
        }
    }
    let first = first.expect("no request counted within 10 s of load");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let text = scrape_text(addr);
    promtool_check(&text);
    let second = parse(&text);
    assert_monotonic(&first, &second, "firehose_packets_received_total");
    assert!(gen.wait(Duration::from_secs(60)).success(), "load failed");
    let last_text = scrape_text(addr);
    let last = parse(&last_text);
    assert_monotonic(&second, &last, "firehose_uptime_seconds");
    srv.stop();
    (last, json_of(json))
}

/// Packets in and out in the scrape equal the totals of the exit document.
fn assert_packets_match(last: &Scrape, doc: &serde_json::Value) {
    for (family, field) in [
        ("firehose_packets_received_total", "packets_in"),
        ("firehose_packets_sent_total", "packets_out"),
    ] {
        let want = doc["totals"][field].as_u64().unwrap();
        assert_eq!(sum(last, family), want, "{family}");
    }
}

#[test]
fn echo_metrics_pass_promtool_rise_and_match_the_exit_stats() {
    let json = tmp("metrics-echo.json");
    let (srv, maddr) = serve_with_metrics(&[], &json);
    let target = srv.addr.to_string();
    let gen = load(&["--target", &target, "--duration", "2", "--window", "8"]);
    let (last, doc) = scrape_under_load(srv, maddr, gen, &json);
    assert_packets_match(&last, &doc);
    assert_eq!(
        sum(&last, "firehose_batch_size_requests_sum"),
        doc["totals"]["packets_in"].as_u64().unwrap()
    );
    let _ = std::fs::remove_file(json);
}

#[test]
fn dns_metrics_count_rcodes_types_and_tcp_and_match_the_exit_stats() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/data");
    let zone = data.join("example.zone").display().to_string();
    let queries = tmp("metrics-queries.txt");
    std::fs::write(
        &queries,
        "www.example.com A\nexample.com MX\nnx.example.com AAAA\nwww.example.com TXT\n",
    )
    .unwrap();
    let json = tmp("metrics-dns.json");
    let (srv, maddr) = serve_with_metrics(&["--proto", "dns", "--zone", &zone], &json);
    let target = srv.addr.to_string();
    let q = queries.display().to_string();
    let gen = load(&[
        "--proto",
        "dns",
        "--queries",
        &q,
        "--target",
        &target,
        "--duration",
        "2",
        "--window",
        "8",
    ]);
    // One query over TCP, counted by the TCP side.
    let mut tcp = TcpStream::connect(srv.addr).unwrap();
    let mut msg = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for l in ["www", "example", "com"] {
        msg.push(l.len() as u8);
        msg.extend_from_slice(l.as_bytes());
    }
    msg.extend_from_slice(&[0, 0, 1, 0, 1]);
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&msg);
    tcp.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len).unwrap();
    drop(tcp);
    let (last, doc) = scrape_under_load(srv, maddr, gen, &json);
    assert_packets_match(&last, &doc);
    let handler = doc["handler"].as_object().unwrap();
    for name in [
        "dns_noerror",
        "dns_nxdomain",
        "dns_formerr",
        "dns_qtype_a",
        "dns_qtype_mx",
        "dns_qtype_aaaa",
        "dns_qtype_txt",
        "dns_qtype_other",
        "dns_rrl_dropped",
        "dns_tcp_accepted",
        "dns_tcp_queries",
        "dns_tcp_noerror",
        "dns_tcp_qtype_a",
    ] {
        let want = handler[name].as_u64().unwrap();
        assert_eq!(
            sum(&last, &format!("firehose_{name}_total")),
            want,
            "{name}"
        );
    }
    // The four questions are sent in turn: a quarter of the answers are NXDOMAIN.
    let nx = sum(&last, "firehose_dns_nxdomain_total");
    assert!(nx > 0);
    assert_eq!(sum(&last, "firehose_dns_qtype_aaaa_total"), nx);
    assert_eq!(sum(&last, "firehose_dns_tcp_accepted_total"), 1);
    assert_eq!(sum(&last, "firehose_dns_tcp_qtype_a_total"), 1);
    for p in [json, queries] {
        let _ = std::fs::remove_file(p);
    }
}
