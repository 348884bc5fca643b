//! The flags of `firehose serve` and how they merge with a profile into a configuration.

use crate::args::{
    parse_bytes, parse_cpus, parse_duration, parse_duration_or_zero, parse_positive, Cpus, Usage,
};
use crate::io_paths::IoPath;
pub use crate::proto::Proto;
use crate::xdp_args::{XdpArgs, PROFILE_XDP};
use anyhow::Result;
use clap::Args;
use firehose_engine::{Pin, PmtuDisc, Profile, ServeConfig, SocketMode, Steer};
use std::net::SocketAddr;
use std::time::Duration;

/// Arguments of `firehose serve`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
#[command(after_help = "Profiles (explicit flags override them):\n  \
  naive      one shared socket, N threads, recvfrom/sendto (the talk's baseline)\n  \
  reuseport  one SO_REUSEPORT socket per worker\n  \
  steered    reuseport + CPU steering (CBPF) + workers pinned 1:1\n  \
  tuned      steered + recvmmsg/sendmmsg batches of 64 + IP_PMTUDISC_DO + 4 MiB receive buffer, no SO_RXQ_OVFL\n  \
  latency    steered + busy polling (50 us) + batches of 8 + IP_PMTUDISC_DO + 4 MiB receive buffer\n\n\
Busy polling (latency, --busy-poll): SO_BUSY_POLL/SO_PREFER_BUSY_POLL/SO_BUSY_POLL_BUDGET;\n\
an idle worker sleeps in an epoll_wait with EPIOCSPARAMS (kernel 6.9+); as root, the NAPIs\n\
of the interface holding the listen address get defer-hard-irqs, gro-flush-timeout and\n\
irq-suspend-timeout (kernel 6.13+), journaled and restored when serve ends. Each is read\n\
back and printed, or its refusal with the errno.\n\n\
Steering: the program returns cpu % workers, and socket j is read by the worker pinned\n\
to a CPU c with c % workers == j, so a packet is read on the CPU that received it.\n\n\
EXAMPLES:\n  \
  firehose serve --listen '[::1]:9000' --workers 2\n  \
  firehose serve --profile naive --interval 1\n  \
  firehose serve --profile latency --listen 10.0.0.1:9000 --workers 1\n  \
  firehose serve --proto dns --zone examples/example.zone --listen 127.0.0.1:5300\n  \
  firehose serve --proto radius --radius-clients examples/radius/clients.conf \\\n      \
--radius-users examples/radius/users --listen 127.0.0.1:1812\n  \
  firehose serve --proto ntp --listen 127.0.0.1:12300 --ntp-local-stratum 10\n  \
  firehose serve --proto ntp --listen 0.0.0.0:123 --ntp-stratum 2 --ntp-refid 192.0.2.1 \\\n      \
--ntp-ratelimit interval=3,burst=8,kod=1\n  \
  firehose serve --io uring --single-issuer --defer-taskrun --workers 2")]
pub struct ServeArgs {
    /// Protocol to serve.
    #[arg(long, value_enum, default_value = "echo")]
    pub(super) proto: Proto,
    /// Zone file (RFC 1035 master file) for --proto dns; repeat for more zones.
    #[arg(long = "zone", value_name = "FILE")]
    pub(super) zones: Vec<std::path::PathBuf>,
    /// Address and port to listen on (IPv4 or [IPv6]); port 0 picks a free one.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9000")]
    pub(super) listen: String,
    /// Preset for a step of the NTT ladder [default: tuned], or `xdp` (the default with
    /// --io xdp): tuned settings for the fallback socket, workers pinned, batches of 64.
    /// One of: naive, reuseport, steered, tuned, latency, xdp.
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub(super) profile: Option<ProfileArg>,
    /// Worker threads [default: 1].
    #[arg(long, value_parser = parse_positive)]
    pub(super) workers: Option<usize>,
    /// One socket for all workers, or one SO_REUSEPORT socket each.
    #[arg(long, value_parser = crate::args::choice(SocketMode::ALL, SocketMode::name))]
    sockets: Option<SocketMode>,
    /// Pick the reuseport socket by receiving CPU (classic BPF or eBPF program).
    #[arg(long, value_parser = crate::args::choice(Steer::ALL, Steer::name))]
    steer: Option<Steer>,
    /// CPUs of the workers, one each in order: none, auto (1:1 over allowed CPUs) or a CPU
    /// list like 0-3,6 (formerly --pin).
    #[arg(long, value_name = "CPULIST", value_parser = parse_cpus)]
    pub(super) cpus: Option<Cpus>,
    /// Datagrams per recvmmsg/sendmmsg; 1 uses recvfrom/sendto.
    #[arg(long, value_parser = parse_positive)]
    pub(super) batch: Option<usize>,
    /// Replies per send call at most [default: one send per received batch; --proto ntp: 1,
    /// so each transmit timestamp is read right before its own send, as chronyd sends;
    /// --io socket and xdp]
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    pub(super) send_batch: Option<usize>,
    /// SO_BUSY_POLL microseconds; workers then poll instead of sleeping (0 turns it off).
    #[arg(long)]
    pub(super) busy_poll: Option<u32>,
    /// IP_MTU_DISCOVER: kernel default (want), dont (no DF), do (always DF: the kernel
    /// skips per-packet IP ID work, the talk's step), omit (no DF, IP ID computed).
    #[arg(long, value_parser = crate::args::choice(PmtuDisc::ALL, PmtuDisc::name))]
    pmtudisc: Option<PmtuDisc>,
    /// SO_RXQ_OVFL: the socket's drop count on every datagram (a control message per
    /// packet); drops are read with SO_MEMINFO either way.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub(super) rxq_ovfl: Option<bool>,
    /// Receive buffer per socket (SO_RCVBUFFORCE as root, else SO_RCVBUF), e.g. 4M.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub(super) rcvbuf: Option<usize>,
    /// Send buffer per socket, e.g. 4M.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    pub(super) sndbuf: Option<usize>,
    /// Print a counter line every interval (e.g. 1, 500ms).
    #[arg(short = 'i', long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) interval: Option<Duration>,
    /// The counters as one JSON document at exit (`--json`: stdout, `--json-file FILE`;
    /// formerly --stats-json), with a record per --interval.
    #[command(flatten)]
    pub(super) json: crate::meta::JsonArgs,
    /// Stop by itself after this long (otherwise run until SIGINT/SIGTERM).
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) duration: Option<Duration>,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub(super) metrics: Option<SocketAddr>,
    /// I/O path: kernel sockets, AF_XDP on --iface (root), or io_uring on the sockets.
    #[arg(long = "io", default_value = "socket", value_parser = crate::io_paths::parser())]
    pub(super) io: &'static IoPath,
    #[command(flatten)]
    pub(super) xdp: XdpArgs,
    #[command(flatten)]
    pub(super) uring: crate::uring_args::UringArgs,
    #[command(flatten)]
    pub(super) dns: DnsArgs,
    #[command(flatten)]
    pub(super) radius: RadiusArgs,
    #[command(flatten)]
    pub(super) ntp: NtpArgs,
}

/// Options of `--proto ntp`.
#[derive(Debug, Args)]
pub(super) struct NtpArgs {
    /// Stratum announced while the kernel clock is synchronised (1 to 15): the kernel does
    /// not know it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=15), default_value = "2")]
    pub(super) ntp_stratum: u8,
    /// Reference ID announced while synchronised: the upstream server's IPv4 or IPv6
    /// address, or a code of 1 to 4 capitals (GPS, PPS) for stratum 1 [default: 0,
    /// unknown].
    #[arg(long, value_name = "ID", value_parser = firehose_ntpwire::RefId::parse)]
    pub(super) ntp_refid: Option<firehose_ntpwire::RefId>,
    /// Root delay announced while synchronised, e.g. 2ms [default: 0].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub(super) ntp_root_delay: Option<Duration>,
    /// Root dispersion announced while synchronised [default: the kernel's maxerror,
    /// which an NTP daemon sets to its root distance, re-read every second].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_or_zero)]
    pub(super) ntp_root_dispersion: Option<Duration>,
    /// Serve an unsynchronised kernel clock at this stratum anyway (1 to 15), as chronyd's
    /// `local stratum N` does (reference ID 127.127.1.1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=15))]
    pub(super) ntp_local_stratum: Option<u8>,
    /// Serve an unsynchronised kernel clock, announced as chronyd announces it (leap 3,
    /// stratum 0 on the wire); without it (or --ntp-local-stratum) the server refuses to
    /// start. Clients ignore such a server.
    #[arg(long)]
    pub(super) allow_unsynchronised: bool,
    /// Per-source rate limiting as chronyd's `ratelimit`: `on` (chrony's defaults,
    /// interval=3,burst=8,leak=2,kod=0) or any of interval=-19..12 (log2 s between
    /// responses), burst=1..255, leak=1..4 (one in 2^leak limited requests answered anyway),
    /// kod=0..4 (one in 2^kod of the rest get a Kiss-o'-Death RATE) [default: off].
    #[arg(long, value_name = "on|K=V,..", value_parser = parse_ratelimit)]
    pub(super) ntp_ratelimit: Option<firehose_proto::ntp::RateLimitConfig>,
    /// Sources each worker's rate limiter remembers; the least recently seen is forgotten.
    #[arg(long, value_name = "N", value_parser = parse_positive, default_value = "16384")]
    pub(super) ntp_ratelimit_sources: usize,
    /// Responses remembered for interleaved mode (chronyd's `xleave`: a client that asks
    /// gets, in its next response, when the previous one really left, from the kernel's
    /// transmit stamp); the oldest is forgotten. 0 answers every request in basic mode.
    /// Only the socket path stamps sends: with --io uring or xdp every answer is basic.
    #[arg(long, value_name = "N", default_value_t = firehose_proto::ntp::DEFAULT_INTERLEAVED_ENTRIES)]
    pub(super) ntp_interleaved_entries: usize,
}

/// `on`, or `key=value,...` over chrony's defaults.
fn parse_ratelimit(s: &str) -> Result<firehose_proto::ntp::RateLimitConfig, String> {
    let mut c = firehose_proto::ntp::RateLimitConfig::default();
    if s == "on" {
        return Ok(c);
    }
    for kv in s.split(',') {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("'{kv}' is not key=value (e.g. interval=3,burst=8)"))?;
        let bad = |_| format!("'{v}' is not a number for {k}");
        match k.trim() {
            "interval" => c.interval = v.trim().parse().map_err(bad)?,
            "burst" => c.burst = v.trim().parse().map_err(bad)?,
            "leak" => c.leak = v.trim().parse().map_err(bad)?,
            "kod" => c.kod = v.trim().parse().map_err(bad)?,
            other => {
                return Err(format!(
                    "unknown rate limit setting '{other}' (valid: interval, burst, leak, kod)"
                ))
            }
        }
    }
    c.check()?;
    Ok(c)
}

/// Options of `--proto radius`.
#[derive(Debug, Args)]
pub(super) struct RadiusArgs {
    /// FreeRADIUS clients.conf: `client NAME { ipaddr = PREFIX  secret = ... }` blocks;
    /// a request from an address no client covers is dropped and counted. Reloaded on
    /// SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub(super) radius_clients: Option<std::path::PathBuf>,
    /// FreeRADIUS users file (its files module): `NAME Cleartext-Password := "..."` and
    /// indented reply attributes. Reloaded on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub(super) radius_users: Option<std::path::PathBuf>,
    /// Drop Access-Requests without a Message-Authenticator (the BlastRADIUS defence,
    /// FreeRADIUS's require_message_authenticator); off admits old clients, but a client
    /// with require_message_authenticator = yes in --radius-clients still needs one.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "on", action = clap::ArgAction::Set)]
    pub(super) require_message_authenticator: bool,
    /// Replies kept per worker to answer retransmissions (RFC 5080 duplicate detection);
    /// 0 turns it off.
    #[arg(long, value_name = "N", default_value = "16384")]
    pub(super) radius_dup_cache: usize,
    /// How long a reply answers retransmissions (FreeRADIUS's cleanup_delay).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub(super) radius_dup_window: Duration,
}

/// Options of `--proto dns` beyond the zone files.
#[derive(Debug, Args)]
pub(super) struct DnsArgs {
    /// DNS over TCP on the same address (RFC 7766): on or off.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "on", action = clap::ArgAction::Set)]
    pub(super) tcp: bool,
    /// TCP threads, each an event loop over its share of the connections (at most 4 per
    /// allowed CPU, as --workers).
    #[arg(long, value_name = "N", value_parser = parse_positive, default_value = "1")]
    pub(super) tcp_threads: usize,
    /// TCP connections open at once, all clients together.
    #[arg(long, value_parser = parse_positive, default_value = "128")]
    pub(super) tcp_max_conns: usize,
    /// TCP connections open at once from one client (an IPv4 address, an IPv6 /64).
    #[arg(long, value_parser = parse_positive, default_value = "8")]
    pub(super) tcp_max_per_client: usize,
    /// Close a TCP connection idle this long (advertised with edns-tcp-keepalive).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(super) tcp_idle: Duration,
    /// Largest zone file accepted, e.g. 512M (zone files must be regular files).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes, default_value = "256M")]
    pub(super) zone_max_size: usize,
    /// Most NSEC3 hash iterations a signed zone may use (RFC 9276: 0); each NXDOMAIN
    /// costs iterations + 1 SHA-1 hashes. A zone over it is refused at load.
    #[arg(long, value_name = "N", default_value = "0")]
    pub(super) nsec3_max_iterations: u16,
    /// Response rate limiting: responses per second per client network (/24, /56),
    /// response kind and name (the wildcard, DNAME, delegation or zone for names they
    /// stand for); past it UDP responses are dropped or slipped (off by default; TCP is
    /// never limited).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    pub(super) rrl: Option<usize>,
    /// With --rrl, every Nth limited response goes out as TC=1 so real clients retry
    /// over TCP (0 drops them all).
    #[arg(long, value_name = "N")]
    pub(super) rrl_slip: Option<u32>,
    /// Answer NSID requests (RFC 5001) with this identifier (e.g. the host name).
    #[arg(long, value_name = "TEXT")]
    pub(super) nsid: Option<String>,
    /// DNS cookies (RFC 7873, server cookies per RFC 9018): on or off. A query with a
    /// valid server cookie is exempt from --rrl.
    #[arg(long, value_name = "on|off", value_parser = parse_on_off, default_value = "off", action = clap::ArgAction::Set)]
    pub(super) cookies: bool,
    /// The cookie secret, 32 hex digits, shared by servers behind one address
    /// [default: random at start].
    #[arg(long, value_name = "HEX", value_parser = parse_secret)]
    pub(super) cookie_secret: Option<[u8; 16]>,
    /// Address or prefix allowed to pull zones (AXFR, and IXFR answered AXFR-style) over TCP;
    /// repeat for more.
    #[arg(long, value_name = "PREFIX")]
    pub(super) allow_transfer: Vec<firehose_proto::dns::Prefix>,
}

/// A socket-path profile, or `xdp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProfileArg {
    Socket(Profile),
    Xdp,
}

fn parse_profile(s: &str) -> Result<ProfileArg, String> {
    if s == PROFILE_XDP {
        return Ok(ProfileArg::Xdp);
    }
    s.parse::<Profile>()
        .map(ProfileArg::Socket)
        .map_err(|e| e.replace(")", ", xdp)"))
}

impl ServeArgs {
    /// Merges the profile preset with explicit flags.
    pub(super) fn config(&self) -> Result<ServeConfig> {
        let listen: SocketAddr = self.listen.parse().map_err(|_| {
            Usage(format!(
                "--listen '{}' is not an address:port (examples: 127.0.0.1:9000, [::1]:9000)",
                self.listen
            ))
        })?;
        let workers = self.workers.unwrap_or(1);
        check_threads("--workers", workers)?;
        check_threads("--tcp-threads", self.dns.tcp_threads)?;
        let base = match self.profile {
            // The fast configuration unless asked otherwise (before 0.2 it was naive); --io
            // xdp without a profile takes the xdp profile's socket settings, the same.
            None => Profile::Tuned,
            Some(ProfileArg::Socket(p)) => p,
            // The fallback socket gets the tuned settings; workers pinned, batches of 64.
            Some(ProfileArg::Xdp) => Profile::Tuned,
        };
        let mut cfg = ServeConfig::profile(base, listen, workers);
        // NTP answers with the arrival time: where the path hands the kernel's stamp over,
        // the sockets stamp (the others would pay for stamps unread).
        cfg.rx_timestamps = self.proto == Proto::Ntp && self.io.rx_timestamps.is_some();
        // A batched send leaves the k-th reply's transmit timestamp early by the sending of
        // the k-1 before it (~2 us each here): 64 replies made NTP's offset 60-75 us wrong.
        // io_uring sends once per batch (its driver gives the batch's buffers back at a
        // send), so its NTP transmit timestamps keep that error (docs/ntp.md).
        cfg.send_batch = match (self.send_batch, self.proto) {
            (Some(_), _) if !self.io.send_batch => {
                return Err(Usage(format!(
                    "--send-batch works with --io socket and xdp only: the {} path sends once per received batch (its driver gives the batch's buffers back at a send); leave --send-batch out",
                    self.io.name
                ))
                .into())
            }
            (Some(n), _) => Some(n),
            (None, Proto::Ntp) if self.io.send_batch => Some(1),
            (None, _) => None,
        };
        cfg.sockets = self.sockets.unwrap_or(cfg.sockets);
        cfg.steer = self.steer.unwrap_or(cfg.steer);
        if let Some(p) = &self.cpus {
            cfg.pin = match p {
                Cpus::None => Pin::None,
                Cpus::Auto => Pin::Auto,
                Cpus::List(l) => Pin::List(l.to_vec()),
            };
        }
        if let Some(b) = self.batch {
            cfg.batch = b;
        }
        // As many as a batch holds is one send per batch already.
        cfg.send_batch = cfg.send_batch.filter(|&n| n < cfg.batch);
        if let Some(us) = self.busy_poll {
            cfg.busy_poll = (us > 0).then_some(us);
        }
        cfg.pmtudisc = self.pmtudisc.unwrap_or(cfg.pmtudisc);
        if let Some(on) = self.rxq_ovfl {
            cfg.rxq_ovfl = on;
        }
        cfg.rcvbuf = self.rcvbuf.or(cfg.rcvbuf);
        cfg.sndbuf = self.sndbuf.or(cfg.sndbuf);
        // NTP's interleaved mode: transmit stamps where the path has them and each worker
        // has a socket of its own (the kernel's stamp keys count per socket).
        cfg.tx_timestamps = self.proto == Proto::Ntp
            && self.ntp.ntp_interleaved_entries > 0
            && self.io.tx_timestamps.is_some()
            && (cfg.sockets != SocketMode::Shared || cfg.workers == 1);
        Ok(cfg)
    }
}

/// The flags that belong to one I/O path, for its row in [`crate::io_paths`].
impl ServeArgs {
    /// `serve --io xdp`: the AF_XDP configuration. The fallback socket answers what XDP
    /// cannot, large replies included: without a socket profile or --pmtudisc the kernel
    /// may fragment them rather than refuse with EMSGSIZE.
    pub(crate) fn xdp_config(&self, cfg: &mut ServeConfig) -> Result<firehose_engine::XdpConfig> {
        if !matches!(self.profile, Some(ProfileArg::Socket(_))) && self.pmtudisc.is_none() {
            cfg.pmtudisc = PmtuDisc::Default;
        }
        Ok(self.xdp.config(cfg, self.workers)?)
    }

    /// `serve --io uring`: the ring flags.
    pub(crate) fn uring_setup(&self) -> Result<firehose_sys::uring::UringSetup> {
        Ok(self.uring.ring())
    }

    /// The io_uring flags' refusal under another path.
    pub(crate) fn uring_flags(&self) -> Option<String> {
        self.uring.refusal()
    }
}

/// The socket path's own flags' refusal under another path.
pub(crate) fn socket_only_flags(a: &ServeArgs) -> Option<String> {
    a.rxq_ovfl
        .map(|_| "--rxq-ovfl applies only to --io socket".to_string())
}

/// The AF_XDP flags' refusal under another path.
pub(crate) fn xdp_only_flags(a: &ServeArgs) -> Option<String> {
    if a.profile == Some(ProfileArg::Xdp) {
        return Some("--profile xdp needs --io xdp --iface IFACE".into());
    }
    a.xdp
        .rx
        .any_given()
        .or(a.xdp.verify_checksum.then_some("--verify-checksum"))
        .map(|flag| format!("{flag} applies only to --io xdp"))
}

/// Workers per allowed CPU beyond which more threads only contend.
const WORKERS_PER_CPU: usize = 4;

/// Refuses a thread count (`flag`'s value) far beyond the CPUs this process may run on.
fn check_threads(flag: &str, workers: usize) -> Result<()> {
    let cpus = firehose_sys::cpu::allowed_cpus()
        .map(|c| c.len())
        .unwrap_or(1)
        .max(1);
    let max = cpus * WORKERS_PER_CPU;
    if workers > max {
        return Err(Usage(format!(
            "{flag} {workers} is more than {WORKERS_PER_CPU} per allowed CPU ({cpus} allowed); use at most {max}"
        ))
        .into());
    }
    Ok(())
}

fn parse_secret(s: &str) -> Result<[u8; 16], String> {
    let bad = || format!("'{s}' is not 32 hex digits (16 bytes)");
    if s.len() != 32 || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}
