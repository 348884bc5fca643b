//! `serve --io xdp` against hand-built frames sent from the client namespace through a raw
//! AF_PACKET socket: an 802.1Q-tagged request is answered over AF_XDP with the tag kept, and
//! the shapes the program must leave to the kernel (IPv4 with options, IPv6 with a fragment
//! header) reach the fallback socket instead. Needs root and python3; skips otherwise.

use crate::util::Served;
use crate::xdp_util::*;
use firehose_frame::{csum, write_request, Endpoints};
use std::net::SocketAddr;
use std::process::Command;

#[test]
fn tagged_requests_are_answered_tagged_and_odd_shapes_go_to_the_kernel() {
    if !is_root() || Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipping: needs root (namespaces, BPF) and python3 (raw AF_PACKET frames)");
        return;
    }
    let lab = Lab::new("f");
    let peer = lab.cli_dev.clone();
    let (smac, cmac) = (mac(&lab.srv, &lab.dev), mac(&lab.cli, &peer));
    let serve = |listen: String| {
        Served::start_in(
            &lab.srv,
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
    let out = srv.stop_with("TERM");
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
    let out = srv.stop_with("TERM");
    assert_eq!(counter(&out, "xdp_requests"), 0, "{out}");
    assert_eq!(
        counter(&out, "socket_requests"),
        1,
        "the request behind a fragment header: {out}"
    );
}
