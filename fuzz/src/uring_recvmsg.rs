//! What the kernel writes into an io_uring provided buffer for each datagram of a multishot
//! receive (`sys::uring::recvmsg::parse`: the `io_uring_recvmsg_out` header, the name, the
//! control messages, the payload) and the control messages in it (`sys::cmsg::walk`,
//! `sys::timestamping::rx_stamp`: the arrival stamp NTP answers with).
//!
//! Input: two control bytes (the name room, 0 to 127, and the control room, 0 to 255 in
//! steps of 2), then the buffer. What must hold: no panic; the name and the control bytes
//! within their rooms and inside the buffer, where the layout puts them; the payload length
//! within what follows the rooms; every control message's value inside the control bytes;
//! a stamp only from a SOL_SOCKET SCM_TIMESTAMPNS or SCM_TIMESTAMPING message, equal to
//! its first timespec.

use firehose_sys::cmsg::walk;
use firehose_sys::uring::recvmsg::{parse, RecvmsgOut, OUT_HDR};

pub fn check(data: &[u8]) {
    let [a, b, buf @ ..] = data else {
        return;
    };
    let (name_room, control_room) = (usize::from(*a & 127), usize::from(*b) * 2);
    let r = parse(buf, name_room, control_room);
    let inside = |s: &[u8], at: usize| {
        s.is_empty()
            || (s.as_ptr() as usize == buf.as_ptr() as usize + at && at + s.len() <= buf.len())
    };
    assert!(r.name.len() <= name_room && inside(r.name, OUT_HDR));
    assert!(r.control.len() <= control_room && inside(r.control, OUT_HDR + name_room));
    let at = RecvmsgOut::payload_at(name_room, control_room);
    assert!(r.len <= buf.len().saturating_sub(at) && r.len <= r.full_len);
    let (lo, hi) = (
        r.control.as_ptr() as usize,
        r.control.as_ptr() as usize + r.control.len(),
    );
    let mut first = None;
    for c in walk(r.control) {
        let p = c.data.as_ptr() as usize;
        assert!(c.data.is_empty() || (p >= lo && p + c.data.len() <= hi));
        let stamp = c.level == libc::SOL_SOCKET
            && (c.ty == libc::SCM_TIMESTAMPNS || c.ty == libc::SCM_TIMESTAMPING);
        if stamp && first.is_none() {
            first = Some(c);
        }
    }
    match r.rx_stamp() {
        None => {}
        Some(t) => {
            let c = first.expect("a stamp comes from a timestamp message");
            let (sec, nsec) = (c.read_at::<i64>(0).unwrap(), c.read_at::<i64>(8).unwrap());
            assert_eq!(
                i128::from(t),
                i128::from(sec) * 1_000_000_000 + i128::from(nsec)
            );
        }
    }
}

/// A buffer as the kernel fills it: a datagram from 127.0.0.1:4242 with an SCM_TIMESTAMPNS
/// stamp (room 28 and 64, as `serve --io uring` reserves them, halved for the byte), one
/// with SCM_TIMESTAMPING, one without control messages, and one cut short.
pub fn seeds() -> Vec<Vec<u8>> {
    let buffer = |ty: i32, ts_len: usize| {
        let mut b = vec![28u8, 32];
        let ctrl = if ts_len == 0 { 0 } else { 16 + ts_len };
        for w in [16u32, ctrl as u32, 5, 0] {
            b.extend_from_slice(&w.to_ne_bytes());
        }
        let mut name = vec![2, 0, 0x10, 0x92, 127, 0, 0, 1];
        name.resize(28, 0);
        b.extend_from_slice(&name);
        let mut c = Vec::new();
        if ts_len > 0 {
            c.extend_from_slice(&(ctrl as u64).to_ne_bytes());
            c.extend_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
            c.extend_from_slice(&ty.to_ne_bytes());
            c.extend_from_slice(&1_764_122_400i64.to_ne_bytes());
            c.extend_from_slice(&123_456_789i64.to_ne_bytes());
            c.resize(ctrl, 0);
        }
        c.resize(64, 0);
        b.extend_from_slice(&c);
        b.extend_from_slice(b"hello");
        b
    };
    let whole = buffer(libc::SCM_TIMESTAMPNS, 16);
    vec![
        whole.clone(),
        buffer(libc::SCM_TIMESTAMPING, 48),
        buffer(0, 0),
        whole[..40].to_vec(),
    ]
}
