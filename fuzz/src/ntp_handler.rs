//! The NTP parser (`ntpwire::parse`) and the whole NTP handler (`proto::ntp::NtpHandler`):
//! bytes in, a response out, as a worker calls it.
//!
//! Input: one control byte (the rate limit on or off, a kernel arrival stamp or none, the
//! clock state served, the peer's port 123 or not, interleaved mode on or off), then the
//! datagram, sent twice: the second time with the first answer's receive timestamp as its
//! origin (what a client in interleaved mode sends). What must hold: no
//! panic; a packet that parses writes its header back byte for byte; each datagram is one
//! answer or one counted drop; only modes 1, 3 (and NTPv1's 0 from a port other than 123)
//! that parse are answered, never 6 or 7; an answer is the 48-byte header, within the
//! request's length, that parses, in mode 4 (2 for mode 1), with the request's version and
//! its transmit timestamp as origin (its receive timestamp when counted interleaved), a
//! receive timestamp ending in 1 and a transmit timestamp ending in 0; a transmit stamp
//! asked only with interleaved mode on, under the answer's receive timestamp.

use crate::input::Input;
#[path = "../../crates/ntpwire/tests/data/captures.rs"]
mod captures;
use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_ntpwire::packet::mode;
use firehose_ntpwire::{parse, Header, HEADER_LEN};
use firehose_proto::live::Live;
use firehose_proto::ntp::counters::{slot, COUNTERS};
use firehose_proto::ntp::state::unsynchronised;
use firehose_proto::ntp::{
    Interleave, NtpHandler, NtpOptions, RateLimitConfig, ServerState, StateSource,
};
use std::sync::Arc;

/// Slots counting what became of a datagram: exactly one moves per datagram.
const OUTCOMES: [usize; 10] = [
    slot::CLIENT,
    slot::SYMMETRIC,
    slot::KOD_RATE,
    slot::RATELIMIT_DROPPED,
    slot::DROPPED_MALFORMED,
    slot::DROPPED_CONTROL,
    slot::DROPPED_PRIVATE,
    slot::DROPPED_MODE,
    slot::DROPPED_AUTH,
    slot::DROPPED_NTS,
];

fn state(c: u8) -> ServerState {
    if c & 4 != 0 {
        return unsynchronised();
    }
    ServerState {
        leap: firehose_ntpwire::Leap::None,
        stratum: 10,
        refid: firehose_ntpwire::refid::LOCAL,
        reference_ns: 1_700_000_000_000_000_000,
        root_delay: firehose_ntpwire::Short(0),
        root_dispersion: firehose_ntpwire::Short(0),
        synchronised: false,
        source: StateSource::Local,
    }
}

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let c = inp.byte();
    let msg = inp.rest();
    if let Ok(p) = parse(msg) {
        assert_eq!(p.len, msg.len());
        let mut out = [0u8; HEADER_LEN];
        Header::read(msg).write(&mut out);
        assert_eq!(
            &out[..],
            &msg[..HEADER_LEN],
            "the header writes back byte for byte"
        );
    }
    let ratelimit = (c & 1 != 0).then_some(RateLimitConfig {
        interval: 3,
        burst: 1,
        leak: 1,
        kod: 1,
    });
    let mut h = NtpHandler::new(
        Live::new(Arc::new(state(c))),
        &NtpOptions {
            precision: -20,
            ratelimit,
            ratelimit_sources: 16,
            interleaved: (c & 16 != 0).then(|| Arc::new(Interleave::new(4))),
        },
    );
    let from = if c & 8 != 0 {
        "192.0.2.1:123"
    } else {
        "[2001:db8::1]:40000"
    };
    let stamp = (c & 2 != 0).then_some(1_700_000_000_123_456_789u64);
    // Twice: the second may be rate limited, or answered interleaved.
    let mut next = msg.to_vec();
    for _ in 0..2 {
        let mut buf = next.clone();
        buf.resize(msg.len().max(64), 0);
        let before: Vec<u64> = (0..COUNTERS).map(|s| h.stats().get(s)).collect();
        let mut req = Request::new(&mut buf, msg.len(), Peer::from_addr(from.parse().unwrap()))
            .with_rx_time_ns(stamp);
        let v = h.handle(&mut req);
        let tag = req.tx_tag();
        let d = |s: usize| h.stats().get(s) - before[s];
        let moved: u64 = OUTCOMES.iter().map(|&s| d(s)).sum();
        assert_eq!(moved, 1, "one answer or one counted drop per datagram");
        let n = match v {
            Verdict::Reply(n) => n,
            Verdict::Drop => {
                assert_eq!(tag, None, "a stamp asked for no answer");
                continue;
            }
            Verdict::Error => panic!("the NTP handler never reports an error"),
        };
        assert!(
            n == HEADER_LEN && n <= msg.len(),
            "answer of {n} bytes to {}",
            msg.len()
        );
        let q = parse(&next)
            .expect("only a packet that parses is answered")
            .header;
        let r = parse(&buf[..n]).expect("the answer parses").header;
        assert!(
            !matches!(q.mode, mode::CONTROL | mode::PRIVATE),
            "mode {} answered",
            q.mode
        );
        let want = match q.mode {
            mode::SYMMETRIC_ACTIVE => mode::SYMMETRIC_PASSIVE,
            mode::CLIENT => mode::SERVER,
            mode::RESERVED if q.version == 1 && c & 8 == 0 => mode::SERVER,
            m => panic!("mode {m} (version {}) answered", q.version),
        };
        let origin = match d(slot::INTERLEAVED) {
            0 => q.transmit,
            _ => q.receive,
        };
        assert_eq!((r.mode, r.version, r.origin), (want, q.version, origin));
        assert_eq!((r.receive.0 & 1, r.transmit.0 & 1), (1, 0));
        if let Some(t) = tag {
            assert!(
                c & 16 != 0,
                "a transmit stamp asked with interleaved mode off"
            );
            assert_eq!(
                t, r.receive.0,
                "the stamp is tagged with the receive timestamp sent"
            );
            h.transmitted(t, firehose_sys::clock::realtime_ns());
        }
        next[24..32].copy_from_slice(&r.receive.0.to_be_bytes());
    }
}

/// chronyd's and ntpdig's captured requests under every control byte, and the ones the
/// handler must refuse: modes 6 and 7, an NTS request, a MAC, short and long ones.
pub fn seeds() -> Vec<Vec<u8>> {
    let chrony = captures::bytes(captures::CHRONY_CLIENT);
    let ntpdig = captures::bytes(captures::NTPDIG);
    let mut reqs = vec![chrony.clone(), ntpdig];
    for lvm in [0x21u8, 0x1b, 0x08, 0x26, 0x27, 0x24, 0x2b] {
        let mut r = chrony.clone();
        r[0] = lvm;
        reqs.push(r);
    }
    let mut nts = chrony.clone();
    nts.extend([0x01, 0x04, 0, 36]);
    nts.extend([7; 32]);
    reqs.push(nts);
    let mut mac = chrony.clone();
    mac.extend([0, 0, 0, 1]);
    mac.extend([0xaa; 16]);
    reqs.push(mac);
    reqs.push(chrony[..47].to_vec());
    // A client in interleaved mode: its origin one of our receive timestamps (odd), its
    // receive timestamp apart from its transmit.
    let mut xleave = chrony.clone();
    xleave[0] = 0x23;
    xleave[24..32].copy_from_slice(&0xe9a1_0000_1234_5679u64.to_be_bytes());
    xleave[32..40].copy_from_slice(&0xe9a1_0000_2000_0000u64.to_be_bytes());
    reqs.push(xleave);
    reqs.push(vec![0x16, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut out = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        for c in [0u8, 3, 6, 8, 15, 16, 18, 31] {
            out.push([&[c ^ (i as u8 & 1)][..], r].concat());
        }
    }
    out
}
