//! `firehose top`: `--once --json` in a namespace the test makes, quiet (every rate and
//! table of the namespace exactly empty) and under a flood into a stopped receiver (its
//! socket, queue and drops, with the process); the screen in a real terminal (tmux) with
//! its keys for sort, filter and freeze; bad input.

use crate::util::{bin, installed, root_or_skip, run, stderr};
use crate::util::{free_port, Netns, Served};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `firehose top --once --json ARGS` inside namespace `ns`.
fn top_json(ns: &Netns, args: &[&str]) -> serde_json::Value {
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, bin(), "top", "--once", "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn once_json_on_a_quiet_namespace_is_exactly_empty() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dtq");
    // A server with metrics outside the namespace is not this namespace's: top neither
    // lists nor scrapes it (a scrape would send on the namespace's loopback).
    let port = free_port("127.0.0.1").to_string();
    let _elsewhere = Served::tuned(&["--metrics", &format!("127.0.0.1:{port}")]);
    let doc = top_json(&ns, &["--interval", "0.3"]);
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n = firehose_sys::cpu::CpuSet::parse_list(online.trim())
        .unwrap()
        .to_vec()
        .len();
    assert_eq!(doc["cpus"].as_array().unwrap().len(), n, "{doc:#}");
    let ifaces = doc["ifaces"].as_array().unwrap();
    assert_eq!(ifaces.len(), 1, "{doc:#}");
    assert_eq!(ifaces[0]["iface"], "lo");
    assert_eq!(ifaces[0]["rx_pps"], 0.0);
    assert_eq!(doc["udp"]["in_per_s"], 0.0);
    assert_eq!(doc["udp"]["no_ports_per_s"], 0.0);
    assert_eq!(doc["sockets"], serde_json::json!([]));
    assert_eq!(doc["drops"], serde_json::json!([]));
    assert_eq!(doc["servers"], serde_json::json!([]), "{doc:#}");
    assert!(doc["seconds"].as_f64().unwrap() >= 0.3);
}

#[test]
fn once_json_under_a_flood_shows_the_socket_its_drops_and_process() {
    if !root_or_skip() || !installed("ss") {
        return;
    }
    let ns = Netns::new("dtf");
    let serve = Served::frozen(&ns.name, 9106);
    // A bounded flood runs through top's whole window (top measures 1 s; the flood sends
    // until top has answered, at most 20 s).
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (name, d2) = (ns.name.clone(), done.clone());
    let flood = std::thread::spawn(move || {
        firehose_sys::netns::enter(&name).unwrap();
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let t0 = std::time::Instant::now();
        let mut sent = 0u64;
        while !d2.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed().as_secs() < 20 {
            if s.send_to(&[1u8; 200], "127.0.0.1:9106").is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let doc = top_json(&ns, &["--interval", "1", "--port", "9106"]);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    assert!(sent > 0);
    let socks = doc["sockets"].as_array().unwrap();
    assert_eq!(socks.len(), 1, "{doc:#}");
    let s = &socks[0];
    assert_eq!(s["port"], 9106);
    assert_eq!(s["process"]["pid"], serve.pid(), "{s}");
    assert!(s["rx_queue_bytes"].as_u64().unwrap() > 0, "{s}");
    assert!(s["drops_per_s"].as_f64().unwrap() > 0.0, "{s}");
    assert!(
        doc["udp"]["rcvbuf_errors_per_s"].as_f64().unwrap() > 0.0,
        "{doc:#}"
    );
    assert!(
        doc["ifaces"][0]["rx_pps"].as_f64().unwrap() > 0.0,
        "{doc:#}"
    );
    let d = doc["drops"].as_array().unwrap();
    assert!(!d.is_empty(), "{doc:#}");
    assert_eq!(d[0]["reason"], "SOCKET_RCVBUFF", "{doc:#}");
    assert_eq!(d[0]["port"], 9106);
    assert_eq!(d[0]["process"]["pid"], serve.pid());
    assert!(d[0]["per_s"].as_f64().unwrap() > 0.0);
}

fn pane(session: &str) -> String {
    let o = Command::new("tmux")
        .args(["capture-pane", "-p", "-t", session])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits (bounded) until the screen shows `want`.
fn screen_shows(session: &str, want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let p = pane(session);
        if p.contains(want) {
            return p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never showed {want:?}:\n{p}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn keys(session: &str, k: &[&str]) {
    let st = Command::new("tmux")
        .args(["send-keys", "-t", session])
        .args(k)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn the_screen_in_a_terminal_answers_its_keys() {
    if !installed("tmux") {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let session = format!("fhtop{}", std::process::id());
    let cmd = format!("{} top --no-drops --interval 0.5 --duration 60", bin());
    let st = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "160",
            "-y",
            "50",
            &cmd,
        ])
        .status()
        .unwrap();
    assert!(st.success());
    struct Kill(String);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["kill-session", "-t", &self.0])
                .status();
        }
    }
    let _k = Kill(session.clone());
    let p = screen_shows(&session, "sort: drops");
    assert!(
        p.contains("CPU") && p.contains("Interfaces") && p.contains("UDP"),
        "{p}"
    );
    keys(&session, &["s"]);
    screen_shows(&session, "sort: queue");
    keys(&session, &["s"]);
    screen_shows(&session, "sort: port");
    keys(&session, &["p", "9", "1", "0", "7", "Enter"]);
    screen_shows(&session, "filter: port 9107");
    keys(&session, &["i", "l", "o", "Enter"]);
    let p = screen_shows(&session, "filter: port 9107, iface lo");
    assert!(!p.contains("eth0"), "{p}");
    keys(&session, &["p", "x", "Enter"]);
    screen_shows(&session, "'x' is not a port");
    keys(&session, &["c"]);
    screen_shows(&session, "filter: none");
    keys(&session, &["Space"]);
    screen_shows(&session, "[FROZEN]");
    keys(&session, &["Space"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pane(&session).contains("[FROZEN]") {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(100));
    }
    keys(&session, &["q"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Command::new("tmux")
        .args(["has-session", "-t", &session])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        assert!(std::time::Instant::now() < deadline, "q did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn top_bad_input_is_one_line_and_exit_2() {
    for args in [
        &["top", "--port", "0"][..],
        &["top", "--interval", "soon"],
        &["top", "--iface", "fh-no-such-if0", "--once"],
        &["top"],
    ] {
        // `top` alone: stdout is a pipe here, not a terminal.
        let o = run(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}
