//! The whole RADIUS handler (`proto::radius::RadiusHandler`): bytes in, a response out, as
//! a worker calls it, over a users file with every kind of entry.
//!
//! Input: two control bytes (the reply capacity, duplicate detection on or off, whether
//! the server requires a Message-Authenticator; the peer; whether to sign the request and
//! to send it twice), then the datagram. Signing hides the User-Password (its bytes taken
//! as clear text) and fills in the Message-Authenticator and an Accounting-Request's
//! authenticator with the client's secret, so the fuzzer reaches the decisions behind
//! the checks. What must hold: no panic; each datagram is one request, one duplicate or
//! one counted drop; a reply within the buffer and 4096 bytes, with the request's id, the
//! code its request asks for, a Response Authenticator and a first Message-Authenticator
//! that check with the client's secret, and the request's Proxy-States last, in order;
//! an Access-Request answered is one accept or one reject by reason; a request signed
//! with the right secret never dropped as badly signed; the same datagram again gets the
//! same answer.

use crate::input::Input;
use firehose_engine::{Handler, Peer, Request as EngineRequest, Verdict};
use firehose_proto::radius::counters::{slot, NAMES};
use firehose_proto::radius::{LiveDb, RadiusDb, RadiusHandler, RadiusOptions};
use firehose_radiuswire::{
    attr, attrs, clients, code, parse_request, users, Header, Secret, AUTH_LEN, HEADER, MAX_PACKET,
    MAX_PASSWORD,
};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The clients: loopback (v4 and v6), a network that must send Message-Authenticators.
pub const CLIENTS: &str = "client lo {\n  ipaddr = 127.0.0.1\n  secret = testing123\n}\n\
client net {\n  ipaddr = 10.0.0.0/8\n  secret = s2\n  require_message_authenticator = yes\n}\n\
client v6 {\n  ipv6addr = ::1\n  secret = testing123\n}\n";

/// Users of every kind: fall-through DEFAULTs with comparisons, vendor attributes,
/// Auth-Type Accept and Reject, a user without a password, a reply too big to send.
pub const USERS: &str = r#"DEFAULT NAS-IP-Address == 127.0.0.1
      Class = 0x01, Reply-Message = "nas", Fall-Through = Yes
alice Cleartext-Password := "alicepw"
      Reply-Message = "Hello, alice",
      Framed-IP-Address = 10.0.0.1,
      Session-Timeout = 3600,
      Fall-Through = Yes
carol Cleartext-Password := "carolpw"
      Attr-26.9.1 = 0x666f6f3d626172,
      Attr-26 = 0x00000009010b666f6f3d626172,
      Vendor-9-Attr-1 = 0x783d79
bob Auth-Type := Reject
      Reply-Message = "no"
dave Auth-Type := Accept
eve Service-Type == Framed-User, Cleartext-Password := "evepw"
      Class := 0x02
frank NAS-IP-Address =* ANY
      Reply-Message = "no password"
DEFAULT User-Name == "big", Cleartext-Password := "big"
      Fall-Through = Yes
"#;

/// The last entry: a DEFAULT for requests naming their NAS (others find no entry).
const LAST: &str =
    "DEFAULT NAS-IP-Address =* ANY\n      Class := 0x02, Session-Timeout = 9, Idle-Timeout += 7\n";

/// The users file with "big"'s reply over 4096 bytes, then [`LAST`].
fn users_text() -> String {
    let long = "x".repeat(250);
    let mut t = USERS.to_string();
    t.push_str("big Cleartext-Password := \"big\"\n");
    for i in 0..18 {
        let sep = if i < 17 { "," } else { "" };
        t.push_str(&format!("      Reply-Message += \"{long}\"{sep}\n"));
    }
    t.push_str(LAST);
    t
}

fn live() -> Arc<LiveDb> {
    static L: OnceLock<Arc<LiveDb>> = OnceLock::new();
    L.get_or_init(|| {
        let c = clients::parse(CLIENTS, "clients.conf").expect("the fuzz clients parse");
        let u = users::parse(&users_text(), "users").expect("the fuzz users parse");
        LiveDb::new(Arc::new(RadiusDb {
            clients: firehose_proto::radius::db::Clients::build(&c, false),
            users: firehose_proto::radius::db::Users::build(&u),
        }))
    })
    .clone()
}

/// Capacities: the request's own length plus a little (the check adds it), an MTU-sized
/// datagram, what is left of an AF_XDP frame, the socket path's 64 KiB.
const CAPACITY: [usize; 8] = [0, 20, 38, 64, 1472, 2048 - 256 - 42, 4096, 65536];

/// Peers: (address, its client's secret, whether that client needs a
/// Message-Authenticator); the last is no client.
const PEERS: [(&str, &[u8], bool); 4] = [
    ("127.0.0.1:40000", b"testing123", false),
    ("10.1.2.3:1645", b"s2", true),
    ("[::1]:40000", b"testing123", false),
    ("192.0.2.1:1812", b"testing123", false),
];

pub fn check(data: &[u8]) {
    let mut inp = Input::new(data);
    let (a, b) = (inp.byte(), inp.byte());
    let mut msg = inp.rest().to_vec();
    let (addr, secret, client_requires) = PEERS[b as usize & 3];
    let secret = Secret::new(secret);
    let signed = b & 4 != 0 && sign(&mut msg, &secret);
    let require = a & 0x10 != 0;
    let opts = RadiusOptions {
        require_message_authenticator: require,
        dup_entries: if a & 0x08 != 0 { 0 } else { 8 },
        dup_window: Duration::from_secs(3600),
    };
    let mut h = RadiusHandler::new(live(), &opts);
    let extra = CAPACITY[a as usize & 7];
    let cap = if extra < 1000 {
        msg.len() + extra
    } else {
        extra.max(msg.len())
    };
    let peer: SocketAddr = addr.parse().expect("a peer address");
    let first = answer(&mut h, &msg, cap, peer, &secret);
    if signed && first.is_none() {
        let s = h.stats();
        for bad in [
            slot::DROPPED_BAD_AUTHENTICATOR,
            slot::DROPPED_BAD_MESSAGE_AUTHENTICATOR,
        ] {
            assert_eq!(
                s.get(bad),
                0,
                "a well-signed request dropped as {}",
                NAMES[bad]
            );
        }
        // RFC 5997: a Status-Server always needs one.
        let status = msg.first() == Some(&code::STATUS_SERVER);
        if !(require || client_requires || status) {
            assert_eq!(s.get(slot::DROPPED_MISSING_MESSAGE_AUTHENTICATOR), 0);
        }
    }
    if b & 8 != 0 {
        let again = answer(&mut h, &msg, cap, peer, &secret);
        assert_eq!(first, again, "the same datagram again, the same answer");
        if first.is_some() && opts.dup_entries > 0 {
            assert_eq!(
                h.stats().get(slot::DUPLICATES),
                1,
                "answered from the cache"
            );
        }
    }
}

/// Counters a datagram ends in: exactly one of these moves.
const OUTCOMES: [usize; 10] = [
    slot::ACCESS_REQUESTS,
    slot::ACCOUNTING_REQUESTS,
    slot::STATUS_SERVER,
    slot::DUPLICATES,
    slot::DROPPED_MALFORMED,
    slot::DROPPED_UNKNOWN_CLIENT,
    slot::DROPPED_CODE,
    slot::DROPPED_MISSING_MESSAGE_AUTHENTICATOR,
    slot::DROPPED_BAD_MESSAGE_AUTHENTICATOR,
    slot::DROPPED_BAD_AUTHENTICATOR,
];

const REJECTS: [usize; 4] = [
    slot::REJECTS_UNKNOWN_USER,
    slot::REJECTS_BAD_PASSWORD,
    slot::REJECTS_NO_CREDENTIALS,
    slot::REJECTS_AUTH_TYPE,
];

/// Answers `msg` in a buffer of `cap` bytes from `peer`; checks the reply against
/// `secret` and the counters, and returns the reply.
pub fn answer(
    h: &mut RadiusHandler,
    msg: &[u8],
    cap: usize,
    peer: SocketAddr,
    secret: &Secret,
) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; cap];
    buf[..msg.len()].copy_from_slice(msg);
    let before = h.stats().clone();
    let v = h.handle(&mut EngineRequest::new(
        &mut buf,
        msg.len(),
        Peer::from_addr(peer),
    ));
    let after = h.stats();
    let d = |s: usize| after.get(s) - before.get(s);
    let outcomes: u64 = OUTCOMES.iter().map(|&s| d(s)).sum();
    assert_eq!(
        outcomes, 1,
        "one request, duplicate or counted drop per datagram"
    );
    let n = match v {
        Verdict::Reply(n) => n,
        Verdict::Drop => {
            let drops: u64 = (slot::DROPPED_MALFORMED..=slot::DROPPED_TOO_BIG)
                .map(d)
                .sum();
            assert_eq!(drops, 1, "a drop is counted by its reason");
            return None;
        }
        Verdict::Error => panic!("the RADIUS handler never reports an error"),
    };
    assert_eq!(d(slot::DROPPED_TOO_BIG), 0);
    assert!(
        n <= cap && n <= MAX_PACKET,
        "reply of {n} bytes, buffer {cap}"
    );
    let resp = &buf[..n];
    let req = parse_request(msg).expect("only a well-formed request is answered");
    let rh = Header::parse(resp).expect("the reply has a header");
    assert_eq!(
        rh.length as usize, n,
        "the length field is the reply's length"
    );
    assert_eq!(rh.id, req.header.id, "id echoed");
    let want = match req.header.code {
        code::ACCOUNTING_REQUEST => vec![code::ACCOUNTING_RESPONSE],
        code::STATUS_SERVER => vec![code::ACCESS_ACCEPT],
        code::ACCESS_REQUEST => vec![code::ACCESS_ACCEPT, code::ACCESS_REJECT],
        c => panic!("code {c} answered"),
    };
    assert!(
        want.contains(&rh.code),
        "code {} for {}",
        rh.code,
        req.header.code
    );
    let ra = &req.header.authenticator;
    assert_eq!(
        rh.authenticator,
        secret.authenticator(resp, ra),
        "Response Authenticator"
    );
    let list: Vec<_> = attrs(resp)
        .collect::<Result<_, _>>()
        .expect("the reply's attributes walk");
    if rh.code != code::ACCOUNTING_RESPONSE {
        let ma = list.first().expect("a Message-Authenticator");
        assert_eq!(ma.typ, attr::MESSAGE_AUTHENTICATOR, "first attribute");
        assert_eq!(
            ma.value,
            secret.message_authenticator(resp, ma.offset + 2, ra),
            "Message-Authenticator"
        );
    }
    let sent: Vec<_> = attrs(&msg[..req.header.length as usize])
        .flatten()
        .filter(|a| a.typ == attr::PROXY_STATE)
        .map(|a| a.value)
        .collect();
    let back: Vec<_> = list[list.len() - sent.len()..]
        .iter()
        .map(|a| (a.typ, a.value))
        .collect();
    let sent: Vec<_> = sent.into_iter().map(|v| (attr::PROXY_STATE, v)).collect();
    assert_eq!(back, sent, "the Proxy-States last, in order");
    if d(slot::DUPLICATES) == 0 && req.header.code == code::ACCESS_REQUEST {
        let rejects: u64 = REJECTS.iter().map(|&s| d(s)).sum();
        let accepts = d(slot::ACCEPTS);
        assert_eq!(accepts + rejects, 1, "one verdict");
        assert_eq!(accepts == 1, rh.code == code::ACCESS_ACCEPT);
    }
    Some(resp.to_vec())
}

/// Signs `msg` as a client holding `secret` would: hides the User-Password (its bytes up
/// to the first NUL taken as clear text), fills in the Message-Authenticator and, for an
/// Accounting-Request, the Request Authenticator. False when it does not parse.
pub fn sign(msg: &mut [u8], secret: &Secret) -> bool {
    let Ok(r) = parse_request(msg) else {
        return false;
    };
    let len = r.header.length as usize;
    let accounting = r.header.code == code::ACCOUNTING_REQUEST;
    let auth = if accounting {
        [0; AUTH_LEN]
    } else {
        r.header.authenticator
    };
    if let Some(p) = r.user_password {
        let (at, n) = (p.at as usize, p.len as usize);
        let mut clear = [0u8; MAX_PASSWORD];
        let v = &msg[at..at + n];
        let k = v.iter().position(|&c| c == 0).unwrap_or(n);
        clear[..k].copy_from_slice(&v[..k]);
        let mut hidden = [0u8; MAX_PASSWORD];
        let m = secret
            .hide_password(&r.header.authenticator, &clear[..n], &mut hidden)
            .expect("a valid User-Password length");
        msg[at..at + m].copy_from_slice(&hidden[..m]);
    }
    if let Some(at) = r.message_authenticator {
        let ma = secret.message_authenticator(&msg[..len], at, &auth);
        msg[at..at + AUTH_LEN].copy_from_slice(&ma);
    }
    if accounting {
        let a = secret.authenticator(&msg[..len], &[0; AUTH_LEN]);
        msg[4..HEADER].copy_from_slice(&a);
    }
    true
}

/// The samples from every peer, signed or not, sent once or twice, in every capacity;
/// and the users of the file each asked with PAP and a Message-Authenticator.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, s) in crate::radius_request::SAMPLES.iter().enumerate() {
        for b in [0u8, 1, 2, 3, 4, 8, 12] {
            let a = [0x07u8, 0x0e, 0x16, 0x01, 0x04, 0x1f][(i + b as usize) % 6];
            out.push([&[a, b][..], s].concat());
        }
    }
    for (i, user) in [
        "alice", "carol", "bob", "dave", "eve", "frank", "big", "nobody", "alice",
    ]
    .iter()
    .enumerate()
    {
        let pw = format!("{user}pw");
        out.push(
            [
                &[7, 4 + (i as u8 & 1) * 8][..],
                &request(user.as_bytes(), pw.as_bytes(), i as u8),
            ]
            .concat(),
        );
    }
    out
}

/// An Access-Request for `user` with a clear User-Password (signing hides it), a
/// Message-Authenticator, a Proxy-State and, for an even `id`, NAS-IP-Address 127.0.0.1.
pub fn request(user: &[u8], pw: &[u8], id: u8) -> Vec<u8> {
    let mut p = vec![code::ACCESS_REQUEST, id, 0, 0];
    p.extend([id ^ 0x5a; AUTH_LEN]);
    p.extend([attr::MESSAGE_AUTHENTICATOR, 18]);
    p.extend([0; AUTH_LEN]);
    p.extend([attr::USER_NAME, 2 + user.len() as u8]);
    p.extend(user);
    let n = pw.len().div_ceil(16).max(1) * 16;
    p.extend([attr::USER_PASSWORD, 2 + n as u8]);
    p.extend(pw);
    p.extend(std::iter::repeat_n(0, n - pw.len()));
    if id.is_multiple_of(2) {
        p.extend([attr::NAS_IP_ADDRESS, 6, 127, 0, 0, 1]);
    }
    p.extend([attr::PROXY_STATE, 4, 1, id]);
    let len = p.len() as u16;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p
}
