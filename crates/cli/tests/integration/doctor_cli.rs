//! `firehose doctor` audit through the real binary: bad usage, JSON rows, and a live
//! `--sample` with `--port` watching a socket the test floods over loopback.

use crate::util::{run, stderr};
use std::net::UdpSocket;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn doctor(args: &[&str]) -> Output {
    run(&[&["doctor"], args].concat())
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    for (args, says) in [
        (&["nosuch"][..], "unknown check 'nosuch'"),
        (&["--dry-run"][..], "--dry-run goes with --apply"),
        (&["--port", "0"][..], "not a port"),
        (&["--iface", "fhnope0"][..], "no such interface"),
        (&["--sample=-1"][..], "greater than zero"),
        (&["--sample", "soon"][..], "not a duration"),
        (&["--revert", "gro"][..], "takes no CHECK"),
        (&["--apply", "--revert"][..], "cannot be used with"),
        (&["--apply", "--sample", "1"][..], "only feed the audit"),
    ] {
        let o = doctor(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn list_names_every_check() {
    let o = doctor(&["--list"]);
    assert_eq!(o.status.code(), Some(0));
    let t = String::from_utf8_lossy(&o.stdout);
    for c in ["queues", "rss-table", "xps", "rp-filter", "softnet", "port"] {
        assert!(t.lines().any(|l| l.starts_with(c)), "{c} missing: {t}");
    }
}

#[test]
fn table_and_json_carry_the_same_rows() {
    let table = doctor(&["rmem", "backlog"]);
    let json = doctor(&["--json", "rmem", "backlog"]);
    assert_eq!(table.status.code(), json.status.code());
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = doc["checks"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        doc["host"].is_string() && doc["firehose"]["commit"].is_string(),
        "{doc}"
    );
    let counted: u64 = ["bad", "warn", "ok", "n/a"]
        .iter()
        .map(|k| doc["summary"][k].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2, "{doc}");
    let t = String::from_utf8_lossy(&table.stdout);
    for r in rows {
        let line = format!(
            "{:<4}  {:<14} {:<8} {}",
            r["status"].as_str().unwrap(),
            r["check"].as_str().unwrap(),
            r["subject"].as_str().unwrap(),
            r["value"].as_str().unwrap()
        );
        assert!(t.contains(&line), "{line} not in\n{t}");
        assert!(r["why"].as_str().unwrap().len() > 20);
        assert!(r["source"].as_str().unwrap().contains("net.core"));
    }
}

#[test]
fn sample_sees_drops_of_a_flooded_socket_on_port() {
    // A socket nobody reads: its buffer fills and the kernel drops the rest.
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port();
    // The flood lasts until the doctor has exited, however long its sample takes to start
    // and end on a loaded host.
    let done = Arc::new(AtomicBool::new(false));
    let flooding = done.clone();
    let flood = std::thread::spawn(move || {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        while !flooding.load(Ordering::Relaxed) {
            for _ in 0..200 {
                let _ = tx.send_to(&[0u8; 64], ("127.0.0.1", port));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let port_s = port.to_string();
    let o = doctor(&[
        "--json",
        "--sample",
        "1",
        "--port",
        &port_s,
        "port",
        "udp-errors",
        "softnet",
        "drop-reasons",
    ]);
    done.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    drop(sink);
    assert_eq!(
        o.status.code(),
        Some(1),
        "drops make a bad row: {}",
        stderr(&o)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let find = |c: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["check"] == c)
            .unwrap()
            .clone()
    };
    let p = find("port");
    assert_eq!(p["status"], "bad", "{p}");
    assert_eq!(p["subject"], format!("port {port}"));
    let v = p["value"].as_str().unwrap();
    assert!(v.starts_with("1 socket(s), drops "), "{v}");
    assert!(!v.starts_with("1 socket(s), drops 0 "), "{v}");
    assert!(v.contains("in the sample"), "{v}");
    let s = find("softnet");
    assert!(
        s["value"]
            .as_str()
            .unwrap()
            .contains("per CPU processed/received_rps: cpu0 "),
        "{s}"
    );
    let u = find("udp-errors");
    assert_eq!(u["status"], "bad", "{u}");
    assert!(u["value"].as_str().unwrap().starts_with("over 1."), "{u}");
    // The same window through the drop watch of `firehose drops`: the kernel's reason.
    let d = find("drop-reasons");
    if firehose_sys::cpu::is_root() {
        assert_eq!(d["status"], "bad", "{d}");
        let v = d["value"].as_str().unwrap();
        assert!(v.contains(&format!(" dropped at port {port}: ")), "{v}");
        assert!(
            v.contains(&format!(
                " SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port {port}"
            )),
            "{v}"
        );
    } else {
        assert_eq!(d["status"], "n/a", "without root the watch is refused: {d}");
    }
}

#[test]
fn default_output_is_compact_verdict_first_and_paste_safe() {
    let o = doctor(&[]);
    let t = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = t.lines().collect();
    // Other tests flood sockets at the same time: the drop checks' rows (and their fix
    // lines) they cause are not this host's.
    let mut flooded = 0;
    let mut in_flood = false;
    for l in &lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"fix:") {
            flooded += usize::from(in_flood);
            continue;
        }
        in_flood = w.len() > 1
            && w[0] != "ok"
            && ["softnet", "udp-errors", "drop-reasons"].contains(&w[1]);
        flooded += usize::from(in_flood);
    }
    // A line per check that is not n/a, a fix line per automatic or manual fix: 40 before
    // the two NTP checks (ntp-clock warns, with its fix, on a host whose clock no daemon
    // keeps) and kthreads (a warn and its fix where DAMON or reclaim takes CPU).
    assert!(lines.len() - flooded <= 45, "{} lines:\n{t}", lines.len());
    assert!(
        lines[0].starts_with("firehose doctor on ") && lines[0].contains(" bad, "),
        "the verdict comes first: {t}"
    );
    // Grouped bad, warn, ok, n/a.
    let rank = |l: &&str| match l.split_whitespace().next() {
        Some("bad") => Some(0),
        Some("warn") => Some(1),
        Some("ok") => Some(2),
        Some("n/a") => Some(3),
        _ => None,
    };
    let ranks: Vec<i32> = lines.iter().filter_map(rank).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{t}");
    for l in lines.iter().filter(|l| l.trim_start().starts_with("fix:")) {
        assert!(!l.contains('['), "a fix line is the command alone: {l}");
    }
    assert!(!t.contains("      why:"), "why only with --verbose: {t}");
    let v = doctor(&["--verbose", "rmem"]);
    let v = String::from_utf8_lossy(&v.stdout);
    assert!(
        v.contains("      why:  ") && v.contains("      from: "),
        "{v}"
    );
}
