//! Issue 20's hostile frames against `serve --io xdp`, sent from the client namespace through
//! a raw AF_PACKET socket: a frame that killed a worker (an IPv6 payload shorter than a UDP
//! header) leaves the server answering, with the refusal counted (the datagram longer than
//! the reply room is `xdp_clamp`'s); a wildcard listener answers only its interface's own
//! addresses, untagged; nothing answers a request from one of our own addresses;
//! `--verify-checksum` drops and counts bad checksums. Needs root and python3; skips
//! otherwise.

use crate::util::Served;
use crate::xdp_util::*;
use firehose_frame::{write_request, Endpoints};
use std::net::SocketAddr;
use std::process::Command;

fn root_and_python() -> bool {
    if !is_root() || Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipping: needs root (namespaces, BPF) and python3 (raw AF_PACKET frames)");
        return false;
    }
    true
}

/// Frames from the client's veth to the server's, as the wire carries them.
struct Wire {
    smac: [u8; 6],
    cmac: [u8; 6],
    peer: String,
}

impl Wire {
    fn new(lab: &Lab) -> Wire {
        let peer = lab.cli_dev.clone();
        Wire {
            smac: mac(&lab.srv, &lab.dev),
            cmac: mac(&lab.cli, &peer),
            peer,
        }
    }

    /// A UDP frame from `src` to `dst` carrying `payload`, checksums computed in full.
    fn frame(&self, src: &str, dst: &str, vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
        let e = Endpoints {
            src_mac: self.cmac,
            dst_mac: self.smac,
            vlan,
            src: src.parse::<SocketAddr>().unwrap(),
            dst: dst.parse::<SocketAddr>().unwrap(),
            ttl: 64,
        };
        let mut buf = vec![0u8; 2048];
        let n = write_request(&mut buf, &e, payload).unwrap();
        buf.truncate(n);
        buf
    }

    /// Sends `frames` and returns, for each reply that came back, which of `markers` it
    /// carries.
    fn exchange(&self, lab: &Lab, frames: &[Vec<u8>], markers: &[&str]) -> Vec<String> {
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let mut got: Vec<String> = raw_exchange(lab, &self.peer, b"-request", &refs)
            .into_iter()
            .map(|(_, f)| {
                let m = markers
                    .iter()
                    .find(|m| f.windows(m.len()).any(|w| w == m.as_bytes()));
                m.map_or_else(|| format!("unknown reply {}", hex(&f)), |m| m.to_string())
            })
            .collect();
        got.sort();
        got
    }
}

fn serve_xdp(lab: &Lab, listen: &str, extra: &[&str]) -> Served {
    let mut args = vec!["--io", "xdp", "--iface", &lab.dev, "--listen", listen];
    args.extend(extra);
    Served::start_in(&lab.srv, &args)
}

#[test]
fn short_ipv6_udp_frames_are_counted_and_the_server_keeps_answering() {
    if !root_and_python() {
        return;
    }
    let lab = Lab::new("h6");
    let w = Wire::new(&lab);
    let (src, dst) = (format!("[{CLI6}]:40000"), format!("[{SRV6}]:7000"));
    let srv = serve_xdp(&lab, &dst, &[]);
    // Payload length 0-5 in a frame long enough for the program's UDP header check.
    let mut frames: Vec<Vec<u8>> = (0..6u16)
        .map(|plen| {
            let mut f = w.frame(&src, &dst, None, b"short-v6");
            f[18..20].copy_from_slice(&plen.to_be_bytes());
            f
        })
        .collect();
    frames.push(w.frame(&src, &dst, None, b"after-short-request"));
    let got = w.exchange(&lab, &frames, &["after-short-request"]);
    let out = srv.stop_with("TERM");
    assert_eq!(got, ["after-short-request"], "{out}");
    assert_eq!(counter(&out, "xdp_bad_frames"), 6, "{out}");
    assert_eq!(counter(&out, "xdp_replies"), 1, "{out}");
}

#[test]
fn a_wildcard_listener_answers_only_its_own_untagged_addresses() {
    if !root_and_python() {
        return;
    }
    let lab = Lab::new("hw");
    let w = Wire::new(&lab);
    let srv = serve_xdp(&lab, "0.0.0.0:7000", &[]);
    let src = format!("{CLI4}:40000");
    let frames = [
        w.frame(&src, &format!("{SRV4}:7000"), None, b"own-request"),
        w.frame(&src, "10.199.0.99:7000", None, b"other-request"),
        w.frame(&src, &format!("{SRV4}:7000"), Some(100), b"tagged-request"),
    ];
    let markers = ["own-request", "other-request", "tagged-request"];
    let got = w.exchange(&lab, &frames, &markers);
    let out = srv.stop_with("TERM");
    assert_eq!(got, ["own-request"], "{out}");
    assert_eq!(counter(&out, "xdp_requests"), 1, "{out}");
    assert_eq!(counter(&out, "socket_requests"), 0, "{out}");
}

#[test]
fn a_request_from_our_own_address_is_never_answered() {
    if !root_and_python() {
        return;
    }
    let lab = Lab::new("hs");
    let w = Wire::new(&lab);
    let dst = format!("{SRV4}:7000");
    let srv = serve_xdp(&lab, &dst, &[]);
    let frames = [
        w.frame(&format!("{SRV4}:7000"), &dst, None, b"self-request"),
        w.frame(&format!("{CLI4}:40000"), &dst, None, b"peer-request"),
    ];
    let got = w.exchange(&lab, &frames, &["self-request", "peer-request"]);
    let out = srv.stop_with("TERM");
    assert_eq!(got, ["peer-request"], "{out}");
    // The program passed it to the kernel, which drops a martian source.
    assert_eq!(counter(&out, "xdp_requests"), 1, "{out}");
    assert_eq!(counter(&out, "socket_requests"), 0, "{out}");
}

#[test]
fn verify_checksum_drops_and_counts_bad_checksums() {
    if !root_and_python() {
        return;
    }
    let lab = Lab::new("hc");
    let w = Wire::new(&lab);
    let (src, dst) = (format!("{CLI4}:40000"), format!("{SRV4}:7000"));
    let srv = serve_xdp(&lab, &dst, &["--verify-checksum"]);
    assert!(
        srv.banner.contains("verify_checksum=true"),
        "{}",
        srv.banner
    );
    let mut bad_udp = w.frame(&src, &dst, None, b"bad-udp-request");
    bad_udp[40] ^= 0x01;
    let mut bad_ip = w.frame(&src, &dst, None, b"bad-ip-request");
    bad_ip[24] ^= 0x01;
    let mut no_udp_sum = w.frame(&src, &dst, None, b"no-sum-request");
    no_udp_sum[40..42].copy_from_slice(&[0, 0]);
    let frames = [
        bad_udp,
        bad_ip,
        no_udp_sum,
        w.frame(&src, &dst, None, b"good-request"),
    ];
    let markers = [
        "bad-udp-request",
        "bad-ip-request",
        "no-sum-request",
        "good-request",
    ];
    let got = w.exchange(&lab, &frames, &markers);
    let out = srv.stop_with("TERM");
    assert_eq!(got, ["good-request", "no-sum-request"], "{out}");
    assert_eq!(counter(&out, "xdp_bad_checksum"), 2, "{out}");
    assert_eq!(counter(&out, "xdp_replies"), 2, "{out}");
}
