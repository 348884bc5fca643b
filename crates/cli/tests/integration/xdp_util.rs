//! A veth pair between two namespaces for the AF_XDP tests (the lab's, [`crate::util::veth`],
//! with IPv6 too), removed on drop; a server in it is [`crate::util::Served::start_in`].

#![allow(dead_code)]

use crate::util::{veth, Side, Topology};
use firehose_sys::retry_interrupted;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

// The addresses of the lab's veth pair (firehose_lab::topology::VETH_*_ADDR*).
pub const SRV4: &str = "10.199.0.1";
pub const CLI4: &str = "10.199.0.2";
pub const SRV6: &str = "fd00:199::1";
pub const CLI6: &str = "fd00:199::2";

pub use firehose_sys::cpu::is_root;

/// The lab's veth pair with 2 queues, IPv4 and IPv6 on both ends ([`veth`]); removed on
/// drop.
pub struct Lab {
    pub srv: String,
    pub cli: String,
    /// The server's end (in `srv`) and the client's (in `cli`).
    pub dev: String,
    pub cli_dev: String,
    _topo: Topology,
}

impl Lab {
    /// `tag` (at most 2 characters) keeps concurrent tests in one process apart.
    pub fn new(tag: &str) -> Lab {
        let topo = veth(tag, 2);
        topo.add_ipv6().unwrap();
        Lab {
            srv: topo.netns(Side::Server).unwrap(),
            cli: topo.netns(Side::Client).unwrap(),
            dev: topo.dev(Side::Server),
            cli_dev: topo.dev(Side::Client),
            _topo: topo,
        }
    }

    /// `ip link show` of the served interface, where an attached program appears as
    /// `prog/xdp id N`.
    pub fn link_show(&self) -> String {
        let out = Command::new("ip")
            .args(["-n", &self.srv, "link", "show", "dev", &self.dev])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn has_xdp(&self) -> bool {
        self.link_show().contains("prog/xdp")
    }

    /// True when a program is attached to the client's end.
    pub fn client_has_xdp(&self) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.cli, "link", "show", "dev", &self.cli_dev])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip link show {}", self.cli_dev);
        String::from_utf8_lossy(&out.stdout).contains("prog/xdp")
    }

    /// Sets the client veth's MTU (the server's stays 1500): the client may then send
    /// datagrams the server's frames cannot hold.
    pub fn client_mtu(&self, mtu: u32) {
        let st = Command::new("ip")
            .args(["-n", &self.cli, "link", "set", "dev", &self.cli_dev, "mtu"])
            .arg(mtu.to_string())
            .status()
            .unwrap();
        assert!(st.success(), "ip link set {} mtu {mtu}", self.cli_dev);
    }

    /// Runs `firehose ARGS` in the server namespace to completion.
    pub fn run_srv(&self, args: &[&str]) -> std::process::Output {
        firehose_in(&self.srv, args).output().unwrap()
    }

    /// Sends `n` datagrams of `len` bytes (byte `i as u8`) to `to` from the client
    /// namespace, from eight source ports (so both rx queues see traffic), gently: a 2 ms
    /// pause after every 20, well under what the veth's backlog holds.
    pub fn send_gently(&self, to: SocketAddr, n: usize, len: usize) {
        Lab::in_ns(&self.cli, move || {
            let any = if to.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
            let socks: Vec<_> = (0..8)
                .map(|_| std::net::UdpSocket::bind(any).unwrap())
                .collect();
            for i in 0..n {
                socks[i % 8].send_to(&vec![i as u8; len], to).unwrap();
                if i % 20 == 19 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
        });
    }

    /// Udp InCsumErrors of the client namespace's kernel.
    pub fn client_csum_errors(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.cli, "cat", "/proc/net/snmp"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
        let i = names
            .split_whitespace()
            .position(|n| n == "InCsumErrors")
            .unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    /// Runs `f` on a thread inside namespace `ns`.
    pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = ns.to_string();
        std::thread::spawn(move || {
            firehose_sys::netns::enter(&ns).unwrap();
            f()
        })
        .join()
        .unwrap()
    }
}

/// `firehose ARGS` run inside namespace `ns` (not started).
pub fn firehose_in(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_firehose")])
        .args(args);
    c
}

/// A UDP socket with a 2 s receive timeout, for use inside a namespace thread.
pub fn udp(bind: &str) -> std::net::UdpSocket {
    let s = std::net::UdpSocket::bind(bind).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

/// Sends `msg` to `to` and returns the answer.
pub fn ask(s: &std::net::UdpSocket, to: SocketAddr, msg: &[u8]) -> Vec<u8> {
    s.send_to(msg, to).unwrap();
    let mut buf = vec![0u8; 65536];
    let (n, from) = retry_interrupted(|| s.recv_from(&mut buf))
        .unwrap_or_else(|e| panic!("no answer from {to} to {} bytes: {e}", msg.len()));
    assert_eq!(from, to);
    buf.truncate(n);
    buf
}

/// A backend counter from the `  name: value` lines serve prints at exit.
pub fn counter(out: &str, name: &str) -> u64 {
    let prefix = format!("{name}: ");
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {out}"))
        .trim()
        .parse()
        .unwrap()
}

pub fn mac(ns: &str, dev: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            &format!("/sys/class/net/{dev}/address"),
        ])
        .output()
        .unwrap();
    firehose_frame::parse_mac(&String::from_utf8_lossy(&out.stdout)).expect("a MAC address")
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Sends each frame from the client's veth and prints, for two seconds, every received frame
/// that carries `marker` as "TCI HEX". The receiving kernel moves a VLAN tag out of the frame
/// into metadata, which PACKET_AUXDATA reports (TCI -1 when the frame had no tag).
pub const RAW: &str = r#"
import socket, struct, sys, time
dev, marker, frames = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3:]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
s.bind((dev, 0)); s.settimeout(0.2)
for f in frames: s.send(bytes.fromhex(f))
end = time.time() + 2
while time.time() < end:
    try: d, anc, _, a = s.recvmsg(4096, 256)
    except socket.timeout: continue
    if a[2] == socket.PACKET_OUTGOING or marker not in d: continue
    tci = -1
    for lvl, typ, data in anc:
        if lvl == 263 and typ == 8:
            status, _, _, _, _, vtci = struct.unpack('IIIHHH', data[:18])
            if status & 0x10: tci = vtci
    print(tci, d.hex())
"#;

/// Runs [`RAW`] in the client namespace: `frames` out of `dev`, replies carrying `marker` back.
pub fn raw_exchange(lab: &Lab, dev: &str, marker: &[u8], frames: &[&[u8]]) -> Vec<(i32, Vec<u8>)> {
    let mut args: Vec<String> = ["netns", "exec", &lab.cli, "python3", "-c", RAW, dev]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(hex(marker));
    args.extend(frames.iter().map(|f| hex(f)));
    let out = Command::new("ip").args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (tci, h) = l.split_once(' ').unwrap();
            let bytes = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap());
            (tci.parse().unwrap(), bytes.collect())
        })
        .collect()
}

#[test]
fn the_addresses_are_the_labs() {
    use firehose_lab::topology as t;
    assert_eq!(SRV4, t::VETH_SERVER_ADDR.to_string());
    assert_eq!(CLI4, t::VETH_CLIENT_ADDR.to_string());
    assert_eq!(SRV6, t::VETH_SERVER_ADDR6.to_string());
    assert_eq!(CLI6, t::VETH_CLIENT_ADDR6.to_string());
}
