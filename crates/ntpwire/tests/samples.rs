//! Packets captured on loopback from the real programs (chrony 4.3 and ntpsec 1.2.2's
//! ntpdig, Debian 12), parsed field by field.

use firehose_ntpwire::{parse, Auth, Header, Leap, RefId, Short, Timestamp};

#[path = "data/captures.rs"]
mod captures;
use captures::*;

#[test]
fn client_requests() {
    let p = parse(&bytes(NTPDIG)).unwrap();
    let h = p.header;
    assert_eq!(
        (h.leap, h.version, h.mode, h.stratum),
        (Leap::Unsynchronised, 4, 3, 0)
    );
    assert_eq!((p.len, p.auth, p.ext_fields), (48, Auth::None, 0));
    assert_eq!(h.transmit, Timestamp(0xeeb1_af01_2835_b000));
    assert!(h.origin.is_zero() && h.receive.is_zero());

    let h = parse(&bytes(CHRONY_CLIENT)).unwrap().header;
    assert_eq!(
        (h.leap, h.version, h.mode, h.poll, h.precision),
        (Leap::None, 4, 3, 6, 32)
    );
    assert_eq!(h.transmit, Timestamp(0x5cbf_7605_45a3_9fb4));
}

#[test]
fn chrony_responses() {
    let req = parse(&bytes(CHRONY_CLIENT)).unwrap().header;
    let h = parse(&bytes(CHRONY_UNSYNC)).unwrap().header;
    assert_eq!(
        (h.leap, h.version, h.mode, h.stratum),
        (Leap::Unsynchronised, 4, 4, 0)
    );
    assert_eq!((h.poll, h.precision), (6, -25));
    assert_eq!(
        (h.root_delay, h.root_dispersion),
        (Short(0x10000), Short(0x10000))
    );
    assert_eq!((h.refid, h.reference), (0, Timestamp::ZERO));
    assert_eq!(
        h.origin, req.transmit,
        "the origin is the request's transmit"
    );
    // chrony marks its receive timestamps with a low bit of 1 and its transmit
    // timestamps with 0, to recognise an interleaved request.
    assert_eq!((h.receive.0 & 1, h.transmit.0 & 1), (1, 0));
    assert!(h.transmit.diff_ns(h.receive) >= 0);

    let h = parse(&bytes(CHRONY_LOCAL)).unwrap().header;
    assert_eq!(
        (h.leap, h.version, h.mode, h.stratum),
        (Leap::None, 4, 4, 10)
    );
    assert_eq!(RefId(h.refid).display(h.stratum), "127.127.1.1");
    assert_eq!((h.root_delay, h.root_dispersion), (Short(0), Short(0)));
    assert!(
        h.receive.diff_ns(h.reference) > 0,
        "the reference is in the past"
    );

    let v3 = parse(&bytes(CHRONY_LOCAL_V3)).unwrap().header;
    assert_eq!((v3.version, v3.mode), (3, 4));
    let passive = parse(&bytes(CHRONY_LOCAL_PASSIVE)).unwrap().header;
    assert_eq!((passive.version, passive.mode), (4, 2));
}

#[test]
fn headers_write_back_byte_for_byte() {
    for hex in [
        NTPDIG,
        CHRONY_CLIENT,
        CHRONY_UNSYNC,
        CHRONY_LOCAL,
        CHRONY_LOCAL_V3,
    ] {
        let b = bytes(hex);
        let mut out = [0u8; 48];
        Header::read(&b).write(&mut out);
        assert_eq!(&out[..], &b[..], "{hex}");
    }
}
