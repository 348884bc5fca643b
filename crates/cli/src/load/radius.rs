//! The flags of `firehose load --proto radius` and the workload they make.

use super::{LoadArgs, Proto};
use crate::args::{parse_positive, Usage};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use firehose_load::radius::{users_from, RadiusLoad, RadiusWorkload, RequestKind};
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;

/// What `--proto radius` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum RadiusRequest {
    /// Access-Request with User-Password.
    Pap,
    /// Access-Request with CHAP-Password.
    Chap,
    /// Accounting-Request (Interim-Update).
    Accounting,
}

/// Options of `--proto radius`.
#[derive(Debug, Args)]
pub(crate) struct RadiusLoadArgs {
    /// FreeRADIUS users file: the users logged in as (named entries with a
    /// Cleartext-Password or Auth-Type), the same file the server reads.
    #[arg(long, value_name = "FILE")]
    radius_users: Option<std::path::PathBuf>,
    /// FreeRADIUS clients.conf: the secret of the client block covering this host's
    /// address towards --target (the server's own file serves).
    #[arg(long, value_name = "FILE", conflicts_with = "radius_secret")]
    radius_clients: Option<std::path::PathBuf>,
    /// A file whose first line is the shared secret.
    #[arg(long, value_name = "FILE")]
    radius_secret: Option<std::path::PathBuf>,
    /// What each request is.
    #[arg(long, value_enum, default_value = "pap")]
    radius_request: RadiusRequest,
    /// Every Nth Access-Request carries a wrong password and must be rejected.
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    radius_wrong_every: Option<usize>,
    /// Put a Message-Authenticator first in every Access-Request (off: as old clients do).
    #[arg(long, value_name = "on|off", value_parser = crate::serve::parse_on_off, default_value = "on", action = clap::ArgAction::Set)]
    message_authenticator: bool,
}

/// The RADIUS workload from the flags (refusing them with another protocol).
pub(super) fn radius_workload(a: &LoadArgs, target: SocketAddr) -> Result<Option<RadiusWorkload>> {
    let r = &a.radius;
    if a.proto != Proto::Radius {
        let given = [
            (r.radius_users.is_some(), "--radius-users"),
            (r.radius_clients.is_some(), "--radius-clients"),
            (r.radius_secret.is_some(), "--radius-secret"),
            (r.radius_wrong_every.is_some(), "--radius-wrong-every"),
        ];
        if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
            return Err(Usage(format!("{flag} applies only to --proto radius")).into());
        }
        return Ok(None);
    }
    let Some(users) = &r.radius_users else {
        return Err(Usage(
            "--proto radius needs --radius-users FILE (a FreeRADIUS users file)".into(),
        )
        .into());
    };
    let file = firehose_radiuswire::users::load(users).map_err(Usage)?;
    let secret = match (&r.radius_clients, &r.radius_secret) {
        (Some(c), None) => {
            let f = firehose_radiuswire::clients::load(c).map_err(Usage)?;
            let src = source_towards(target)?;
            let client = f
                .clients
                .iter()
                .filter(|cl| cl.prefix.contains(src))
                .max_by_key(|cl| cl.prefix.len)
                .ok_or_else(|| {
                    Usage(format!(
                        "{}: no client block covers this host's address towards the target ({src})",
                        c.display()
                    ))
                })?;
            client.secret.clone()
        }
        (None, Some(s)) => {
            let text = std::fs::read_to_string(s)
                .map_err(|e| Usage(format!("--radius-secret {}: {e}", s.display())))?;
            let line = text.lines().next().unwrap_or("").to_string();
            if line.is_empty() {
                return Err(Usage(format!(
                    "--radius-secret {}: the first line is empty",
                    s.display()
                ))
                .into());
            }
            line.into_bytes()
        }
        _ => return Err(Usage(
            "--proto radius needs the shared secret: --radius-clients FILE or --radius-secret FILE"
                .into(),
        )
        .into()),
    };
    let kind = match r.radius_request {
        RadiusRequest::Pap => RequestKind::Pap,
        RadiusRequest::Chap => RequestKind::Chap,
        RadiusRequest::Accounting => RequestKind::Accounting,
    };
    if kind == RequestKind::Accounting && r.radius_wrong_every.is_some() {
        return Err(
            Usage("--radius-wrong-every applies to Access-Requests (pap, chap)".into()).into(),
        );
    }
    let cfg = RadiusLoad {
        kind,
        message_authenticator: r.message_authenticator,
        wrong_every: r.radius_wrong_every.unwrap_or(0) as u64,
        secret: firehose_radiuswire::Secret::new(&secret),
        users: users_from(&file).into(),
    };
    let seed = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Ok(Some(
        RadiusWorkload::new(cfg, seed).map_err(|e| Usage(format!("{}: {e}", users.display())))?,
    ))
}

/// This host's address on the way to `target` (what the server sees as the source).
fn source_towards(target: SocketAddr) -> Result<std::net::IpAddr> {
    let any: SocketAddr = if target.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s =
        std::net::UdpSocket::bind(any).context("binding a socket to find the source address")?;
    s.connect(target)
        .map_err(|e| Usage(format!("--target {target}: no route ({e})")))?;
    Ok(s.local_addr()?.ip())
}
