//! `firehose load --io xdp` with the real binary and kernel, on a two-queue veth pair between
//! two namespaces the test creates: every request counted exactly once against a socket
//! server and an AF_XDP server, over IPv4 and IPv6; the generator's program gone after its
//! run and after Ctrl-C; bad input refused with one line and exit 2, nothing left attached.
//! Needs root; skips with a reason otherwise.

use crate::util::{json_of, root_or_skip, stderr, tmp, Served, Spawned};
use crate::xdp_util::*;
use firehose_sys::xdp::attach::XdpProg;
use firehose_sys::xdp::{ifindex, netlink};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The client end of the lab's veth pair.
fn cli_dev(lab: &Lab) -> String {
    lab.cli_dev.clone()
}

fn client_has_xdp(lab: &Lab) -> bool {
    let out = Command::new("ip")
        .args(["-n", &lab.cli, "link", "show", "dev", &cli_dev(lab)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
}

fn load_cmd(lab: &Lab, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        &lab.cli,
        env!("CARGO_BIN_EXE_firehose"),
        "load",
    ])
    .args(args);
    c
}

fn load(lab: &Lab, args: &[&str]) -> Output {
    load_cmd(lab, args).output().unwrap()
}

/// Runs `load --io xdp` for exactly `n` requests against `target` (echo, or as `proto`
/// says); returns its JSON.
fn load_exactly(lab: &Lab, target: &str, n: usize, tag: &str, proto: &[&str]) -> serde_json::Value {
    let json = tmp(&format!("xdpload-{tag}.json"));
    let out = load(
        lab,
        &[
            proto,
            &[
                "--io",
                "xdp",
                "--iface",
                &cli_dev(lab),
                "--target",
                target,
                "--requests",
                &n.to_string(),
                "--flows",
                "32",
                "--window",
                "4",
                "--interval",
                "0",
                // A loaded host can stall for a second: a late answer still counts.
                "--timeout",
                "10s",
                "--json-file",
                &json.to_string_lossy(),
            ],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json_of(&json);
    let _ = std::fs::remove_file(&json);
    doc
}

#[test]
fn load_over_xdp_counts_every_request_against_both_server_paths() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("g");
    const N: usize = 20000;
    for server_io in ["socket", "xdp"] {
        for (family, addr) in [
            ("v4", format!("{SRV4}:7100")),
            ("v6", format!("[{SRV6}]:7100")),
        ] {
            let mut args = vec!["--listen", addr.as_str(), "--io", server_io];
            if server_io == "xdp" {
                args.extend(["--iface", lab.dev.as_str()]);
            }
            let srv = Served::start_in(&lab.srv, &args);
            let doc = load_exactly(&lab, &addr, N, &format!("{server_io}{family}"), &[]);
            let what = format!("server --io {server_io}, {family}: {doc}");
            assert_eq!(doc["completed"], N, "{what}");
            assert_eq!(doc["sent"], N, "{what}");
            for k in ["lost", "stray", "dup", "unsent", "send_errors"] {
                assert_eq!(doc[k], 0, "{k}: {what}");
            }
            assert_eq!(doc["send_path"], "af_xdp", "{what}");
            assert_eq!(doc["config"]["io"], "xdp", "{what}");
            assert_eq!(doc["config"]["xdp"]["queues"], "0,1", "{what}");
            assert!(!client_has_xdp(&lab), "program left after the run ({what})");
            let rest = srv.stop_with("TERM");
            if server_io == "xdp" {
                assert_eq!(counter(&rest, "xdp_replies"), N as u64, "{rest}");
            }
        }
    }
}

#[test]
fn ctrl_c_ends_the_run_with_a_summary_and_detaches() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("i");
    let addr = format!("{SRV4}:7101");
    let srv = Served::start_in(&lab.srv, &["--listen", &addr]);
    let child = load_cmd(
        &lab,
        &[
            "--io",
            "xdp",
            "--iface",
            &cli_dev(&lab),
            "--target",
            &addr,
            "--duration",
            "60",
            "--interval",
            "0",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let child = Spawned::of(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !client_has_xdp(&lab) {
        assert!(Instant::now() < deadline, "the program never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1000));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.output(Duration::from_secs(30));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // Ended by the signal with its summary: 0, or 1 when a stalled host let nothing complete
    // (load's verdict on the run), never killed by it or refused.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{text}");
    assert!(text.contains("summary:"), "{text}");
    assert!(!client_has_xdp(&lab), "program left after Ctrl-C");
    drop(srv);
}

/// One line on stderr, exit 2, and no program of ours left on the client interface.
fn refused(lab: &Lab, out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "wanted {needle:?} in {err}");
    assert!(!client_has_xdp(lab), "left attached after: {err}");
}

#[test]
fn bad_input_is_one_line_and_exit_2_with_nothing_attached() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("j");
    let dev = cli_dev(&lab);
    let target = format!("{SRV4}:7102");
    let base = ["--target", target.as_str(), "--requests", "10"];
    let run = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        load(&lab, &a)
    };
    refused(
        &lab,
        &run(&["--io", "xdp", "--iface", "nope0"]),
        "no such interface",
    );
    refused(&lab, &run(&["--io", "xdp"]), "needs --iface");
    refused(&lab, &run(&["--iface", &dev]), "applies only to --io xdp");
    refused(
        &lab,
        &run(&[
            "--io",
            "xdp",
            "--iface",
            &dev,
            "--threads",
            "2",
            "--flows",
            "2",
        ]),
        "--threads 1",
    );
    refused(
        &lab,
        &run(&["--io", "xdp", "--iface", &dev, "--target", "10.99.0.1:7"]),
        "link",
    );
    Command::new("ip")
        .args(["-n", &lab.cli, "link", "set", &dev, "down"])
        .status()
        .unwrap();
    refused(&lab, &run(&["--io", "xdp", "--iface", &dev]), "is down");
    Command::new("ip")
        .args(["-n", &lab.cli, "link", "set", &dev, "up"])
        .status()
        .unwrap();
    // A foreign program stays where it is, untouched.
    let dev2 = dev.clone();
    let foreign_id = Lab::in_ns(&lab.cli, move || {
        let idx = ifindex(&dev2).unwrap();
        let p = XdpProg::load_pass("other_tool").unwrap();
        netlink::attach(idx, &p, false).unwrap();
        netlink::query(idx).unwrap().native
    });
    let out = run(&["--io", "xdp", "--iface", &dev]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("other_tool"), "{err}");
    let dev3 = dev.clone();
    let still = Lab::in_ns(&lab.cli, move || {
        let idx = ifindex(&dev3).unwrap();
        let now = netlink::query(idx).unwrap().native;
        netlink::detach(idx, false).unwrap();
        now
    });
    assert_eq!(still, foreign_id, "the foreign program was replaced");
}

/// `load --proto radius --io xdp` against `serve --proto radius` (socket and AF_XDP paths)
/// across the veth pair: every Access-Request answered and validated (authenticators, and
/// the verdict the users file promises: one user accepted, one rejected), each counted once.
#[test]
fn radius_load_over_xdp_validates_every_answer_against_both_server_paths() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("rr");
    let dir = tmp("xdpload-radius");
    std::fs::create_dir_all(&dir).unwrap();
    let clients = dir.join("clients.conf");
    std::fs::write(
        &clients,
        format!("client veth {{\n\tipaddr = {CLI4}\n\tsecret = s3cret\n\trequire_message_authenticator = yes\n}}\n"),
    )
    .unwrap();
    let users = dir.join("users");
    std::fs::write(
        &users,
        "alice\tCleartext-Password := \"pw-a\"\n\tReply-Message = \"hello alice\"\n\n\
         bob\tCleartext-Password := \"pw-b\", Auth-Type := Reject\n\tReply-Message = \"no\"\n",
    )
    .unwrap();
    let (c, u) = (clients.to_string_lossy(), users.to_string_lossy());
    const N: usize = 4000;
    let addr = format!("{SRV4}:1812");
    for server_io in ["socket", "xdp"] {
        let mut args = vec![
            "--proto",
            "radius",
            "--radius-clients",
            &c,
            "--radius-users",
            &u,
            "--listen",
            addr.as_str(),
            "--io",
            server_io,
        ];
        if server_io == "xdp" {
            args.extend(["--iface", lab.dev.as_str()]);
        }
        let srv = Served::start_in(&lab.srv, &args);
        let doc = load_exactly(
            &lab,
            &addr,
            N,
            &format!("radius-{server_io}"),
            &[
                "--proto",
                "radius",
                "--radius-clients",
                &c,
                "--radius-users",
                &u,
            ],
        );
        let what = format!("serve --proto radius --io {server_io}: {doc}");
        assert_eq!(doc["completed"], N, "{what}");
        assert_eq!(doc["sent"], N, "{what}");
        for k in ["lost", "stray", "dup", "unsent", "send_errors"] {
            assert_eq!(doc[k], 0, "{k}: {what}");
        }
        // An empty map of invalid answers is left out of the document.
        assert!(doc.get("invalid").is_none(), "invalid answers: {what}");
        let accepts = doc["codes"]["Access-Accept"].as_u64().unwrap_or(0);
        let rejects = doc["codes"]["Access-Reject"].as_u64().unwrap_or(0);
        assert!(accepts > 0 && rejects > 0, "both verdicts: {what}");
        assert_eq!(accepts + rejects, N as u64, "{what}");
        assert_eq!(doc["send_path"], "af_xdp", "{what}");
        assert!(!client_has_xdp(&lab), "program left after the run ({what})");
        srv.stop_with("TERM");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
