//! `firehose stream` as a user runs it: a receiver and a sender process over loopback.

use crate::util::{bin, run, Spawned};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts `firehose stream --listen ADDR ARGS` and returns it with the address it bound.
/// The receiver is killed when dropped, so a failing test leaves no process behind.
fn receiver(listen: &str, args: &[&str]) -> (Spawned, String) {
    let child = Command::new(bin())
        .args(["stream", "--listen", listen])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn receiver");
    let mut child = Spawned::of(child);
    let mut out = BufReader::new(child.child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    (child, addr)
}

/// TCP connections established to local port `port` (/proc/net/tcp, state 01).
fn established(port: u16) -> usize {
    let want = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&want) && f[3] == "01"
        })
        .count()
}

fn usage(args: &[&str], mention: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(mention),
        "{args:?}: '{err}' should mention '{mention}'"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    usage(&["stream"], "--listen");
    usage(
        &[
            "stream",
            "--listen",
            "127.0.0.1:0",
            "--target",
            "127.0.0.1:1",
        ],
        "cannot be used",
    );
    usage(
        &["stream", "--target", "127.0.0.1:1", "--send", "zc"],
        "uring-zc",
    );
    usage(
        &["stream", "--target", "127.0.0.1:1", "--recv", "mmap"],
        "--recv applies only",
    );
    usage(
        &["stream", "--listen", "127.0.0.1:0", "--flows", "2"],
        "--flows applies only",
    );
    usage(
        &["stream", "--target", "127.0.0.1:1", "--msg-size", "0"],
        "greater than zero",
    );
    usage(
        &["stream", "--target", "127.0.0.1:1", "--cpus", "x"],
        "--cpus",
    );
    usage(
        &[
            "stream",
            "--target",
            "127.0.0.1:1",
            "--send",
            "sendfile",
            "--rewrite-buffers",
        ],
        "fixed pages",
    );
    usage(
        &[
            "stream",
            "--target",
            "127.0.0.1:1",
            "--duration",
            "1",
            "--bytes",
            "1M",
        ],
        "not both",
    );
}

#[test]
fn zcrx_on_loopback_is_refused_with_the_errno() {
    let out = run(&["stream", "--listen", "127.0.0.1:0", "--recv", "uring-zcrx"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("uring-zcrx"), "{err}");
    // Root reaches the registration (EOPNOTSUPP on lo); others are refused earlier (EPERM).
    assert!(err.contains("(E"), "an errno name: {err}");
}

#[test]
fn connection_refused_is_exit_1_with_bytes() {
    let out = run(&["stream", "--target", "127.0.0.1:1", "--duration", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ECONNREFUSED") && err.contains("0 bytes"),
        "{err}"
    );
}

#[test]
fn json_report_over_ipv6_has_both_sides_and_equal_bytes() {
    if !crate::util::uring_or_skip("send_zc") || !crate::util::uring_or_skip("recv") {
        return;
    }
    let (mut rx, addr) = receiver("[::1]:0", &["--once", "--recv", "uring"]);
    let out = run(&[
        "stream",
        "--target",
        &addr,
        "--send",
        "uring-zc",
        "--flows",
        "2",
        "--msg-size",
        "64K",
        "--bytes",
        "2M",
        "--window",
        "1M",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = v["sender"]["bytes"].as_u64().unwrap();
    assert_eq!(sent, 2 * (2 << 20));
    assert_eq!(v["receiver"]["bytes"].as_u64(), Some(sent));
    assert_eq!(v["receiver"]["checked"], true);
    assert_eq!(v["sender"]["mode"], "uring-zc");
    let f0 = &v["sender"]["flows"][0];
    assert!(
        f0["sndbuf"].as_i64().unwrap() >= 1 << 20,
        "granted buffer read back: {f0}"
    );
    assert!(f0["zerocopy"]["notifications"].as_u64().unwrap() > 0);
    assert!(v["roi"]["power_source"].is_string());
    assert!(rx.wait(Duration::from_secs(30)).success());
}

#[test]
fn receiver_killed_mid_run_is_exit_1_with_bytes_so_far() {
    let (mut rx, addr) = receiver("127.0.0.1:0", &[]);
    let mut sender = Command::new(bin());
    sender.args([
        "stream",
        "--target",
        &addr,
        "--flows",
        "2",
        "--duration",
        "20",
    ]);
    let sender = Spawned::start(sender);
    // Mid-run: once both flows are connected (an event, however slow the host).
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    crate::util::until("both flows connected", || established(port) >= 2);
    rx.child.kill().unwrap();
    rx.wait(Duration::from_secs(10));
    let out = sender.output(Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("bytes transferred"), "{err}");
    // The peer's death shows as a reset, a broken pipe, or (when it lands on the final
    // shutdown) a connection that is gone.
    assert!(
        ["ECONNRESET", "EPIPE", "ENOTCONN"]
            .iter()
            .any(|e| err.contains(e)),
        "{err}"
    );
}

/// `--mss` and `--congestion` (docs/stream.md) are applied: the report's congestion control
/// and each flow's MSS are what getsockopt(TCP_CONGESTION, TCP_MAXSEG) reads back, and
/// without the flags they are the host's default and loopback's large MSS.
#[test]
fn mss_and_congestion_are_applied_and_read_back() {
    let default_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .unwrap()
        .trim()
        .to_string();
    let other = if default_cc == "reno" {
        "cubic"
    } else {
        "reno"
    };
    for (extra, cc) in [
        (vec!["--mss", "1000", "--congestion", other], other),
        (vec![], default_cc.as_str()),
    ] {
        let (mut rx, addr) = receiver("127.0.0.1:0", &["--once"]);
        let mut args = vec![
            "stream", "--target", &addr, "--flows", "2", "--bytes", "1M", "--json",
        ];
        args.extend(&extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["congestion"], cc, "{extra:?}: {v}");
        for f in v["sender"]["flows"].as_array().unwrap() {
            let mss = f["mss"].as_i64().unwrap();
            if extra.is_empty() {
                assert!(mss > 1000, "loopback's MSS: {f}");
            } else {
                // TCP_MAXSEG reads back the MSS less the options every segment carries.
                assert!((900..=1000).contains(&mss), "--mss 1000 read back: {f}");
            }
        }
        assert!(rx.wait(Duration::from_secs(30)).success());
    }
}

/// As root, what TCP retransmitted is attributed: an nft rule in a namespace of the test
/// drops every tenth segment to the receiver's port; the sender's summary and document say
/// `retransmits N:` with NETFILTER_DROP at that port.
#[test]
fn retransmits_are_attributed_to_the_drops_that_caused_them() {
    if !crate::util::root_or_skip() || !crate::util::installed("nft") {
        return;
    }
    let ns = crate::util::Netns::new("st");
    let port = 9200;
    let rules = format!(
        "table inet fhstream {{\n chain input {{\n  type filter hook input priority 0;\n  tcp dport {port} numgen inc mod 10 == 5 drop\n }}\n}}\n"
    );
    let mut nft = ns.command("nft");
    nft.args(["-f", "-"]).stdin(Stdio::piped());
    let mut nft = nft.spawn().unwrap();
    std::io::Write::write_all(&mut nft.stdin.take().unwrap(), rules.as_bytes()).unwrap();
    assert!(nft.wait().unwrap().success(), "nft -f refused {rules}");
    let mut rx = ns.firehose(&["stream", "--listen", &format!("127.0.0.1:{port}"), "--once"]);
    rx.stdin(Stdio::null());
    let rx = Spawned::started(rx, Duration::from_secs(30));
    let dir = crate::util::tempdir("stream-loss");
    let json = dir.join("sender.json");
    let mut tx = ns.firehose(&[
        "stream",
        "--target",
        &format!("127.0.0.1:{port}"),
        "--flows",
        "1",
        "--bytes",
        "16M",
        "--json-file",
        json.to_str().unwrap(),
    ]);
    tx.stdin(Stdio::null());
    let out = Spawned::start(tx).output(Duration::from_secs(60));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(rx);
    let v = crate::util::json_of(&json);
    let retrans: u64 = v["sender"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["tcp_info"]["total_retrans"].as_u64())
        .sum();
    assert!(
        retrans > 0,
        "no retransmits with every tenth segment dropped: {v}"
    );
    let a = &v["loss_attribution"];
    let line = a["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .find(|l| l.contains(" NETFILTER_DROP at ") && l.contains(&format!(", port {port}")))
        .unwrap_or_else(|| panic!("no NETFILTER_DROP line at port {port}: {a}"));
    assert!(text.contains(&format!("retransmits {retrans}: ")), "{text}");
    assert!(text.contains(line), "{text}");
}
