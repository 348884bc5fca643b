//! `serve --io xdp` against hand-built frames sent from the client namespace through a raw
//! AF_PACKET socket: an 802.1Q-tagged request is answered over AF_XDP with the tag kept, and
//! the shapes the program must leave to the kernel (IPv4 with options, IPv6 with a fragment
//! header) reach the fallback socket instead. Needs root and python3; skips otherwise.

use crate::xdp_util::*;
use firehose_frame::{csum, write_request, Endpoints};
use std::net::SocketAddr;
use std::process::Command;

fn mac(ns: &str, dev: &str) -> [u8; 6] {
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Sends each frame from the client's veth and prints, for two seconds, every received frame
/// that carries `marker` as "TCI HEX". The receiving kernel moves a VLAN tag out of the frame
/// into metadata, which PACKET_AUXDATA reports (TCI -1 when the frame had no tag).
const RAW: &str = r#"
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
fn raw_exchange(lab: &Lab, dev: &str, marker: &[u8], frames: &[&[u8]]) -> Vec<(i32, Vec<u8>)> {
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
fn tagged_requests_are_answered_tagged_and_odd_shapes_go_to_the_kernel() {
    if !is_root() || Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipping: needs root (namespaces, BPF) and python3 (raw AF_PACKET frames)");
        return;
    }
    let lab = Lab::new("f");
    let peer = format!("{}p", lab.dev);
    let (smac, cmac) = (mac(&lab.srv, &lab.dev), mac(&lab.cli, &peer));
    let serve = |listen: String| {
        Served::start(
            &lab,
            &["--io", "xdp", "--iface", &lab.dev, "--listen", &listen],
        )
    };
    // A request frame from the client's port 40000 to `dst`.
    let frame = |dst: String, vlan, payload: &[u8]| {
        let dst: SocketAddr = dst.parse().unwrap();
        let client = if dst.is_ipv4() { CLI4 } else { CLI6 };
        let e = Endpoints {
            src_mac: cmac,
            dst_mac: smac,
            vlan,
            src: SocketAddr::new(client.parse().unwrap(), 40000),
            dst,
            ttl: 64,
        };
        let mut buf = vec![0u8; 256];
        let n = write_request(&mut buf, &e, payload).unwrap();
        buf.truncate(n);
        buf
    };
    let srv = serve(format!("{SRV4}:7000"));
    let ends = |vlan, payload: &[u8]| frame(format!("{SRV4}:7000"), vlan, payload);
    // Tagged, VLAN 100: the reply must come back tagged, addresses and ports swapped.
    let tagged = ends(Some(100), b"tagged-request");
    // IPv4 with one option word (four NOPs): passed to the kernel.
    let mut opts = ends(None, b"options-request");
    opts.splice(34..34, [1u8, 1, 1, 1]);
    opts[14] = 0x46;
    let total = u16::from_be_bytes([opts[16], opts[17]]) + 4;
    opts[16..18].copy_from_slice(&total.to_be_bytes());
    opts[24..26].copy_from_slice(&[0, 0]);
    let c = csum::of(&opts[14..38]);
    opts[24..26].copy_from_slice(&c.to_be_bytes());
    let replies = raw_exchange(&lab, &peer, b"-request", &[&tagged, &opts]);
    let (tci, tagged_reply) = replies
        .iter()
        .find(|(_, f)| f.windows(14).any(|w| w == b"tagged-request"))
        .unwrap_or_else(|| panic!("no reply to the tagged request among {replies:?}"));
    assert_eq!(*tci, 100, "reply tagged with VLAN 100");
    let u = firehose_frame::parse(tagged_reply).unwrap();
    assert_eq!(u.src, format!("{SRV4}:7000").parse().unwrap());
    assert_eq!(u.dst, format!("{CLI4}:40000").parse().unwrap());
    assert!(firehose_frame::udp_checksum_ok(tagged_reply, &u));
    assert_eq!(&tagged_reply[..6], &cmac);
    let (out, st) = srv.stop("-TERM");
    assert!(st.success(), "{out}");
    assert_eq!(counter(&out, "xdp_replies"), 1, "the tagged request: {out}");
    assert_eq!(
        counter(&out, "socket_requests"),
        1,
        "the request with IP options: {out}"
    );

    // IPv6 with a fragment header (an atomic fragment: offset 0, no more fragments): the
    // program passes it, the kernel strips the header and the fallback socket answers.
    let srv = serve(format!("[{SRV6}]:7000"));
    let mut frag = frame(format!("[{SRV6}]:7000"), None, b"fragment-request");
    frag.splice(54..54, [17u8, 0, 0, 0, 0, 0, 0, 7]);
    frag[20] = 44;
    let plen = u16::from_be_bytes([frag[18], frag[19]]) + 8;
    frag[18..20].copy_from_slice(&plen.to_be_bytes());
    raw_exchange(&lab, &peer, b"-request", &[&frag]);
    let (out, st) = srv.stop("-TERM");
    assert!(st.success(), "{out}");
    assert_eq!(counter(&out, "xdp_requests"), 0, "{out}");
    assert_eq!(
        counter(&out, "socket_requests"),
        1,
        "the request behind a fragment header: {out}"
    );
}
