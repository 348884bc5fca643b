//! The RADIUS handler on packets radclient sent and FreeRADIUS answered
//! (crates/radiuswire/tests/data): the same verdicts and reply attributes, valid
//! authenticators, drops by reason, duplicates from the cache, reloads.

use firehose_engine::{Handler, Peer, Request, Verdict};
use firehose_proto::radius::{counters::NAMES, RadiusHandler, RadiusOptions, Reloader};
use firehose_radiuswire::{attr, attrs, code, parse_request, Header, Secret, HEADER};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

const USERS: &str = r#"alice Cleartext-Password := "alicepw"
      Reply-Message = "Hello, alice",
      Framed-IP-Address = 10.0.0.1,
      Session-Timeout = 3600
carol Cleartext-Password := "carolpw"
      Attr-26.9.1 = 0x666f6f3d626172,
      Attr-26 = 0x00000009010b666f6f3d626172,
      Vendor-9-Attr-1 = 0x783d79
"#;

const CLIENTS: &str = "client lo {\n  ipaddr = 127.0.0.1\n  secret = testing123\n}\n";

fn sample(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../radiuswire/tests/data")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(tag: &str, clients: &str, users: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("fh-radius-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("clients.conf"), clients).unwrap();
        std::fs::write(dir.join("users"), users).unwrap();
        Files { dir }
    }

    fn reloader(&self, require: bool) -> Reloader {
        Reloader::load(
            &self.dir.join("clients.conf"),
            &self.dir.join("users"),
            require,
        )
        .unwrap()
        .0
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn handler(r: &Reloader, require: bool) -> RadiusHandler {
    RadiusHandler::new(
        r.live(),
        &RadiusOptions {
            require_message_authenticator: require,
            ..RadiusOptions::default()
        },
    )
}

const LO: &str = "127.0.0.1:40000";

fn ask(h: &mut RadiusHandler, req: &[u8], from: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 65536];
    buf[..req.len()].copy_from_slice(req);
    let peer = Peer::from_addr(from.parse::<SocketAddr>().unwrap());
    match h.handle(&mut Request::new(&mut buf, req.len(), peer)) {
        Verdict::Reply(n) => Some(buf[..n].to_vec()),
        Verdict::Drop => None,
        Verdict::Error => panic!("handler error"),
    }
}

fn count(h: &RadiusHandler, name: &str) -> u64 {
    assert!(NAMES.contains(&name), "{name}");
    h.counters().iter().find(|(n, _)| *n == name).unwrap().1
}

/// Checks the reply's authenticators for `req` and returns its attributes other than
/// the Message-Authenticator, as (type, value).
fn checked(req: &[u8], resp: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let s = Secret::new(b"testing123");
    let q = Header::parse(req).unwrap();
    let h = Header::parse(resp).unwrap();
    assert_eq!(h.id, q.id);
    assert_eq!(h.length as usize, resp.len());
    assert_eq!(
        h.authenticator,
        s.authenticator(resp, &q.authenticator),
        "Response Authenticator"
    );
    let list: Vec<_> = attrs(resp).map(Result::unwrap).collect();
    if h.code != code::ACCOUNTING_RESPONSE {
        let ma = list[0];
        assert_eq!(ma.typ, attr::MESSAGE_AUTHENTICATOR, "first attribute");
        assert_eq!(
            ma.value,
            s.message_authenticator(resp, ma.offset + 2, &q.authenticator),
            "Message-Authenticator"
        );
    }
    list.iter()
        .filter(|a| a.typ != attr::MESSAGE_AUTHENTICATOR)
        .map(|a| (a.typ, a.value.to_vec()))
        .collect()
}

fn freeradius_attrs(resp: &[u8]) -> Vec<(u8, Vec<u8>)> {
    attrs(resp)
        .map(Result::unwrap)
        .filter(|a| a.typ != attr::MESSAGE_AUTHENTICATOR)
        .map(|a| (a.typ, a.value.to_vec()))
        .collect()
}

#[test]
fn same_verdicts_and_attributes_as_freeradius() {
    let f = Files::new("same", CLIENTS, USERS);
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    for name in ["pap", "pap_ma", "chap_ma", "vsa"] {
        let req = sample(&format!("{name}.req"));
        let theirs = sample(&format!("{name}.resp"));
        let ours = ask(&mut h, &req, LO).unwrap_or_else(|| panic!("{name} dropped"));
        assert_eq!(ours[0], theirs[0], "{name}: code");
        assert_eq!(checked(&req, &ours), freeradius_attrs(&theirs), "{name}");
    }
    // Rejects: FreeRADIUS (without its attr_filter in this capture) sent the reply items;
    // a default FreeRADIUS keeps only Reply-Message, as we do.
    for name in ["bad_pw", "pap_long"] {
        let req = sample(&format!("{name}.req"));
        let ours = ask(&mut h, &req, LO).unwrap();
        assert_eq!(ours[0], code::ACCESS_REJECT, "{name}");
        let kept: Vec<_> = freeradius_attrs(&sample(&format!("{name}.resp")))
            .into_iter()
            .filter(|(t, _)| *t == attr::REPLY_MESSAGE)
            .collect();
        assert_eq!(checked(&req, &ours), kept, "{name}");
    }
    // An Accounting-Response has nothing to choose: byte for byte FreeRADIUS's.
    assert_eq!(
        ask(&mut h, &sample("acct.req"), LO).unwrap(),
        sample("acct.resp")
    );
    assert_eq!(count(&h, "radius_accepts"), 4);
    assert_eq!(count(&h, "radius_rejects_bad_password"), 2);
    assert_eq!(count(&h, "radius_pap"), 5);
    assert_eq!(count(&h, "radius_chap"), 1);
    assert_eq!(count(&h, "radius_accounting_responses"), 1);
}

#[test]
fn message_authenticator_required_by_default() {
    let f = Files::new("ma", CLIENTS, USERS);
    let r = f.reloader(true);
    let mut h = handler(&r, true);
    assert_eq!(ask(&mut h, &sample("pap.req"), LO), None);
    assert_eq!(count(&h, "radius_dropped_missing_message_authenticator"), 1);
    assert!(ask(&mut h, &sample("pap_ma.req"), LO).is_some());
    // A wrong Message-Authenticator is dropped whatever the setting.
    let mut bad = sample("pap_ma.req");
    let at = parse_request(&bad).unwrap().message_authenticator.unwrap();
    bad[at] ^= 0x80;
    // (From another port: from the same one it is a duplicate of the good one.)
    assert_eq!(ask(&mut h, &bad, "127.0.0.1:40009"), None);
    let r2 = f.reloader(false);
    let mut relaxed = handler(&r2, false);
    assert_eq!(ask(&mut relaxed, &bad, LO), None);
    assert_eq!(
        count(&relaxed, "radius_dropped_bad_message_authenticator"),
        1
    );
    assert!(ask(&mut relaxed, &sample("pap.req"), LO).is_some());
    // A client's own require_message_authenticator = yes holds even when relaxed.
    let f = Files::new(
        "ma-client",
        "client lo {\n ipaddr = 127.0.0.1\n secret = testing123\n require_message_authenticator = yes\n}\n",
        USERS,
    );
    let r3 = f.reloader(false);
    let mut h3 = handler(&r3, false);
    assert_eq!(ask(&mut h3, &sample("pap.req"), LO), None);
    // Status-Server needs one always, and is answered with an Access-Accept.
    let st = ask(&mut h3, &sample("status.req"), LO).unwrap();
    assert_eq!(st[0], code::ACCESS_ACCEPT);
    checked(&sample("status.req"), &st);
}

#[test]
fn drops_by_reason_never_an_answer() {
    let f = Files::new("drops", CLIENTS, USERS);
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    assert_eq!(ask(&mut h, &sample("pap_ma.req"), "10.1.2.3:1812"), None);
    assert_eq!(count(&h, "radius_dropped_unknown_client"), 1);
    let req = sample("pap_ma.req");
    // Truncated, a length field past the datagram, an attribute running past the end.
    assert_eq!(ask(&mut h, &req[..19], LO), None);
    assert_eq!(ask(&mut h, &req[..req.len() - 1], LO), None);
    let mut bad = req.clone();
    bad[HEADER + 1] = 200;
    assert_eq!(ask(&mut h, &bad, LO), None);
    assert_eq!(count(&h, "radius_dropped_malformed"), 3);
    // A response sent to the server.
    assert_eq!(ask(&mut h, &sample("pap_ma.resp"), LO), None);
    assert_eq!(count(&h, "radius_dropped_code"), 1);
    // An Accounting-Request whose authenticator does not check.
    let mut acct = sample("acct.req");
    acct[5] ^= 1;
    assert_eq!(ask(&mut h, &acct, LO), None);
    assert_eq!(count(&h, "radius_dropped_bad_authenticator"), 1);
    // Padding past the length field is ignored.
    let mut padded = req.clone();
    padded.extend([0xAA; 7]);
    assert!(ask(&mut h, &padded, LO).is_some());
}

#[test]
fn duplicates_get_the_cached_reply() {
    let f = Files::new("dup", CLIENTS, USERS);
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    let req = sample("pap_ma.req");
    let first = ask(&mut h, &req, LO).unwrap();
    let again = ask(&mut h, &req, LO).unwrap();
    assert_eq!(first, again);
    assert_eq!(count(&h, "radius_duplicates"), 1);
    assert_eq!(count(&h, "radius_access_requests"), 1, "processed once");
    // Another source port is another request.
    assert!(ask(&mut h, &req, "127.0.0.1:40001").is_some());
    assert_eq!(count(&h, "radius_duplicates"), 1);
    // Even after the users file changed and was reloaded, the retransmission gets what
    // the first answer said.
    std::fs::write(f.dir.join("users"), "alice Auth-Type := Reject\n").unwrap();
    let mut r = r;
    let out = r.reload();
    assert!(out.iter().all(|(_, o)| o.is_ok()), "{out:?}");
    assert_eq!(ask(&mut h, &req, LO).unwrap(), first);
    let fresh = ask(&mut h, &req, "127.0.0.1:40002").unwrap();
    assert_eq!(fresh[0], code::ACCESS_REJECT);
    assert_eq!(count(&h, "radius_rejects_auth_type"), 1);
}

#[test]
fn reload_keeps_the_last_good_file() {
    let f = Files::new("reload", CLIENTS, USERS);
    let mut r = f.reloader(false);
    let mut h = handler(&r, false);
    std::fs::write(
        f.dir.join("users"),
        "alice Cleartext-Password := \"x\"\n  Bogus = 1\n",
    )
    .unwrap();
    std::fs::write(
        f.dir.join("clients.conf"),
        "client lo { ipaddr = 127.0.0.0/8 secret = testing123 }\n",
    )
    .unwrap();
    let out = r.reload();
    assert_eq!(out[0].1, Ok(1));
    assert!(
        out[1].1.as_ref().unwrap_err().contains("users:2:"),
        "{out:?}"
    );
    // The old users, the new clients.
    assert_eq!(
        ask(&mut h, &sample("pap_ma.req"), "127.0.0.9:5").unwrap()[0],
        code::ACCESS_ACCEPT
    );
}

#[test]
fn fall_through_and_defaults_merge_as_freeradius_does() {
    let users = "DEFAULT NAS-IP-Address == 127.0.0.1\n  Class = 0x01, Reply-Message = \"nas\", Fall-Through = Yes\n\
                 alice Cleartext-Password := \"alicepw\"\n  Reply-Message = \"alice\", Session-Timeout = 1, Fall-Through = Yes\n\
                 DEFAULT\n  Class := 0x02, Session-Timeout = 9, Idle-Timeout += 7\n";
    let f = Files::new("fall", CLIENTS, users);
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    let req = sample("pap_ma.req");
    let got = checked(&req, &ask(&mut h, &req, LO).unwrap());
    // "alice" is not added (= and a Reply-Message already there), Session-Timeout = 9
    // neither; Class := replaces the first DEFAULT's; += always adds.
    let want: Vec<(u8, Vec<u8>)> = vec![
        (18, b"nas".to_vec()),
        (27, vec![0, 0, 0, 1]),
        (25, vec![2]),
        (28, vec![0, 0, 0, 7]),
    ];
    assert_eq!(got, want);
    // A request without NAS-IP-Address skips the first DEFAULT.
    let req = sample("chap_ma.req");
    let got = checked(&req, &ask(&mut h, &req, LO).unwrap());
    assert_eq!(got[0], (18, b"alice".to_vec()));
}

#[test]
fn unknown_users_and_missing_credentials_are_rejected() {
    let f = Files::new(
        "unknown",
        CLIENTS,
        "bob Cleartext-Password := \"b\"\nalice Auth-Type := Accept\n",
    );
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    // alice has no password but Auth-Type := Accept.
    assert_eq!(
        ask(&mut h, &sample("pap_ma.req"), LO).unwrap()[0],
        code::ACCESS_ACCEPT
    );
    let f = Files::new(
        "unknown2",
        CLIENTS,
        "bob Cleartext-Password := \"b\"\nalice NAS-IP-Address =* ANY\n",
    );
    let r = f.reloader(false);
    let mut h = handler(&r, false);
    assert_eq!(
        ask(&mut h, &sample("vsa.req"), LO).unwrap()[0],
        code::ACCESS_REJECT
    );
    assert_eq!(count(&h, "radius_rejects_unknown_user"), 1);
    assert_eq!(
        ask(&mut h, &sample("pap_ma.req"), LO).unwrap()[0],
        code::ACCESS_REJECT
    );
    assert_eq!(count(&h, "radius_rejects_no_credentials"), 1);
}
