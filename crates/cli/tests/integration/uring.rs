//! `serve --io uring` and `load --io uring`: the transaction path over io_uring, checked
//! against the socket path byte for byte and counter for counter.

use crate::bad_input::assert_usage_error;
use crate::echo::check_exact_echo;
use crate::metrics::{parse, scrape_text, serve_with_metrics, sum};
use crate::util::{json_of, run, tmp, uring_or_skip, Served};
use firehose_sys::retry_interrupted;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

#[test]
fn serve_io_uring_echo_is_exact_for_the_socket_path_sizes() {
    if !uring_or_skip("recvmsg") {
        return;
    }
    check_exact_echo("127.0.0.1:0", "127.0.0.1:0", &["--io", "uring"]);
    check_exact_echo(
        "127.0.0.1:0",
        "127.0.0.1:0",
        &["--io", "uring", "--single-issuer", "--defer-taskrun"],
    );
    check_exact_echo("127.0.0.1:0", "127.0.0.1:0", &["--io", "uring", "--sqpoll"]);
    if UdpSocket::bind("[::1]:0").is_err() {
        eprintln!("IPv6 part skipped: no IPv6 loopback on this host");
        return;
    }
    // As on the socket path: IPv6 replies above the loopback MTU need fragments.
    check_exact_echo(
        "[::1]:0",
        "[::1]:0",
        &["--io", "uring", "--pmtudisc", "default"],
    );
}

/// A query for `www.example.com A`, id 0xbeef, no recursion wanted.
fn query() -> Vec<u8> {
    let mut q = vec![0xbe, 0xef, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["www", "example", "com"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn ask(srv: SocketAddr, q: &[u8]) -> Vec<u8> {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    c.send_to(q, srv).unwrap();
    let mut buf = [0u8; 2048];
    let (n, from) = retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
    assert_eq!(from, srv);
    buf[..n].to_vec()
}

#[test]
fn dns_over_uring_answers_byte_for_byte_as_the_socket_path() {
    if !uring_or_skip("recvmsg") {
        return;
    }
    let z = crate::util::example_zone();
    let common = [
        "--proto",
        "dns",
        "--zone",
        &z,
        "--listen",
        "127.0.0.1:0",
        "--tcp",
        "off",
    ];
    let sock = Served::start(&common);
    let mut args = common.to_vec();
    args.extend_from_slice(&["--io", "uring"]);
    let ring = Served::start(&args);
    let (a, b) = (ask(sock.addr, &query()), ask(ring.addr, &query()));
    assert!(a.len() > query().len(), "an answer, not an echo: {a:?}");
    assert_eq!(a[3] & 0x0f, 0, "NOERROR");
    assert_eq!(a, b, "the handler does not know which path it runs on");
    sock.stop();
    ring.stop();
}

#[test]
fn counters_at_exit_and_on_metrics_match_what_was_sent() {
    if !uring_or_skip("recvmsg") {
        return;
    }
    let json = tmp("uring-counters.json");
    let (srv, metrics) = serve_with_metrics(&["--io", "uring", "--batch", "16"], &json);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..123u32 {
        c.send_to(&i.to_le_bytes(), srv.addr).unwrap();
        let (n, _) = retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
        assert_eq!(&buf[..n], &i.to_le_bytes());
    }
    // The worker counts a batch's replies just after sending them.
    let mut s = parse(&scrape_text(metrics));
    for _ in 0..100 {
        if sum(&s, "firehose_packets_sent_total") == 123 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        s = parse(&scrape_text(metrics));
    }
    assert_eq!(sum(&s, "firehose_packets_received_total"), 123);
    assert_eq!(sum(&s, "firehose_packets_sent_total"), 123);
    assert_eq!(sum(&s, "firehose_backend_uring_buffer_ring_empty_total"), 0);
    assert!(sum(&s, "firehose_backend_uring_recv_arms_total") >= 1);
    srv.stop();
    let doc = json_of(&json);
    let t = &doc["totals"];
    assert_eq!(
        (t["packets_in"].as_u64(), t["packets_out"].as_u64()),
        (Some(123), Some(123))
    );
    assert_eq!(t["bytes_in"], 123 * 4);
    assert_eq!(t["send_errors"], 0);
    assert_eq!(t["recv_errors"], 0);
    assert!(t["batches"].as_u64().unwrap() >= 1);
    // At least one io_uring_enter per batch: the replies' submission.
    assert!(t["syscalls"].as_u64().unwrap() >= t["batches"].as_u64().unwrap());
    assert_eq!(t["backend"]["uring_buffer_ring_empty"], 0);
    assert_eq!(t["backend"]["uring_recv_errors"], 0);
    let b = &doc["applied"]["backend"];
    assert_eq!(b["name"], "io_uring");
    assert_eq!(b["settings"]["batch"], "16");
    assert_eq!(b["settings"]["setup_flags"], "none");
    std::fs::remove_file(json).unwrap();
}

fn load_exact(target: &str, extra: &[&str], name: &str) -> serde_json::Value {
    let out_path = tmp(name);
    let mut args = vec![
        "load",
        "--target",
        target,
        "--io",
        "uring",
        "--requests",
        "5000",
        // A reply may take seconds on a loaded host and still count.
        "--timeout",
        "3s",
        "--json-file",
        out_path.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out_path);
    std::fs::remove_file(out_path).unwrap();
    assert_eq!(doc["sent"], 5000, "{extra:?} {doc}");
    assert_eq!(doc["completed"], 5000, "{extra:?} {doc}");
    assert_eq!(
        (doc["lost"].as_u64(), doc["stray"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(doc["dup"], 0);
    assert_eq!(doc["send_path"], "io_uring", "{doc}");
    doc
}

#[test]
fn load_io_uring_completes_n_of_n_against_either_server() {
    if !uring_or_skip("recvmsg") {
        return;
    }
    let json = tmp("uring-load-srv.json");
    let js = json.display().to_string();
    // Unpinned, with room to queue: a worker pinned to a CPU that others' work keeps busy
    // would drop requests in its socket (a loss that says nothing about the generator).
    let roomy = ["--cpus", "none", "--rcvbuf", "4M"];
    let srv = Served::tuned(&[&roomy[..], &["--json-file", &js]].concat());
    let target = srv.addr.to_string();
    load_exact(&target, &["--flows", "1", "--window", "1"], "uring-load-1");
    load_exact(
        &target,
        &["--flows", "4", "--window", "8", "--threads", "2"],
        "uring-load-2",
    );
    load_exact(
        &target,
        &[
            "--flows",
            "3",
            "--rate",
            "10k",
            "--single-issuer",
            "--defer-taskrun",
        ],
        "uring-load-3",
    );
    srv.stop();
    // The server saw exactly what the three runs sent.
    assert_eq!(json_of(&json)["totals"]["packets_in"], 15000);
    std::fs::remove_file(json).unwrap();
    // And io_uring at both ends.
    let ring = Served::tuned(&["--io", "uring"]);
    load_exact(
        &ring.addr.to_string(),
        &["--flows", "2", "--window", "4"],
        "uring-load-4",
    );
    ring.stop();
}

#[test]
fn uring_flags_out_of_place_are_refused() {
    assert_usage_error(
        &["serve", "--sqpoll", "--listen", "127.0.0.1:0"],
        "apply only to --io uring",
    );
    assert_usage_error(
        &[
            "serve",
            "--io",
            "uring",
            "--rxq-ovfl",
            "on",
            "--listen",
            "127.0.0.1:0",
        ],
        "--rxq-ovfl applies only to --io socket",
    );
    assert_usage_error(
        &[
            "serve",
            "--io",
            "uring",
            "--iface",
            "lo",
            "--listen",
            "127.0.0.1:0",
        ],
        "--iface applies only to --io xdp",
    );
    assert_usage_error(
        &[
            "load",
            "--target",
            "127.0.0.1:9",
            "--io",
            "uring",
            "--no-gso",
        ],
        "--no-gso applies only to --io socket",
    );
    assert_usage_error(
        &["load", "--target", "127.0.0.1:9", "--single-issuer"],
        "apply only to --io uring",
    );
}

/// Reads back from the kernel the rings of process `pid` (a serve or sink with `--io uring`
/// and the ring flags `flags`): at least `workers` rings (each worker makes its own, on its
/// thread, perhaps after the first line; waited for at most 10 s), each with an SQ thread
/// exactly when `--sqpoll` was given, refusing a foreign register exactly with
/// `--single-issuer` and a foreign wait exactly with `--defer-taskrun`. Returns the ring
/// count, or None (with the reason printed) without ptrace rights over the process.
pub fn assert_ring_flags(pid: u32, workers: usize, flags: &[&str]) -> Option<usize> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let rings = loop {
        let fds = firehose_sys::uring::rings_of(pid).unwrap();
        if fds.len() >= workers {
            break fds;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {workers} rings after 10 s",
            fds.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let want = (
        flags.contains(&"--sqpoll"),
        flags.contains(&"--single-issuer"),
        flags.contains(&"--defer-taskrun"),
    );
    for &fd in &rings {
        let got = match firehose_sys::uring::read_back(pid, fd) {
            Ok(g) => g,
            Err(e) if e.errno() == Some(1) => {
                // EPERM: Yama's ptrace_scope 2 or 3 without root.
                eprintln!("ring flags not read back: no ptrace rights over {pid}: {e}");
                return None;
            }
            Err(e) => panic!("{flags:?}: {e}"),
        };
        assert_eq!(
            (
                got.sq_thread.is_some(),
                got.single_issuer,
                got.defer_taskrun
            ),
            want,
            "{flags:?} ring {fd}: {got:?}"
        );
    }
    Some(rings.len())
}

/// --sqpoll, --single-issuer and --defer-taskrun reach the kernel: each worker's ring, read
/// back from this (foreign) process, has an SQ thread, refuses a foreign register, refuses
/// a foreign wait, exactly as asked; and without the flags, none of it.
#[test]
fn uring_setup_flags_are_read_back_from_the_servers_rings() {
    if !uring_or_skip("recvmsg") {
        return;
    }
    let cases: [&[&str]; 3] = [&[], &["--sqpoll"], &["--single-issuer", "--defer-taskrun"]];
    for flags in cases {
        let mut args = vec!["--listen", "127.0.0.1:0", "--io", "uring", "--workers", "2"];
        args.extend_from_slice(flags);
        let srv = Served::start(&args);
        if let Some(n) = assert_ring_flags(srv.pid(), 2, flags) {
            assert_eq!(n, 2, "one ring per worker");
        }
        // And the server still answers after being asked.
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        c.send_to(b"ping", srv.addr).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = retry_interrupted(|| c.recv_from(&mut buf)).unwrap();
        assert_eq!(&buf[..n], b"ping");
        srv.stop();
    }
}
