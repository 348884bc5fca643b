//! Starting an authoritative server: the UDP engine with one [`DnsHandler`] per worker and,
//! beside it, the TCP side on the same port. With port 0 the UDP side picks the port and
//! TCP must get the same one, so a port another process holds for TCP means starting over
//! on another, a few times.

use super::options::OptionsConfig;
use super::{DnsHandler, Prefix, Reloader, RrlConfig, TcpConfig, TcpServer, DEFAULT_MAX_UDP};
use firehose_engine::Server;
use firehose_sys::supervise::WorkerFailure;
use firehose_sys::SetupError;
use std::net::SocketAddr;

/// How the server answers, beside the engine's own settings.
#[derive(Debug, Clone)]
pub struct DnsServe {
    pub options: OptionsConfig,
    /// Who may pull zones with AXFR/IXFR (over TCP).
    pub allow_transfer: Vec<Prefix>,
    /// Response rate limiting: (responses per second for the whole server, slip).
    pub rrl: Option<(usize, u32)>,
    /// The TCP side, if any; its `allow_transfer` and `options` are taken from here.
    pub tcp: Option<TcpConfig>,
    /// UDP workers (each keeps its own RRL table and allows its share of the rate).
    pub workers: usize,
}

/// The UDP engine and, for DNS over TCP, the TCP side beside it.
pub struct Running {
    pub server: Server,
    pub tcp: Option<TcpServer>,
    /// Re-reads the zone files on SIGHUP.
    pub reloader: Reloader,
}

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The engine refused (a setting, or the kernel).
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The TCP side could not listen on the UDP side's address.
    #[error("cannot listen on TCP {addr}: {source}")]
    Tcp {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Every port the UDP side picked was taken for TCP.
    #[error("no port free for both UDP and TCP after {0} tries")]
    NoCommonPort(usize),
    /// A worker of a start given up (to try another port) had failed.
    #[error(transparent)]
    Worker(#[from] WorkerFailure),
}

/// Starts the UDP side with `start_udp` (the engine on the chosen I/O path, called with a
/// handler to clone per worker) and the TCP side on the same address. `tries` is how many
/// ports to try when the UDP side picks the port (1: no retry; an AF_XDP path takes its
/// queues once, so it is never started twice).
pub fn start(
    reloader: Reloader,
    dns: &DnsServe,
    tries: usize,
    mut start_udp: impl FnMut(DnsHandler) -> Result<Server, SetupError>,
) -> Result<Running, StartError> {
    let live = reloader.live();
    let tries = tries.max(1);
    for attempt in 1..=tries {
        let mut h = DnsHandler::live(live.clone(), DEFAULT_MAX_UDP)
            .with_options(dns.options.clone())
            .with_transfers(&dns.allow_transfer);
        if let Some((rate, slip)) = dns.rrl {
            h = h.with_rrl(RrlConfig {
                rate: rate.div_ceil(dns.workers.max(1)).min(u32::MAX as usize) as u32,
                slip,
            });
        }
        let server = start_udp(h)?;
        let Some(tcp) = &dns.tcp else {
            return Ok(Running {
                server,
                tcp: None,
                reloader,
            });
        };
        let tcfg = TcpConfig {
            allow_transfer: dns.allow_transfer.clone(),
            options: dns.options.clone(),
            ..tcp.clone()
        };
        match TcpServer::start(server.local_addr(), live.clone(), tcfg) {
            Ok(t) => {
                return Ok(Running {
                    server,
                    tcp: Some(t),
                    reloader,
                })
            }
            Err(e) if attempt < tries && e.kind() == std::io::ErrorKind::AddrInUse => {
                server.shutdown()?;
            }
            Err(source) => {
                return Err(StartError::Tcp {
                    addr: server.local_addr(),
                    source,
                })
            }
        }
    }
    Err(StartError::NoCommonPort(tries))
}
