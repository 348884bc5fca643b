//! Server configuration: every application-side technique of the NTT talk as a switch,
//! and the profiles that climb its ladder.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::str::FromStr;

/// How many sockets the workers share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SocketMode {
    /// One socket read by every worker (the talk's baseline; its lock is contended).
    Shared,
    /// One SO_REUSEPORT socket per worker.
    Reuseport,
}

impl SocketMode {
    pub const ALL: &'static [SocketMode] = &[SocketMode::Shared, SocketMode::Reuseport];

    /// The name as the command line and the documents spell it.
    pub fn name(self) -> &'static str {
        match self {
            SocketMode::Shared => "shared",
            SocketMode::Reuseport => "reuseport",
        }
    }
}

/// How the kernel picks a socket in the reuseport group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Steer {
    /// By flow hash (the kernel default).
    None,
    /// By receiving CPU, with a classic BPF program (SO_ATTACH_REUSEPORT_CBPF).
    Cpu,
    /// By receiving CPU, with an eBPF program (SO_ATTACH_REUSEPORT_EBPF).
    CpuEbpf,
}

impl Steer {
    pub const ALL: &'static [Steer] = &[Steer::None, Steer::Cpu, Steer::CpuEbpf];

    /// The name as the command line and the documents spell it.
    pub fn name(self) -> &'static str {
        match self {
            Steer::None => "none",
            Steer::Cpu => "cpu",
            Steer::CpuEbpf => "cpu-ebpf",
        }
    }
}

/// Where worker threads run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pin {
    /// Wherever the scheduler puts them.
    None,
    /// Worker i on the i-th allowed CPU.
    Auto,
    /// Worker i on the i-th CPU of the list.
    List(Vec<usize>),
}

/// IP_MTU_DISCOVER choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PmtuDisc {
    /// Leave the kernel's default (from net.ipv4.ip_no_pmtu_disc).
    Default,
    /// IP_PMTUDISC_DONT: never set DF.
    Dont,
    /// IP_PMTUDISC_DO: always set DF. A DF datagram from an unconnected socket gets IP ID 0,
    /// so the kernel skips `__ip_select_ident` per packet: the talk's "skip IP ID
    /// calculation" step (its slide sets IP_PMTUDISC_DO). Datagrams over the path MTU fail
    /// with EMSGSIZE instead of being fragmented.
    Do,
    /// IP_PMTUDISC_OMIT: no DF and path MTU ignored; the kernel must then compute an IP ID
    /// for every datagram, so this costs CPU rather than saving it.
    Omit,
}

impl PmtuDisc {
    pub const ALL: &'static [PmtuDisc] = &[
        PmtuDisc::Default,
        PmtuDisc::Dont,
        PmtuDisc::Do,
        PmtuDisc::Omit,
    ];

    /// The name as the command line and the documents spell it.
    pub fn name(self) -> &'static str {
        match self {
            PmtuDisc::Default => "default",
            PmtuDisc::Dont => "dont",
            PmtuDisc::Do => "do",
            PmtuDisc::Omit => "omit",
        }
    }
}

/// A named preset for one step of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    Naive,
    Reuseport,
    Steered,
    Tuned,
    Latency,
}

impl Profile {
    /// All profiles in ladder order.
    pub const ALL: [Profile; 5] = [
        Profile::Naive,
        Profile::Reuseport,
        Profile::Steered,
        Profile::Tuned,
        Profile::Latency,
    ];

    /// The profile's name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Naive => "naive",
            Profile::Reuseport => "reuseport",
            Profile::Steered => "steered",
            Profile::Tuned => "tuned",
            Profile::Latency => "latency",
        }
    }

    /// One line on what the profile turns on.
    pub fn describe(self) -> &'static str {
        match self {
            Profile::Naive => "one shared socket, N threads, recvfrom/sendto",
            Profile::Reuseport => "SO_REUSEPORT socket per worker, recvfrom/sendto",
            Profile::Steered => "reuseport + CPU steering (CBPF) + pinned workers",
            Profile::Tuned => {
                "steered + recvmmsg/sendmmsg batches of 64 + IP_PMTUDISC_DO + 4 MiB receive buffer, no SO_RXQ_OVFL"
            }
            Profile::Latency => {
                "steered + busy polling (50 us) + batches of 8 + IP_PMTUDISC_DO + 4 MiB receive buffer"
            }
        }
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown profile '{s}' (valid: naive, reuseport, steered, tuned, latency)")
            })
    }
}

/// The receive buffer of the tuned and latency profiles. A server well below its capacity
/// still meets bursts: a generator's wake-up sends 64 to 128 requests per flow back to
/// back, and a server thread descheduled for a few ms holds everything that arrives
/// meanwhile. The kernel's default (rmem_default, 208 KiB: about 250 small datagrams)
/// dropped 0.28% of 150k/s, a third of capacity (issue 25). A busy-polling worker is no
/// exception: it spins, so the scheduler shares its CPU with any other runnable task in
/// slices of milliseconds, and at 55k/s the default buffer lost requests from 30% of max
/// (all SOCKET_RCVBUFF at the server's socket). 4 MiB holds about 30 ms of small requests
/// at 150k/s; it turns a stall's loss into queueing that the latency figures show. Without
/// CAP_NET_ADMIN the kernel caps it at net.core.rmem_max, and serve says so.
pub const TUNED_RCVBUF: usize = 4 << 20;

/// Everything `serve` needs to start.
#[derive(Debug, Clone, Serialize)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub workers: usize,
    pub sockets: SocketMode,
    pub steer: Steer,
    pub pin: Pin,
    /// Messages per recvmmsg/sendmmsg; 1 means recvfrom/sendto.
    pub batch: usize,
    /// SO_BUSY_POLL microseconds; `Some` also makes workers poll without sleeping.
    pub busy_poll: Option<u32>,
    pub pmtudisc: PmtuDisc,
    pub rcvbuf: Option<usize>,
    pub sndbuf: Option<usize>,
    /// SO_RXQ_OVFL: the kernel attaches the drop counter to every datagram. It costs a
    /// control message per packet (~7% of server CPU in a perf profile); the same counter
    /// is always available from SO_MEMINFO at no per-packet cost.
    pub rxq_ovfl: bool,
    /// SO_TIMESTAMPNS: the kernel stamps each datagram's arrival (CLOCK_REALTIME) and the
    /// socket backend hands the stamp to the handler ([`crate::Request::rx_time_ns`]), for a
    /// protocol that answers with it (NTP). Off for the others: a control message per
    /// packet costs what SO_RXQ_OVFL's does.
    pub rx_timestamps: bool,
    /// SO_TIMESTAMPING instead of SO_TIMESTAMPNS (socket path): the same arrival stamps,
    /// and a software transmit stamp for each reply whose handler asks for one
    /// ([`crate::Request::want_tx_stamp`]), read from the socket's error queue once per
    /// batch and handed back ([`crate::Handler::transmitted`]): NTP's interleaved mode.
    /// Replies that do not ask cost nothing more. Needs one socket per worker (the
    /// kernel's stamp keys count per socket).
    pub tx_timestamps: bool,
    /// Replies per send call at most, `None` for one send per received batch. A reply
    /// whose content is a clock reading (NTP's transmit timestamp) is only as true as the
    /// time between that reading and its send: in a batch of 64 the last reply waits for
    /// the 63 before it to be sent, and its timestamp is early by that much.
    pub send_batch: Option<usize>,
}

impl ServeConfig {
    /// The preset of a profile for `workers` workers on `listen`.
    pub fn profile(p: Profile, listen: SocketAddr, workers: usize) -> Self {
        let base = ServeConfig {
            listen,
            workers,
            sockets: SocketMode::Shared,
            steer: Steer::None,
            pin: Pin::None,
            batch: 1,
            busy_poll: None,
            pmtudisc: PmtuDisc::Default,
            rcvbuf: None,
            sndbuf: None,
            rxq_ovfl: true,
            rx_timestamps: false,
            tx_timestamps: false,
            send_batch: None,
        };
        match p {
            Profile::Naive => base,
            Profile::Reuseport => ServeConfig {
                sockets: SocketMode::Reuseport,
                ..base
            },
            Profile::Steered => ServeConfig {
                sockets: SocketMode::Reuseport,
                steer: Steer::Cpu,
                pin: Pin::Auto,
                ..base
            },
            Profile::Tuned => ServeConfig {
                sockets: SocketMode::Reuseport,
                steer: Steer::Cpu,
                pin: Pin::Auto,
                batch: 64,
                pmtudisc: PmtuDisc::Do,
                rcvbuf: Some(TUNED_RCVBUF),
                rxq_ovfl: false,
                ..base
            },
            Profile::Latency => ServeConfig {
                sockets: SocketMode::Reuseport,
                steer: Steer::Cpu,
                pin: Pin::Auto,
                batch: 8,
                busy_poll: Some(50),
                pmtudisc: PmtuDisc::Do,
                rcvbuf: Some(TUNED_RCVBUF),
                rxq_ovfl: false,
                ..base
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line parses these by `name`, the documents write them through serde: one
    /// spelling both ways, every value listed once.
    #[test]
    fn names_are_the_documents_spelling_and_every_value_is_listed() {
        fn check<T: Serialize + Copy + PartialEq + std::fmt::Debug>(
            all: &[T],
            name: fn(T) -> &'static str,
        ) {
            for (i, &v) in all.iter().enumerate() {
                assert_eq!(serde_json::to_value(v).unwrap(), name(v), "{v:?}");
                assert!(all[i + 1..].iter().all(|&w| w != v), "{v:?} twice");
            }
        }
        check(SocketMode::ALL, SocketMode::name);
        check(Steer::ALL, Steer::name);
        check(PmtuDisc::ALL, PmtuDisc::name);
        assert_eq!(
            (SocketMode::ALL.len(), Steer::ALL.len(), PmtuDisc::ALL.len()),
            (2, 3, 4)
        );
    }

    #[test]
    fn profiles_parse_by_name() {
        for p in Profile::ALL {
            assert_eq!(p.name().parse::<Profile>().unwrap(), p);
        }
        assert!("fast".parse::<Profile>().is_err());
    }

    #[test]
    fn only_tuned_and_latency_ask_for_a_receive_buffer() {
        let l: SocketAddr = "127.0.0.1:0".parse().unwrap();
        for p in Profile::ALL {
            let want = matches!(p, Profile::Tuned | Profile::Latency).then_some(TUNED_RCVBUF);
            assert_eq!(ServeConfig::profile(p, l, 1).rcvbuf, want, "{p:?}");
        }
    }
}
