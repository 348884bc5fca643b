//! FreeRADIUS's files as firehose reads them (`radiuswire::clients` and `users`), and the
//! tables the server builds from them: an operator's files, read as root.
//!
//! Input: one control byte (clients.conf or a users file), then the text. What must hold:
//! no panic; every client found again by its own address, as itself or a more specific
//! client; every reply item short enough for an attribute and rendered to attributes that
//! walk; and a users file that loads is served: each named user (at most 8) asked with
//! PAP passes every check of the `radius_handler` target.

use crate::radius_handler::{answer, request, sign, CLIENTS};
use firehose_proto::radius::db::{Clients, Users};
use firehose_proto::radius::{LiveDb, RadiusDb, RadiusHandler, RadiusOptions};
use firehose_radiuswire::users::Name;
use firehose_radiuswire::{attrs, clients, users, Secret, HEADER};
use std::net::SocketAddr;
use std::sync::Arc;

pub fn check(data: &[u8]) {
    let Some((&c, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if c & 1 == 0 {
        check_clients(text);
    } else {
        check_users(text);
    }
}

fn check_clients(text: &str) {
    let Ok(file) = clients::parse(text, "clients.conf") else {
        return;
    };
    let table = Clients::build(&file, false);
    for def in &file.clients {
        let p = def.prefix;
        assert!(p.contains(p.addr), "{p} holds its own address");
        let found = table
            .find(p.addr)
            .expect("a client's own address finds a client");
        assert!(found.prefix.contains(p.addr));
        assert!(found.prefix.len >= p.len, "the most specific client wins");
    }
}

fn check_users(text: &str) {
    let Ok(file) = users::parse(text, "users") else {
        return;
    };
    let table = Users::build(&file);
    assert_eq!(table.len(), file.entries.len());
    for (i, e) in file.entries.iter().enumerate() {
        for it in &e.reply {
            assert!(
                it.value.len() <= 253,
                "a reply item of {} bytes",
                it.value.len()
            );
        }
        let entry = table.entry(i as u32);
        for blob in [&entry.accept, &entry.reject] {
            let mut packet = vec![0u8; HEADER];
            packet.extend(blob.iter());
            let mut n = 0;
            for a in attrs(&packet) {
                a.expect("rendered attributes walk");
                n += 1;
            }
            assert!(n <= e.reply.len());
        }
        if let Name::User(n) = &e.name {
            assert!(table.candidates(n).contains(&(i as u32)));
        }
    }
    let c = clients::parse(CLIENTS, "clients.conf").expect("the fuzz clients parse");
    let live = LiveDb::new(Arc::new(RadiusDb {
        clients: Clients::build(&c, false),
        users: table,
    }));
    let mut h = RadiusHandler::new(live, &RadiusOptions::default());
    let secret = Secret::new(b"testing123");
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("an address");
    let mut asked = 0;
    for (i, e) in file.entries.iter().enumerate() {
        let Name::User(n) = &e.name else { continue };
        if asked == 8 || n.len() > 200 {
            break;
        }
        asked += 1;
        let pw = e.password.as_deref().unwrap_or(b"x");
        let mut req = request(n, &pw[..pw.len().min(128)], i as u8);
        assert!(sign(&mut req, &secret));
        answer(&mut h, &req, 65536, peer, &secret);
    }
}

/// The users files of crates/proto's tests and the fuzz target's own, and clients files
/// of every form.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for t in [
        CLIENTS,
        "client a { ipaddr = 192.0.2.0 netmask = 24 secret = x }\nclient b {\n ipv4addr = 192.0.2.7\n secret = \"q\\\"uoted\"\n nas_type = other\n}\n",
        "client v6 {\n ipv6addr = fd00::/64\n secret = s\n limit {\n max_connections = 16\n }\n}\n",
    ] {
        out.push([b"\x00", t.as_bytes()].concat());
    }
    for t in [
        crate::radius_handler::USERS,
        "alice Cleartext-Password := \"alicepw\"\n  Reply-Message = \"Hello, alice\",\n  Framed-IP-Address = 10.0.0.1,\n  Session-Timeout = 3600\n",
        "DEFAULT NAS-IP-Address == 127.0.0.1\n  Class = 0x01, Reply-Message = \"nas\", Fall-Through = Yes\nalice Cleartext-Password := \"alicepw\"\n  Reply-Message = \"alice\", Session-Timeout = 1, Fall-Through = Yes\nDEFAULT\n  Class := 0x02, Session-Timeout = 9, Idle-Timeout += 7\n",
        "bob Cleartext-Password := \"b\"\nalice NAS-IP-Address =* ANY\nx Service-Type != Login-User, Session-Timeout > 5\n",
    ] {
        out.push([b"\x01", t.as_bytes()].concat());
    }
    out
}
