//! RADIUS request parsing (`radiuswire::parse_request` and the attribute walk): every
//! datagram a RADIUS server receives goes through it first.
//!
//! Input: a datagram. What must hold: no panic; a request that parses has its header
//! length within the datagram, every span it points at inside the packet and on an
//! attribute of its type, the lengths RFC 2865 fixes, and as many Proxy-States as the walk
//! finds; it parses exactly when the header and every attribute are well formed; a hidden
//! User-Password unhides to at most its length and hides back to the same clear text.

use firehose_radiuswire::{
    attr, attrs, parse_request, Header, Malformed, Secret, AUTH_LEN, HEADER, MAX_PASSWORD,
};

pub fn check(data: &[u8]) {
    let parsed = parse_request(data);
    let header = Header::parse(data);
    let Ok(h) = header else {
        assert_eq!(
            parsed.map(|_| ()),
            header.map(|_| ()),
            "a bad header fails alike"
        );
        return;
    };
    let len = h.length as usize;
    assert!((HEADER..=data.len()).contains(&len));
    let packet = &data[..len];
    // The walk: attributes tile the packet after the header, or it ends with an error.
    let mut at = HEADER;
    let mut walk_ok = true;
    let mut proxy_states = 0;
    for a in attrs(packet) {
        match a {
            Ok(a) => {
                assert_eq!(a.offset, at, "attributes are contiguous");
                assert_eq!(packet[at], a.typ);
                assert_eq!(packet[at + 1] as usize, a.value.len() + 2);
                at += a.value.len() + 2;
                proxy_states += u16::from(a.typ == attr::PROXY_STATE);
            }
            Err(Malformed::Attribute(off)) => {
                assert_eq!(off, at, "the error names the bad attribute");
                walk_ok = false;
            }
            Err(e) => panic!("the walk reports only bad attribute lengths: {e}"),
        }
    }
    if walk_ok {
        assert_eq!(at, len, "the walk covers the packet");
    }
    let r = match parsed {
        Ok(r) => r,
        Err(Malformed::AttributeLength { typ, at }) => {
            assert!(matches!(
                typ,
                attr::USER_PASSWORD | attr::CHAP_PASSWORD | attr::MESSAGE_AUTHENTICATOR
            ));
            assert_eq!(packet[at], typ);
            return;
        }
        Err(e) => {
            assert!(!walk_ok, "{e} on a packet whose walk was clean");
            return;
        }
    };
    assert!(walk_ok, "a request parses only if every attribute does");
    assert_eq!(r.header, h);
    assert_eq!(r.proxy_states, proxy_states);
    let on = |span: Option<firehose_radiuswire::Span>, typ: u8| {
        if let Some(s) = span {
            let (a, n) = (s.at as usize, s.len as usize);
            assert!(a >= HEADER + 2 && a + n <= len, "span inside the packet");
            assert_eq!(packet[a - 2], typ, "span on an attribute of its type");
            assert_eq!(packet[a - 1] as usize, n + 2);
        }
    };
    on(r.user_name, attr::USER_NAME);
    on(r.user_password, attr::USER_PASSWORD);
    on(r.chap_password, attr::CHAP_PASSWORD);
    on(r.chap_challenge, attr::CHAP_CHALLENGE);
    if let Some(s) = r.user_password {
        assert!(s.len % 16 == 0 && (16..=128).contains(&s.len));
    }
    if let Some(s) = r.chap_password {
        assert_eq!(s.len, 17);
    }
    if let Some(m) = r.message_authenticator {
        assert!(m + AUTH_LEN <= len);
        assert_eq!(packet[m - 2], attr::MESSAGE_AUTHENTICATOR);
        assert_eq!(packet[m - 1] as usize, AUTH_LEN + 2);
    }
    if let Some(s) = r.user_password {
        let secret = Secret::new(b"testing123");
        let mut clear = [0u8; MAX_PASSWORD];
        let n = secret
            .unhide_password(&h.authenticator, s.of(packet), &mut clear)
            .expect("a User-Password of a valid length unhides");
        assert!(n <= s.len as usize);
        let mut hidden = [0u8; MAX_PASSWORD];
        let m = secret
            .hide_password(&h.authenticator, &clear[..n], &mut hidden)
            .expect("what unhid hides again");
        let mut again = [0u8; MAX_PASSWORD];
        let k = secret
            .unhide_password(&h.authenticator, &hidden[..m], &mut again)
            .expect("and unhides");
        assert_eq!(again[..k], clear[..n], "hide then unhide is the clear text");
    }
}

/// The packets radclient sent in crates/radiuswire/tests/data, and a few cut or bent.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = SAMPLES.iter().map(|s| s.to_vec()).collect();
    for s in SAMPLES {
        out.push(s[..s.len() - 1].to_vec());
        let mut padded = s.to_vec();
        padded.extend([0xAA; 5]);
        out.push(padded);
    }
    out
}

/// The requests of crates/radiuswire/tests/data.
pub const SAMPLES: [&[u8]; 8] = [
    include_bytes!("../../crates/radiuswire/tests/data/pap.req"),
    include_bytes!("../../crates/radiuswire/tests/data/pap_ma.req"),
    include_bytes!("../../crates/radiuswire/tests/data/pap_long.req"),
    include_bytes!("../../crates/radiuswire/tests/data/bad_pw.req"),
    include_bytes!("../../crates/radiuswire/tests/data/chap_ma.req"),
    include_bytes!("../../crates/radiuswire/tests/data/vsa.req"),
    include_bytes!("../../crates/radiuswire/tests/data/acct.req"),
    include_bytes!("../../crates/radiuswire/tests/data/status.req"),
];
