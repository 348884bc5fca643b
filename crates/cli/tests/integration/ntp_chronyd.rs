//! `firehose serve --proto ntp` and chronyd, both serving this host's clock as a local
//! stratum 10, asked the same requests: their answers compared field by field.

use crate::util::{installed, tempdir, Served, Spawned};
use firehose_ntpwire::{parse, Header, Timestamp};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A chronyd of our own serving on loopback, killed when dropped.
struct Chronyd {
    _child: Spawned,
    addr: SocketAddr,
    _dir: crate::util::TempDir,
}

fn start_chronyd() -> Option<Chronyd> {
    if !installed("chronyd") || !firehose_sys::cpu::is_root() {
        eprintln!("skipped: needs root and chronyd (apt-get install chrony)");
        return None;
    }
    let dir = tempdir("ntp-chronyd-server");
    let port = crate::util::free_port("127.0.0.1");
    let conf = dir.join("chrony.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbindaddress 127.0.0.1\nallow 127.0.0.1\nlocal stratum 10\ncmdport 0\npidfile {}\n",
            dir.join("chronyd.pid").display()
        ),
    )
    .unwrap();
    // -x: never touch the clock; -d: in the foreground.
    let child = Command::new("chronyd")
        .args(["-d", "-x", "-u", "root", "-f"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn chronyd");
    let c = Chronyd {
        _child: Spawned::of(child),
        addr: ([127, 0, 0, 1], port).into(),
        _dir: dir,
    };
    // Ready when it answers as its local reference (stratum 10).
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match ask(c.addr, &request(0x23, 1)) {
            Some(r) if Header::read(&r).stratum == 10 => return Some(c),
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
            None => {}
        }
    }
    panic!("chronyd did not answer on {} within 10 s", c.addr);
}

/// A 48-byte request with first byte `lvm` (leap, version, mode).
fn request(lvm: u8, transmit: u64) -> [u8; 48] {
    let mut b = crate::ntp::request(transmit);
    b[0] = lvm;
    b
}

/// The answer to `req`, or `None` after the timeout.
fn ask(to: SocketAddr, req: &[u8]) -> Option<Vec<u8>> {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.send_to(req, to).unwrap();
    crate::ntp::recv(&s)
}

/// Now as an NTP timestamp.
fn now() -> Timestamp {
    Timestamp::from_unix_ns(firehose_sys::clock::realtime_ns())
}

#[test]
fn answers_match_chronyd_field_by_field() {
    let Some(chrony) = start_chronyd() else {
        return;
    };
    let srv = Served::proto("ntp", &["--ntp-local-stratum", "10"]);
    // Client v4, client v3, symmetric active, NTPv1 (mode 0), a client request with leap 3
    // (as ntpdig sends), then what neither may answer: modes 2, 4, 5, 6, 7.
    let answered = [0x23u8, 0x1b, 0x21, 0x08, 0xe3];
    let silent = [0x22u8, 0x24, 0x25, 0x26, 0x27];
    for (k, lvm) in answered.iter().enumerate() {
        let req = request(*lvm, 0x5cbf_7605_45a3_9fb4 + k as u64);
        let t0 = now();
        let ours = Header::read(&ask(srv.addr, &req).expect("firehose answers"));
        let theirs_bytes = ask(chrony.addr, &req).expect("chronyd answers");
        let t1 = now();
        let theirs = Header::read(&theirs_bytes);
        assert_eq!(theirs_bytes.len(), 48, "{lvm:#x}");
        let fields = |h: &Header| {
            (
                h.leap,
                h.version,
                h.mode,
                h.stratum,
                h.poll,
                h.root_delay,
                h.root_dispersion,
                h.refid,
                h.origin,
            )
        };
        assert_eq!(fields(&ours), fields(&theirs), "request {lvm:#x}");
        // The clock readings: within the exchange, receive before transmit, and chronyd's
        // marks (receive ends in 1, transmit in 0) kept.
        for h in [&ours, &theirs] {
            for t in [h.receive, h.transmit] {
                assert!(
                    t.diff_ns(t0) >= -1_000 && t1.diff_ns(t) >= -1_000,
                    "{lvm:#x}: {t}"
                );
            }
            assert!(h.transmit.diff_ns(h.receive) >= 0, "{lvm:#x}");
            assert!(
                h.receive.diff_ns(h.reference) > 0,
                "{lvm:#x}: reference in the past"
            );
        }
        assert_eq!((ours.receive.0 & 1, ours.transmit.0 & 1), (1, 0));
        // Precision: each measures its own reading of the same clock; allow one step.
        assert!(
            (i32::from(ours.precision) - i32::from(theirs.precision)).abs() <= 2,
            "precision {} vs chronyd's {}",
            ours.precision,
            theirs.precision
        );
    }
    for lvm in silent {
        let req = request(lvm, 0x5cbf_7605_0000_0001);
        assert_eq!(ask(chrony.addr, &req), None, "chronyd answered {lvm:#x}");
        assert_eq!(ask(srv.addr, &req), None, "firehose answered {lvm:#x}");
    }
    // Both parse as NTP and are the same length.
    let req = request(0x23, 7);
    let (a, b) = (
        ask(srv.addr, &req).unwrap(),
        ask(chrony.addr, &req).unwrap(),
    );
    assert_eq!((a.len(), parse(&a).is_ok()), (b.len(), parse(&b).is_ok()));
    srv.stop();
}
