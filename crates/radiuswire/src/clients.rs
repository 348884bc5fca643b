//! FreeRADIUS's `clients.conf`: `client NAME { ipaddr = ...  secret = ... }` blocks.
//!
//! Read: `ipaddr`, `ipv4addr`, `ipv6addr` (an address, a prefix `/N`, or `*`), the old
//! `netmask`, `secret`, `require_message_authenticator`, `shortname`; the 1.x form with
//! the address as the block's name. Keys that change nothing here (`nas_type`,
//! `limit { }` ...) are listed as notes. Host names, `${...}` references and
//! `$INCLUDE` are refused with the line, so nothing is half-understood.

use crate::lex::{tokens, Token};
use std::net::IpAddr;

/// An address prefix: the clients it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Whether `ip` falls in this prefix (IPv4-mapped IPv6 addresses count as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                mask(u32::from(p) as u128, u32::from(a) as u128, self.len, 32)
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => mask(u128::from(p), u128::from(a), self.len, 128),
            _ => false,
        }
    }

    fn parse(s: &str) -> Result<Prefix, String> {
        if s == "*" {
            return Err("'*' needs ipv4addr or ipv6addr to say which family".into());
        }
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| {
            format!("'{a}' is not an IP address (host names are not resolved; write the address)")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("'/{l}' is not a prefix length from 0 to {max}"))?,
            None => max,
        };
        Ok(Prefix { addr, len })
    }
}

fn mask(p: u128, a: u128, len: u8, bits: u32) -> bool {
    if len == 0 {
        return true;
    }
    let shift = bits - len as u32;
    (p >> shift) == (a >> shift)
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// One client block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub name: String,
    pub prefix: Prefix,
    pub secret: Vec<u8>,
    /// `require_message_authenticator` as written (`None` when absent).
    pub require_message_authenticator: Option<bool>,
    pub line: usize,
}

/// A parsed clients file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientsFile {
    pub clients: Vec<Client>,
    /// Settings read but not acted on, as "line N: key", for the operator.
    pub ignored: Vec<String>,
}

/// Keys of a client block that firehose reads past (they tune FreeRADIUS itself).
const IGNORED: [&str; 12] = [
    "nas_type",
    "proto",
    "virtual_server",
    "response_window",
    "coa_server",
    "login",
    "password",
    "track_connections",
    "limit_proxy_state",
    "add_cui",
    "require_message_authenticator_auto",
    "dynamic_clients",
];

/// Parses clients.conf text; `path` names it in errors ("path:line: what").
pub fn parse(text: &str, path: &str) -> Result<ClientsFile, String> {
    let mut out = ClientsFile::default();
    // Flatten to (line, token) so blocks may span or share lines.
    let mut toks: Vec<(usize, Token<'_>)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let err = |m: String| format!("{path}:{}: {m}", i + 1);
        let trimmed = l.trim_start();
        if trimmed.starts_with("$INCLUDE") || trimmed.starts_with("$-INCLUDE") {
            return Err(err(
                "$INCLUDE is not supported; put the clients in one file".into(),
            ));
        }
        if l.contains("${") {
            return Err(err(
                "${...} references are not expanded; write the value".into()
            ));
        }
        for t in tokens(l).map_err(err)? {
            toks.push((i + 1, t));
        }
    }
    let mut it = toks.into_iter().peekable();
    // Sections read past that are still open.
    let mut depth = 0usize;
    while let Some((line, t)) = it.next() {
        let err = |m: String| format!("{path}:{line}: {m}");
        match t {
            Token::Word("client") => {
                let name = match it.next() {
                    Some((_, Token::Word(n))) => n.to_string(),
                    Some((_, Token::Quoted(n, _))) => n,
                    _ => return Err(err("'client' needs a name and a { block }".into())),
                };
                if !matches!(it.next(), Some((_, Token::Open))) {
                    return Err(err(format!("client {name}: expected '{{'")));
                }
                let body =
                    block(&mut it).ok_or_else(|| err(format!("client {name}: no closing '}}'")))?;
                out.clients
                    .push(client(name, line, body, path, &mut out.ignored)?);
            }
            Token::Word(w) => {
                // Another setting or section (e.g. `clients per_socket { ... }`): read
                // past it, but not past a client block inside it.
                out.ignored.push(format!("line {line}: {w}"));
                match it.peek() {
                    Some((_, Token::Op(_))) => {
                        it.next();
                        it.next();
                    }
                    Some((_, Token::Word(_))) | Some((_, Token::Quoted(..))) => {
                        it.next();
                        if !matches!(it.next(), Some((_, Token::Open))) {
                            return Err(err(format!("section {w}: expected '{{'")));
                        }
                        depth += 1;
                    }
                    Some((_, Token::Open)) => {
                        it.next();
                        depth += 1;
                    }
                    _ => return Err(err(format!("'{w}' is neither a setting nor a section"))),
                }
            }
            // The end of a section read past.
            Token::Close if depth > 0 => depth -= 1,
            _ => return Err(err("expected 'client NAME { ... }'".into())),
        }
    }
    if depth > 0 {
        return Err(format!("{path}: a section is not closed with '}}'"));
    }
    // Two blocks for one prefix would make the secret depend on the order.
    for (i, a) in out.clients.iter().enumerate() {
        if let Some(b) = out.clients[..i].iter().find(|b| b.prefix == a.prefix) {
            return Err(format!(
                "{path}:{}: client {} covers {} as client {} (line {}) does",
                a.line, a.name, a.prefix, b.name, b.line
            ));
        }
    }
    Ok(out)
}

type Body<'a> = Vec<(usize, Token<'a>)>;

/// The tokens up to the matching close brace (consumed), nested blocks included.
fn block<'a>(it: &mut impl Iterator<Item = (usize, Token<'a>)>) -> Option<Body<'a>> {
    let mut depth = 0usize;
    let mut body = Vec::new();
    for (l, t) in it.by_ref() {
        match t {
            Token::Open => depth += 1,
            Token::Close if depth == 0 => return Some(body),
            Token::Close => depth -= 1,
            _ => {}
        }
        body.push((l, t));
    }
    None
}

fn client(
    name: String,
    line: usize,
    body: Body<'_>,
    path: &str,
    ignored: &mut Vec<String>,
) -> Result<Client, String> {
    let mut addr: Option<(usize, String, Option<bool>)> = None;
    let mut netmask: Option<u8> = None;
    let mut secret: Option<Vec<u8>> = None;
    let mut require = None;
    let mut it = body.into_iter().peekable();
    while let Some((l, t)) = it.next() {
        let err = |m: String| format!("{path}:{l}: client {name}: {m}");
        let key = match t {
            Token::Word(k) => k,
            _ => return Err(err("expected 'key = value'".into())),
        };
        if matches!(it.peek(), Some((_, Token::Open))) {
            it.next();
            block(&mut it).ok_or_else(|| err(format!("section {key}: no closing '}}'")))?;
            ignored.push(format!("line {l}: {key} {{ }}"));
            continue;
        }
        if !matches!(it.next(), Some((_, Token::Op("=")))) {
            return Err(err(format!("expected '{key} = value'")));
        }
        let value = match it.next() {
            Some((_, Token::Word(v))) => v.to_string(),
            Some((_, Token::Quoted(v, '`'))) => {
                return Err(err(format!("`{v}`: back-quoted commands are not run")))
            }
            Some((_, Token::Quoted(v, _))) => v,
            _ => return Err(err(format!("{key} has no value"))),
        };
        match key {
            "ipaddr" => addr = Some((l, value, None)),
            "ipv4addr" => addr = Some((l, value, Some(true))),
            "ipv6addr" => addr = Some((l, value, Some(false))),
            "netmask" => {
                netmask = Some(
                    value
                        .parse()
                        .map_err(|_| err(format!("netmask '{value}' is not a prefix length")))?,
                )
            }
            "secret" => secret = Some(value.into_bytes()),
            "require_message_authenticator" => {
                require = Some(match value.as_str() {
                    "yes" | "true" => true,
                    "no" | "false" => false,
                    _ => {
                        return Err(err(format!(
                            "require_message_authenticator '{value}' is not yes or no"
                        )))
                    }
                })
            }
            "shortname" => {}
            k if IGNORED.contains(&k) => ignored.push(format!("line {l}: {k}")),
            k => return Err(err(format!("unknown setting '{k}'"))),
        }
    }
    let err = |m: String| format!("{path}:{line}: client {name}: {m}");
    let (al, a, v4) = match addr {
        Some(a) => a,
        // The 1.x form: the address is the client's name.
        None => (line, name.clone(), None),
    };
    let mut prefix = match (a.as_str(), v4) {
        ("*", Some(true)) => Prefix {
            addr: IpAddr::from([0, 0, 0, 0]),
            len: 0,
        },
        ("*", Some(false)) => Prefix {
            addr: IpAddr::from([0u16; 8]),
            len: 0,
        },
        _ => Prefix::parse(&a).map_err(|m| format!("{path}:{al}: client {name}: {m}"))?,
    };
    if v4.is_some_and(|v4| v4 != prefix.addr.is_ipv4()) {
        return Err(format!(
            "{path}:{al}: client {name}: '{a}' is not of the family its key names"
        ));
    }
    if let Some(m) = netmask {
        let max = if prefix.addr.is_ipv4() { 32 } else { 128 };
        if m > max {
            return Err(err(format!("netmask {m} is above {max}")));
        }
        prefix.len = m;
    }
    let secret = secret.ok_or_else(|| err("no secret".into()))?;
    if secret.is_empty() {
        return Err(err("the secret is empty".into()));
    }
    Ok(Client {
        name,
        prefix,
        secret,
        require_message_authenticator: require,
        line,
    })
}

/// Reads and parses a clients file.
pub fn load(path: &std::path::Path) -> Result<ClientsFile, String> {
    let text = crate::read_text(path)?;
    parse(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
# comment
client localhost {
    ipaddr = 127.0.0.1
    proto = *
    secret = testing123
    require_message_authenticator = no
    nas_type = other   # localhost isn't usually a NAS...
    limit {
        max_connections = 16
        lifetime = 0
    }
}
client localhost_ipv6 {
    ipv6addr = ::1
    secret = "with space"
}
client net { ipaddr = 10.0.0.0/8
  secret = s3 }
client 192.0.2.7 {
    secret = old-style
}
client legacy { ipaddr = 198.51.100.0  netmask = 24  secret = x }
clients per_socket {
    client inner { ipaddr = 203.0.113.1 secret = y }
}
"#;

    #[test]
    fn freeradius_default_and_older_forms() {
        let f = parse(CONF, "clients.conf").unwrap();
        let names: Vec<_> = f.clients.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "localhost",
                "localhost_ipv6",
                "net",
                "192.0.2.7",
                "legacy",
                "inner"
            ]
        );
        let c = &f.clients[0];
        assert_eq!(c.secret, b"testing123");
        assert_eq!(c.require_message_authenticator, Some(false));
        assert_eq!(c.prefix.to_string(), "127.0.0.1/32");
        assert_eq!(f.clients[1].secret, b"with space");
        assert_eq!(f.clients[2].prefix.to_string(), "10.0.0.0/8");
        assert_eq!(f.clients[3].secret, b"old-style");
        assert_eq!(f.clients[4].prefix.to_string(), "198.51.100.0/24");
        assert!(
            f.ignored.iter().any(|i| i.ends_with("nas_type")),
            "{:?}",
            f.ignored
        );
        assert!(
            f.ignored.iter().any(|i| i.contains("limit")),
            "{:?}",
            f.ignored
        );
        assert!(f.clients[2].prefix.contains("10.9.8.7".parse().unwrap()));
        assert!(!f.clients[2].prefix.contains("11.0.0.1".parse().unwrap()));
        assert!(c.prefix.contains("::ffff:127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn refusals_name_the_line() {
        let e = parse(
            "client a {\n ipaddr = radius.example.org\n secret = x\n}\n",
            "c",
        )
        .unwrap_err();
        assert!(
            e.starts_with("c:2: client a: 'radius.example.org' is not an IP"),
            "{e}"
        );
        let e = parse("client a {\n ipaddr = 1.2.3.4\n}\n", "c").unwrap_err();
        assert_eq!(e, "c:1: client a: no secret");
        let e = parse("client a {\n ipaddr = 1.2.3.4\n secret = ${x}\n}\n", "c").unwrap_err();
        assert!(e.starts_with("c:3: ${"), "{e}");
        let e = parse("client a {\n ipaddr = 1.2.3.4\n secert = x\n}\n", "c").unwrap_err();
        assert_eq!(e, "c:3: client a: unknown setting 'secert'");
        let e = parse("client a { ipaddr = 1.2.3.4 secret = x }\nclient b { ipaddr = 1.2.3.4/32 secret = y }\n", "c").unwrap_err();
        assert!(e.contains("covers 1.2.3.4/32 as client a"), "{e}");
        assert!(parse("client a {\n ipaddr = 1.2.3.4\n secret = x\n", "c").is_err());
        let e = parse("client a { ipv4addr = ::1 secret = x }", "c").unwrap_err();
        assert!(e.contains("family"), "{e}");
    }
}
