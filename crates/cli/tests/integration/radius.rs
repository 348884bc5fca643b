//! `firehose serve --proto radius` and `firehose load --proto radius` as real binaries:
//! radclient against firehose and FreeRADIUS with the same clients.conf and users file,
//! duplicates, malformed packets, reloads under load, bad input.

use crate::util::{installed, json_of, run, signal_pid, stderr, tempdir, Served, Spawned};
use firehose_lab::peers::freeradius::{self, FreeRadiusPlan};
use firehose_radiuswire::{attr, parse_request, Header, Secret};
use firehose_sys::retry_interrupted;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/radius")
        .join(name)
        .display()
        .to_string()
}

fn sample(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../radiuswire/tests/data")
        .join(name);
    std::fs::read(p).unwrap()
}

fn serve(clients: &str, users: &str, extra: &[&str]) -> Served {
    let files = ["--radius-clients", clients, "--radius-users", users];
    Served::proto("radius", &[&files, extra].concat())
}

/// A FreeRADIUS of our own on loopback, killed when dropped.
struct FreeRadius {
    _child: Spawned,
    addr: SocketAddr,
    _dir: crate::util::TempDir,
}

/// Two free UDP ports in a row on loopback (FreeRADIUS takes accounting on the second).
fn free_port_pair() -> u16 {
    for _ in 0..50 {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = a.local_addr().unwrap().port();
        if p < 65535 && UdpSocket::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two free ports in a row");
}

fn start_freeradius(clients: &str, users: &str) -> Option<FreeRadius> {
    if !installed(freeradius::PROGRAM) || !installed("radclient") {
        eprintln!("skipped: freeradius or radclient is not installed (apt-get install freeradius freeradius-utils)");
        return None;
    }
    let dir = tempdir("radius-freeradius");
    let addr: SocketAddr = ([127, 0, 0, 1], free_port_pair()).into();
    let args = freeradius::write(&FreeRadiusPlan {
        dir: &dir,
        listen: addr,
        clients: clients.as_ref(),
        users: users.as_ref(),
        threads: 1,
    })
    .unwrap();
    let child = Command::new(freeradius::PROGRAM)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fr = FreeRadius {
        _child: Spawned::of(child),
        addr,
        _dir: dir,
    };
    assert!(
        freeradius::wait_ready(addr, b"testing123", Duration::from_secs(20)),
        "FreeRADIUS did not answer a Status-Server on {addr}"
    );
    Some(fr)
}

/// radclient's verdict and reply attributes (without Message-Authenticator, which
/// FreeRADIUS 3.2.1 leaves out and firehose always puts first), or "no reply".
fn radclient(addr: SocketAddr, kind: &str, attrs: &str) -> String {
    let c = Command::new("radclient")
        .args([
            "-x",
            "-t",
            "1",
            "-r",
            "1",
            &addr.to_string(),
            kind,
            "testing123",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = Spawned::of(c);
    std::io::Write::write_all(&mut c.child.stdin.take().unwrap(), attrs.as_bytes()).unwrap();
    let out = c.output(Duration::from_secs(20));
    let out = String::from_utf8_lossy(&out.stdout);
    let mut lines = Vec::new();
    let mut after = false;
    for l in out.lines() {
        if let Some(rest) = l.strip_prefix("Received ") {
            lines.push(rest.split(" Id ").next().unwrap().to_string());
            after = true;
        } else if l.starts_with("Sent ") {
            after = false;
        } else if after && !l.contains("Message-Authenticator") {
            lines.push(l.trim().to_string());
        }
    }
    if lines.is_empty() {
        "no reply".into()
    } else {
        lines.join("; ")
    }
}

/// Sends `packet` from a socket bound to `from` and returns the reply, if any within
/// half a second.
fn exchange(from: &str, to: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind(from).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    s.send_to(packet, to).unwrap();
    let mut buf = [0u8; 4096];
    retry_interrupted(|| s.recv_from(&mut buf))
        .ok()
        .map(|(n, _)| buf[..n].to_vec())
}

#[test]
fn radclient_gets_the_same_answers_from_firehose_and_freeradius() {
    let (clients, users) = (example("clients.conf"), example("users"));
    let Some(fr) = start_freeradius(&clients, &users) else {
        return;
    };
    let ours = serve(&clients, &users, &[]);
    let ma = "Message-Authenticator=0x00";
    let cases = [
        ("pap", format!("User-Name=alice,User-Password=alicepw,{ma}")),
        (
            "chap",
            format!("User-Name=carol,CHAP-Password=carolpw,{ma}"),
        ),
        (
            "bad password",
            format!("User-Name=alice,User-Password=wrong,{ma}"),
        ),
        (
            "unknown user",
            format!("User-Name=nobody,User-Password=x,{ma}"),
        ),
        (
            "auth-type reject",
            format!("User-Name=mallory,User-Password=mallorypw,{ma}"),
        ),
        (
            "reply attributes",
            format!("User-Name=bob,CHAP-Password=bobpw,{ma}"),
        ),
        (
            "proxy-state",
            format!("User-Name=bob,User-Password=bobpw,Proxy-State=0x0102,{ma}"),
        ),
        (
            "missing message-authenticator",
            "User-Name=alice,User-Password=alicepw".into(),
        ),
    ];
    let mut answered = 0;
    for (what, attrs) in &cases {
        let a = radclient(ours.addr, "auth", attrs);
        let b = radclient(fr.addr, "auth", attrs);
        assert_eq!(a, b, "{what}: firehose then FreeRADIUS");
        answered += (a != "no reply") as u32;
    }
    assert_eq!(answered, 7, "all but the missing Message-Authenticator");
    // Accounting: FreeRADIUS takes it on the next port, firehose on the same one.
    let acct = "User-Name=alice,Acct-Status-Type=Start,Acct-Session-Id=s1,NAS-IP-Address=127.0.0.1";
    let fr_acct: SocketAddr = ([127, 0, 0, 1], fr.addr.port() + 1).into();
    let a = radclient(ours.addr, "acct", acct);
    assert_eq!(a, radclient(fr_acct, "acct", acct));
    assert_eq!(a, "Accounting-Response");
    // A wrong Message-Authenticator, and an address no client covers: dropped by both.
    let mut bad = sample("pap_ma.req");
    let at = parse_request(&bad).unwrap().message_authenticator.unwrap();
    bad[at] ^= 1;
    for to in [ours.addr, fr.addr] {
        assert_eq!(exchange("127.0.0.1:0", to, &bad), None, "bad MA to {to}");
        assert_eq!(
            exchange("127.0.0.2:0", to, &sample("pap_ma.req")),
            None,
            "unknown client to {to}"
        );
    }
    ours.stop();
}

#[test]
fn duplicates_and_malformed_packets_are_counted_in_the_exit_json() {
    let dir = tempdir("radius-dup");
    let json = dir.join("stats.json");
    let j = json.display().to_string();
    let srv = serve(
        &example("clients.conf"),
        &example("users"),
        &["--json-file", &j, "--require-message-authenticator", "off"],
    );
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let req = sample("pap_ma.req");
    let mut got = Vec::new();
    for _ in 0..2 {
        s.send_to(&req, srv.addr).unwrap();
        let mut buf = [0u8; 4096];
        let (n, _) = retry_interrupted(|| s.recv_from(&mut buf)).unwrap();
        got.push(buf[..n].to_vec());
    }
    assert_eq!(got[0], got[1], "the duplicate gets the cached reply");
    let h = Header::parse(&got[0]).unwrap();
    let q = Header::parse(&req).unwrap();
    assert_eq!(
        h.authenticator,
        Secret::new(b"testing123").authenticator(&got[0], &q.authenticator)
    );
    assert_eq!(got[0][20], attr::MESSAGE_AUTHENTICATOR);
    // Malformed: never answered.
    for bad in [&req[..10], &req[..req.len() - 1], &[1u8, 2, 0, 200][..]] {
        assert_eq!(exchange("127.0.0.1:0", srv.addr, bad), None);
    }
    srv.stop();
    let doc = json_of(&json);
    let hd = &doc["handler"];
    assert_eq!(doc["proto"], "radius");
    assert_eq!(hd["radius_duplicates"], 1);
    assert_eq!(hd["radius_access_requests"], 1);
    assert_eq!(hd["radius_accepts"], 1);
    assert_eq!(hd["radius_dropped_malformed"], 3);
    assert_eq!(doc["totals"]["handler_drops"], 3);
}

#[test]
fn reloads_under_load_lose_nothing() {
    let dir = tempdir("radius-reload");
    let users = dir.join("users");
    let base = std::fs::read_to_string(example("users")).unwrap();
    std::fs::write(&users, &base).unwrap();
    let u = users.display().to_string();
    let clients = example("clients.conf");
    let srv = serve(&clients, &u, &[]);
    let load_json = dir.join("load.json");
    let load = Command::new(crate::util::bin())
        .args([
            "load",
            "--proto",
            "radius",
            "--target",
            &srv.addr.to_string(),
        ])
        .args([
            "--radius-users",
            &example("users"),
            "--radius-clients",
            &clients,
        ])
        .args(["--rate", "1000", "-t", "3", "--quiet", "--timeout", "2s"])
        .args([
            "--radius-wrong-every",
            "7",
            "--json-file",
            &load_json.display().to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    for i in 0..6 {
        std::thread::sleep(Duration::from_millis(400));
        // Every other reload adds a user; the users the load logs in as stay.
        let text = if i % 2 == 0 {
            format!("{base}\ndave Cleartext-Password := \"d{i}\"\n")
        } else {
            base.clone()
        };
        std::fs::write(&users, text).unwrap();
        signal_pid(srv.pid(), "HUP");
    }
    let st = Spawned::of(load).wait(Duration::from_secs(60));
    assert!(st.success(), "load exited with {st}");
    let rest = srv.stop();
    assert!(
        rest.matches("radius clients and users swapped").count() >= 5,
        "{rest}"
    );
    let r = json_of(&load_json);
    assert!(r["completed"].as_u64().unwrap() >= 2000, "{r}");
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["stray"], 0, "{r}");
    assert!(r.get("invalid").is_none(), "{r}");
    assert!(r["codes"]["Access-Reject"].as_u64().unwrap() > 0, "{r}");
}

#[test]
fn bad_radius_input_is_one_line_and_exit_2() {
    let dir = tempdir("radius-bad");
    let bad_users = dir.join("users");
    std::fs::write(
        &bad_users,
        "alice Cleartext-Password := \"x\"\n  Bogus-Attr = 1\n",
    )
    .unwrap();
    let b = bad_users.display().to_string();
    let c = example("clients.conf");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["serve", "--proto", "radius"], "needs --radius-clients"),
        (
            vec!["serve", "--radius-users", &b],
            "--radius-users applies only to --proto radius",
        ),
        (
            vec![
                "serve",
                "--proto",
                "radius",
                "--radius-clients",
                &c,
                "--radius-users",
                &b,
            ],
            ":2: unknown attribute 'Bogus-Attr'",
        ),
        (
            vec!["load", "--proto", "radius", "--target", "127.0.0.1:1812"],
            "needs --radius-users",
        ),
        (
            vec!["load", "--target", "127.0.0.1:9", "--radius-secret", &c],
            "--radius-secret applies only to --proto radius",
        ),
        (
            vec!["lab", "compare", "--proto", "radius", "--size", "100"],
            "--size: RADIUS requests are Access-Requests of the generated users",
        ),
        (
            vec!["lab", "compare", "--proto", "radius", "--queues", "2"],
            "--queues sets the veth pair's queues: use it with --topology veth",
        ),
    ];
    // One id space of 256 per generator thread, shared by its flows: a window above it is
    // refused in closed loop and in open loop (where it caps each flow).
    let u = example("users");
    let load = [
        "load",
        "--proto",
        "radius",
        "--target",
        "127.0.0.1:9",
        "--radius-users",
        &u,
        "--radius-clients",
        &c,
    ];
    let mut cases = cases;
    for extra in [
        &["--flows", "2", "--window", "129"][..],
        &["--rate", "1000", "--window", "300"][..],
    ] {
        let mut a = load.to_vec();
        a.extend_from_slice(extra);
        cases.push((a, "ids only distinguish 256 per thread"));
    }
    for (args, want) in cases {
        let o = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}
