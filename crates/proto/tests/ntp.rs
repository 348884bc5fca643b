//! The NTP handler against chronyd 4.3's own answers to the same captured requests (see
//! crates/ntpwire/tests/data/README.md), field by field; modes that are never answered;
//! malformed and authenticated requests; Kiss-o'-Death under a burst.

use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_ntpwire::{parse, Header, Leap, RefId, Short, Timestamp};
use firehose_proto::live::Live;
use firehose_proto::ntp::counters::slot;
use firehose_proto::ntp::state::{unsynchronised, ServerState, StateSource};
use firehose_proto::ntp::{Interleave, NtpHandler, NtpOptions, RateLimitConfig};
use std::sync::Arc;

#[path = "../../ntpwire/tests/data/captures.rs"]
mod captures;
use captures::*;

/// chronyd's `local stratum 10` state, a second behind `now`.
fn local10(now_ns: u64) -> ServerState {
    ServerState {
        leap: Leap::None,
        stratum: 10,
        refid: firehose_ntpwire::refid::LOCAL,
        reference_ns: now_ns - 1_000_000_000,
        root_delay: Short(0),
        root_dispersion: Short(0),
        synchronised: false,
        source: StateSource::Local,
    }
}

fn handler(state: ServerState, ratelimit: Option<RateLimitConfig>) -> NtpHandler {
    handler_with(state, ratelimit, None)
}

fn handler_with(
    state: ServerState,
    ratelimit: Option<RateLimitConfig>,
    interleaved: Option<Arc<Interleave>>,
) -> NtpHandler {
    NtpHandler::new(
        Live::new(Arc::new(state)),
        &NtpOptions {
            // chronyd's, on the host the captures come from.
            precision: -25,
            ratelimit,
            ratelimit_sources: 1024,
            interleaved,
        },
    )
}

fn now_ns() -> u64 {
    firehose_sys::clock::realtime_ns()
}

const FROM: &str = "192.0.2.10:40123";

/// Runs one request through `h`; the response header, or the verdict if not a reply.
fn ask(h: &mut NtpHandler, req: &[u8], from: &str, rx: Option<u64>) -> Result<Header, Verdict> {
    ask_tagged(h, req, from, rx).map(|(h, _)| h)
}

/// As [`ask`], with the transmit-stamp tag the handler asked for, if any.
fn ask_tagged(
    h: &mut NtpHandler,
    req: &[u8],
    from: &str,
    rx: Option<u64>,
) -> Result<(Header, Option<u64>), Verdict> {
    let mut buf = vec![0u8; 2048];
    buf[..req.len()].copy_from_slice(req);
    let peer = Peer::from_addr(from.parse().unwrap());
    let mut r = Request::new(&mut buf, req.len(), peer).with_rx_time_ns(rx);
    let v = h.handle(&mut r);
    let tag = r.tx_tag();
    match v {
        Verdict::Reply(n) => {
            assert_eq!(
                n, 48,
                "never longer than the request, never more than a header"
            );
            Ok((parse(&buf[..n]).expect("a valid packet").header, tag))
        }
        v => Err(v),
    }
}

/// The fields chronyd fills from its state and the request (not its clock readings).
fn state_fields(h: &Header) -> (Leap, u8, u8, u8, i8, i8, Short, Short, u32, Timestamp) {
    (
        h.leap,
        h.version,
        h.mode,
        h.stratum,
        h.poll,
        h.precision,
        h.root_delay,
        h.root_dispersion,
        h.refid,
        h.origin,
    )
}

#[test]
fn an_unsynchronised_clock_is_answered_field_by_field_as_chronyd_answers() {
    let mut h = handler(unsynchronised(), None);
    let rx = now_ns();
    let ours = ask(&mut h, &bytes(CHRONY_CLIENT), FROM, Some(rx)).unwrap();
    let theirs = Header::read(&bytes(CHRONY_UNSYNC));
    assert_eq!(state_fields(&ours), state_fields(&theirs));
    assert_eq!(
        (ours.reference, theirs.reference),
        (Timestamp::ZERO, Timestamp::ZERO)
    );
    // The receive timestamp is the arrival time handed over, to the precision.
    let rx_back = ours.receive.to_unix_ns(rx);
    assert!((rx_back - rx as i128).abs() < 100, "{rx_back} vs {rx}");
    assert_eq!((ours.receive.0 & 1, ours.transmit.0 & 1), (1, 0));
    assert!(ours.transmit.diff_ns(ours.receive) >= 0);
    assert_eq!(h.stats().get(slot::UNSYNCHRONISED), 1);
    assert_eq!(h.stats().get(slot::RX_KERNEL), 1);
}

#[test]
fn a_local_stratum_is_answered_as_chronyd_answers() {
    let now = now_ns();
    let mut h = handler(local10(now), None);
    let req = bytes(CHRONY_CLIENT);
    let ours = ask(&mut h, &req, FROM, None).unwrap();
    let theirs = Header::read(&bytes(CHRONY_LOCAL));
    assert_eq!(state_fields(&ours), state_fields(&theirs));
    assert_eq!(RefId(ours.refid).display(ours.stratum), "127.127.1.1");
    assert!(ours.receive.diff_ns(ours.reference) > 0);
    assert_eq!(
        h.stats().get(slot::RX_DAEMON),
        1,
        "no arrival stamp: read here"
    );

    // Version 3 gets version 3; symmetric active gets symmetric passive.
    let mut v3 = req.clone();
    v3[0] = 0x1b;
    let ours = ask(&mut h, &v3, FROM, None).unwrap();
    assert_eq!(
        state_fields(&ours),
        state_fields(&Header::read(&bytes(CHRONY_LOCAL_V3)))
    );
    let mut active = req.clone();
    active[0] = 0x21;
    let ours = ask(&mut h, &active, FROM, None).unwrap();
    let theirs = Header::read(&bytes(CHRONY_LOCAL_PASSIVE));
    assert_eq!(state_fields(&ours), state_fields(&theirs));
    assert_eq!(
        (h.stats().get(slot::CLIENT), h.stats().get(slot::SYMMETRIC)),
        (2, 1)
    );

    // ntpdig's request: leap 3 in a request means nothing; answered normally.
    let ours = ask(&mut h, &bytes(NTPDIG), FROM, None).unwrap();
    assert_eq!((ours.leap, ours.mode, ours.stratum), (Leap::None, 4, 10));
    assert_eq!(ours.origin, Timestamp(0xeeb1_af01_2835_b000));
}

#[test]
fn control_and_private_modes_and_non_requests_are_never_answered() {
    let mut h = handler(local10(now_ns()), None);
    let req = bytes(CHRONY_CLIENT);
    for (lvm, counter) in [
        (0x26, slot::DROPPED_CONTROL),
        (0x27, slot::DROPPED_PRIVATE),
        (0x20, slot::DROPPED_MODE),
        (0x22, slot::DROPPED_MODE),
        (0x24, slot::DROPPED_MODE),
        (0x25, slot::DROPPED_MODE),
    ] {
        let mut r = req.clone();
        r[0] = lvm;
        let before = h.stats().get(counter);
        assert_eq!(ask(&mut h, &r, FROM, None), Err(Verdict::Drop), "{lvm:#x}");
        assert_eq!(h.stats().get(counter), before + 1, "{lvm:#x}");
    }
    // ntpq's READVAR is 12 bytes: still counted as a control message.
    let ntpq = [0x16, 0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(ask(&mut h, &ntpq, FROM, None), Err(Verdict::Drop));
    assert_eq!(h.stats().get(slot::DROPPED_CONTROL), 2);
    // An NTPv1 request (mode 0) from a client port is a client request.
    let mut v1 = req.clone();
    v1[0] = 1 << 3;
    assert_eq!(ask(&mut h, &v1, FROM, None).unwrap().mode, 4);
    assert_eq!(ask(&mut h, &v1, "192.0.2.10:123", None), Err(Verdict::Drop));
}

#[test]
fn malformed_and_authenticated_requests_are_counted_not_answered() {
    let mut h = handler(local10(now_ns()), None);
    let req = bytes(CHRONY_CLIENT);
    for bad in [&req[..47], &req[..0], &[0xe3; 50][..]] {
        assert_eq!(ask(&mut h, bad, FROM, None), Err(Verdict::Drop));
    }
    let mut v5 = req.clone();
    v5[0] = 5 << 3 | 3;
    assert_eq!(ask(&mut h, &v5, FROM, None), Err(Verdict::Drop));
    assert_eq!(h.stats().get(slot::DROPPED_MALFORMED), 4);
    // A symmetric-key MAC (key 1, 16-byte digest) and a crypto-NAK: no keys here.
    let mut mac = req.clone();
    mac.extend_from_slice(&[0, 0, 0, 1]);
    mac.extend_from_slice(&[0xaa; 16]);
    assert_eq!(ask(&mut h, &mac, FROM, None), Err(Verdict::Drop));
    let mut nak = req.clone();
    nak.extend_from_slice(&[0; 4]);
    assert_eq!(ask(&mut h, &nak, FROM, None), Err(Verdict::Drop));
    assert_eq!(h.stats().get(slot::DROPPED_AUTH), 2);
    // An NTS request: a Unique Identifier field (type 0x0104, 36 bytes).
    let mut nts = req.clone();
    nts.extend_from_slice(&[0x01, 0x04, 0, 36]);
    nts.extend_from_slice(&[7; 32]);
    assert_eq!(ask(&mut h, &nts, FROM, None), Err(Verdict::Drop));
    assert_eq!(h.stats().get(slot::DROPPED_NTS), 1);
    // Nothing of this was answered.
    assert_eq!(h.stats().get(slot::CLIENT), 0);
}

#[test]
fn a_burst_from_one_source_gets_kiss_of_death_rate() {
    let now = now_ns();
    let rl = RateLimitConfig {
        interval: 3,
        burst: 4,
        leak: 4,
        kod: 1,
    };
    let mut h = handler(local10(now), Some(rl));
    let req = bytes(CHRONY_CLIENT);
    let mut answers = Vec::new();
    for k in 0..200u64 {
        answers.push(ask(&mut h, &req, FROM, Some(now + k * 1000)));
    }
    // The burst is answered normally, with the limit's interval as the least poll.
    for a in &answers[..4] {
        let a = a.as_ref().unwrap();
        assert_eq!((a.leap, a.stratum, a.poll), (Leap::None, 10, 6));
    }
    let kods: Vec<&Header> = answers[4..]
        .iter()
        .filter_map(|a| a.as_ref().ok())
        .filter(|a| a.stratum == 0)
        .collect();
    assert!(
        kods.len() > 40,
        "about half of the limited ones: {}",
        kods.len()
    );
    for k in &kods {
        assert_eq!((k.leap, k.mode), (Leap::Unsynchronised, 4));
        assert_eq!(RefId(k.refid).display(0), "RATE");
        assert_eq!(k.origin, Header::read(&req).transmit);
    }
    let s = h.stats();
    assert_eq!(s.get(slot::KOD_RATE), kods.len() as u64);
    let dropped = answers.iter().filter(|a| a.is_err()).count() as u64;
    assert_eq!(s.get(slot::RATELIMIT_DROPPED), dropped);
    assert!(dropped > 40);
    // Another source is not limited.
    let other = ask(&mut h, &req, "198.51.100.1:5000", Some(now)).unwrap();
    assert_eq!(other.stratum, 10);
}

/// chronyd's client request in interleaved form: version 4, `origin` (one of the server's
/// receive timestamps), its own receive and transmit timestamps.
fn xleave(origin: Timestamp, receive: u64, transmit: u64) -> Vec<u8> {
    let mut r = bytes(CHRONY_CLIENT);
    r[0] = 0x23;
    origin.write(&mut r[24..]);
    Timestamp(receive).write(&mut r[32..]);
    Timestamp(transmit).write(&mut r[40..]);
    r
}

#[test]
fn an_interleaved_request_gets_the_kernels_transmit_time_of_the_answer_it_names() {
    let now = now_ns();
    let table = Arc::new(Interleave::new(64));
    let mut h = handler_with(local10(now), None, Some(table));
    // chronyd's basic request (origin zero): answered as without the table, no stamp asked.
    let (basic, tag) = ask_tagged(&mut h, &bytes(CHRONY_CLIENT), FROM, Some(now)).unwrap();
    assert_eq!(tag, None);
    assert_eq!(basic.origin, Header::read(&bytes(CHRONY_CLIENT)).transmit);
    // A first interleaved request: not found, answered basic, remembered, stamp asked
    // under the receive timestamp sent.
    let odd = Timestamp(0x1234_5678_9abc_def1);
    let (a, tag) = ask_tagged(&mut h, &xleave(odd, 7, 9 << 32), FROM, Some(now)).unwrap();
    assert_eq!(a.origin, Timestamp(9 << 32));
    assert_eq!(tag, Some(a.receive.0));
    // The kernel says it left 3 µs after the server's reading.
    let left = a.transmit.to_unix_ns(now) as u64 + 3_000;
    h.transmitted(a.receive.0, left);
    // The next names it: interleaved, its transmit that time (to the precision, 2^-25 s).
    let (b, tag) = ask_tagged(
        &mut h,
        &xleave(a.receive, 11, 13 << 32),
        FROM,
        Some(now + 1),
    )
    .unwrap();
    assert_eq!(
        b.origin,
        Timestamp(11),
        "origin = the request's receive timestamp"
    );
    assert!(
        (b.transmit.to_unix_ns(now) - i128::from(left)).abs() < 60,
        "{b:?}"
    );
    assert_eq!(tag, Some(b.receive.0));
    assert_eq!((b.receive.0 & 1, b.transmit.0 & 1), (1, 0));
    let fixed = |h: &Header| (h.leap, h.version, h.mode, h.stratum, h.poll, h.refid);
    assert_eq!(fixed(&b), fixed(&a));
    // Once only.
    let (c, _) = ask_tagged(
        &mut h,
        &xleave(a.receive, 11, 15 << 32),
        FROM,
        Some(now + 2),
    )
    .unwrap();
    assert_eq!(c.origin, Timestamp(15 << 32));
    let st = |s| h.stats().get(s);
    assert_eq!(
        (
            st(slot::INTERLEAVED),
            st(slot::INTERLEAVED_MISSED),
            st(slot::TX_KERNEL)
        ),
        (1, 2, 1)
    );
    assert_eq!((st(slot::CLIENT), st(slot::TX_DAEMON)), (4, 3));
}

/// Two requests stamped at one instant (a client's GSO packet is stamped once by the
/// kernel and then split) are two responses: each carries its own receive timestamp, and
/// each follow-up gets the time its own response left. With a shared receive timestamp the
/// first follow-up got the second response's time, later than the first reached the client
/// (a third of interleaved answers under `load --ntp-interleaved` at 400k/s).
#[test]
fn two_requests_with_one_arrival_stamp_get_their_own_interleaved_answers() {
    let now = now_ns();
    let table = Arc::new(Interleave::new(64));
    let mut h = NtpHandler::new(
        Live::new(Arc::new(local10(now))),
        &NtpOptions {
            // No bits below the precision to randomise: one arrival, one receive timestamp.
            precision: -32,
            ratelimit: None,
            ratelimit_sources: 1024,
            interleaved: Some(table),
        },
    );
    let odd = Timestamp(0x1234_5678_9abc_def1);
    let (a, a_tag) = ask_tagged(&mut h, &xleave(odd, 7, 9 << 32), FROM, Some(now)).unwrap();
    let (b, b_tag) = ask_tagged(&mut h, &xleave(odd, 7, 10 << 32), FROM, Some(now)).unwrap();
    assert_ne!(a.receive, b.receive, "{a:?} {b:?}");
    assert_eq!((a_tag, b_tag), (Some(a.receive.0), Some(b.receive.0)));
    assert_eq!(b.receive.0 & 1, 1);
    assert!(
        b.receive.diff_ns(a.receive).abs() < 10,
        "still the arrival time"
    );
    let left = |t: Timestamp, us: u64| t.to_unix_ns(now) as u64 + us * 1_000;
    let (a_left, b_left) = (left(a.transmit, 3), left(b.transmit, 900));
    h.transmitted(a.receive.0, a_left);
    h.transmitted(b.receive.0, b_left);
    for (answer, left, tx) in [(a, a_left, 11u64), (b, b_left, 12)] {
        let (x, _) = ask_tagged(
            &mut h,
            &xleave(answer.receive, 5, tx << 32),
            FROM,
            Some(now + 1_000_000),
        )
        .unwrap();
        assert_eq!(x.origin, Timestamp(5), "interleaved");
        assert!(
            (x.transmit.to_unix_ns(now) - i128::from(left)).abs() < 60,
            "{x:?} for {answer:?}"
        );
    }
}

#[test]
fn kod_and_older_versions_never_touch_the_interleaved_table_and_a_full_one_evicts() {
    let now = now_ns();
    let table = Arc::new(Interleave::new(16));
    let kod = RateLimitConfig {
        interval: 3,
        burst: 1,
        leak: 4,
        kod: 0,
    };
    let mut h = handler_with(local10(now), Some(kod), Some(table.clone()));
    let odd = Timestamp(0x1234_5678_9abc_def1);
    // The first passes the rate limit, some leak; the rest get KoD RATE or nothing, and a
    // KoD asks for no stamp.
    let mut kods = 0;
    for i in 0..20u64 {
        if let Ok((r, tag)) = ask_tagged(&mut h, &xleave(odd, 7, i << 32), FROM, Some(now)) {
            assert_eq!(tag.is_some(), r.stratum != 0, "answer {i}: {r:?}");
            kods += u32::from(r.stratum == 0);
        }
    }
    assert_eq!(u64::from(kods), h.stats().get(slot::KOD_RATE));
    let mut h = handler_with(local10(now), None, Some(table));
    let mut v3 = xleave(odd, 7, 1 << 32);
    v3[0] = 0x1b;
    assert_eq!(ask_tagged(&mut h, &v3, FROM, Some(now)).unwrap().1, None);
    // 16 entries (one per shard): 40 remembered answers forget at least 24.
    for i in 0..40u64 {
        let (_, tag) =
            ask_tagged(&mut h, &xleave(odd, 7, (i + 2) << 32), FROM, Some(now + i)).unwrap();
        assert!(tag.is_some());
    }
    assert!(h.stats().get(slot::INTERLEAVED_EVICTIONS) >= 24);
    assert_eq!(h.stats().get(slot::INTERLEAVED_MISSED), 40);
}
