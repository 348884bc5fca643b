//! The servers an experiment can put under load: ours and the peers a user would pick
//! instead, for echo (the ladder, `compare`), for DNS (`compare --proto dns`), for RADIUS
//! (`compare --proto radius`) and for NTP (`compare --proto ntp`).

use serde::Serialize;

/// A server under test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ServerKind {
    /// `firehose serve --proto echo` with these extra flags.
    Firehose { flags: Vec<String> },
    /// The lab's one-socket echo server (`firehose lab plain-echo`), the talk's baseline.
    PlainEcho { threads: usize },
    /// `sockperf sr`.
    Sockperf,
    /// `firehose serve --proto dns --profile tuned`.
    FirehoseDns,
    /// knotd with `udp-workers N` and `socket-affinity: on`.
    Knot,
    /// nsd with `server-count N`, `reuseport: yes` and response rate limiting off.
    Nsd,
    /// `firehose serve --proto radius`.
    FirehoseRadius,
    /// FreeRADIUS with its files, pap and chap modules and a thread pool of N.
    FreeRadius,
    /// `firehose serve --proto ntp --ntp-local-stratum 10`.
    FirehoseNtp,
    /// N chronyd instances on one SO_REUSEPORT port (`local stratum 10`, no rate limit).
    Chronyd,
    /// ntpsec's ntpd: one process on port 123 (orphan stratum 10, no rate limit).
    Ntpd,
}

/// The DNS servers, in the order `compare --proto dns` lists them.
pub const DNS_SERVERS: [ServerKind; 3] =
    [ServerKind::FirehoseDns, ServerKind::Knot, ServerKind::Nsd];

/// The RADIUS servers, in the order `compare --proto radius` lists them.
pub const RADIUS_SERVERS: [ServerKind; 2] = [ServerKind::FirehoseRadius, ServerKind::FreeRadius];

/// The NTP servers, in the order `compare --proto ntp` lists them.
pub const NTP_SERVERS: [ServerKind; 3] = [
    ServerKind::FirehoseNtp,
    ServerKind::Chronyd,
    ServerKind::Ntpd,
];

impl ServerKind {
    /// The program's name, as tables and the command line show it.
    pub fn name(&self) -> &'static str {
        match self {
            ServerKind::Firehose { .. }
            | ServerKind::FirehoseDns
            | ServerKind::FirehoseRadius
            | ServerKind::FirehoseNtp => "firehose",
            ServerKind::PlainEcho { .. } => "plain",
            ServerKind::Sockperf => "sockperf",
            ServerKind::Knot => "knotd",
            ServerKind::Nsd => "nsd",
            ServerKind::FreeRadius => "freeradius",
            ServerKind::Chronyd => "chronyd",
            ServerKind::Ntpd => "ntpd",
        }
    }

    /// The program's name as its authors write it, for sentences ("FreeRADIUS").
    pub fn title(&self) -> &'static str {
        match self {
            ServerKind::FreeRadius => "FreeRADIUS",
            other => other.name(),
        }
    }

    /// The short key of a DNS server in JSON ("firehose", "knot", "nsd").
    pub fn key(&self) -> &'static str {
        match self {
            ServerKind::Knot => "knot",
            other => other.name(),
        }
    }

    /// A DNS server by the name the command line uses (the program's).
    pub fn dns_from_name(s: &str) -> Option<ServerKind> {
        DNS_SERVERS.into_iter().find(|k| k.name() == s)
    }

    /// A RADIUS server by the name the command line uses (the program's).
    pub fn radius_from_name(s: &str) -> Option<ServerKind> {
        RADIUS_SERVERS.into_iter().find(|k| k.name() == s)
    }

    /// An NTP server by the name the command line uses (the program's).
    pub fn ntp_from_name(s: &str) -> Option<ServerKind> {
        NTP_SERVERS.into_iter().find(|k| k.name() == s)
    }

    /// True for the servers of `compare --proto dns`.
    pub fn speaks_dns(&self) -> bool {
        matches!(
            self,
            ServerKind::FirehoseDns | ServerKind::Knot | ServerKind::Nsd
        )
    }

    /// The configuration that sets the worker count, as a row of `compare --proto dns`
    /// shows it (for echo servers: their flags).
    pub fn config(&self, workers: usize) -> String {
        match self {
            ServerKind::Knot => format!("udp-workers {workers}, socket-affinity on"),
            ServerKind::Nsd => format!("server-count {workers}, reuseport"),
            ServerKind::PlainEcho { .. } => format!("threads {workers}"),
            ServerKind::Firehose { flags } => flags.join(" "),
            ServerKind::Sockperf => "sockperf sr".into(),
            ServerKind::FirehoseDns => format!("tuned, workers {workers}"),
            ServerKind::FirehoseRadius => format!("workers {workers}"),
            ServerKind::FreeRadius => format!("thread pool {workers}"),
            ServerKind::FirehoseNtp => format!("workers {workers}"),
            ServerKind::Chronyd => format!("{workers} instance(s), reuseport"),
            ServerKind::Ntpd => "1 process, port 123".into(),
        }
    }

    /// True when the server's program can be run here (ours always; ntpd on PATH or where
    /// mk/deps unpacks it).
    pub fn found(&self) -> bool {
        match self {
            ServerKind::Ntpd => crate::peers::ntpd::find().is_some(),
            other => other
                .program()
                .is_none_or(|(p, _)| crate::cmd::installed(p)),
        }
    }

    /// A peer's program that must be installed (and its Debian package); `None` for ours.
    pub fn program(&self) -> Option<(&'static str, &'static str)> {
        match self {
            ServerKind::Sockperf => Some(("sockperf", "sockperf")),
            ServerKind::Knot => Some(("knotd", "knot")),
            ServerKind::Nsd => Some(("nsd", "nsd")),
            ServerKind::FreeRadius => Some(("freeradius", "freeradius")),
            ServerKind::Chronyd => Some((
                crate::peers::chronyd::PROGRAM,
                crate::peers::chronyd::PACKAGE,
            )),
            ServerKind::Ntpd => Some((crate::peers::ntpd::PROGRAM, crate::peers::ntpd::PACKAGE)),
            _ => None,
        }
    }
}

/// The servers of `servers` that can run here: a peer whose program is not installed is
/// left out, into `skipped` with the package to install.
pub fn installed(
    servers: &[ServerKind],
    skipped: &mut Vec<crate::study::Skipped>,
) -> Vec<ServerKind> {
    servers
        .iter()
        .filter(|k| match k.program() {
            Some((prog, _)) if !k.found() => {
                skipped.push(crate::study::Skipped::not_installed(prog));
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

/// Serialises a DNS server as its key (`"knot"`), the shape `compare --proto dns` writes.
pub fn serialize_key<S: serde::Serializer>(k: &ServerKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_and_keys() {
        assert_eq!(ServerKind::dns_from_name("knotd"), Some(ServerKind::Knot));
        assert_eq!(
            ServerKind::dns_from_name("firehose"),
            Some(ServerKind::FirehoseDns)
        );
        assert_eq!(ServerKind::dns_from_name("plain"), None);
        assert_eq!(ServerKind::Knot.key(), "knot");
        assert!(DNS_SERVERS.iter().all(ServerKind::speaks_dns));
        assert!(!ServerKind::Sockperf.speaks_dns());
        assert_eq!(
            ServerKind::Knot.config(2),
            "udp-workers 2, socket-affinity on"
        );
        assert_eq!(ServerKind::FirehoseDns.config(1), "tuned, workers 1");
        assert_eq!(
            ServerKind::radius_from_name("freeradius"),
            Some(ServerKind::FreeRadius)
        );
        assert_eq!(ServerKind::FirehoseRadius.key(), "firehose");
        assert!(!ServerKind::FreeRadius.speaks_dns());
        assert_eq!(
            ServerKind::ntp_from_name("chronyd"),
            Some(ServerKind::Chronyd)
        );
        assert_eq!(
            ServerKind::ntp_from_name("firehose"),
            Some(ServerKind::FirehoseNtp)
        );
        assert_eq!(ServerKind::Chronyd.config(2), "2 instance(s), reuseport");
        assert_eq!(ServerKind::ntp_from_name("ntpd"), Some(ServerKind::Ntpd));
        assert_eq!(ServerKind::FreeRadius.title(), "FreeRADIUS");
    }
}
