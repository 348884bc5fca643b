//! Starting the engine (and the DNS TCP side) from the flags; refusals as bad usage.

use super::args::{DnsArgs, Proto, RadiusArgs, ServeArgs};
use crate::args::Usage;
use crate::io_paths::{Handlers, ServeOn};
use anyhow::{Context, Result};
use firehose_engine::{ServeConfig, Server};
use firehose_proto::dns::options::{OptionsConfig, MAX_NSID};
use firehose_proto::dns::serve::{DnsServe, StartError};
use firehose_proto::dns::{Limits, Reloader, TcpConfig, TcpServer};
use firehose_sys::SetupError;

/// The EDNS options to answer, from the flags.
fn options_config(d: &DnsArgs) -> Result<OptionsConfig> {
    if let Some(n) = &d.nsid {
        if n.is_empty() || n.len() > MAX_NSID {
            return Err(Usage(format!("--nsid must be 1 to {MAX_NSID} bytes")).into());
        }
    }
    if d.cookie_secret.is_some() && !d.cookies {
        return Err(Usage("--cookie-secret needs --cookies on".into()).into());
    }
    let cookie_secret = match (d.cookies, d.cookie_secret) {
        (false, _) => None,
        (true, Some(s)) => Some(s),
        (true, None) => {
            use std::io::Read;
            let mut s = [0u8; 16];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| f.read_exact(&mut s))
                .context("reading a cookie secret from /dev/urandom")?;
            Some(s)
        }
    };
    Ok(OptionsConfig {
        nsid: d.nsid.as_ref().map(|n| n.as_bytes().to_vec()),
        cookie_secret,
    })
}

/// The UDP engine and, for DNS, the TCP side beside it.
pub(super) struct Running {
    pub(super) server: Server,
    pub(super) tcp: Option<TcpServer>,
    /// Re-reads the zone files, or the RADIUS clients and users, on SIGHUP.
    pub(super) reloader: Option<Reload>,
    /// Lines about what was loaded, printed after the listening line.
    pub(super) notes: Vec<String>,
    /// For NTP: the thread re-reading the kernel clock state, stopped on drop.
    pub(super) clock: Option<firehose_proto::ntp::ClockWatch>,
}

/// What SIGHUP re-reads.
pub(super) enum Reload {
    Dns(Reloader),
    Radius(firehose_proto::radius::Reloader),
}

/// Refuses the RADIUS flags with another protocol.
fn refuse_radius_flags(r: &RadiusArgs, proto: Proto) -> Result<()> {
    if proto == Proto::Radius {
        return Ok(());
    }
    let given = [
        (r.radius_clients.is_some(), "--radius-clients"),
        (r.radius_users.is_some(), "--radius-users"),
    ];
    if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
        return Err(Usage(format!("{flag} applies only to --proto radius")).into());
    }
    Ok(())
}

/// Loads the RADIUS files and starts the engine with a handler per worker.
fn start_radius(
    cfg: &ServeConfig,
    r: &RadiusArgs,
    zones: bool,
    mut on: ServeOn,
) -> Result<Running> {
    if zones {
        return Err(Usage("--zone applies only to --proto dns".into()).into());
    }
    let (Some(clients), Some(users)) = (&r.radius_clients, &r.radius_users) else {
        return Err(Usage(
            "--proto radius needs --radius-clients FILE (clients.conf) and --radius-users FILE (users)"
                .into(),
        )
        .into());
    };
    let (reloader, loaded) =
        firehose_proto::radius::Reloader::load(clients, users, r.require_message_authenticator)
            .map_err(Usage)?;
    let mut notes = vec![format!(
        "  radius: {} client(s) from {}, {} users entries from {}",
        loaded.clients,
        clients.display(),
        loaded.users,
        users.display()
    )];
    for c in reloader.db().clients.all() {
        notes.push(format!(
            "  radius client {}: {} Message-Authenticator {}",
            c.name,
            c.prefix,
            if c.require_message_authenticator {
                "required"
            } else {
                "optional"
            }
        ));
    }
    if !loaded.ignored.is_empty() {
        notes.push(format!(
            "  note: {} settings only FreeRADIUS uses were read past: {}",
            clients.display(),
            loaded.ignored.join(", ")
        ));
    }
    let opts = firehose_proto::radius::RadiusOptions {
        require_message_authenticator: r.require_message_authenticator,
        dup_entries: r.radius_dup_cache,
        dup_window: r.radius_dup_window,
    };
    let server = on
        .start(cfg, &Handlers::Radius(reloader.live(), opts))
        .map_err(serve_error)?;
    Ok(Running {
        server,
        tcp: None,
        reloader: Some(Reload::Radius(reloader)),
        notes,
        clock: None,
    })
}

pub(super) fn start_server(
    cfg: &ServeConfig,
    proto: Proto,
    a: &ServeArgs,
    mut on: ServeOn,
) -> Result<Running> {
    let zones = &a.zones;
    refuse_radius_flags(&a.radius, proto)?;
    super::ntp::refuse_ntp_flags(&a.ntp, proto)?;
    let res = match proto {
        Proto::Radius => return start_radius(cfg, &a.radius, !zones.is_empty(), on),
        Proto::Echo | Proto::Ntp if !zones.is_empty() => {
            return Err(Usage("--zone applies only to --proto dns".into()).into())
        }
        Proto::Echo | Proto::Ntp if !a.dns.allow_transfer.is_empty() || a.dns.rrl.is_some() => {
            return Err(Usage("--allow-transfer and --rrl apply only to --proto dns".into()).into())
        }
        Proto::Ntp => return super::ntp::start_ntp(cfg, &a.ntp, a.io, on),
        Proto::Echo => on.start(cfg, &Handlers::Echo),
        Proto::Dns => {
            if zones.is_empty() {
                return Err(Usage("--proto dns needs at least one --zone FILE".into()).into());
            }
            if a.dns.rrl_slip.is_some() && a.dns.rrl.is_none() {
                return Err(Usage("--rrl-slip needs --rrl N".into()).into());
            }
            if !a.dns.tcp && !a.dns.allow_transfer.is_empty() {
                return Err(Usage(
                    "--allow-transfer needs --tcp on (zone transfers run over TCP)".into(),
                )
                .into());
            }
            let options = options_config(&a.dns)?;
            let transfers = !a.dns.allow_transfer.is_empty();
            let limits = Limits {
                zone_max_size: a.dns.zone_max_size as u64,
                nsec3_max_iterations: a.dns.nsec3_max_iterations,
            };
            let reloader =
                Reloader::load(zones, limits, transfers).map_err(|e| Usage(e.to_string()))?;
            let dns = DnsServe {
                options,
                allow_transfer: a.dns.allow_transfer.clone(),
                rrl: a.dns.rrl.map(|r| (r, a.dns.rrl_slip.unwrap_or(2))),
                tcp: a.dns.tcp.then(|| TcpConfig {
                    max_conns: a.dns.tcp_max_conns,
                    max_per_client: a.dns.tcp_max_per_client,
                    idle: a.dns.tcp_idle,
                    threads: a.dns.tcp_threads,
                    ..TcpConfig::default()
                }),
                workers: cfg.workers,
            };
            // Port 0: the UDP side picks the port, and a port taken for TCP means another
            // try (not with XDP, whose queues are taken once).
            let tries = if cfg.listen.port() == 0 && !on.once_only() {
                5
            } else {
                1
            };
            let r = firehose_proto::dns::serve::start(reloader, &dns, tries, |h| {
                on.start(cfg, &Handlers::Dns(Box::new(h)))
            })
            .map_err(|e| match e {
                StartError::Setup(e) => serve_error(e),
                StartError::Worker(f) => crate::supervise::failed("the server", f),
                StartError::Tcp { addr, source } => Usage(format!(
                    "cannot listen on TCP {addr}: {source} — pick another --listen port or pass --tcp off"
                ))
                .into(),
                StartError::NoCommonPort(_) => {
                    Usage("no port free for both UDP and TCP; pass a --listen port".into()).into()
                }
            })?;
            return Ok(Running {
                server: r.server,
                tcp: r.tcp,
                reloader: Some(Reload::Dns(r.reloader)),
                notes: Vec::new(),
                clock: None,
            });
        }
    };
    Ok(Running {
        server: res.map_err(serve_error)?,
        tcp: None,
        reloader: None,
        notes: Vec::new(),
        clock: None,
    })
}

/// A start-up refusal as one line of bad usage (exit 2).
pub(crate) fn serve_error(e: SetupError) -> anyhow::Error {
    crate::refusal::setup_error(e, None)
}
