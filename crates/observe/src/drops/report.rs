//! Counts turned into rows a person reads: reason names from the tracepoint format,
//! locations named with /proc/kallsyms, sockets' owners from /proc/<pid>/fd, and the
//! one-line attribution of a loss (`2325 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000
//! (firehose serve pid 123)`) that load, sink and lab summaries print.

use super::Counts;
use firehose_host::kernel::kallsyms::{self, Symbols};
use firehose_host::kernel::tracepoint::Format;
use firehose_host::procfs::socket_owners::{self, Owner};
use firehose_sys::trace::prog::PortFrom;
use std::collections::{BTreeMap, BTreeSet};

/// One (reason, location, port, socket, namespace) and how many drops it had.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DropRow {
    pub count: u64,
    /// The kernel's name (`SOCKET_RCVBUFF`), or `reason N` when the format has none.
    pub reason: String,
    pub reason_code: u32,
    /// The function that freed the skb (`udp_queue_rcv_one_skb`), when kallsyms names it.
    pub function: Option<String>,
    /// `function+0xoffset [module]`, or the raw address in hex.
    pub location: String,
    /// The local port of the socket, or the packet's destination port.
    pub port: Option<u16>,
    /// `socket` or `packet`: where the port came from.
    pub port_from: Option<String>,
    /// `udp` or `tcp` for a port read from the packet.
    pub protocol: Option<String>,
    /// The socket's inode (`socket:[N]` in /proc/<pid>/fd).
    pub socket_inode: Option<u64>,
    /// The network namespace's inode (`readlink /proc/<pid>/ns/net`).
    pub netns: Option<u32>,
    /// The process holding the socket, when one still does.
    pub process: Option<Owner>,
}

/// Names locations; loaded once per report (or once for a refreshing screen).
pub struct Namer {
    symbols: Symbols,
    /// Why locations are raw addresses, when they are.
    pub note: Option<String>,
}

impl Namer {
    /// Reads /proc/kallsyms.
    pub fn load() -> Namer {
        match firehose_host::procfs::read("/proc/kallsyms", kallsyms::parse) {
            Ok(s) if s.hidden => Namer {
                symbols: s,
                note: Some(
                    "/proc/kallsyms hides addresses from this user (kptr_restrict): locations are raw"
                        .into(),
                ),
            },
            Ok(s) => Namer {
                symbols: s,
                note: None,
            },
            Err(e) => Namer {
                symbols: Symbols::default(),
                note: Some(format!("{e}: locations are raw addresses")),
            },
        }
    }

    /// A namer with no symbols (tests, or a caller that wants addresses).
    pub fn none() -> Namer {
        Namer {
            symbols: Symbols::default(),
            note: None,
        }
    }
}

/// The reason's name as the format prints it.
pub fn reason_name(format: &Format, code: u32) -> String {
    format
        .symbol("reason", code as i64)
        .map(str::to_string)
        .unwrap_or_else(|| format!("reason {code}"))
}

/// The rows of `counts`, busiest first; owners are looked up when `owners` is true.
pub fn rows(counts: &Counts, format: &Format, namer: &Namer, owners: bool) -> Vec<DropRow> {
    let inodes: BTreeSet<u64> = counts
        .by_key
        .keys()
        .filter(|k| k.ino != 0)
        .map(|k| k.ino)
        .collect();
    let owners: BTreeMap<u64, Owner> = if owners {
        socket_owners::owners(&inodes)
    } else {
        BTreeMap::new()
    };
    let mut out: Vec<DropRow> = counts
        .by_key
        .iter()
        .map(|(k, &count)| {
            let loc = namer.symbols.locate(k.location);
            DropRow {
                count,
                reason: reason_name(format, k.reason),
                reason_code: k.reason,
                function: loc.as_ref().map(|l| l.function.clone()),
                location: loc.map_or_else(|| format!("{:#x}", k.location), |l| l.to_string()),
                port: (k.port_from != PortFrom::None).then_some(k.port),
                port_from: match k.port_from {
                    PortFrom::Socket => Some("socket".into()),
                    PortFrom::Packet => Some("packet".into()),
                    PortFrom::None => None,
                },
                protocol: match (k.port_from, k.ip_proto) {
                    (PortFrom::Packet, 17) => Some("udp".into()),
                    (PortFrom::Packet, 6) => Some("tcp".into()),
                    _ => None,
                },
                socket_inode: (k.ino != 0).then_some(k.ino),
                netns: (k.netns != 0).then_some(k.netns),
                process: owners.get(&k.ino).cloned(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    out
}

/// Keeps the rows a caller asked about: a port, a network namespace.
pub fn filter(rows: &mut Vec<DropRow>, port: Option<u16>, netns: Option<u32>) {
    rows.retain(|r| {
        port.is_none_or(|p| r.port == Some(p)) && netns.is_none_or(|n| r.netns == Some(n))
    });
}

/// A loss attributed, grouped by reason, function, port and process (locations inside
/// one function add up): `2325 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000
/// (firehose serve pid 123)`, busiest first, at most `limit` groups, the rest summed.
pub fn attribution(rows: &[DropRow], limit: usize) -> Vec<String> {
    let mut groups: BTreeMap<(String, String, Option<u16>, Option<String>), u64> = BTreeMap::new();
    for r in rows {
        let at = r.function.clone().unwrap_or_else(|| r.location.clone());
        let who = r.process.as_ref().map(|o| o.to_string());
        *groups
            .entry((r.reason.clone(), at, r.port, who))
            .or_default() += r.count;
    }
    let mut v: Vec<_> = groups.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out: Vec<String> = v
        .iter()
        .take(limit)
        .map(|((reason, at, port, who), n)| {
            let mut s = format!("{n} {reason} at {at}");
            if let Some(p) = port {
                s.push_str(&format!(", port {p}"));
            }
            if let Some(w) = who {
                s.push_str(&format!(" ({w})"));
            }
            s
        })
        .collect();
    let rest: u64 = v.iter().skip(limit).map(|(_, n)| n).sum();
    if rest > 0 {
        out.push(format!("{rest} elsewhere"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_sys::trace::prog::DropKey;

    fn format() -> Format {
        firehose_host::kernel::tracepoint::parse(
            "name: kfree_skb\nformat:\n\tfield:enum skb_drop_reason reason;\toffset:36;\tsize:4;\tsigned:0;\n\nprint fmt: \"%s\", __print_symbolic(REC->reason, { 3, \"NO_SOCKET\" }, { 6, \"SOCKET_RCVBUFF\" })\n",
        )
        .unwrap()
    }

    fn key(reason: u32, port: u16, from: PortFrom, location: u64) -> DropKey {
        DropKey {
            reason,
            port,
            port_from: from,
            ip_proto: 17,
            location,
            ino: 0,
            netns: 7,
        }
    }

    #[test]
    fn rows_name_reasons_and_attribution_groups_by_function() {
        let mut c = Counts::default();
        c.by_key.insert(key(6, 9000, PortFrom::Socket, 0x10), 2000);
        c.by_key.insert(key(6, 9000, PortFrom::Socket, 0x20), 325);
        c.by_key.insert(key(3, 9001, PortFrom::Packet, 0x30), 5);
        c.by_key.insert(key(99, 0, PortFrom::None, 0x40), 1);
        let rows = rows(&c, &format(), &Namer::none(), false);
        assert_eq!(rows[0].count, 2000);
        assert_eq!(rows[0].reason, "SOCKET_RCVBUFF");
        assert_eq!(rows[0].location, "0x10");
        assert_eq!(rows[2].protocol.as_deref(), Some("udp"));
        assert_eq!(rows[3].reason, "reason 99");
        assert_eq!(rows[3].port, None);
        let lines = attribution(&rows, 5);
        assert_eq!(lines[0], "2000 SOCKET_RCVBUFF at 0x10, port 9000");
        let one = attribution(&rows, 1);
        assert_eq!(
            one,
            ["2000 SOCKET_RCVBUFF at 0x10, port 9000", "331 elsewhere"]
        );
        let mut only = rows.clone();
        filter(&mut only, Some(9001), None);
        assert_eq!(only.len(), 1);
        filter(&mut only, None, Some(8));
        assert!(only.is_empty());
    }

    #[test]
    fn counts_since_an_earlier_snapshot() {
        let mut a = Counts::default();
        a.by_key.insert(key(6, 1, PortFrom::Socket, 1), 10);
        let mut b = a.clone();
        *b.by_key.get_mut(&key(6, 1, PortFrom::Socket, 1)).unwrap() = 15;
        b.by_key.insert(key(3, 2, PortFrom::Packet, 2), 4);
        b.unkeyed = 2;
        let d = b.since(&a);
        assert_eq!(d.total(), 5 + 4 + 2);
        assert_eq!(d.by_key.len(), 2);
    }
}
