//! The clients and users as the hot path reads them, built once per load or reload.
//!
//! Clients: a hash of whole addresses, then the shorter prefixes longest first (the most
//! specific client wins, as in FreeRADIUS). Users: for every user name, the indexes of
//! the entries that may apply to it (its own and the DEFAULT ones) in file order, so a
//! request walks one short slice; each entry's reply is pre-rendered to wire bytes.

use firehose_radiuswire::users::{AuthType, CmpOp, Compare, Name, ReplyItem};
use firehose_radiuswire::{attr, attrs, ClientsFile, Prefix, Secret, UsersFile};
use hashbrown::HashMap;
use std::net::IpAddr;

/// A client as served: its secret (with the HMAC key ready) and whether it must send a
/// Message-Authenticator.
#[derive(Debug, Clone)]
pub struct ClientEntry {
    pub name: String,
    pub prefix: Prefix,
    pub secret: Secret,
    pub require_message_authenticator: bool,
}

/// Clients by source address.
#[derive(Debug, Default)]
pub struct Clients {
    exact: HashMap<IpAddr, u32>,
    /// Shorter prefixes, longest first.
    prefixes: Vec<u32>,
    all: Vec<ClientEntry>,
}

impl Clients {
    /// Builds the table; `require_all` turns Message-Authenticator on for every client
    /// (a client's own `require_message_authenticator = yes` turns it on for that one).
    pub fn build(file: &ClientsFile, require_all: bool) -> Clients {
        let mut c = Clients::default();
        for (i, def) in file.clients.iter().enumerate() {
            c.all.push(ClientEntry {
                name: def.name.clone(),
                prefix: def.prefix,
                secret: Secret::new(&def.secret),
                require_message_authenticator: require_all
                    || def.require_message_authenticator == Some(true),
            });
            let full = if def.prefix.addr.is_ipv4() { 32 } else { 128 };
            if def.prefix.len == full {
                c.exact.insert(def.prefix.addr, i as u32);
            } else {
                c.prefixes.push(i as u32);
            }
        }
        let all = &c.all;
        c.prefixes
            .sort_by_key(|&i| std::cmp::Reverse(all[i as usize].prefix.len));
        c
    }

    /// The client a request from `ip` comes from, if any.
    #[inline]
    pub fn find(&self, ip: IpAddr) -> Option<&ClientEntry> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        if let Some(&i) = self.exact.get(&ip) {
            return Some(&self.all[i as usize]);
        }
        self.prefixes
            .iter()
            .map(|&i| &self.all[i as usize])
            .find(|c| c.prefix.contains(ip))
    }

    /// Every client, in file order.
    pub fn all(&self) -> &[ClientEntry] {
        &self.all
    }
}

/// An entry of the users file as served.
#[derive(Debug, Clone)]
pub struct UserEntry {
    pub password: Option<Box<[u8]>>,
    pub auth_type: Option<AuthType>,
    pub compares: Box<[Compare]>,
    /// The reply items one by one (for merging behind an earlier entry).
    pub items: Box<[ReplyItem]>,
    /// The reply items as wire attributes, for an Access-Accept.
    pub accept: Box<[u8]>,
    /// The items an Access-Reject keeps (Reply-Message, EAP-Message: FreeRADIUS's default
    /// `attr_filter.access_reject`), as wire attributes.
    pub reject: Box<[u8]>,
    pub fall_through: bool,
}

/// Whether an Access-Reject keeps attribute `typ`.
#[inline]
pub fn kept_in_reject(typ: u8) -> bool {
    typ == attr::REPLY_MESSAGE || typ == attr::EAP_MESSAGE
}

/// The users file as served.
#[derive(Debug, Default)]
pub struct Users {
    entries: Vec<UserEntry>,
    /// Per user name: indexes of its entries and the DEFAULT ones, in file order.
    by_name: HashMap<Box<[u8]>, Box<[u32]>>,
    defaults: Box<[u32]>,
}

impl Users {
    pub fn build(file: &UsersFile) -> Users {
        let mut u = Users::default();
        let mut named: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        let mut defaults = Vec::new();
        for (i, e) in file.entries.iter().enumerate() {
            let render = |keep: &dyn Fn(u8) -> bool| -> Box<[u8]> {
                let mut out = Vec::new();
                for it in e.reply.iter().filter(|it| keep(it.typ)) {
                    out.push(it.typ);
                    out.push(2 + it.value.len() as u8);
                    out.extend(&it.value);
                }
                out.into()
            };
            u.entries.push(UserEntry {
                password: e.password.as_deref().map(Into::into),
                auth_type: e.auth_type,
                compares: e.compares.clone().into(),
                items: e.reply.clone().into(),
                accept: render(&|_| true),
                reject: render(&kept_in_reject),
                fall_through: e.fall_through,
            });
            match &e.name {
                Name::User(n) => named.entry(n.as_slice().into()).or_default().push(i as u32),
                Name::Default => defaults.push(i as u32),
            }
        }
        for (name, mut idx) in named {
            idx.extend(&defaults);
            idx.sort_unstable();
            u.by_name.insert(name, idx.into());
        }
        u.defaults = defaults.into();
        u
    }

    /// The entries that may apply to `user`, in file order.
    #[inline]
    pub fn candidates(&self, user: &[u8]) -> &[u32] {
        self.by_name.get(user).unwrap_or(&self.defaults)
    }

    pub fn entry(&self, i: u32) -> &UserEntry {
        &self.entries[i as usize]
    }

    /// Entries in the file.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whether every comparison of an entry holds for the request `packet`.
pub fn compares_hold(compares: &[Compare], packet: &[u8]) -> bool {
    compares.iter().all(|c| {
        let found = attrs(packet)
            .filter_map(Result::ok)
            .find(|a| a.typ == c.attr)
            .map(|a| a.value);
        match (c.op, found) {
            (CmpOp::Present, f) => f.is_some(),
            (CmpOp::Absent, f) => f.is_none(),
            (_, None) => false,
            (op, Some(v)) => {
                let ord = if c.numeric && v.len() == 4 && c.value.len() == 4 {
                    u32::from_be_bytes([v[0], v[1], v[2], v[3]]).cmp(&u32::from_be_bytes([
                        c.value[0], c.value[1], c.value[2], c.value[3],
                    ]))
                } else {
                    v.cmp(&c.value[..])
                };
                match op {
                    CmpOp::Eq => ord.is_eq(),
                    CmpOp::Ne => ord.is_ne(),
                    CmpOp::Gt => ord.is_gt(),
                    CmpOp::Ge => ord.is_ge(),
                    CmpOp::Lt => ord.is_lt(),
                    CmpOp::Le => ord.is_le(),
                    CmpOp::Present | CmpOp::Absent => unreachable!(),
                }
            }
        }
    })
}

/// Everything a handler answers from: clients and users, swapped whole on reload.
#[derive(Debug, Default)]
pub struct RadiusDb {
    pub clients: Clients,
    pub users: Users,
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_radiuswire::{clients, users};

    #[test]
    fn most_specific_client_wins() {
        let f = clients::parse(
            "client net { ipaddr = 10.0.0.0/8 secret = a }\n\
             client sub { ipaddr = 10.1.0.0/16 secret = b }\n\
             client one { ipaddr = 10.1.2.3 secret = c }\n\
             client v6 { ipv6addr = fd00::/8 secret = d require_message_authenticator = yes }\n",
            "c",
        )
        .unwrap();
        let c = Clients::build(&f, false);
        let name = |ip: &str| c.find(ip.parse().unwrap()).map(|c| c.name.as_str());
        assert_eq!(name("10.1.2.3"), Some("one"));
        assert_eq!(name("10.1.9.9"), Some("sub"));
        assert_eq!(name("10.9.9.9"), Some("net"));
        assert_eq!(name("::ffff:10.9.9.9"), Some("net"));
        assert_eq!(name("11.0.0.1"), None);
        assert!(
            !c.find("10.9.9.9".parse().unwrap())
                .unwrap()
                .require_message_authenticator
        );
        assert!(
            c.find("fd00::1".parse().unwrap())
                .unwrap()
                .require_message_authenticator
        );
        let c = Clients::build(&f, true);
        assert!(c.all().iter().all(|c| c.require_message_authenticator));
    }

    #[test]
    fn candidates_merge_defaults_in_file_order() {
        let f = users::parse(
            "DEFAULT NAS-Port == 1\n  Class = 0x01, Fall-Through = Yes\n\
             a Cleartext-Password := \"x\"\n  Reply-Message = \"hi\", Session-Timeout = 5\n\
             DEFAULT\n  Class = 0x02\n",
            "u",
        )
        .unwrap();
        let u = Users::build(&f);
        assert_eq!(u.candidates(b"a"), &[0, 1, 2]);
        assert_eq!(u.candidates(b"nobody"), &[0, 2]);
        let a = u.entry(1);
        assert_eq!(&*a.accept, &[18, 4, b'h', b'i', 27, 6, 0, 0, 0, 5]);
        assert_eq!(&*a.reject, &[18, 4, b'h', b'i']);
    }

    #[test]
    fn comparisons_with_the_request() {
        let f = users::parse(
            "a NAS-Port >= 10, Service-Type == Framed-User, Class !* ANY\n",
            "u",
        )
        .unwrap();
        let c = &f.entries[0].compares;
        let mut p = vec![1, 1, 0, 0];
        p.extend([0; 16]);
        p.extend([5, 6, 0, 0, 0, 12, 6, 6, 0, 0, 0, 2]);
        assert!(compares_hold(c, &p));
        p[HEADER_PORT] = 9;
        assert!(!compares_hold(c, &p));
        p[HEADER_PORT] = 12;
        p.extend([25, 3, 1]);
        assert!(!compares_hold(c, &p), "Class present");
    }

    const HEADER_PORT: usize = 20 + 5;
}
