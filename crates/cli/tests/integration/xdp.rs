//! `firehose serve --io xdp` with the real binary and kernel, on a veth pair between two
//! namespaces the test creates: echo exact over AF_XDP for IPv4 and IPv6 at every size up to
//! the MTU, larger datagrams answered by the fallback socket, checksums accepted by the
//! client's kernel, the rest of the host's traffic (ARP/NDP, ping, TCP, other UDP ports)
//! untouched, DNS answers identical to the socket path, and the program gone after Ctrl-C and
//! after SIGKILL. Needs root; skips with a reason otherwise.

use crate::util::{root_or_skip, Served};
use crate::xdp_util::*;
use firehose_sys::retry_interrupted;
use firehose_sys::xdp::attach::{XdpMode, XdpProg};
use firehose_sys::xdp::{ifindex, netlink};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

/// Payload of `len` bytes that differs per size.
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + len) as u8).collect()
}

/// ICMP echo from the client namespace (a raw socket, as `ping` would).
fn ping(lab: &Lab, to: &str) -> bool {
    let script = format!(
        "import socket,struct\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_RAW,socket.IPPROTO_ICMP);s.settimeout(2)\n\
         h=struct.pack('!BBHHH',8,0,0,0x4648,1)+b'firehose'\n\
         c=sum(struct.unpack('!%dH'%(len(h)//2),h));c=(c&0xffff)+(c>>16);c=~c&0xffff\n\
         s.sendto(h[:2]+struct.pack('!H',c)+h[4:],('{to}',0))\n\
         while True:\n d=s.recv(2048)\n if d[20]==0 and d[24:26]==b'\\x46\\x48': print('pong');break\n"
    );
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.cli, "python3", "-c", &script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("pong")
}

#[test]
fn echo_is_exact_over_xdp_and_the_kernel_keeps_everything_else() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("e");
    let before = lab.client_csum_errors();
    for (listen, bind, max) in [
        (format!("{SRV4}:7000"), format!("{CLI4}:0"), 1472),
        (format!("[{SRV6}]:7000"), format!("[{CLI6}]:0"), 1452),
    ] {
        let srv = Served::start_in(
            &lab.srv,
            &["--io", "xdp", "--iface", &lab.dev, "--listen", &listen],
        );
        assert!(srv.banner.contains("xdp_mode=native"), "{}", srv.banner);
        assert!(
            srv.banner.contains("zerocopy=off"),
            "veth has no zero-copy: {}",
            srv.banner
        );
        assert!(lab.has_xdp(), "program attached: {}", lab.link_show());
        let to: SocketAddr = listen.parse().unwrap();
        let sent = Lab::in_ns(&lab.cli, move || {
            let s = udp(&bind);
            for len in 0..=max {
                let msg = payload(len);
                assert_eq!(ask(&s, to, &msg), msg, "{to} size {len}");
            }
            // Larger than the MTU: fragments, which the program passes to the fallback socket.
            for len in [max + 1, 3000, 9000] {
                let msg = payload(len);
                assert_eq!(ask(&s, to, &msg), msg, "{to} size {len}");
            }
            max as u64 + 1
        });
        if to.is_ipv4() {
            the_kernel_keeps_everything_else(&lab);
        }
        let out = srv.stop_with("INT");
        assert_eq!(counter(&out, "xdp_replies"), sent, "{out}");
        assert_eq!(counter(&out, "socket_replies"), 3, "{out}");
        assert!(
            !lab.has_xdp(),
            "program left after Ctrl-C: {}",
            lab.link_show()
        );
    }
    assert_eq!(
        lab.client_csum_errors(),
        before,
        "client kernel counted UDP checksum errors"
    );
}

/// While serving SRV4:7000 over XDP: another UDP port reaches its kernel socket, TCP to the
/// served address and port connects, ping answers, ARP and NDP resolve.
fn the_kernel_keeps_everything_else(lab: &Lab) {
    let (tcp, other_udp) = Lab::in_ns(&lab.srv, || {
        (
            TcpListener::bind((SRV4, 7000)).unwrap(),
            udp(&format!("{SRV4}:7001")),
        )
    });
    Lab::in_ns(&lab.cli, || {
        udp(&format!("{CLI4}:0"))
            .send_to(b"other", format!("{SRV4}:7001"))
            .unwrap();
        TcpStream::connect_timeout(
            &format!("{SRV4}:7000").parse().unwrap(),
            Duration::from_secs(2),
        )
        .unwrap();
        // NDP: any IPv6 packet to the server makes the client resolve it.
        let _ = udp(&format!("[{CLI6}]:0")).send_to(b"ndp", format!("[{SRV6}]:7002"));
    });
    let mut buf = [0u8; 16];
    assert_eq!(retry_interrupted(|| other_udp.recv(&mut buf)).unwrap(), 5);
    assert!(tcp.accept().is_ok());
    assert!(ping(lab, SRV4), "ping while serving");
    std::thread::sleep(Duration::from_millis(100));
    let neigh = Command::new("ip")
        .args(["-n", &lab.cli, "neigh", "show"])
        .output()
        .unwrap();
    let neigh = String::from_utf8_lossy(&neigh.stdout);
    assert!(neigh.contains(SRV4) && neigh.contains(SRV6), "{neigh}");
}

/// DNS queries (id, flags, one question) for names of the test zone.
fn dns_queries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, (name, qtype)) in [
        ("example.com", 1u16),
        ("www.example.com", 1),
        ("example.com", 28),
        ("example.com", 15),
        ("nothere.example.com", 1),
        ("Mixed.Case.example.com", 1),
        ("example.com", 6),
    ]
    .iter()
    .enumerate()
    {
        let mut q = vec![0x12, i as u8, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        out.push(q);
    }
    out
}

fn zone(name: &str) -> String {
    format!("{}/../proto/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn dns_answers_are_identical_on_the_socket_and_xdp_paths() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("d");
    let (z1, z2) = (zone("example.zone"), zone("reverse.zone"));
    let mut answers = Vec::new();
    for io in ["socket", "xdp"] {
        let mut args = vec![
            "--proto",
            "dns",
            "--zone",
            &z1,
            "--zone",
            &z2,
            "--listen",
            "10.199.0.1:5300",
            "--io",
            io,
        ];
        if io == "xdp" {
            args.extend(["--iface", &lab.dev]);
        }
        let srv = Served::start_in(&lab.srv, &args);
        let got = Lab::in_ns(&lab.cli, || {
            let s = udp(&format!("{CLI4}:0"));
            dns_queries()
                .iter()
                .map(|q| ask(&s, "10.199.0.1:5300".parse().unwrap(), q))
                .collect::<Vec<_>>()
        });
        let out = srv.stop_with("TERM");
        if io == "xdp" {
            assert_eq!(counter(&out, "xdp_replies"), dns_queries().len() as u64);
        }
        answers.push(got);
    }
    assert_eq!(answers[0], answers[1]);
    assert!(!lab.has_xdp());
}

#[test]
fn after_sigkill_the_program_is_gone_and_the_next_serve_starts() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("k");
    let args = [
        "--io",
        "xdp",
        "--iface",
        &lab.dev,
        "--listen",
        "10.199.0.1:7000",
        "--queues",
        "1",
    ];
    let srv = Served::start_in(&lab.srv, &args);
    assert!(lab.has_xdp());
    let (_, st) = srv.stop_status("KILL");
    assert!(!st.success());
    // The BPF link closed with the process; give the kernel's deferred release a moment.
    let mut gone = false;
    for _ in 0..50 {
        if !lab.has_xdp() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone, "program left after SIGKILL: {}", lab.link_show());
    let again = Served::start_in(&lab.srv, &args);
    assert!(again.banner.contains("queues=1"), "{}", again.banner);
    again.stop_with("TERM");
    assert!(!lab.has_xdp());
}

fn refused(out: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn bad_input_is_one_line_exit_2_and_leaves_nothing_attached() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("b");
    let dev = lab.dev.clone();
    let serve = |extra: &[&str]| {
        let mut a = vec![
            "serve",
            "--io",
            "xdp",
            "--listen",
            "10.199.0.1:7000",
            "--duration",
            "1",
        ];
        a.extend_from_slice(extra);
        lab.run_srv(&a)
    };
    refused(&serve(&["--iface", "nosuch0"]), "no such interface");
    refused(
        &serve(&["--iface", &dev, "--queues", "2"]),
        "queue 2 is out of range",
    );
    let xdp_on = |listen: &str| {
        vec!["serve", "--io", "xdp", "--iface", &dev, "--listen", listen]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let args = xdp_on("10.9.9.9:7000");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&lab.run_srv(&args), "is not an address of");
    refused(
        &serve(&["--iface", &dev, "--zerocopy", "on"]),
        "refused zero-copy",
    );
    refused(
        &lab.run_srv(&["serve", "--iface", &dev]),
        "--iface applies only to --io xdp",
    );
    refused(&serve(&[]), "--io xdp needs --iface");
    // Not root: run as nobody through setpriv when it is installed (util-linux).
    if Command::new("setpriv").arg("--version").output().is_ok() {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.srv,
                "setpriv",
                "--reuid",
                "65534",
                "--regid",
                "65534",
                "--clear-groups",
            ])
            .arg(env!("CARGO_BIN_EXE_firehose"))
            .args(xdp_on("10.199.0.1:7000"))
            .output()
            .unwrap();
        refused(&out, "needs root");
    } else {
        eprintln!("not-root case skipped: setpriv (util-linux) is not installed");
    }
    assert!(!lab.has_xdp(), "{}", lab.link_show());

    // A foreign program attached through netlink: refused, then replaced with --force.
    let idx = Lab::in_ns(&lab.srv, {
        let dev = dev.clone();
        move || {
            let idx = ifindex(&dev).unwrap();
            let p = XdpProg::load_pass("other_tool").unwrap();
            netlink::attach(idx, &p, false).unwrap();
            idx
        }
    });
    refused(
        &serve(&["--iface", &dev]),
        "foreign XDP program 'other_tool'",
    );
    assert!(lab.has_xdp());
    let out = serve(&["--iface", &dev, "--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed XDP program 'other_tool'"));
    assert!(!lab.has_xdp(), "{}", lab.link_show());

    // A foreign program held by a live BPF link cannot be replaced even with --force.
    let dev2 = dev.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let srv_ns = lab.srv.clone();
    let holder = std::thread::spawn(move || {
        firehose_sys::netns::enter(&srv_ns).unwrap();
        let p = XdpProg::load_pass("other_tool").unwrap();
        let _link = p.attach(ifindex(&dev2).unwrap(), XdpMode::Native).unwrap();
        ready_tx.send(()).unwrap();
        let _ = rx.recv();
    });
    ready_rx.recv().unwrap();
    refused(&serve(&["--iface", &dev, "--force"]), "held by a BPF link");
    drop(tx);
    holder.join().unwrap();
    assert!(!lab.has_xdp());
    let _ = idx;
}

#[test]
fn load_counts_every_request_against_both_queues() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("l");
    let json = std::env::temp_dir().join(format!("fh-xdp-load-{}.json", std::process::id()));
    let stats = std::env::temp_dir().join(format!("fh-xdp-serve-{}.json", std::process::id()));
    let stats_s = stats.to_string_lossy().into_owned();
    let srv = Served::start_in(
        &lab.srv,
        &[
            "--io",
            "xdp",
            "--iface",
            &lab.dev,
            "--listen",
            &format!("{SRV4}:7000"),
            "--json-file",
            &stats_s,
        ],
    );
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.cli,
            env!("CARGO_BIN_EXE_firehose"),
            "load",
        ])
        .args([
            "--target",
            &format!("{SRV4}:7000"),
            "--requests",
            "20000",
            "--flows",
            "32",
            "--window",
            "4",
        ])
        .args(["--warmup", "0", "--json-file", &json.to_string_lossy()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    srv.stop_with("TERM");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(doc["completed"], 20000, "{doc}");
    assert_eq!(doc["lost"], 0, "{doc}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats);
    let workers = s["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2, "one worker per queue");
    for w in workers {
        assert!(
            w["backend"]["xdp_replies"].as_u64().unwrap() > 0,
            "queue idle: {w}"
        );
    }
    assert_eq!(s["totals"]["backend"]["xdp_replies"], 20000, "{s}");
}
