//! The netdev netlink reply parser (`sys::netdev::parse_replies`): `serve --profile latency`
//! reads the kernel's NAPI instances and settings from these bytes, and sets what it reads.
//!
//! Input: two bytes of family number, then a netlink datagram. Whatever it holds, parsing
//! never panics, never reads more messages than 16-byte headers fit in it, and every NAPI
//! read writes back (as the kernel lays it out) to bytes that read as the same NAPI.

use firehose_sys::netdev::{parse_replies, sample_dump, Napi, Reply};

pub fn check(data: &[u8]) {
    let Some((fam, datagram)) = data.split_first_chunk::<2>() else {
        return;
    };
    let family = u16::from_ne_bytes(*fam);
    let replies = parse_replies(datagram, family);
    assert!(replies.len() <= datagram.len() / 16, "{replies:?}");
    for r in replies {
        if let Reply::Napi(n) = r {
            // The pid is not written back (a threaded NAPI's, read only).
            let n = Napi { pid: None, ..n };
            for wide in [false, true] {
                if !wide
                    && [n.gro_flush_timeout_ns, n.irq_suspend_timeout_ns]
                        .iter()
                        .any(|v| v.is_some_and(|v| v > u64::from(u32::MAX)))
                {
                    continue;
                }
                let back =
                    parse_replies(&sample_dump(family, std::slice::from_ref(&n), wide), family);
                assert_eq!(back.first(), Some(&Reply::Napi(n.clone())), "wide {wide}");
            }
        }
    }
}

/// A two-NAPI dump of family 30 (4- and 8-byte timeouts), an error, and cut copies.
pub fn seeds() -> Vec<Vec<u8>> {
    let napi = |id| Napi {
        id,
        ifindex: 4,
        irq: Some(120),
        pid: None,
        defer_hard_irqs: Some(2),
        gro_flush_timeout_ns: Some(200_000),
        irq_suspend_timeout_ns: Some(20_000_000),
    };
    let mut out = Vec::new();
    for wide in [false, true] {
        let mut s = 30u16.to_ne_bytes().to_vec();
        s.extend(sample_dump(30, &[napi(8193), napi(8194)], wide));
        out.push(s[..s.len() / 2].to_vec());
        out.push(s);
    }
    let mut err = 30u16.to_ne_bytes().to_vec();
    err.extend_from_slice(&36u32.to_ne_bytes());
    err.extend_from_slice(&2u16.to_ne_bytes());
    err.extend_from_slice(&[0; 10]);
    err.extend_from_slice(&(-1i32).to_ne_bytes());
    err.extend_from_slice(&[0; 16]);
    out.push(err);
    out
}
