//! The frame parser and the in-place reply builder of the AF_XDP paths (crate `frame`):
//! any bytes may arrive at an AF_XDP port.
//!
//! Input: three control bytes (reply length, TTL), then the frame. A frame that parses
//! has its payload inside the frame; its reply, built in place in an AF_XDP-sized buffer,
//! parses back with the addresses swapped, the asked length and a right checksum. Then
//! the same bytes, read as endpoints and a payload, build a request that parses back to
//! exactly those endpoints.

use crate::input::Input;
use firehose_frame::{parse, reply_in_place, udp_checksum_ok, write_request, Endpoints};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Room of a frame on an AF_XDP ring (the default frame size).
const FRAME: usize = 2048;

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let want = inp.u16() as usize;
    let ttl = inp.byte();
    let frame = inp.rest();
    reply(frame, want, ttl);
    request(data);
}

fn reply(frame: &[u8], want: usize, ttl: u8) {
    let Ok(u) = parse(frame) else {
        return;
    };
    assert!(u.l3 == 14 || u.l3 == 18, "{u:?}");
    assert!(u.l4 >= u.l3 + 20, "{u:?}");
    assert!(
        u.payload() + u.len <= frame.len(),
        "payload past the frame: {u:?}"
    );
    let _ = udp_checksum_ok(frame, &u);
    // The handler may write any reply that fits the frame's room, longer than the request.
    let mut buf = frame.to_vec();
    buf.resize(FRAME.max(frame.len()), 0);
    let room = buf.len() - u.payload();
    let reply_len = want % (room + 1);
    let n = reply_in_place(&mut buf, &u, reply_len, ttl);
    assert_eq!(n, u.payload() + reply_len);
    let r = parse(&buf[..n]).unwrap_or_else(|e| panic!("the reply to {u:?} does not parse: {e}"));
    assert_eq!((r.src, r.dst), (u.dst, u.src), "addresses swapped");
    assert_eq!((r.l3, r.l4, r.len), (u.l3, u.l4, reply_len));
    assert!(udp_checksum_ok(&buf[..n], &r), "reply checksum");
}

fn request(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.byte();
    let v6 = flags & 1 != 0;
    let vlan = (flags & 2 != 0).then(|| inp.u16());
    let mut mac = || {
        let m = inp.take(6);
        let mut out = [0u8; 6];
        out[..m.len()].copy_from_slice(m);
        out
    };
    let (src_mac, dst_mac) = (mac(), mac());
    let addr = |inp: &mut Input<'_>| {
        let ip = if v6 {
            let mut o = [0u8; 16];
            let b = inp.take(16);
            o[..b.len()].copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(o))
        } else {
            let mut o = [0u8; 4];
            let b = inp.take(4);
            o[..b.len()].copy_from_slice(b);
            IpAddr::V4(Ipv4Addr::from(o))
        };
        SocketAddr::new(ip, inp.u16())
    };
    let src = addr(&mut inp);
    let dst = addr(&mut inp);
    let ttl = inp.byte();
    let payload = inp.rest();
    let e = Endpoints {
        src_mac,
        dst_mac,
        vlan,
        src,
        dst,
        ttl,
    };
    let mut buf = vec![0u8; FRAME];
    let Some(n) = write_request(&mut buf, &e, payload) else {
        assert!(firehose_frame::header_len(&e) + payload.len() > FRAME);
        return;
    };
    let u = parse(&buf[..n]).expect("a built request parses");
    assert_eq!((u.src, u.dst, u.len), (src, dst, payload.len()));
    assert_eq!(&buf[u.payload()..u.payload() + u.len], payload);
    assert_eq!(&buf[..6], &dst_mac);
    assert!(udp_checksum_ok(&buf[..n], &u));
}

/// Requests over IPv4 and IPv6, with and without a VLAN tag, the crafted frames of issue
/// 20 (IPv6 payload lengths 0 to 7), and an IPv4 header with options.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let ends = [
        ("10.0.0.1:1234", "10.0.0.2:53", None),
        ("[fd00::1]:5000", "[fd00::2]:53", Some(7)),
        ("192.0.2.1:40000", "192.0.2.2:7000", Some(0x2005)),
        ("[fd99::2]:1000", "[fd99::1]:7000", None),
    ];
    for (src, dst, vlan) in ends {
        let e = Endpoints {
            src_mac: [2, 0, 0, 0, 0, 0xaa],
            dst_mac: [2, 0, 0, 0, 0, 0xbb],
            vlan,
            src: src.parse().expect("literal"),
            dst: dst.parse().expect("literal"),
            ttl: 64,
        };
        for payload in [&b""[..], b"hello", &[0x42; 100]] {
            let mut buf = vec![0u8; 256];
            let n = write_request(&mut buf, &e, payload).expect("fits");
            out.push([&[0, 40, 64][..], &buf[..n]].concat());
        }
    }
    // IPv6, next header UDP, payload length 0..=7: shorter than a UDP header.
    let base = out[9][3..].to_vec();
    for plen in 0..8u8 {
        let mut f = base.clone();
        f[14 + 4] = 0;
        f[14 + 5] = plen;
        out.push([&[0, 8, 64][..], &f].concat());
    }
    // IPv4 with 4 bytes of options (IHL 6).
    let mut f = out[0][3..].to_vec();
    f.splice(34..34, [1, 1, 1, 0]);
    f[14] = 0x46;
    let total = u16::from_be_bytes([f[16], f[17]]) + 4;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    out.push([&[0, 16, 1][..], &f].concat());
    out
}
