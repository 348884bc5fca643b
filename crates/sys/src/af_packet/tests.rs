//! AF_PACKET against the real kernel, on loopback. Needs CAP_NET_RAW: skipped otherwise.

use super::*;
use crate::socket::UdpSock;
use std::net::SocketAddr;
use std::time::Instant;

fn skip_unless_root() -> bool {
    if !crate::cpu::is_root() {
        eprintln!("skipped: AF_PACKET needs CAP_NET_RAW (run as root)");
        return true;
    }
    false
}

/// A UDP socket holding a loopback port, dropping all it gets (so the kernel sends no
/// port-unreachable), and the port.
fn held_port() -> (UdpSock, u16) {
    let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let s = UdpSock::new_for(&a).unwrap();
    s.bind(&a).unwrap();
    crate::bpf::attach_cbpf(s.as_raw_fd(), &crate::bpf::cbpf_drop_all()).unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

fn send_n(port: u16, n: usize, len: usize) {
    let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let c = UdpSock::new_for(&a).unwrap();
    let to = crate::sockaddr::RawAddr::from_std(&format!("127.0.0.1:{port}").parse().unwrap());
    for _ in 0..n {
        c.send_to(&vec![7u8; len], Some(&to), 0).unwrap();
    }
}

fn rx_ring(port: u16, fanout: Option<(u16, Fanout)>) -> RxRing {
    let lo = ifindex("lo").unwrap();
    let cfg = RxRingConfig {
        block_size: 4096 * 4,
        block_nr: 8,
        frame_size: 2048,
        retire: Duration::from_millis(5),
    };
    let r = RxRing::new(PacketSock::open(lo).unwrap(), cfg).unwrap();
    r.sock().attach_filter(&udp_port_filter(port)).unwrap();
    r.sock().bind().unwrap();
    if let Some((g, m)) = fanout {
        r.sock().join_fanout(g, m).unwrap();
    }
    r
}

/// Drains every ring until `want` frames are counted or two seconds pass.
fn count(rings: &mut [RxRing], want: usize) -> Vec<usize> {
    let mut got = vec![0; rings.len()];
    let end = Instant::now() + Duration::from_secs(2);
    while got.iter().sum::<usize>() < want && Instant::now() < end {
        for (i, r) in rings.iter_mut().enumerate() {
            r.wait(Duration::from_millis(5)).unwrap();
            while let Some(b) = r.next_block() {
                for f in b.frames() {
                    assert_ne!(f.pkttype, PKTTYPE_OUTGOING, "the filter drops outgoing");
                    assert_eq!(f.len as usize, 14 + 20 + 8 + 100);
                    got[i] += 1;
                }
            }
        }
    }
    got
}

#[test]
fn v3_ring_sees_exactly_the_datagrams_to_its_port() {
    if skip_unless_root() {
        return;
    }
    let (_hold, port) = held_port();
    let (_other, other_port) = held_port();
    let mut rings = [rx_ring(port, None)];
    send_n(other_port, 5, 100);
    send_n(port, 50, 100);
    assert_eq!(count(&mut rings, 50), vec![50]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        count(&mut rings, 1),
        vec![0],
        "nothing more, nothing for the other port"
    );
    let st = rings[0].sock().take_stats().unwrap();
    assert_eq!((st.packets, st.drops), (50, 0));
    assert_eq!(
        rings[0].sock().take_stats().unwrap().packets,
        0,
        "reading resets"
    );
}

#[test]
fn fanout_lb_spreads_over_the_group() {
    if skip_unless_root() {
        return;
    }
    let (_hold, port) = held_port();
    let group = (std::process::id() as u16) ^ 0x5a5a;
    let mut rings = [
        rx_ring(port, Some((group, Fanout::Lb))),
        rx_ring(port, Some((group, Fanout::Lb))),
    ];
    assert_eq!(
        rings[0].sock().fanout().unwrap(),
        Some((group, libc::PACKET_FANOUT_LB))
    );
    send_n(port, 40, 100);
    let got = count(&mut rings, 40);
    assert_eq!(got.iter().sum::<usize>(), 40, "{got:?}");
    assert!(
        got.iter().all(|&n| n > 0),
        "round robin reaches both: {got:?}"
    );
}

#[test]
fn fanout_mode_mismatch_is_refused_with_the_errno() {
    if skip_unless_root() {
        return;
    }
    let (_hold, port) = held_port();
    let group = (std::process::id() as u16) ^ 0x1234;
    let _a = rx_ring(port, Some((group, Fanout::Hash)));
    let b = rx_ring(port, None);
    let e = b.sock().join_fanout(group, Fanout::Cpu).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    assert!(e.to_string().contains("PACKET_FANOUT cpu"), "{e}");
}

#[test]
fn a_ring_geometry_the_kernel_rejects_names_the_errno() {
    if skip_unless_root() {
        return;
    }
    let lo = ifindex("lo").unwrap();
    let cfg = RxRingConfig {
        block_size: 1000, // not a multiple of the page size
        ..RxRingConfig::default()
    };
    let e = RxRing::new(PacketSock::open(lo).unwrap(), cfg).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    assert!(e.to_string().contains("PACKET_RX_RING"), "{e}");
    assert_eq!(
        ifindex("nosuchif0").unwrap_err().errno(),
        Some(libc::ENODEV)
    );
}

/// An Ethernet + IPv4 + UDP frame on loopback (zero MACs), UDP checksum 0 (none).
fn v4_frame(buf: &mut [u8], sport: u16, dport: u16, payload: usize) -> usize {
    let ip_len = 20 + 8 + payload;
    buf[..12].fill(0);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
    ]);
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    let sum = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut buf[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    udp[6..8].fill(0);
    buf[42..42 + payload].fill(0xab);
    14 + ip_len
}

/// Runs `f` on a thread in a network namespace of its own (gone when the thread ends),
/// with lo up, route_localnet and accept_local set: a frame a packet socket puts on lo has
/// no route attached, so the kernel routes it as input and drops 127/8 addresses
/// (IP_LOCALNET) and local sources (IP_LOCAL_SOURCE) unless these are on.
fn in_private_netns(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: unshare takes no pointers; it moves only this thread to a new netns.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        let ok = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status()
            .unwrap();
        assert!(ok.success());
        // /proc/sys/net is the namespace of the task that opens it: this thread's.
        for knob in ["route_localnet", "accept_local"] {
            std::fs::write(format!("/proc/sys/net/ipv4/conf/lo/{knob}"), "1").unwrap();
        }
        f()
    })
    .join()
    .unwrap();
}

#[test]
fn tx_ring_with_qdisc_bypass_delivers_every_frame() {
    if skip_unless_root() {
        return;
    }
    in_private_netns(tx_ring_body);
}

fn tx_ring_body() {
    let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let rx = UdpSock::new_for(&a).unwrap();
    rx.bind(&a).unwrap();
    rx.set_recv_timeout(Duration::from_secs(2)).unwrap();
    let port = rx.local_addr().unwrap().port();
    let lo = ifindex("lo").unwrap();
    let sock = PacketSock::open(lo).unwrap();
    sock.set_qdisc_bypass(true).unwrap();
    assert!(sock.qdisc_bypass().unwrap());
    let mut tx = TxRing::new(
        sock,
        TxRingConfig {
            frame_size: 2048,
            frame_nr: 16,
        },
    )
    .unwrap();
    assert_eq!(tx.slots(), 16);
    let n = 40; // more than the ring holds: slots are reused once the kernel frees them
    let mut taken = 0;
    let mut written = 0;
    let end = Instant::now() + Duration::from_secs(5);
    while taken < n && Instant::now() < end {
        while written < n {
            let Some(buf) = tx.frame_mut() else { break };
            let len = v4_frame(buf, 40000 + (written % 4) as u16, port, 60);
            tx.commit(len);
            written += 1;
        }
        taken += tx.send().unwrap().frames;
    }
    assert_eq!(taken, n);
    let mut buf = [0u8; 256];
    let mut ports = std::collections::BTreeSet::new();
    for _ in 0..n {
        let (len, from) = rx.recv_from(&mut buf, 0).unwrap();
        assert_eq!(len, 60);
        assert!(buf[..60].iter().all(|&b| b == 0xab));
        ports.insert(from.to_std().unwrap().port());
    }
    assert_eq!(ports.len(), 4, "four source ports: {ports:?}");
}

#[test]
fn prefilled_tx_ring_sends_each_slot_frame_again_lap_after_lap() {
    if skip_unless_root() {
        return;
    }
    in_private_netns(|| prefill_body(false));
}

#[test]
fn prefilled_tx_ring_with_vnet_headers_sends_linear_frames_intact() {
    if skip_unless_root() {
        return;
    }
    in_private_netns(|| prefill_body(true));
}

/// With `vnet`, each slot holds a virtio_net_hdr asking for the whole frame linear, then
/// the frame; the receiver must see the same datagrams either way.
fn prefill_body(vnet: bool) {
    let a: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let rx = UdpSock::new_for(&a).unwrap();
    rx.bind(&a).unwrap();
    rx.set_recv_timeout(Duration::from_secs(2)).unwrap();
    let port = rx.local_addr().unwrap().port();
    let sock = PacketSock::open(ifindex("lo").unwrap()).unwrap();
    sock.set_qdisc_bypass(true).unwrap();
    sock.set_vnet_hdr(vnet).unwrap();
    assert_eq!(sock.vnet_hdr().unwrap(), vnet);
    let mut tx = TxRing::new(
        sock,
        TxRingConfig {
            frame_size: 2048,
            frame_nr: 8,
        },
    )
    .unwrap();
    // Slot i holds source port 41000 + i % 4 with an (i % 4 + 1)-byte payload.
    let frames: Vec<Vec<u8>> = (0..4)
        .map(|k| {
            let mut b = vec![0u8; 128];
            let n = v4_frame(&mut b, 41000 + k as u16, port, k + 1);
            b.truncate(n);
            if vnet {
                let mut v = vnet_hdr_linear(n as u16).to_vec();
                v.extend_from_slice(&b);
                return v;
            }
            b
        })
        .collect();
    let hdr = if vnet { VNET_HDR_LEN } else { 0 };
    assert_eq!(
        tx.prefill(|i| &frames[i % 4][..]).unwrap(),
        hdr + 14 + 20 + 8 + 4
    );
    let too_long = vec![0u8; tx.max_frame() + 1];
    let n = 20; // two and a half laps of the 8 slots, the data never rewritten
    let (mut marked, mut taken) = (0, 0);
    let end = Instant::now() + Duration::from_secs(5);
    while taken < n && Instant::now() < end {
        while marked < n && tx.mark() {
            marked += 1;
        }
        taken += tx.send().unwrap().frames;
    }
    assert_eq!(taken, n);
    assert_eq!(
        tx.prefill(|_| &too_long[..]).unwrap_err().errno(),
        Some(libc::EMSGSIZE)
    );
    let mut buf = [0u8; 256];
    let mut per_port = std::collections::BTreeMap::new();
    for _ in 0..n {
        let (len, from) = rx.recv_from(&mut buf, 0).unwrap();
        let p = from.to_std().unwrap().port();
        assert_eq!(
            len,
            (p - 41000) as usize + 1,
            "slot data belongs to its port"
        );
        *per_port.entry(p).or_insert(0) += 1;
    }
    // 20 frames over slots 0..7, 0..7, 0..3: ports in turn, 5 each.
    assert_eq!(per_port.values().copied().collect::<Vec<_>>(), [5, 5, 5, 5]);
}
