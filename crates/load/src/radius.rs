//! RADIUS requests: Access-Requests with PAP or CHAP for the users of a FreeRADIUS users
//! file, or Accounting-Requests, each with a fresh random Request Authenticator.
//!
//! Every response is validated before it completes its request: its Response
//! Authenticator (and Message-Authenticator, when present) against what was sent under
//! that id, and its verdict against the one the users file promises (Accept for the right
//! password, Reject for a wrong one or for `Auth-Type := Reject`). A response failing a
//! check is counted by reason ([`Workload::invalid`]) and leaves its request to be lost.

use crate::workload::Workload;
use firehose_radiuswire::users::{AuthType, Name};
use firehose_radiuswire::{
    attr, attrs, chap_response, code, code_name, put_attr, put_header, Header, Secret, UsersFile,
    AUTH_LEN, HEADER,
};
use std::sync::Arc;

/// What each request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Pap,
    Chap,
    Accounting,
}

/// A user the generator logs in as, with the verdict the server owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadUser {
    pub name: Vec<u8>,
    pub password: Vec<u8>,
    /// `Auth-Type := Reject`: rejected whatever the password.
    pub rejected: bool,
}

/// The users of a users file the generator can predict: named entries with a
/// Cleartext-Password or an Auth-Type, without comparisons with request attributes (the
/// first entry of each name counts). DEFAULT entries are left out.
pub fn users_from(file: &UsersFile) -> Vec<LoadUser> {
    let mut out: Vec<LoadUser> = Vec::new();
    for e in &file.entries {
        let Name::User(n) = &e.name else { continue };
        if !e.compares.is_empty() || out.iter().any(|u| &u.name == n) {
            continue;
        }
        let rejected = e.auth_type == Some(AuthType::Reject);
        if e.password.is_none() && e.auth_type.is_none() {
            continue;
        }
        out.push(LoadUser {
            name: n.clone(),
            password: e.password.clone().unwrap_or_default(),
            rejected,
        });
    }
    out
}

/// How the generator builds requests.
#[derive(Debug, Clone)]
pub struct RadiusLoad {
    pub kind: RequestKind,
    /// Put a Message-Authenticator first in every Access-Request.
    pub message_authenticator: bool,
    /// Every Nth Access-Request carries a wrong password and must be rejected (0: none).
    pub wrong_every: u64,
    pub secret: Secret,
    pub users: Arc<[LoadUser]>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    auth: [u8; AUTH_LEN],
    expect: u8,
}

/// Slots of [`RadiusWorkload`]'s failed checks, in the order of [`INVALID`].
const BAD_AUTHENTICATOR: usize = 0;
const BAD_MESSAGE_AUTHENTICATOR: usize = 1;
const UNEXPECTED_ACCEPT: usize = 2;
const UNEXPECTED_REJECT: usize = 3;
const UNEXPECTED_CODE: usize = 4;
/// The names of the failed checks.
pub const INVALID: [&str; 5] = [
    "bad_authenticator",
    "bad_message_authenticator",
    "unexpected_accept",
    "unexpected_reject",
    "unexpected_code",
];

/// One generator thread's RADIUS requests.
#[derive(Debug, Clone)]
pub struct RadiusWorkload {
    cfg: RadiusLoad,
    next_user: usize,
    count: u64,
    rng: [u64; 2],
    sent: Box<[Sent; 256]>,
    invalid: [u64; 5],
}

impl RadiusWorkload {
    /// A workload from `cfg`, its authenticators drawn from a generator seeded with
    /// `seed` (distinct per thread).
    pub fn new(cfg: RadiusLoad, seed: u64) -> Result<Self, String> {
        if cfg.users.is_empty() {
            return Err("the users file names no user with a Cleartext-Password or Auth-Type (DEFAULT entries and entries with comparisons are not used)".into());
        }
        Ok(RadiusWorkload {
            cfg,
            next_user: 0,
            count: 0,
            rng: [
                seed ^ 0x9E37_79B9_7F4A_7C15,
                seed.rotate_left(32) ^ 0xD1B5_4A32_D192_ED03,
            ],
            sent: Box::new([Sent::default(); 256]),
            invalid: [0; 5],
        })
    }

    /// Gives thread `k` its own sequence of authenticators.
    pub fn reseed(&mut self, k: u64) {
        self.rng[0] ^= k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.rng[1] = self.rng[1].wrapping_add(k);
        if self.rng == [0, 0] {
            self.rng[1] = 1;
        }
    }

    /// Starts this instance `k` users into the list, so threads log in different users.
    pub fn starting_at(mut self, k: usize) -> Self {
        self.next_user = k % self.cfg.users.len();
        self
    }

    /// 16 random bytes (xorshift128+; an authenticator must not repeat, not be secret
    /// from the generator's own operator).
    fn random(&mut self) -> [u8; AUTH_LEN] {
        let mut out = [0u8; AUTH_LEN];
        for half in out.chunks_exact_mut(8) {
            let [mut s1, s0] = self.rng;
            self.rng[0] = s0;
            s1 ^= s1 << 23;
            self.rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
            half.copy_from_slice(&self.rng[1].wrapping_add(s0).to_le_bytes());
        }
        out
    }
}

/// NAS-Identifier of every request (RFC 2865 asks for it or NAS-IP-Address).
const NAS_ID: &[u8] = b"firehose-load";
const NAS_IDENTIFIER: u8 = 32;

impl Workload for RadiusWorkload {
    fn id_bits(&self) -> u32 {
        8
    }

    fn write_request(&mut self, id: u64, _sent_ns: u64, buf: &mut [u8]) -> usize {
        let wire_id = (id & 0xFF) as u8;
        let u = self.next_user;
        self.next_user = if u + 1 == self.cfg.users.len() {
            0
        } else {
            u + 1
        };
        self.count += 1;
        // Drawn first: the user below borrows the configuration.
        let auth = self.random();
        let user = &self.cfg.users[u];
        let put =
            |buf: &mut [u8], at: usize, t: u8, v: &[u8]| put_attr(buf, at, t, v).unwrap_or(at);
        if self.cfg.kind == RequestKind::Accounting {
            let mut end = put(buf, HEADER, attr::USER_NAME, &user.name);
            end = put(buf, end, attr::ACCT_STATUS_TYPE, &3u32.to_be_bytes());
            let sid = format!("{:016x}", self.count);
            end = put(buf, end, attr::ACCT_SESSION_ID, sid.as_bytes());
            end = put(buf, end, NAS_IDENTIFIER, NAS_ID);
            put_header(buf, code::ACCOUNTING_REQUEST, wire_id, end);
            let a = self.cfg.secret.authenticator(&buf[..end], &[0; AUTH_LEN]);
            buf[4..HEADER].copy_from_slice(&a);
            self.sent[wire_id as usize] = Sent {
                auth: a,
                expect: code::ACCOUNTING_RESPONSE,
            };
            return end;
        }
        buf[4..HEADER].copy_from_slice(&auth);
        let wrong = self.cfg.wrong_every > 0 && self.count.is_multiple_of(self.cfg.wrong_every);
        let mut end = HEADER;
        let ma = self.cfg.message_authenticator.then(|| {
            end = put(buf, end, attr::MESSAGE_AUTHENTICATOR, &[0; AUTH_LEN]);
            HEADER + 2
        });
        end = put(buf, end, attr::USER_NAME, &user.name);
        let mut pw = [0u8; 128];
        let n = user.password.len().min(128);
        pw[..n].copy_from_slice(&user.password[..n]);
        let mut n = n;
        if wrong {
            // One byte more than the right password (or its last byte changed): wrong,
            // and never equal by chance.
            if n < 128 {
                pw[n] = b'!';
                n += 1;
            } else {
                pw[127] ^= 1;
            }
        }
        match self.cfg.kind {
            RequestKind::Chap => {
                let mut v = [0u8; 17];
                v[0] = wire_id;
                v[1..].copy_from_slice(&chap_response(wire_id, &pw[..n], &auth));
                end = put(buf, end, attr::CHAP_PASSWORD, &v);
            }
            _ => {
                let mut hidden = [0u8; 128];
                let h = self
                    .cfg
                    .secret
                    .hide_password(&auth, &pw[..n], &mut hidden)
                    .unwrap_or(16);
                end = put(buf, end, attr::USER_PASSWORD, &hidden[..h]);
            }
        }
        end = put(buf, end, NAS_IDENTIFIER, NAS_ID);
        put_header(buf, code::ACCESS_REQUEST, wire_id, end);
        if let Some(at) = ma {
            let m = self
                .cfg
                .secret
                .message_authenticator(&buf[..end], at, &auth);
            buf[at..at + AUTH_LEN].copy_from_slice(&m);
        }
        self.sent[wire_id as usize] = Sent {
            auth,
            expect: if wrong || user.rejected {
                code::ACCESS_REJECT
            } else {
                code::ACCESS_ACCEPT
            },
        };
        end
    }

    fn response_id(&mut self, resp: &[u8]) -> Option<(u64, u16)> {
        let h = Header::parse(resp).ok()?;
        matches!(
            h.code,
            code::ACCESS_ACCEPT
                | code::ACCESS_REJECT
                | code::ACCOUNTING_RESPONSE
                | code::ACCESS_CHALLENGE
        )
        .then_some((u64::from(h.id), u16::from(h.code)))
    }

    fn matches(&mut self, id: u64, resp: &[u8]) -> bool {
        let s = self.sent[(id & 0xFF) as usize];
        let Ok(h) = Header::parse(resp) else {
            return false;
        };
        let packet = &resp[..h.length as usize];
        let secret = &self.cfg.secret;
        if h.authenticator != secret.authenticator(packet, &s.auth) {
            self.invalid[BAD_AUTHENTICATOR] += 1;
            return false;
        }
        if let Some(ma) = attrs(packet)
            .flatten()
            .find(|a| a.typ == attr::MESSAGE_AUTHENTICATOR)
        {
            let want = secret.message_authenticator(packet, ma.offset + 2, &s.auth);
            if ma.value != want {
                self.invalid[BAD_MESSAGE_AUTHENTICATOR] += 1;
                return false;
            }
        }
        if h.code != s.expect {
            let slot = match h.code {
                code::ACCESS_ACCEPT => UNEXPECTED_ACCEPT,
                code::ACCESS_REJECT => UNEXPECTED_REJECT,
                _ => UNEXPECTED_CODE,
            };
            self.invalid[slot] += 1;
            return false;
        }
        true
    }

    fn invalid(&self) -> Vec<(&'static str, u64)> {
        INVALID.iter().copied().zip(self.invalid).collect()
    }

    fn code_name(&self, c: u16) -> String {
        code_name(c as u8).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_radiuswire::{parse_request, users};

    fn workload(kind: RequestKind, wrong_every: u64) -> RadiusWorkload {
        let f = users::parse(
            "alice Cleartext-Password := \"alicepw\"\nbob Auth-Type := Reject\nDEFAULT\n  Class = 0x01\n",
            "u",
        )
        .unwrap();
        let cfg = RadiusLoad {
            kind,
            message_authenticator: true,
            wrong_every,
            secret: Secret::new(b"s3cret"),
            users: users_from(&f).into(),
        };
        RadiusWorkload::new(cfg, 1).unwrap()
    }

    /// The response a server owes: `code`, correct authenticators.
    fn respond(req: &[u8], c: u8, secret: &[u8]) -> Vec<u8> {
        let s = Secret::new(secret);
        let q = Header::parse(req).unwrap();
        let mut r = vec![0u8; HEADER];
        r.extend([attr::MESSAGE_AUTHENTICATOR, 18]);
        r.extend([0; 16]);
        let n = r.len();
        put_header(&mut r, c, q.id, n);
        let ma = s.message_authenticator(&r, HEADER + 2, &q.authenticator);
        r[HEADER + 2..].copy_from_slice(&ma);
        let a = s.authenticator(&r, &q.authenticator);
        r[4..HEADER].copy_from_slice(&a);
        r
    }

    /// The User-Password of `req`, unhidden as the server does.
    fn password(req: &[u8]) -> Vec<u8> {
        let r = parse_request(req).unwrap();
        let mut clear = [0u8; 128];
        let m = Secret::new(b"s3cret")
            .unhide_password(
                &r.header.authenticator,
                r.user_password.unwrap().of(req),
                &mut clear,
            )
            .unwrap();
        clear[..m].to_vec()
    }

    #[test]
    fn requests_verify_as_a_server_would() {
        let mut w = workload(RequestKind::Pap, 0);
        let s = Secret::new(b"s3cret");
        let mut buf = [0u8; 4096];
        let n = w.write_request(0x1FF, 0, &mut buf);
        let r = parse_request(&buf[..n]).unwrap();
        assert_eq!(r.header.id, 0xFF);
        assert_eq!(r.message_authenticator, Some(HEADER + 2), "first attribute");
        assert_eq!(
            &buf[HEADER + 2..HEADER + 18],
            &s.message_authenticator(&buf[..n], HEADER + 2, &r.header.authenticator)
        );
        assert_eq!(password(&buf[..n]), b"alicepw");
        // A second request: another user, another authenticator.
        let auth1 = r.header.authenticator;
        let n2 = w.write_request(2, 0, &mut buf);
        let r2 = parse_request(&buf[..n2]).unwrap();
        assert_ne!(r2.header.authenticator, auth1);
        assert_eq!(r2.user_name.unwrap().of(&buf[..n2]), b"bob");
    }

    #[test]
    fn responses_are_checked_and_failures_counted() {
        let mut w = workload(RequestKind::Chap, 0);
        let mut buf = [0u8; 4096];
        let n = w.write_request(7, 0, &mut buf);
        let req = buf[..n].to_vec();
        let r = parse_request(&req).unwrap();
        let chap = r.chap_password.unwrap().of(&req);
        assert_eq!(
            chap_response(chap[0], b"alicepw", &r.header.authenticator),
            chap[1..]
        );
        let ok = respond(&req, code::ACCESS_ACCEPT, b"s3cret");
        assert_eq!(w.response_id(&ok), Some((7, 2)));
        assert!(w.matches(7, &ok));
        assert!(!w.matches(7, &respond(&req, code::ACCESS_ACCEPT, b"other")));
        assert!(!w.matches(7, &respond(&req, code::ACCESS_REJECT, b"s3cret")));
        let mut bad_ma = ok.clone();
        bad_ma[HEADER + 2] ^= 1;
        let a = Secret::new(b"s3cret").authenticator(&bad_ma, &r.header.authenticator);
        bad_ma[4..HEADER].copy_from_slice(&a);
        assert!(!w.matches(7, &bad_ma));
        let inv: Vec<_> = w.invalid().into_iter().filter(|(_, v)| *v > 0).collect();
        assert_eq!(
            inv,
            [
                ("bad_authenticator", 1),
                ("bad_message_authenticator", 1),
                ("unexpected_reject", 1)
            ]
        );
        // bob is rejected by Auth-Type, so a Reject completes his request.
        let n = w.write_request(8, 0, &mut buf);
        assert!(w.matches(8, &respond(&buf[..n], code::ACCESS_REJECT, b"s3cret")));
        assert_eq!(w.code_name(5), "Accounting-Response");
    }

    #[test]
    fn wrong_passwords_expect_rejects_and_accounting_expects_responses() {
        let mut w = workload(RequestKind::Pap, 2);
        let mut buf = [0u8; 4096];
        let n = w.write_request(1, 0, &mut buf);
        assert!(w.matches(1, &respond(&buf[..n], code::ACCESS_ACCEPT, b"s3cret")));
        let n = w.write_request(2, 0, &mut buf);
        assert!(
            w.matches(2, &respond(&buf[..n], code::ACCESS_REJECT, b"s3cret")),
            "bob, wrong"
        );
        let n = w.write_request(3, 0, &mut buf);
        assert_eq!(password(&buf[..n]), b"alicepw", "third: right");
        let n = w.write_request(4, 0, &mut buf);
        assert_eq!(
            password(&buf[..n]),
            b"!",
            "fourth: bob's empty password made wrong"
        );
        let s = Secret::new(b"s3cret");
        let mut a = workload(RequestKind::Accounting, 0);
        let n = a.write_request(9, 0, &mut buf);
        let h = Header::parse(&buf[..n]).unwrap();
        assert_eq!(h.code, code::ACCOUNTING_REQUEST);
        assert_eq!(h.authenticator, s.authenticator(&buf[..n], &[0; 16]));
        let mut resp = vec![0u8; HEADER];
        put_header(&mut resp, code::ACCOUNTING_RESPONSE, 9, HEADER);
        let ra = s.authenticator(&resp, &h.authenticator);
        resp[4..HEADER].copy_from_slice(&ra);
        assert!(a.matches(9, &resp));
        assert!(users_from(&UsersFile::default()).is_empty());
    }
}
