//! The wire format checked on packets radclient and FreeRADIUS exchanged (tests/data).

use firehose_radiuswire::{
    attrs, chap_response, code, parse_request, Header, Secret, AUTH_LEN, HEADER,
};

fn sample(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn secret() -> Secret {
    Secret::new(b"testing123")
}

fn password_of(req: &[u8]) -> Vec<u8> {
    let r = parse_request(req).unwrap();
    let mut out = [0u8; 128];
    let n = secret()
        .unhide_password(
            &r.header.authenticator,
            r.user_password.unwrap().of(req),
            &mut out,
        )
        .unwrap();
    out[..n].to_vec()
}

#[test]
fn pap_passwords_come_back() {
    assert_eq!(password_of(&sample("pap.req")), b"alicepw");
    assert_eq!(password_of(&sample("pap_ma.req")), b"alicepw");
    assert_eq!(password_of(&sample("bad_pw.req")), b"wrong");
    assert_eq!(
        password_of(&sample("pap_long.req")),
        b"a-much-longer-password-of-40-bytes-xxxxx"
    );
}

#[test]
fn message_authenticators_verify_and_a_flipped_bit_does_not() {
    for name in [
        "pap_ma.req",
        "chap_ma.req",
        "bad_pw.req",
        "vsa.req",
        "status.req",
    ] {
        let req = sample(name);
        let r = parse_request(&req).unwrap();
        let at = r.message_authenticator.unwrap_or_else(|| panic!("{name}"));
        let want = secret().message_authenticator(&req, at, &r.header.authenticator);
        assert_eq!(&req[at..at + AUTH_LEN], &want, "{name}");
        let mut bad = req.clone();
        *bad.last_mut().unwrap() ^= 1;
        if at + AUTH_LEN != bad.len() {
            assert_ne!(
                &bad[at..at + AUTH_LEN],
                &secret().message_authenticator(&bad, at, &r.header.authenticator),
                "{name}"
            );
        }
        assert_ne!(
            &req[at..at + AUTH_LEN],
            &Secret::new(b"testing124").message_authenticator(&req, at, &r.header.authenticator)
        );
    }
    assert_eq!(
        parse_request(&sample("pap.req"))
            .unwrap()
            .message_authenticator,
        None
    );
}

#[test]
fn chap_response_uses_the_request_authenticator_as_challenge() {
    let req = sample("chap_ma.req");
    let r = parse_request(&req).unwrap();
    let chap = r.chap_password.unwrap().of(&req);
    assert_eq!(r.chap_challenge, None);
    assert_eq!(
        chap_response(chap[0], b"alicepw", &r.header.authenticator),
        chap[1..]
    );
    assert_ne!(
        chap_response(chap[0], b"alicepX", &r.header.authenticator),
        chap[1..]
    );
}

#[test]
fn response_authenticators_of_freeradius_replies() {
    for name in [
        "pap", "pap_ma", "chap_ma", "bad_pw", "pap_long", "vsa", "acct",
    ] {
        let req = sample(&format!("{name}.req"));
        let resp = sample(&format!("{name}.resp"));
        let q = Header::parse(&req).unwrap();
        let h = Header::parse(&resp).unwrap();
        assert_eq!(h.id, q.id, "{name}");
        assert_eq!(
            h.authenticator,
            secret().authenticator(&resp, &q.authenticator),
            "{name}"
        );
        assert!(attrs(&resp).all(|a| a.is_ok()), "{name}");
    }
    assert_eq!(sample("bad_pw.resp")[0], code::ACCESS_REJECT);
    assert_eq!(sample("vsa.resp")[0], code::ACCESS_ACCEPT);
}

#[test]
fn accounting_request_authenticator() {
    let req = sample("acct.req");
    let h = Header::parse(&req).unwrap();
    assert_eq!(h.code, code::ACCOUNTING_REQUEST);
    assert_eq!(
        h.authenticator,
        secret().authenticator(&req, &[0; AUTH_LEN])
    );
    let mut bad = req.clone();
    bad[HEADER + 3] ^= 1;
    assert_ne!(
        h.authenticator,
        secret().authenticator(&bad, &[0; AUTH_LEN])
    );
}

#[test]
fn hiding_reproduces_radclient_bytes() {
    // With radclient's authenticator, our hiding gives radclient's bytes.
    let req = sample("pap_long.req");
    let r = parse_request(&req).unwrap();
    let mut out = [0u8; 128];
    let n = secret()
        .hide_password(
            &r.header.authenticator,
            b"a-much-longer-password-of-40-bytes-xxxxx",
            &mut out,
        )
        .unwrap();
    assert_eq!(&out[..n], r.user_password.unwrap().of(&req));
}
