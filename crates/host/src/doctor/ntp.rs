//! What `serve --proto ntp` needs of the host: a kernel clock an NTP daemon keeps
//! synchronised (the server announces what the kernel says, or refuses to start), and the
//! NTP port free of another NTP server.

use super::facts::NTP_PORT;
use super::{Facts, Row, Status};
use crate::procfs::udp_sockets;

const WHY_CLOCK: &str = "firehose serve --proto ntp serves the system clock as the kernel \
    reports it (adjtimex): an unsynchronised clock is refused, or announced as leap 3 / \
    stratum 16, which clients ignore";
const WHY_PORT: &str = "only one process receives a unicast datagram on a UDP port (without \
    SO_REUSEPORT shared by both): another NTP server on the port answers instead of firehose, \
    or firehose cannot bind it (EADDRINUSE)";

/// Programs that serve NTP (their /proc/PID/comm).
const NTP_SERVERS: &[&str] = &[
    "chronyd",
    "ntpd",
    "openntpd",
    "ntpsec",
    "ptp4l",
    "timemaster",
];

/// `ntp-clock`: is the kernel clock synchronised, with what error bound and leap.
pub(super) fn clock(facts: &Facts) -> Vec<Row> {
    let row = Row::new("ntp-clock", "host", WHY_CLOCK).from("adjtimex(2), modes 0 (read only)");
    let c = match &facts.clock {
        None => return vec![row.na("not the running host's tree: the kernel clock not read")],
        Some(Err(e)) => return vec![row.na(format!("adjtimex refused: {e}"))],
        Some(Ok(c)) => c,
    };
    let leap = match c.status {
        s if s & firehose_sys::clock::STA_INS != 0 => ", leap second to insert at midnight UTC",
        s if s & firehose_sys::clock::STA_DEL != 0 => ", leap second to delete at midnight UTC",
        _ => "",
    };
    let value = format!(
        "{} ({}), maxerror {} us, esterror {} us{leap}",
        if c.synchronised() {
            "synchronised"
        } else {
            "NOT synchronised"
        },
        c.state_name(),
        c.maxerror_us,
        c.esterror_us,
    );
    if c.synchronised() {
        vec![row.status(Status::Ok, value)]
    } else {
        vec![row.status(Status::Warn, value).fix(
            "run an NTP daemon that disciplines the clock (chronyd: apt-get install chrony), \
             or serve it anyway with --ntp-local-stratum N (or announce it with \
             --allow-unsynchronised)",
        )]
    }
}

/// `ntp-port`: who holds UDP port 123 (and `--port`), warning when an NTP server other
/// than firehose does.
pub(super) fn port(facts: &Facts) -> Vec<Row> {
    let mut ports = vec![NTP_PORT];
    ports.extend(facts.port.filter(|p| *p != NTP_PORT));
    let mut rows = Vec::new();
    for port in ports {
        let row = Row::new("ntp-port", &format!("port {port}"), WHY_PORT)
            .from("/proc/net/udp, /proc/net/udp6, /proc/PID/fd");
        let mut sockets = Vec::new();
        let mut unreadable = None;
        let mut read = 0;
        for p in ["/proc/net/udp", "/proc/net/udp6"] {
            match facts.file(p).map(udp_sockets::parse) {
                Ok(Ok(v)) => {
                    read += 1;
                    sockets.extend(v.into_iter().filter(|s| s.local.port() == port));
                }
                Ok(Err(e)) => unreadable = Some(e.to_string()),
                Err(e) if e.is_absent() => {}
                Err(e) => unreadable = Some(e.to_string()),
            }
        }
        if let Some(e) = unreadable {
            rows.push(row.na(e));
            continue;
        }
        if read == 0 {
            rows.push(row.na("no /proc/net/udp or /proc/net/udp6 to read"));
            continue;
        }
        if sockets.is_empty() {
            rows.push(row.status(Status::Ok, format!("no UDP socket bound to port {port}")));
            continue;
        }
        let mut holders: Vec<String> = Vec::new();
        let mut other_server = None;
        for s in &sockets {
            let who = match facts.udp_owners.get(&s.inode) {
                Some(o) => {
                    if other_server.is_none() && NTP_SERVERS.contains(&o.comm.as_str()) {
                        other_server = Some(o.comm.clone());
                    }
                    format!("{o}")
                }
                None => format!("inode {} (owner not visible)", s.inode),
            };
            let h = format!("{} {who}", s.local);
            if !holders.contains(&h) {
                holders.push(h);
            }
        }
        let value = format!("{} socket(s): {}", sockets.len(), holders.join("; "));
        rows.push(match other_server {
            Some(name) => row.status(Status::Warn, value).fix(format!(
                "stop {name} serving (chrony: 'port 0' in chrony.conf keeps it a client only; \
                 or systemctl stop {name}), or serve firehose on another --listen port"
            )),
            None => row.status(Status::Ok, value),
        });
    }
    rows
}
