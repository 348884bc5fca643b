//! Live counters: softnet drops and squeezes, UDP errors, and the sockets of `--port`. With
//! `--sample` they are deltas over the window; without, totals since boot.

use super::facts::{Facts, Text};
use super::{Row, Status};
use crate::procfs::snmp;
use crate::procfs::softnet::{self, SoftnetRow};
use crate::procfs::{udp_sockets, ParseError};
use std::collections::BTreeMap;

/// A counter file over the `--sample` window (`delta(before, after)`) or, without a sample,
/// its totals since boot; with a phrase naming the span.
fn counters<T>(
    facts: &Facts,
    path: &str,
    parse: fn(&str) -> Result<T, ParseError>,
    delta: impl Fn(&T, &T) -> T,
) -> Result<(T, String), String> {
    let parsed = |t: &str| parse(t).map_err(|e| e.to_string());
    let sampled = |m: &BTreeMap<String, Text>| match m.get(path) {
        Some(Ok(t)) => parsed(t),
        Some(Err(e)) => Err(e.to_string()),
        None => Err(format!("{path}: not sampled")),
    };
    match &facts.sample {
        Some(s) => Ok((
            delta(&sampled(&s.before)?, &sampled(&s.after)?),
            format!("over {:.1} s", s.seconds),
        )),
        None => Ok((
            parsed(facts.file(path).map_err(|e| e.to_string())?)?,
            "since boot".into(),
        )),
    }
}

/// With a sample, the totals since boot at its start: history, shown beside the window's
/// counts but never judged (old drops say nothing about now).
fn since_boot<T>(facts: &Facts, path: &str, parse: fn(&str) -> Result<T, ParseError>) -> Option<T> {
    facts.sample.as_ref()?;
    parse(facts.file(path).ok()?).ok()
}

const WHY_SOFTNET: &str = "'dropped' = backlog full (raise netdev_max_backlog), 'time_squeeze' = NET_RX out of budget (raise netdev_budget); received_rps shows RPS at work";

pub(super) fn softnet(facts: &Facts) -> Vec<Row> {
    let row = Row::new("softnet", "host", WHY_SOFTNET).from("/proc/net/softnet_stat");
    let (rows, span) = match counters(
        facts,
        "/proc/net/softnet_stat",
        softnet::parse,
        |a: &Vec<SoftnetRow>, b: &Vec<SoftnetRow>| softnet::delta(a, b),
    ) {
        Ok(c) => c,
        Err(e) => return vec![row.na(e)],
    };
    let sum = |f: fn(&SoftnetRow) -> u64| rows.iter().map(f).sum::<u64>();
    let (processed, dropped, squeeze, rps) = (
        sum(|r| r.processed),
        sum(|r| r.dropped),
        sum(|r| r.time_squeeze),
        sum(|r| r.received_rps),
    );
    let worst: Vec<String> = rows
        .iter()
        .filter(|r| r.dropped > 0 || r.time_squeeze > 0)
        .map(|r| {
            format!(
                "cpu{} dropped {} squeezed {}",
                r.cpu, r.dropped, r.time_squeeze
            )
        })
        .collect();
    let mut value = format!("{span}: processed {processed}, dropped {dropped}, time_squeeze {squeeze}, received_rps {rps}");
    if facts.sample.is_some() {
        let per: Vec<String> = rows
            .iter()
            .map(|r| format!("cpu{} {}/{}", r.cpu, r.processed, r.received_rps))
            .collect();
        value.push_str(&format!(
            "; per CPU processed/received_rps: {}",
            per.join(" ")
        ));
    }
    if !worst.is_empty() {
        value.push_str(&format!(" ({})", worst.join("; ")));
    }
    if let Some(boot) = since_boot(facts, "/proc/net/softnet_stat", softnet::parse) {
        let sum = |f: fn(&SoftnetRow) -> u64| boot.iter().map(f).sum::<u64>();
        value.push_str(&format!(
            "; since boot, as context: dropped {}, time_squeeze {} of {} processed",
            sum(|r| r.dropped),
            sum(|r| r.time_squeeze),
            sum(|r| r.processed)
        ));
    }
    let sampled = facts.sample.is_some();
    if dropped > 0 {
        let s = if sampled { Status::Bad } else { Status::Warn };
        vec![row
            .status(s, value)
            .fix("raise net.core.netdev_max_backlog (see the backlog row)")]
    } else if squeeze > 0 {
        vec![row
            .status(Status::Warn, value)
            .fix("raise net.core.netdev_budget (see the budget row)")]
    } else {
        vec![row.status(Status::Ok, value)]
    }
}

const WHY_UDP: &str = "RcvbufErrors are datagrams dropped at a full socket buffer: the server is slower than its share of traffic or its buffer too small";

pub(super) fn udp_errors(facts: &Facts) -> Vec<Row> {
    let row = Row::new("udp-errors", "host", WHY_UDP).from("/proc/net/snmp Udp:");
    let (c, span) = match counters(facts, "/proc/net/snmp", snmp::parse_udp, |a, b| b.since(a)) {
        Ok(c) => c,
        Err(e) => return vec![row.na(e)],
    };
    let value = format!(
        "{span}: InDatagrams {} InErrors {} RcvbufErrors {} SndbufErrors {} MemErrors {} NoPorts {}",
        c.in_datagrams, c.in_errors, c.rcvbuf_errors, c.sndbuf_errors, c.mem_errors, c.no_ports
    );
    let mut value = value;
    if let Some(b) = since_boot(facts, "/proc/net/snmp", snmp::parse_udp) {
        value.push_str(&format!(
            "; since boot, as context: InErrors {} RcvbufErrors {} of {} InDatagrams",
            b.in_errors, b.rcvbuf_errors, b.in_datagrams
        ));
    }
    if c.in_errors + c.rcvbuf_errors + c.sndbuf_errors + c.mem_errors == 0 {
        return vec![row.status(Status::Ok, value)];
    }
    let s = if facts.sample.is_some() {
        Status::Bad
    } else {
        Status::Warn
    };
    vec![row.status(s, value).fix(
        "raise the socket buffers (rmem row) and check the port row for the socket that drops",
    )]
}

const WHY_DROPS: &str = "the kernel's own reason for every packet it freed unsent or unread (skb:kfree_skb, the counters of firehose drops): which limit was hit and where, not only that one was";

pub(super) fn drop_reasons(facts: &Facts) -> Vec<Row> {
    let row = Row::new("drop-reasons", "host", WHY_DROPS).from("skb:kfree_skb tracepoint");
    let Some(sample) = &facts.sample else {
        return vec![row.na("judged over a sample window only (--sample)")];
    };
    let r = match &facts.drop_reasons {
        None => return vec![row.na("the drop watch was not attached")],
        Some(Err(e)) => return vec![row.na(e.clone())],
        Some(Ok(r)) => r,
    };
    let at = facts.port.map_or("anywhere on the host".to_string(), |p| {
        format!("at port {p}")
    });
    let span = format!("over {:.1} s", sample.seconds);
    if r.total == 0 {
        return vec![row.status(
            Status::Ok,
            format!(
                "{span}: the kernel dropped nothing {at} (watched by {})",
                r.via
            ),
        )];
    }
    let value = format!(
        "{span}: {} dropped {at}: {} (watched by {})",
        r.total,
        r.lines.join("; "),
        r.via
    );
    // At a server's port every drop is a lost request; host-wide, some are the kernel's
    // routine (a closed port, a TCP reset) and only worth a look.
    let (status, port) = match facts.port {
        Some(p) => (Status::Bad, format!(" --port {p}")),
        None => (Status::Warn, String::new()),
    };
    vec![row.status(status, value).fix(format!(
        "firehose drops --duration 10{port} (the full table, by socket and process)"
    ))]
}

const WHY_PORT: &str = "per-socket drops show which worker of a reuseport group falls behind; an uneven group means the steering (hash or CBPF by CPU) does not match the queues";

fn sockets(udp: &Text, udp6: &Text, port: u16) -> Result<Vec<udp_sockets::UdpSocketRow>, String> {
    let mut out = Vec::new();
    for t in [udp, udp6] {
        match t {
            Ok(t) => out.extend(udp_sockets::parse(t).map_err(|e| e.to_string())?),
            Err(e) if e.is_absent() => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    out.retain(|s| s.local.port() == port);
    Ok(out)
}

pub(super) fn port(facts: &Facts) -> Vec<Row> {
    let Some(port) = facts.port else {
        return vec![Row::new("port", "host", WHY_PORT)
            .from("/proc/net/udp, /proc/net/udp6")
            .na("pass --port N to check the sockets of a server")];
    };
    let row =
        Row::new("port", &format!("port {port}"), WHY_PORT).from("/proc/net/udp, /proc/net/udp6");
    let files = |m: &BTreeMap<String, Text>| -> (Text, Text) {
        let g = |p: &str| {
            m.get(p)
                .cloned()
                .unwrap_or_else(|| facts.files.get(p).cloned().unwrap_or(Ok(String::new())))
        };
        (g("/proc/net/udp"), g("/proc/net/udp6"))
    };
    let (now_udp, now_udp6) = match &facts.sample {
        Some(s) => files(&s.after),
        None => files(&facts.files),
    };
    let now = match sockets(&now_udp, &now_udp6, port) {
        Ok(s) => s,
        Err(e) => return vec![row.na(e)],
    };
    if now.is_empty() {
        return vec![row
            .status(Status::Warn, format!("no UDP socket bound to port {port}"))
            .fix("start the server, or check --port")];
    }
    let before: Vec<udp_sockets::UdpSocketRow> = facts
        .sample
        .as_ref()
        .and_then(|s| {
            let (a, b) = files(&s.before);
            sockets(&a, &b, port).ok()
        })
        .unwrap_or_default();
    let drops: Vec<u64> = now
        .iter()
        .map(|s| {
            let old = before
                .iter()
                .find(|b| b.inode == s.inode)
                .map_or(0, |b| b.drops);
            s.drops.saturating_sub(old)
        })
        .collect();
    // Queue occupancy per socket over the polls: how often it had datagrams waiting.
    let polls: Vec<Vec<udp_sockets::UdpSocketRow>> = facts
        .sample
        .iter()
        .flat_map(|s| s.polls.iter())
        .filter_map(|(a, b)| sockets(a, b, port).ok())
        .collect();
    let busy: Vec<usize> = now
        .iter()
        .map(|s| {
            polls
                .iter()
                .filter(|p| p.iter().any(|r| r.inode == s.inode && r.rx_queue > 0))
                .count()
        })
        .collect();
    let span = if facts.sample.is_some() {
        "in the sample"
    } else {
        "since each socket was created"
    };
    let per: Vec<String> = now
        .iter()
        .zip(&drops)
        .zip(&busy)
        .map(|((s, d), b)| {
            format!(
                "{} inode {} drops {d} queued {b}/{}",
                s.local,
                s.inode,
                polls.len()
            )
        })
        .collect();
    let total: u64 = drops.iter().sum();
    let mut value = format!(
        "{} socket(s), drops {total} {span}: {}",
        now.len(),
        per.join("; ")
    );
    let mut status = if total > 0 { Status::Bad } else { Status::Ok };
    if now.len() > 1 && !polls.is_empty() {
        let (lo, hi) = (
            busy.iter().min().copied().unwrap_or(0),
            busy.iter().max().copied().unwrap_or(0),
        );
        let dropping = drops.iter().filter(|d| **d > 0).count();
        if hi * 2 >= polls.len() && lo == 0 || (dropping > 0 && dropping < now.len()) {
            value.push_str("; uneven: some sockets back up while others stay empty");
            status = status.max(Status::Warn);
        } else if hi == 0 {
            value.push_str("; queues always empty: no pressure, evenness not visible");
        }
    }
    let row = row.status(status, value);
    if status == Status::Ok {
        vec![row]
    } else {
        vec![row.fix("steer by CPU (firehose serve --sockets reuseport --steer cpu) and raise rmem; see the rps/irq-affinity rows")]
    }
}
