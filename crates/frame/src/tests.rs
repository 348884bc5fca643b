use super::*;

const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];

fn ends(src: &str, dst: &str, vlan: Option<u16>) -> Endpoints {
    Endpoints {
        src_mac: A,
        dst_mac: B,
        vlan,
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        ttl: 64,
    }
}

/// 10.0.0.1:1234 -> 10.0.0.2:53, payload "hi": fields at their offsets, the UDP checksum
/// against a sum written out by hand.
#[test]
fn builds_a_known_ipv4_frame() {
    let mut buf = [0u8; 64];
    let n = write_request(&mut buf, &ends("10.0.0.1:1234", "10.0.0.2:53", None), b"hi").unwrap();
    assert_eq!(n, 14 + 20 + 8 + 2);
    assert_eq!(&buf[12..14], &[0x08, 0x00]);
    // total length 30, TTL 64, proto 17
    assert_eq!(&buf[16..18], &[0, 30]);
    assert_eq!(buf[22], 64);
    assert_eq!(buf[23], 17);
    // A header with its checksum sums to zero; so does the UDP datagram with its pseudo-header.
    assert_eq!(csum::of(&buf[14..34]), 0);
    let u = parse(&buf[..n]).unwrap();
    assert!(udp_checksum_ok(&buf[..n], &u));
    assert_eq!(u.src, "10.0.0.1:1234".parse().unwrap());
    assert_eq!(u.dst, "10.0.0.2:53".parse().unwrap());
    assert_eq!((u.l3, u.l4, u.len, u.payload()), (14, 34, 2, 42));
    // Hand-computed: pseudo 0a00+0001+0a00+0002+0011+000a, udp 04d2+0035+000a, data 6869.
    let sum: u32 =
        0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 0x0011 + 0x000a + 0x04d2 + 0x0035 + 0x000a + 0x6869;
    let folded = (sum & 0xffff) + (sum >> 16);
    assert_eq!(be16(&buf, 40), !(folded as u16));
}

#[test]
fn parses_vlan_and_ipv6_and_refuses_what_it_does_not_handle() {
    let mut buf = [0u8; 128];
    let n = write_request(
        &mut buf,
        &ends("[fd00::1]:5000", "[fd00::2]:53", Some(7)),
        b"q",
    )
    .unwrap();
    let u = parse(&buf[..n]).unwrap();
    assert_eq!((u.l3, u.l4, u.len), (18, 58, 1));
    assert!(u.is_v6() && udp_checksum_ok(&buf[..n], &u));
    // Ethernet padding after the packet is ignored.
    let padded = [&buf[..n], &[0u8; 6][..]].concat();
    assert_eq!(parse(&padded).unwrap(), u);
    // Fragment header, TCP, ARP, truncation.
    let mut frag = buf;
    frag[18 + 6] = 44;
    assert_eq!(parse(&frag[..n]), Err(ParseError::Fragment));
    frag[18 + 6] = 6;
    assert_eq!(parse(&frag[..n]), Err(ParseError::NotUdp));
    let mut arp = buf;
    arp[16..18].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(parse(&arp[..n]), Err(ParseError::NotIp));
    assert_eq!(parse(&buf[..n - 1]), Err(ParseError::BadLength));
    assert_eq!(parse(&buf[..10]), Err(ParseError::Short));
}

#[test]
fn ipv4_fragments_are_refused() {
    let mut buf = [0u8; 64];
    let n = write_request(&mut buf, &ends("10.0.0.1:1", "10.0.0.2:2", None), b"x").unwrap();
    let mut mf = buf;
    mf[20] = 0x20; // MF
    assert_eq!(parse(&mf[..n]), Err(ParseError::Fragment));
    let mut off = buf;
    off[21] = 1; // offset 8
    assert_eq!(parse(&off[..n]), Err(ParseError::Fragment));
    let mut df = buf;
    df[20] = 0x40; // DF alone is fine
    assert!(parse(&df[..n]).is_ok());
}

/// The reply to a request equals the request built from the other side.
#[test]
fn reply_in_place_matches_a_request_built_the_other_way() {
    for (c, s, vlan) in [
        ("10.1.2.3:40000", "10.9.8.7:7", None),
        ("10.1.2.3:40000", "10.9.8.7:7", Some(0x2005)),
        ("[fd00::1:2]:40000", "[fd00::9]:7", None),
        ("[fd00::1:2]:40000", "[fd00::9]:7", Some(12)),
    ] {
        for len in [0usize, 1, 2, 3, 7, 100, 1400] {
            let req_payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let reply_payload: Vec<u8> = (0..len + 3).map(|i| (i * 7) as u8).collect();
            let mut frame = vec![0u8; 2048];
            let n = write_request(&mut frame, &ends(c, s, vlan), &req_payload).unwrap();
            let u = parse(&frame[..n]).unwrap();
            frame[u.payload()..u.payload() + reply_payload.len()].copy_from_slice(&reply_payload);
            let m = reply_in_place(&mut frame, &u, reply_payload.len(), 64);
            let mut want = vec![0u8; 2048];
            let mut back = ends(s, c, vlan);
            back.src_mac = B;
            back.dst_mac = A;
            let w = write_request(&mut want, &back, &reply_payload).unwrap();
            assert_eq!(
                &frame[..m],
                &want[..w],
                "{c} -> {s} vlan {vlan:?} len {len}"
            );
        }
    }
}

#[test]
fn a_corrupted_byte_fails_the_checksum() {
    let mut buf = [0u8; 128];
    let n = write_request(
        &mut buf,
        &ends("[fd00::1]:5000", "[fd00::2]:53", None),
        b"hello",
    )
    .unwrap();
    let u = parse(&buf[..n]).unwrap();
    buf[n - 1] ^= 1;
    assert!(!udp_checksum_ok(&buf[..n], &u));
}

#[test]
fn macs_as_the_kernel_prints_them() {
    assert_eq!(parse_mac("02:00:00:00:00:aa\n"), Some(A));
    assert_eq!(mac_text(&A), "02:00:00:00:00:aa");
    assert_eq!(parse_mac("02:00:00:00:00"), None);
    assert_eq!(parse_mac("02:00:00:00:00:aa:01"), None);
    assert_eq!(parse_mac("02:00:00:00:00:zz"), None);
    assert_eq!(parse_mac("2:00:00:00:00:aa"), None);
}

/// Issue 20: an IPv6 header whose payload length (0-7) cannot hold a UDP header, in a frame
/// long enough for one (Ethernet pads to 60 bytes), panicked in `parse`. Every such length,
/// and every truncation of a whole frame, is refused instead.
#[test]
fn an_ipv6_payload_shorter_than_a_udp_header_is_refused_not_a_panic() {
    let mut buf = [0u8; 128];
    let n = write_request(
        &mut buf,
        &ends("[fd00::1]:5000", "[fd99::1]:7000", None),
        b"x",
    )
    .unwrap();
    for plen in 0..8u16 {
        let mut f = buf;
        f[18..20].copy_from_slice(&plen.to_be_bytes());
        assert_eq!(
            parse(&f[..n.max(70)]),
            Err(ParseError::BadLength),
            "plen {plen}"
        );
    }
    let mut v4 = [0u8; 128];
    let m = write_request(&mut v4, &ends("10.0.0.1:1", "10.0.0.2:2", None), b"x").unwrap();
    for frame in [&buf[..n], &v4[..m]] {
        for cut in 0..frame.len() {
            assert!(parse(&frame[..cut]).is_err(), "cut at {cut}");
        }
    }
}

#[test]
fn checksums_ok_checks_the_ipv4_header_and_the_udp_datagram() {
    let mut buf = [0u8; 64];
    let n = write_request(&mut buf, &ends("10.0.0.1:1234", "10.0.0.2:53", None), b"hi").unwrap();
    let u = parse(&buf[..n]).unwrap();
    assert!(checksums_ok(&buf[..n], &u));
    let mut ttl = buf;
    ttl[22] -= 1; // TTL changed, header checksum not updated
    assert!(!checksums_ok(&ttl[..n], &u));
    let mut data = buf;
    data[42] ^= 1;
    assert!(!checksums_ok(&data[..n], &u));
    let mut none = data;
    none[40..42].copy_from_slice(&[0, 0]); // no UDP checksum over IPv4
    assert!(checksums_ok(&none[..n], &u));
    let mut v6 = [0u8; 128];
    let m = write_request(&mut v6, &ends("[fd00::1]:1", "[fd00::2]:2", None), b"hi").unwrap();
    let u6 = parse(&v6[..m]).unwrap();
    assert!(checksums_ok(&v6[..m], &u6));
    v6[m - 1] ^= 1;
    assert!(!checksums_ok(&v6[..m], &u6));
}
