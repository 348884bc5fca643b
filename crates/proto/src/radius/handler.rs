//! The hot path: find the client, answer a duplicate from the cache, verify the
//! request's authenticators, decide Accept or Reject from the users entries, and write
//! the response over the request.
//!
//! Every response to an Access-Request carries a Message-Authenticator as its first
//! attribute (the BlastRADIUS advice for servers), then the entries' reply attributes,
//! then the request's Proxy-State attributes in order (RFC 2865 §5.33).

use super::counters::{slot, RadiusStats};
use super::db::{compares_hold, kept_in_reject, ClientEntry, RadiusDb, UserEntry};
use super::dedup::{DupCache, Key};
use super::LiveDb;
use firehose_engine::{Handler, Peer, Request as EngineRequest, Verdict};
use firehose_radiuswire::users::{AuthType, SetOp};
use firehose_radiuswire::{
    attr, attrs, chap_response, code, ct_eq, parse_request, put_attr, put_header, Request,
    AUTH_LEN, HEADER, MAX_PACKET, MAX_PASSWORD,
};
use std::sync::Arc;
use std::time::Duration;

/// Duplicate detection's defaults: FreeRADIUS keeps a request's reply for
/// `cleanup_delay` = 5 s; 16384 replies per worker.
pub const DEFAULT_DUP_WINDOW: Duration = Duration::from_secs(5);
pub const DEFAULT_DUP_ENTRIES: usize = 16384;

/// What the server does beyond the files.
#[derive(Debug, Clone, Copy)]
pub struct RadiusOptions {
    /// Drop an Access-Request without a Message-Authenticator from every client
    /// (FreeRADIUS's `require_message_authenticator`).
    pub require_message_authenticator: bool,
    /// Replies kept per worker for duplicate detection (0 turns it off).
    pub dup_entries: usize,
    pub dup_window: Duration,
}

impl Default for RadiusOptions {
    fn default() -> Self {
        RadiusOptions {
            require_message_authenticator: true,
            dup_entries: DEFAULT_DUP_ENTRIES,
            dup_window: DEFAULT_DUP_WINDOW,
        }
    }
}

/// A RADIUS server for the engine: one per worker.
pub struct RadiusHandler {
    live: Arc<LiveDb>,
    generation: u64,
    db: Arc<RadiusDb>,
    stats: RadiusStats,
    dup: Option<DupCache>,
    /// The request's Proxy-State attributes, set aside while the reply overwrites them.
    scratch: Box<[u8; MAX_PACKET]>,
    /// Entries that matched the current request (capacity kept between requests).
    matched: Vec<u32>,
}

/// The outcome of an Access-Request.
enum Decision {
    Accept,
    Reject(usize),
}

impl RadiusHandler {
    /// A handler answering from whatever `live` publishes (the clients' settings,
    /// including their Message-Authenticator requirement, were fixed when it was built).
    pub fn new(live: Arc<LiveDb>, opts: &RadiusOptions) -> Self {
        let (generation, db) = live.get();
        RadiusHandler {
            live,
            generation,
            db,
            stats: RadiusStats::new(&super::counters::NAMES),
            dup: (opts.dup_entries > 0).then(|| DupCache::new(opts.dup_entries, opts.dup_window)),
            scratch: Box::new([0; MAX_PACKET]),
            matched: Vec::with_capacity(64),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &RadiusStats {
        &self.stats
    }

    #[inline]
    fn drop(&mut self, s: usize) -> Verdict {
        self.stats.bump(s);
        Verdict::Drop
    }

    fn respond(&mut self, buf: &mut [u8], len: usize, peer: &Peer<'_>) -> Verdict {
        if self.live.generation() != self.generation {
            (self.generation, self.db) = self.live.get();
        }
        let Ok(req) = parse_request(&buf[..len]) else {
            return self.drop(slot::DROPPED_MALFORMED);
        };
        let c = req.header.code;
        if !matches!(
            c,
            code::ACCESS_REQUEST | code::ACCOUNTING_REQUEST | code::STATUS_SERVER
        ) {
            return self.drop(slot::DROPPED_CODE);
        }
        let Some(from) = peer.addr() else {
            return self.drop(slot::DROPPED_UNKNOWN_CLIENT);
        };
        let db = self.db.clone();
        let Some(client) = db.clients.find(from.ip()) else {
            return self.drop(slot::DROPPED_UNKNOWN_CLIENT);
        };
        let key = Key::new(from, &buf[..HEADER]);
        if let Some(n) = self.dup.as_ref().and_then(|d| d.get(&key, buf)) {
            self.stats.bump(slot::DUPLICATES);
            return Verdict::Reply(n);
        }
        let v = match c {
            code::ACCOUNTING_REQUEST => self.accounting(buf, &req, client),
            _ => self.access(buf, &req, client, &db),
        };
        match v {
            Verdict::Reply(n) => {
                if let Some(d) = self.dup.as_mut() {
                    d.insert(key, &buf[..n]);
                    self.stats.set(slot::DUP_CACHE_EVICTIONS, d.evicted_young);
                }
                Verdict::Reply(n)
            }
            v => v,
        }
    }

    /// Checks a Message-Authenticator if present; `Err` is the drop reason.
    #[inline]
    fn verify_ma(
        buf: &[u8],
        req: &Request,
        client: &ClientEntry,
        required: bool,
        auth: &[u8; AUTH_LEN],
    ) -> Result<(), usize> {
        let packet = &buf[..req.header.length as usize];
        match req.message_authenticator {
            Some(at) => {
                let want = client.secret.message_authenticator(packet, at, auth);
                if ct_eq(&packet[at..at + AUTH_LEN], &want) {
                    Ok(())
                } else {
                    Err(slot::DROPPED_BAD_MESSAGE_AUTHENTICATOR)
                }
            }
            None if required => Err(slot::DROPPED_MISSING_MESSAGE_AUTHENTICATOR),
            None => Ok(()),
        }
    }

    fn accounting(&mut self, buf: &mut [u8], req: &Request, client: &ClientEntry) -> Verdict {
        let packet = &buf[..req.header.length as usize];
        let want = client.secret.authenticator(packet, &[0; AUTH_LEN]);
        if !ct_eq(&req.header.authenticator, &want) {
            return self.drop(slot::DROPPED_BAD_AUTHENTICATOR);
        }
        if let Err(s) = Self::verify_ma(buf, req, client, false, &[0; AUTH_LEN]) {
            return self.drop(s);
        }
        self.stats.bump(slot::ACCOUNTING_REQUESTS);
        let ps = self.save_proxy_states(buf, req);
        let end = HEADER;
        let Some(end) = self.put_proxy_states(buf, end, ps) else {
            return self.drop(slot::DROPPED_TOO_BIG);
        };
        put_header(buf, code::ACCOUNTING_RESPONSE, req.header.id, end);
        let a = client
            .secret
            .authenticator(&buf[..end], &req.header.authenticator);
        buf[4..HEADER].copy_from_slice(&a);
        self.stats.bump(slot::ACCOUNTING_RESPONSES);
        Verdict::Reply(end)
    }

    fn access(
        &mut self,
        buf: &mut [u8],
        req: &Request,
        client: &ClientEntry,
        db: &RadiusDb,
    ) -> Verdict {
        let status = req.header.code == code::STATUS_SERVER;
        // RFC 5997: a Status-Server always carries a Message-Authenticator.
        let required = status || client.require_message_authenticator;
        if let Err(s) = Self::verify_ma(buf, req, client, required, &req.header.authenticator) {
            return self.drop(s);
        }
        let decision = if status {
            self.stats.bump(slot::STATUS_SERVER);
            self.matched.clear();
            Decision::Accept
        } else {
            self.stats.bump(slot::ACCESS_REQUESTS);
            self.decide(buf, req, client, db)
        };
        let ps = self.save_proxy_states(buf, req);
        // Message-Authenticator first, filled in once the packet is complete.
        let ma_at = HEADER + 2;
        let Some(mut end) = put_attr(buf, HEADER, attr::MESSAGE_AUTHENTICATOR, &[0; AUTH_LEN])
        else {
            return self.drop(slot::DROPPED_TOO_BIG);
        };
        let (code, accept) = match decision {
            Decision::Accept => (code::ACCESS_ACCEPT, true),
            Decision::Reject(_) => (code::ACCESS_REJECT, false),
        };
        let limit = buf.len().min(MAX_PACKET);
        let attrs_from = end;
        for (k, &i) in self.matched.iter().enumerate() {
            let e = db.users.entry(i);
            let r = if k == 0 {
                let blob = if accept { &e.accept } else { &e.reject };
                copy_blob(buf, end, blob, limit)
            } else {
                merge(buf, attrs_from, end, e, accept, limit)
            };
            match r {
                Some(n) => end = n,
                None => return self.drop(slot::DROPPED_TOO_BIG),
            }
        }
        let Some(end) = self.put_proxy_states(&mut buf[..limit], end, ps) else {
            return self.drop(slot::DROPPED_TOO_BIG);
        };
        put_header(buf, code, req.header.id, end);
        let ra = req.header.authenticator;
        let ma = client.secret.message_authenticator(&buf[..end], ma_at, &ra);
        buf[ma_at..ma_at + AUTH_LEN].copy_from_slice(&ma);
        let a = client.secret.authenticator(&buf[..end], &ra);
        buf[4..HEADER].copy_from_slice(&a);
        match decision {
            Decision::Accept if !status => self.stats.bump(slot::ACCEPTS),
            Decision::Accept => {}
            Decision::Reject(s) => self.stats.bump(s),
        }
        Verdict::Reply(end)
    }

    /// Walks the user's entries as FreeRADIUS's files module does, leaving those that
    /// matched in `self.matched`, then authenticates.
    fn decide(
        &mut self,
        buf: &[u8],
        req: &Request,
        client: &ClientEntry,
        db: &RadiusDb,
    ) -> Decision {
        let packet = &buf[..req.header.length as usize];
        let user = req.user_name.map_or(&[][..], |s| s.of(packet));
        self.matched.clear();
        let mut password: Option<&[u8]> = None;
        let mut auth_type = None;
        for &i in db.users.candidates(user) {
            let e: &UserEntry = db.users.entry(i);
            if !e.compares.is_empty() && !compares_hold(&e.compares, packet) {
                continue;
            }
            self.matched.push(i);
            if let Some(p) = &e.password {
                password = Some(p);
            }
            if e.auth_type.is_some() {
                auth_type = e.auth_type;
            }
            if !e.fall_through {
                break;
            }
        }
        if self.matched.is_empty() {
            return Decision::Reject(slot::REJECTS_UNKNOWN_USER);
        }
        match auth_type {
            Some(AuthType::Reject) => return Decision::Reject(slot::REJECTS_AUTH_TYPE),
            Some(AuthType::Accept) => return Decision::Accept,
            None => {}
        }
        let Some(password) = password else {
            return Decision::Reject(slot::REJECTS_NO_CREDENTIALS);
        };
        let ok = if let Some(chap) = req.chap_password {
            // CHAP before PAP, as FreeRADIUS's chap module claims the request first.
            self.stats.bump(slot::CHAP);
            let chap = chap.of(packet);
            let challenge = req
                .chap_challenge
                .map_or(&req.header.authenticator[..], |c| c.of(packet));
            ct_eq(&chap_response(chap[0], password, challenge), &chap[1..])
        } else if let Some(pw) = req.user_password {
            self.stats.bump(slot::PAP);
            let mut clear = [0u8; MAX_PASSWORD];
            match client.secret.unhide_password(
                &req.header.authenticator,
                pw.of(packet),
                &mut clear,
            ) {
                Some(n) => ct_eq(&clear[..n], password),
                None => false,
            }
        } else {
            return Decision::Reject(slot::REJECTS_NO_CREDENTIALS);
        };
        if ok {
            Decision::Accept
        } else {
            Decision::Reject(slot::REJECTS_BAD_PASSWORD)
        }
    }

    /// Copies the request's Proxy-State attributes aside; returns their bytes.
    #[inline]
    fn save_proxy_states(&mut self, buf: &[u8], req: &Request) -> usize {
        if req.proxy_states == 0 {
            return 0;
        }
        let mut n = 0;
        for a in attrs(&buf[..req.header.length as usize]).flatten() {
            if a.typ == attr::PROXY_STATE {
                let len = a.value.len() + 2;
                self.scratch[n..n + len].copy_from_slice(&buf[a.offset..a.offset + len]);
                n += len;
            }
        }
        n
    }

    #[inline]
    fn put_proxy_states(&self, buf: &mut [u8], end: usize, n: usize) -> Option<usize> {
        if end + n > buf.len().min(MAX_PACKET) {
            return None;
        }
        buf[end..end + n].copy_from_slice(&self.scratch[..n]);
        Some(end + n)
    }
}

/// Appends pre-rendered attributes.
#[inline]
fn copy_blob(buf: &mut [u8], end: usize, blob: &[u8], limit: usize) -> Option<usize> {
    let n = end + blob.len();
    if n > limit {
        return None;
    }
    buf[end..n].copy_from_slice(blob);
    Some(n)
}

/// Adds a later entry's reply items behind the earlier ones' as FreeRADIUS moves pairs:
/// `=` only if the earlier entries put no attribute of that type, `:=` replacing theirs,
/// `+=` always.
fn merge(
    buf: &mut [u8],
    from: usize,
    end: usize,
    e: &UserEntry,
    accept: bool,
    limit: usize,
) -> Option<usize> {
    let mut earlier_end = end;
    let mut end = end;
    for it in e.items.iter().filter(|it| accept || kept_in_reject(it.typ)) {
        let present = |buf: &[u8], upto: usize| {
            let mut at = from;
            while at < upto {
                if buf[at] == it.typ {
                    return true;
                }
                at += buf[at + 1] as usize;
            }
            false
        };
        match it.op {
            SetOp::Add if present(buf, earlier_end) => continue,
            SetOp::Set => {
                // Remove every earlier attribute of this type.
                let mut at = from;
                while at < earlier_end {
                    let l = buf[at + 1] as usize;
                    if buf[at] == it.typ {
                        buf.copy_within(at + l..end, at);
                        earlier_end -= l;
                        end -= l;
                    } else {
                        at += l;
                    }
                }
            }
            _ => {}
        }
        end = put_attr(&mut buf[..limit], end, it.typ, &it.value)?;
    }
    Some(end)
}

impl Handler for RadiusHandler {
    fn handle(&mut self, req: &mut EngineRequest<'_>) -> Verdict {
        let (buf, len, peer) = req.parts();
        self.respond(buf, len, peer)
    }

    fn counters(&self) -> &[(&'static str, u64)] {
        self.stats.named()
    }
}
