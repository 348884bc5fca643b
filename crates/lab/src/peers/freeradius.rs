//! FreeRADIUS as a peer: a private configuration in a directory of the run's own, so
//! it serves the same clients.conf and users file as `firehose serve --proto radius`
//! with its `files`, `pap` and `chap` modules, a thread pool of a given size, and
//! nothing else (no preprocess, realms, EAP or logging to disk).
//!
//! Like for like with firehose's defaults: `reject_delay = 0` (FreeRADIUS delays rejects
//! by 1 s by default; firehose never does), replies to rejects filtered as FreeRADIUS's
//! default `attr_filter.access_reject` does, accounting answered without being stored.
//! Access-Requests go to the given port, Accounting-Requests to the port after it (firehose
//! takes both on one port).

use firehose_radiuswire::{code, put_attr, put_header, Header, Secret, AUTH_LEN, HEADER};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// The program and the Debian package it comes from.
pub const PROGRAM: &str = "freeradius";
pub const PACKAGE: &str = "freeradius";

/// What the configuration says.
#[derive(Debug, Clone)]
pub struct FreeRadiusPlan<'a> {
    /// The directory the configuration, pid file and logs go in (created by the caller).
    pub dir: &'a Path,
    /// Where Access-Requests go; Accounting-Requests go to the next port.
    pub listen: SocketAddr,
    pub clients: &'a Path,
    pub users: &'a Path,
    /// Worker threads of its pool (start, min and max all this).
    pub threads: usize,
}

/// radiusd.conf for `plan`.
pub fn radiusd_conf(plan: &FreeRadiusPlan<'_>) -> String {
    let dir = plan.dir.display();
    let (key, ip) = match plan.listen {
        SocketAddr::V4(a) => ("ipaddr", a.ip().to_string()),
        SocketAddr::V6(a) => ("ipv6addr", a.ip().to_string()),
    };
    let port = plan.listen.port();
    let t = plan.threads.max(1);
    TEMPLATE
        .replace("@DIR@", &dir.to_string())
        .replace("@THREADS@", &t.to_string())
        .replace("@CLIENTS@", &plan.clients.display().to_string())
        .replace("@USERS@", &plan.users.display().to_string())
        .replace("@LISTEN_KEY@", key)
        .replace("@IP@", &ip)
        .replace("@PORT@", &port.to_string())
        .replace("@ACCT_PORT@", &(port + 1).to_string())
}

/// The configuration with `@NAME@` placeholders.
const TEMPLATE: &str = include_str!("freeradius/radiusd.conf");

/// What an Access-Reject keeps (FreeRADIUS's default `attr_filter/access_reject`).
const ACCESS_REJECT_FILTER: &str = "DEFAULT\n\tEAP-Message =* ANY,\n\tMessage-Authenticator =* ANY,\n\tReply-Message =* ANY,\n\tProxy-State =* ANY\n";

/// Writes the configuration into `plan.dir`; returns the arguments that run FreeRADIUS
/// on it in the foreground (`freeradius ARGS`).
pub fn write(plan: &FreeRadiusPlan<'_>) -> std::io::Result<Vec<String>> {
    std::fs::write(plan.dir.join("radiusd.conf"), radiusd_conf(plan))?;
    std::fs::write(plan.dir.join("access_reject"), ACCESS_REJECT_FILTER)?;
    std::fs::write(plan.dir.join("acct_users"), "")?;
    Ok(vec![
        "-f".into(),
        "-d".into(),
        plan.dir.display().to_string(),
        "-n".into(),
        "radiusd".into(),
    ])
}

/// A Status-Server with its Message-Authenticator, id `id`.
pub fn status_server(secret: &[u8], id: u8, auth: [u8; AUTH_LEN]) -> Vec<u8> {
    let mut p = vec![0u8; HEADER + 18];
    p[4..HEADER].copy_from_slice(&auth);
    let end = put_attr(&mut p, HEADER, 80, &[0; AUTH_LEN]).unwrap_or(p.len());
    put_header(&mut p, code::STATUS_SERVER, id, end);
    let ma = Secret::new(secret).message_authenticator(&p, HEADER + 2, &auth);
    p[HEADER + 2..HEADER + 18].copy_from_slice(&ma);
    p
}

/// Waits until a RADIUS server at `addr` answers a Status-Server (any answer counts), at
/// most `within`.
pub fn wait_ready(addr: SocketAddr, secret: &[u8], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut id = 0u8;
    while Instant::now() < deadline {
        id = id.wrapping_add(1);
        if answers_status(addr, secret, id, Duration::from_millis(100)) {
            return true;
        }
    }
    false
}

/// True if the RADIUS server at `addr` answers one Status-Server (id `id`) within
/// `timeout`: any answer with that id counts (firehose accepts it, FreeRADIUS too with
/// `status_server = yes`).
pub fn answers_status(addr: SocketAddr, secret: &[u8], id: u8, timeout: Duration) -> bool {
    let request = status_server(secret, id, [id; AUTH_LEN]);
    super::probe(addr, &request, timeout, |r| {
        Header::parse(r).is_ok_and(|h| h.id == id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_the_files_ports_and_threads() {
        let plan = FreeRadiusPlan {
            dir: Path::new("/tmp/fh-x"),
            listen: "127.0.0.1:18120".parse().unwrap(),
            clients: Path::new("/tmp/c.conf"),
            users: Path::new("/tmp/users"),
            threads: 2,
        };
        let c = radiusd_conf(&plan);
        assert!(c.contains("$INCLUDE /tmp/c.conf\n"));
        assert!(c.contains("filename = /tmp/users\n"));
        assert!(c.contains("port = 18120\n") && c.contains("port = 18121\n"));
        assert!(c.contains("max_servers = 2\n"));
        assert!(c.contains("reject_delay = 0\n"));
        assert!(c.contains("key = \"%{User-Name}\""));
        let v6 = radiusd_conf(&FreeRadiusPlan {
            listen: "[::1]:1812".parse().unwrap(),
            ..plan
        });
        assert!(v6.contains("ipv6addr = ::1\n"));
        let p = status_server(b"testing123", 7, [1; 16]);
        assert_eq!((p[0], p[1], p.len()), (12, 7, 38));
    }
}
