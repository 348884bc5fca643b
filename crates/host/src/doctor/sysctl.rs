//! Kernel limits a UDP server runs into: socket buffers, UDP memory, backlog, NAPI budget,
//! busy polling. Buffer-like values are only ever raised.

use super::facts::Facts;
use super::plan::{Kind, NapiParam, Phase, Step, Target};
use super::{Row, Status};
use crate::text;

const MIB: u64 = 1 << 20;

/// A numeric sysctl and the least value a high-rate UDP server wants.
struct Want {
    key: &'static str,
    min: u64,
}

impl Want {
    fn path(&self) -> String {
        format!("/proc/sys/{}", self.key.replace('.', "/"))
    }
}

/// One row over several raise-only numeric sysctls.
fn raise_row(facts: &Facts, check: &'static str, why: &'static str, wants: &[Want]) -> Row {
    let row = Row::new(check, "host", why)
        .from(wants.iter().map(|w| w.key).collect::<Vec<_>>().join(", "));
    let mut parts = Vec::new();
    let mut steps = Vec::new();
    for w in wants {
        let v = match facts.file(&w.path()) {
            Ok(t) => match t.trim().parse::<u64>() {
                Ok(v) => v,
                Err(_) => return row.na(format!("{}: not a number: {:?}", w.key, t.trim())),
            },
            Err(e) => return row.na(e.to_string()),
        };
        parts.push(format!("{}={v}", w.key.rsplit('.').next().unwrap_or(w.key)));
        if v < w.min {
            steps.push(
                Step::set(
                    check,
                    Phase::Sysctl,
                    Target::file(w.path(), Kind::Text),
                    w.min.to_string(),
                )
                .raise(),
            );
        }
    }
    let value = parts.join(" ");
    if steps.is_empty() {
        row.status(Status::Ok, value)
    } else {
        let want: Vec<String> = wants
            .iter()
            .map(|w| format!("{}>={}", w.key.rsplit('.').next().unwrap_or(w.key), w.min))
            .collect();
        row.status(Status::Warn, format!("{value} (want {})", want.join(" ")))
            .steps(steps)
    }
}

const WHY_RMEM: &str = "a 10 ms stall at 1 Mpps is 10k datagrams (~10 MiB of truesize); a smaller buffer turns it into RcvbufErrors (NFV sheet: rmem_max/rmem_default)";

pub(super) fn rmem(facts: &Facts) -> Vec<Row> {
    vec![raise_row(
        facts,
        "rmem",
        WHY_RMEM,
        &[
            Want {
                key: "net.core.rmem_max",
                min: 16 * MIB,
            },
            Want {
                key: "net.core.rmem_default",
                min: MIB,
            },
        ],
    )]
}

const WHY_WMEM: &str = "a send buffer too small for a burst of replies makes sendmmsg block or fail with ENOBUFS (SndbufErrors)";

pub(super) fn wmem(facts: &Facts) -> Vec<Row> {
    vec![raise_row(
        facts,
        "wmem",
        WHY_WMEM,
        &[
            Want {
                key: "net.core.wmem_max",
                min: 4 * MIB,
            },
            Want {
                key: "net.core.wmem_default",
                min: 256 * 1024,
            },
        ],
    )]
}

const WHY_BACKLOG: &str = "packets steered by RPS or from veth wait in a per-CPU backlog of netdev_max_backlog; when full they are dropped (softnet 'dropped'; NFV sheet)";

pub(super) fn backlog(facts: &Facts) -> Vec<Row> {
    vec![raise_row(
        facts,
        "backlog",
        WHY_BACKLOG,
        &[Want {
            key: "net.core.netdev_max_backlog",
            min: 10_000,
        }],
    )]
}

const WHY_BUDGET: &str = "NET_RX stops after netdev_budget packets or netdev_budget_usecs; work left over is a time_squeeze (NFV sheet: raise to 600)";

pub(super) fn budget(facts: &Facts) -> Vec<Row> {
    vec![raise_row(
        facts,
        "budget",
        WHY_BUDGET,
        &[
            Want {
                key: "net.core.netdev_budget",
                min: 600,
            },
            Want {
                key: "net.core.netdev_budget_usecs",
                min: 2000,
            },
        ],
    )]
}

const WHY_UDP_MEM: &str = "udp_mem caps the pages all UDP sockets may hold; above it every socket drops, whatever its rmem (one 16 MiB buffer per CPU must fit)";

pub(super) fn udp_mem(facts: &Facts) -> Vec<Row> {
    let path = "/proc/sys/net/ipv4/udp_mem";
    let row =
        Row::new("udp-mem", "host", WHY_UDP_MEM).from("net.ipv4.udp_mem (pages: min pressure max)");
    let cur = match facts.file(path).map(text::parse_numbers) {
        Ok(Some(v)) if v.len() == 3 => v,
        Ok(_) => return vec![row.na("udp_mem is not three numbers")],
        Err(e) => return vec![row.na(e.to_string())],
    };
    let ncpu = facts.online().len().max(1) as u64;
    let need_max = ncpu * 16 * MIB / 4096;
    let need = [need_max / 2, need_max * 3 / 4, need_max];
    let value = format!(
        "{} {} {} pages ({} MiB max) for {ncpu} CPUs",
        cur[0],
        cur[1],
        cur[2],
        cur[2] * 4096 / MIB
    );
    if cur[2] >= need_max {
        return vec![row.status(Status::Ok, value)];
    }
    let new: Vec<String> = cur
        .iter()
        .zip(need)
        .map(|(c, n)| (*c).max(n).to_string())
        .collect();
    let step = Step::set(
        "udp-mem",
        Phase::Sysctl,
        Target::file(path, Kind::Words),
        new.join(" "),
    )
    .raise();
    vec![row.status(Status::Warn, value).steps(vec![step])]
}

const WHY_TCP_BUF: &str = "TCP autotuning grows a bulk flow's buffers only up to the third field of tcp_rmem/tcp_wmem; below the bandwidth-delay product of a fast path the window, not the CPU, caps Gbit/s (the Bloomberg netdev 0x18 talk sets 4096 87380 536870912)";

/// The least tcp_rmem/tcp_wmem maximum for bulk TCP (firehose stream).
const TCP_BUF_MAX: u64 = 64 * MIB;

pub(super) fn tcp_buffers(facts: &Facts) -> Vec<Row> {
    let row = Row::new("tcp-buffers", "host", WHY_TCP_BUF)
        .from("net.ipv4.tcp_rmem, net.ipv4.tcp_wmem (min default max)");
    let mut parts = Vec::new();
    let mut steps = Vec::new();
    for key in ["tcp_rmem", "tcp_wmem"] {
        let path = format!("/proc/sys/net/ipv4/{key}");
        let cur = match facts.file(&path).map(text::parse_numbers) {
            Ok(Some(v)) if v.len() == 3 => v,
            Ok(_) => return vec![row.na(format!("{key} is not three numbers"))],
            Err(e) => return vec![row.na(e.to_string())],
        };
        parts.push(format!("{key}={} {} {}", cur[0], cur[1], cur[2]));
        if cur[2] < TCP_BUF_MAX {
            let new = format!("{} {} {}", cur[0], cur[1], TCP_BUF_MAX);
            steps.push(
                Step::set(
                    "tcp-buffers",
                    Phase::Sysctl,
                    Target::file(path, Kind::Words),
                    new,
                )
                .raise(),
            );
        }
    }
    let value = parts.join(" ");
    if steps.is_empty() {
        vec![row.status(Status::Ok, value)]
    } else {
        let want = format!("{value} (want max >= {TCP_BUF_MAX})");
        vec![row.status(Status::Warn, want).steps(steps)]
    }
}

const WHY_OPTMEM: &str = "MSG_ZEROCOPY charges each in-flight send's notification to the socket's option memory; at optmem_max sends fail with ENOBUFS until completions are read (the Bloomberg netdev 0x18 talk sets 2097152)";

pub(super) fn optmem(facts: &Facts) -> Vec<Row> {
    vec![raise_row(
        facts,
        "optmem",
        WHY_OPTMEM,
        &[Want {
            key: "net.core.optmem_max",
            min: 2 * MIB,
        }],
    )]
}

const WHY_BUSY: &str = "busy polling spins on the NIC queue instead of sleeping, cutting wake-up latency at the cost of CPU (Herbert; NFV sheet: busy_poll=busy_read=50)";

pub(super) fn busy_poll(facts: &Facts) -> Vec<Row> {
    let row = Row::new("busy-poll", "host", WHY_BUSY)
        .from("net.core.busy_poll, net.core.busy_read, netdev netlink napi-get per interface");
    let get = |k: &str| {
        facts
            .file(&format!("/proc/sys/net/core/{k}"))
            .map(|t| t.trim().parse::<u64>().unwrap_or(0))
    };
    let (poll, read) = match (get("busy_poll"), get("busy_read")) {
        (Ok(p), Ok(r)) => (p, r),
        (Err(e), _) | (_, Err(e)) => return vec![row.na(e.to_string())],
    };
    let value = format!("busy_poll={poll} busy_read={read} (us)");
    let napis: String = facts.ifaces.iter().map(napi_text).collect();
    if (poll == 0) != (read == 0) {
        let fix = if poll == 0 {
            format!("sysctl -w net.core.busy_poll={read}")
        } else {
            format!("sysctl -w net.core.busy_read={poll}")
        };
        return vec![row.status(Status::Warn, format!("{value}: only one of them is set, so epoll and blocking reads behave differently{napis}")).fix(fix)];
    }
    let note = if poll == 0 {
        "off: fine for throughput; for lowest latency set both to 50"
    } else {
        "on"
    };
    vec![row.status(Status::Ok, format!("{value} {note}{napis}"))]
}

/// The busy-polling settings of each NAPI instance of `iface` (what `serve --profile
/// latency` and `doctor --apply` change), as "; eth0 napi 8193 defer-hard-irqs=0 ...".
fn napi_text(iface: &super::facts::Iface) -> String {
    let name = &iface.name;
    match &iface.napis {
        Err(e) => format!("; {name}: per-NAPI settings not read: {e}"),
        Ok(list) if list.is_empty() => format!("; {name}: no NAPI instance"),
        Ok(list) => list
            .iter()
            .map(|n| {
                let values: Vec<String> = NapiParam::ALL
                    .iter()
                    .map(|p| match p.of(n) {
                        Some(v) => format!("{}={v}", p.name()),
                        None => format!("{}=? (not reported: a kernel before 6.13)", p.name()),
                    })
                    .collect();
                format!(
                    "; {name} napi {} {} (timeouts in ns)",
                    n.id,
                    values.join(" ")
                )
            })
            .collect(),
    }
}
