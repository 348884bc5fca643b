//! `firehose drops` against the real kernel (root), in namespaces each test makes, with
//! exact counts: a stopped receiver's SOCKET_RCVBUFF drops equal its socket's own drop count
//! (SO_MEMINFO, as `ss -m` shows it), N datagrams to a closed port are N NO_SOCKET, an nft
//! drop rule's are N NETFILTER_DROP, an XDP_DROP program's are counted by the tracepoint and
//! by the veth's queue counter; nothing stays attached after Ctrl-C or SIGKILL; bad input
//! and a missing permission are one line and exit code 2.

use crate::util::{bin, root_or_skip, run, signal_pid, stderr, Netns, Served, Spawned};
use crate::xdp_util::Lab;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running `firehose drops --json`, started (its watch attached) when `start` returns;
/// killed when dropped.
struct Watching {
    child: Spawned,
}

impl Watching {
    /// `firehose drops ARGS --json`, in namespace `ns` when given; waits for the line that
    /// says the watch is attached.
    fn start(ns: Option<&str>, args: &[&str]) -> Watching {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, bin()]);
                c
            }
            None => Command::new(bin()),
        };
        cmd.arg("drops").args(args).arg("--json");
        let mut child = Spawned::start(cmd);
        let mut err = BufReader::new(child.child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.starts_with("firehose drops: "), "{line}");
        // Keep draining stderr so the child never blocks on it.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
        });
        Watching { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ctrl-C, then the JSON report.
    fn finish(mut self) -> serde_json::Value {
        signal_pid(self.pid(), "INT");
        let mut out = String::new();
        self.child
            .child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let st = self.child.wait(Duration::from_secs(20));
        assert!(st.success(), "drops exited with {st}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().unwrap();
    assert!(st.success(), "ip {args:?}");
}

/// Sends `n` datagrams of `len` bytes to `to` from inside namespace `ns`.
fn send(ns: &str, to: &str, n: usize, len: usize) {
    let to: std::net::SocketAddr = to.parse().unwrap();
    Lab::in_ns(ns, move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let buf = vec![7u8; len];
        for _ in 0..n {
            // An ICMP error from an earlier datagram may fail a send: count what left.
            let _ = s.send_to(&buf, to);
        }
    });
}

/// The rows of a report with this reason and port.
fn count(doc: &serde_json::Value, reason: &str, port: u16) -> u64 {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == reason && r["port"] == port)
        .map(|r| r["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn closed_port_is_n_no_socket() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dc");
    let w = Watching::start(None, &["--netns", &ns.name]);
    send(&ns.name, "127.0.0.1:9101", 137, 32);
    let doc = w.finish();
    assert_eq!(count(&doc, "NO_SOCKET", 9101), 137, "{doc:#}");
    let row = &doc["rows"][0];
    assert_eq!(row["function"], "__udp4_lib_rcv", "{row}");
    assert_eq!(row["protocol"], "udp");
    assert_eq!(doc["method"]["via"], "bpf");
    assert!(doc["attribution"][0]
        .as_str()
        .unwrap()
        .starts_with("137 NO_SOCKET at __udp4_lib_rcv, port 9101"));
}

#[test]
fn an_nft_drop_rule_is_n_netfilter_drop() {
    if !root_or_skip() || !crate::util::installed("nft") {
        return;
    }
    let ns = Netns::new("dn");
    let rules = "table inet fhdrops {\n chain input {\n  type filter hook input priority 0;\n  udp dport 9102 drop\n }\n}\n";
    let mut nft = Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut nft.stdin.take().unwrap(), rules.as_bytes()).unwrap();
    assert!(nft.wait().unwrap().success(), "nft -f refused {rules}");
    let w = Watching::start(None, &["--netns", &ns.name, "--port", "9102"]);
    send(&ns.name, "127.0.0.1:9102", 211, 32);
    let doc = w.finish();
    assert_eq!(count(&doc, "NETFILTER_DROP", 9102), 211, "{doc:#}");
    assert_eq!(doc["drops"], 211, "{doc:#}");
}

/// The socket's drop count as SO_MEMINFO reports it (`ss -m`: skmem d<N>).
fn meminfo_drops(ns: &str, port: u16) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ss",
            "-uamnH",
            "sport",
            "=",
            &format!(":{port}"),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let skmem = text
        .split("skmem:(")
        .nth(1)
        .unwrap_or_else(|| panic!("no skmem in {text}"));
    skmem
        .trim_end_matches([')', '\n', ' '])
        .split(',')
        .find_map(|f| f.strip_prefix('d'))
        .unwrap()
        .trim_end_matches(')')
        .parse()
        .unwrap()
}

#[test]
fn a_stopped_receiver_s_rcvbuff_drops_equal_its_socket_s() {
    if !root_or_skip() || !crate::util::installed("ss") {
        return;
    }
    let ns = Netns::new("ds");
    let serve = Served::frozen(&ns.name, 9103);
    let w = Watching::start(None, &["--netns", &ns.name, "--port", "9103"]);
    send(&ns.name, "127.0.0.1:9103", 3000, 1000);
    let doc = w.finish();
    let d = meminfo_drops(&ns.name, 9103);
    assert!(d > 0, "the flood did not overflow the socket");
    assert_eq!(count(&doc, "SOCKET_RCVBUFF", 9103), d, "{doc:#}");
    assert_eq!(doc["drops"], d, "only SOCKET_RCVBUFF at this port: {doc:#}");
    let row = &doc["rows"][0];
    assert_eq!(row["port_from"], "socket", "{row}");
    assert_eq!(row["process"]["pid"], serve.pid(), "{row}");
    assert!(row["process"]["command"]
        .as_str()
        .unwrap()
        .starts_with("firehose serve"));
}

#[test]
fn an_xdp_drop_program_is_counted_by_tracepoint_and_queue_counter() {
    if !root_or_skip() {
        return;
    }
    let lab = Lab::new("dx");
    // Only our datagrams reach the program: no IPv6 chatter, no ARP (a static neighbour).
    for ns in [&lab.srv, &lab.cli] {
        let st = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
            ])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let mac = std::fs::read_to_string(format!("/sys/class/net/{}/address", lab.dev));
    let mac = match mac {
        Ok(m) => m,
        Err(_) => {
            let o = Command::new("ip")
                .args(["-n", &lab.srv, "-br", "link", "show", &lab.dev])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(2)
                .unwrap()
                .to_string()
        }
    };
    let peer = lab.cli_dev.clone();
    let srv4 = crate::xdp_util::SRV4;
    ip(&[
        "-n",
        &lab.cli,
        "neigh",
        "replace",
        srv4,
        "lladdr",
        mac.trim(),
        "dev",
        &peer,
        "nud",
        "permanent",
    ]);
    let dev = lab.dev.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let srv = lab.srv.clone();
    let holder = std::thread::spawn(move || {
        firehose_sys::netns::enter(&srv).unwrap();
        let prog = firehose_sys::xdp::attach::XdpProg::load_drop().unwrap();
        let idx = firehose_sys::xdp::ifindex(&dev).unwrap();
        let _link = prog
            .attach(idx, firehose_sys::xdp::attach::XdpMode::Native)
            .unwrap();
        ready_tx.send(()).unwrap();
        let _ = rx.recv();
    });
    ready_rx.recv().unwrap();
    let w = Watching::start(
        Some(&lab.srv),
        &["--netns", &lab.srv, "--port", "9104", "--iface", &lab.dev],
    );
    send(&lab.cli, &format!("{srv4}:9104"), 173, 64);
    let doc = w.finish();
    tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(doc["drops"], 173, "{doc:#}");
    assert!(
        doc["rows"][0]["function"]
            .as_str()
            .unwrap()
            .starts_with("veth_xdp"),
        "{doc:#}"
    );
    let xdp_drops: u64 = doc["counters"]["nic"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["counter"].as_str().unwrap().ends_with("xdp_drops"))
        .map(|n| n["delta"].as_u64().unwrap())
        .sum();
    assert_eq!(xdp_drops, 173, "{doc:#}");
}

/// The ids of the BPF programs an fd of `pid` holds (fdinfo's `prog_id:`).
pub(crate) fn prog_ids(pid: u32) -> Vec<u32> {
    let mut ids = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let text = std::fs::read_to_string(fd.path()).unwrap_or_default();
        ids.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse::<u32>().ok()),
        );
    }
    ids.sort();
    ids.dedup();
    ids
}

#[test]
fn ctrl_c_and_sigkill_leave_no_program_attached() {
    if !root_or_skip() {
        return;
    }
    for signal in ["INT", "KILL"] {
        let mut w = Watching::start(None, &["--duration", "60"]);
        let ids = prog_ids(w.pid());
        assert!(!ids.is_empty(), "no BPF program held by drops");
        for id in &ids {
            firehose_sys::xdp::attach::prog_info(*id).unwrap();
        }
        signal_pid(w.pid(), signal);
        let st = w.child.wait(Duration::from_secs(20));
        assert_eq!(st.success(), signal == "INT", "{signal}: {st}");
        for id in ids {
            let e = firehose_sys::xdp::attach::prog_info(id).unwrap_err();
            assert_eq!(e.errno(), Some(2), "{signal}: program {id} remains: {e}");
        }
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for args in [
        &["drops", "--port", "70000"][..],
        &["drops", "--port", "http"],
        &["drops", "--netns", "fh-no-such-namespace"],
        &["drops", "--iface", "fh-no-such-if0"],
        &["drops", "--via", "kprobe"],
        &["drops", "--duration", "0"],
    ] {
        let o = run(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{args:?}: {e}");
    }
}

#[test]
fn without_permission_one_line_names_it() {
    if !firehose_sys::cpu::is_root() {
        // As a normal user this is the case itself.
        let o = run(&["drops", "-t", "1"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        return;
    }
    // As root: run it as nobody.
    use std::os::unix::process::CommandExt;
    let o = match Command::new(bin())
        .args(["drops", "-t", "1"])
        .uid(65534)
        .gid(65534)
        .output()
    {
        Ok(o) => o,
        // A checkout under a directory nobody may enter (/root): nothing to run as nobody.
        Err(e) => {
            eprintln!("skipped: nobody cannot execute {}: {e}", bin());
            return;
        }
    };
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("needs") && (e.contains("root") || e.contains("CAP_")),
        "{e}"
    );
}

/// A load against a stopped server, as root: the summary attributes the loss to the
/// server's full socket, with its pid, and the JSON carries the same.
#[test]
fn a_load_s_loss_is_attributed_in_its_summary_and_json() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("dl");
    let serve = Served::frozen(&ns.name, 9108);
    let json = crate::util::tmp("drops-load-attribution.json");
    let o = Command::new("ip")
        .args(["netns", "exec", &ns.name, bin(), "load"])
        .args([
            "--target",
            "127.0.0.1:9108",
            "--flows",
            "8",
            "--window",
            "64",
        ])
        .args([
            "--duration",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "100ms",
            "--size",
            "1000",
        ])
        .args(["--json-file", json.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("lost ") && l.contains("SOCKET_RCVBUFF"))
        .unwrap_or_else(|| panic!("no attribution line:\n{out}"));
    assert!(line.contains("port 9108"), "{line}");
    assert!(line.contains(&format!("pid {}", serve.pid())), "{line}");
    let doc = crate::util::json_of(&json);
    std::fs::remove_file(&json).unwrap();
    let a = &doc["loss_attribution"];
    assert_eq!(a["via"], "bpf", "{a}");
    let d = a["drops"].as_u64().unwrap();
    assert!(d > 0 && d <= doc["lost"].as_u64().unwrap(), "{a}");
    assert_eq!(a["rows"][0]["reason"], "SOCKET_RCVBUFF");
    assert_eq!(a["rows"][0]["process"]["pid"], serve.pid());
}
