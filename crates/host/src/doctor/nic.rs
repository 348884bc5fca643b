//! NIC checks over ethtool answers: queues, RSS table, UDP hash fields, GRO, GSO.

use super::facts::{Facts, Iface};
use super::plan::{Phase, Step, Target};
use super::{per_iface, Row, Status};
use crate::nic::{Feature, NicError};
use firehose_sys::ethtool::{RXH_IP_DST, RXH_IP_SRC, RXH_L4_B_0_1, RXH_L4_B_2_3};
use std::collections::BTreeMap;

/// Receive queues the NIC has now: from ethtool, else the rx-* directories in sysfs.
pub(super) fn rx_queue_count(i: &Iface) -> usize {
    match &i.channels {
        Ok(c) if c.combined + c.rx > 0 => (c.combined + c.rx) as usize,
        _ => i.rx.len(),
    }
}

fn refused(row: Row, e: &NicError) -> Row {
    if e.unsupported() {
        row.na(format!("{e} (the driver does not report it)"))
    } else {
        row.na(e.to_string())
    }
}

const WHY_QUEUES: &str = "one rx queue per core lets RSS spread softirq work over all cores (NTT talk: RSS, 64 queues for 20 cores)";

pub(super) fn queues(facts: &Facts) -> Vec<Row> {
    let ncpu = facts.online().len().max(1);
    per_iface(facts, "queues", WHY_QUEUES, |i, row| {
        let row = row.from(format!("ETHTOOL_GCHANNELS {}", i.name));
        let c = match &i.channels {
            Ok(c) => *c,
            Err(e) if i.has_device || !i.rx.is_empty() => {
                let n = i.rx.len();
                let status = if n >= ncpu { Status::Ok } else { Status::Warn };
                return row
                    .status(
                        status,
                        format!("{n} rx queues in sysfs for {ncpu} CPUs; ethtool: {e}"),
                    )
                    .from(format!("/sys/class/net/{}/queues", i.name));
            }
            Err(e) => return refused(row, e),
        };
        let (now, max, kind) = if c.max_combined > 0 {
            (c.combined, c.max_combined, "combined")
        } else {
            (c.rx, c.max_rx, "rx")
        };
        let want = (ncpu as u32).min(max);
        let value = format!("{now} {kind} queues (max {max}) for {ncpu} CPUs");
        if now >= want {
            row.status(Status::Ok, value)
        } else {
            row.status(Status::Warn, value)
                .fix(format!("ethtool -L {} {kind} {want}", i.name))
        }
    })
}

const WHY_RSS: &str = "queues missing from the RSS indirection table never receive (NTT talk: only queues 0-15 of 20 used; use RPS for the rest)";

pub(super) fn rss_table(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "rss-table", WHY_RSS, |i, row| {
        let row = row.from(format!("ETHTOOL_GRXFHINDIR {}", i.name));
        let table = match &i.rss {
            Ok(t) if !t.is_empty() => t,
            Ok(_) => return row.na("indirection table has size 0"),
            Err(e) => return refused(row, e),
        };
        let nrx = rx_queue_count(i).max(1);
        let mut weight: BTreeMap<u32, usize> = BTreeMap::new();
        for q in table {
            *weight.entry(*q).or_default() += 1;
        }
        let unused: Vec<usize> = (0..nrx)
            .filter(|q| !weight.contains_key(&(*q as u32)))
            .collect();
        let (lo, hi) = (
            weight.values().min().copied().unwrap_or(0),
            weight.values().max().copied().unwrap_or(0),
        );
        let value = format!(
            "{} entries over {} of {nrx} rx queues (entries per queue {lo}-{hi})",
            table.len(),
            weight.len()
        );
        let spread: Vec<String> = (0..table.len()).map(|k| (k % nrx).to_string()).collect();
        let step = Step::set(
            "rss-table",
            Phase::Rss,
            Target::Rss {
                iface: i.name.clone(),
            },
            spread.join(" "),
        )
        .on(&i.name);
        if !unused.is_empty() {
            let list: Vec<String> = unused.iter().map(|q| q.to_string()).collect();
            row.status(
                Status::Bad,
                format!("{value}; queues {} never receive", list.join(",")),
            )
            .steps(vec![step])
        } else if hi > 2 * lo {
            row.status(Status::Warn, format!("{value}; uneven weights"))
                .steps(vec![step])
        } else {
            row.status(Status::Ok, value)
        }
    })
}

const WHY_HASH: &str =
    "RSS must hash UDP ports as well as addresses, or all flows between two hosts share one queue";

pub(super) fn udp_hash(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "udp-hash", WHY_HASH, |i, row| {
        let row = row.from(format!("ETHTOOL_GRXFH UDP_V4_FLOW {}", i.name));
        let bits = match &i.udp4_hash {
            Ok(b) => *b,
            Err(e) => return refused(row, e),
        };
        let names: Vec<&str> = [
            (RXH_IP_SRC, "src-ip"),
            (RXH_IP_DST, "dst-ip"),
            (RXH_L4_B_0_1, "src-port"),
            (RXH_L4_B_2_3, "dst-port"),
        ]
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| *n)
        .collect();
        let full = RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3;
        let value = format!(
            "hash fields 0x{bits:x} ({})",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(" ")
            }
        );
        if bits & full == full {
            row.status(Status::Ok, value)
        } else if rx_queue_count(i) <= 1 {
            row.na(format!("{value}; one rx queue, so the hash picks nothing"))
        } else {
            row.status(Status::Warn, value)
                .fix(format!("ethtool -N {} rx-flow-hash udp4 sdfn", i.name))
        }
    })
}

fn feature_row(
    i: &Iface,
    row: Row,
    f: Feature,
    state: &Result<bool, NicError>,
    want_on: bool,
) -> Row {
    let row = row.from(format!(
        "ETHTOOL_G{} {}",
        f.name().to_ascii_uppercase(),
        i.name
    ));
    let on = match state {
        Ok(on) => *on,
        Err(e) => return refused(row, e),
    };
    let word = |b: bool| if b { "on" } else { "off" };
    if on == want_on {
        return row.status(Status::Ok, word(on));
    }
    let step = Step::set(
        row.check,
        Phase::Offload,
        Target::Feature {
            iface: i.name.clone(),
            feature: f,
        },
        word(want_on),
    )
    .on(&i.name);
    row.status(Status::Warn, word(on)).steps(vec![step])
}

const WHY_GRO: &str = "GRO cannot merge request/response UDP and cost 4.9% CPU (NTT talk: +2.6% tps off); keep it on for TCP-heavy hosts and KVM hypervisors";

pub(super) fn gro(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "gro", WHY_GRO, |i, row| {
        feature_row(i, row, Feature::Gro, &i.gro, false)
    })
}

const WHY_GSO: &str = "GSO lets UDP_SEGMENT and TCP senders pass large buffers down the stack and split them late (Bloomberg talk: GSO/TSO)";

pub(super) fn gso(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "gso", WHY_GSO, |i, row| {
        feature_row(i, row, Feature::Gso, &i.gso, true)
    })
}
