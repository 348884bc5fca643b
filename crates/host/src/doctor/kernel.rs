//! Per-packet costs outside the data path: netfilter, source validation, audit, SELinux.

use super::facts::Facts;
use super::plan::{Kind, Phase, Step, Target};
use super::{per_iface, Row, Status};
use crate::text;

const WHY_NETFILTER: &str = "loaded iptables modules run hooks per packet even with no rules (NTT talk: +3.7% tps unloaded); a full conntrack table drops new flows";

pub(super) fn netfilter(facts: &Facts) -> Vec<Row> {
    let row = Row::new("netfilter", "host", WHY_NETFILTER)
        .from("/proc/modules, /proc/net/ip_tables_names, /proc/sys/net/netfilter/nf_conntrack_{count,max}");
    let modules = match facts.file("/proc/modules") {
        Ok(t) => text::parse_modules(t),
        Err(e) if e.is_absent() => Vec::new(),
        Err(e) => return vec![row.na(e.to_string())],
    };
    let nf: Vec<&String> = modules
        .iter()
        .filter(|m| {
            m.starts_with("iptable_")
                || m.starts_with("ip6table_")
                || m.starts_with("nf_conntrack")
                || *m == "ip_tables"
                || *m == "ip6_tables"
                || *m == "nf_tables"
        })
        .collect();
    let tables: Vec<&str> = facts
        .file("/proc/net/ip_tables_names")
        .map(|t| t.split_whitespace().collect())
        .unwrap_or_default();
    let count = facts
        .file("/proc/sys/net/netfilter/nf_conntrack_count")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    let max = facts
        .file("/proc/sys/net/netfilter/nf_conntrack_max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok());
    let mut parts = Vec::new();
    parts.push(if nf.is_empty() {
        "no netfilter modules loaded".to_string()
    } else {
        format!(
            "modules {}",
            nf.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
        )
    });
    if !tables.is_empty() {
        parts.push(format!("iptables tables {}", tables.join(",")));
    }
    if let (Some(c), Some(m)) = (count, max) {
        parts.push(format!("conntrack {c}/{m}"));
        if m > 0 && c * 10 >= m * 9 {
            return vec![row.status(Status::Bad, parts.join("; ")).fix(format!(
                "sysctl -w net.netfilter.nf_conntrack_max={}",
                m * 2
            ))];
        }
    }
    let value = parts.join("; ");
    if count.is_some_and(|c| c > 0) {
        row.status(Status::Warn, value).fix("exempt the UDP port: iptables -t raw -A PREROUTING -p udp --dport PORT -j NOTRACK (or modprobe -r nf_conntrack if unused)").into_vec()
    } else if !nf.is_empty() || !tables.is_empty() {
        row.status(Status::Warn, value)
            .fix("modprobe -r iptable_filter ip_tables (only if no rules are needed)")
            .into_vec()
    } else {
        row.status(Status::Ok, value).into_vec()
    }
}

impl Row {
    fn into_vec(self) -> Vec<Row> {
        vec![self]
    }
}

fn flag(t: Result<&str, crate::fs::FsError>) -> Result<u64, String> {
    let t = t.map_err(|e| e.to_string())?;
    t.trim().parse().map_err(|_| format!("not a number: {t:?}"))
}

fn conf(iface: &str, key: &str) -> String {
    format!("/proc/sys/net/ipv4/conf/{}/{key}", iface.replace('.', "/"))
}

/// The `all` and per-interface values of an ipv4 conf flag.
fn conf_pair(facts: &Facts, iface: &super::facts::Text, key: &str) -> Result<(u64, u64), String> {
    let all = flag(facts.file(&conf("all", key)))?;
    Ok((all, flag(iface.as_deref().map_err(Clone::clone))?))
}

const WHY_RP: &str = "reverse path filtering costs a second FIB lookup per packet (NTT talk: +2% tps with rp_filter=0, only where source validation is not needed)";

pub(super) fn rp_filter(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "rp-filter", WHY_RP, |i, row| {
        let row = row.from(format!("net.ipv4.conf.{{all,{}}}.rp_filter", i.name));
        let (a, v) = match conf_pair(facts, &i.rp_filter, "rp_filter") {
            Ok(p) => p,
            Err(e) => return row.na(e),
        };
        let value = format!("all={a} {}={v} (effective {})", i.name, a.max(v));
        if a.max(v) == 0 {
            return row.status(Status::Ok, value);
        }
        let mut steps = Vec::new();
        for (cur, path) in [
            (a, conf("all", "rp_filter")),
            (v, conf(&i.name, "rp_filter")),
        ] {
            if cur != 0 {
                steps.push(
                    Step::set(
                        "rp-filter",
                        Phase::Sysctl,
                        Target::file(path, Kind::Text),
                        "0",
                    )
                    .on(&i.name),
                );
            }
        }
        row.status(Status::Warn, value).steps(steps)
    })
}

const WHY_LOCAL: &str = "accept_local=1 with rp_filter=0 skips the local-source FIB lookup on receive (NTT talk: part of 'disable source validation')";

pub(super) fn accept_local(facts: &Facts) -> Vec<Row> {
    per_iface(facts, "accept-local", WHY_LOCAL, |i, row| {
        let row = row.from(format!("net.ipv4.conf.{{all,{}}}.accept_local", i.name));
        let (a, v) = match conf_pair(facts, &i.accept_local, "accept_local") {
            Ok(p) => p,
            Err(e) => return row.na(e),
        };
        let value = format!("all={a} {}={v}", i.name);
        if a != 0 || v != 0 {
            return row.status(Status::Ok, value);
        }
        let step = Step::set(
            "accept-local",
            Phase::Sysctl,
            Target::file(conf(&i.name, "accept_local"), Kind::Text),
            "1",
        )
        .on(&i.name);
        row.status(Status::Warn, value).steps(vec![step])
    })
}

const WHY_AUDIT: &str = "audit rules are evaluated on every syscall of the packet path (NTT talk: +6.7% tps with auditd off)";

pub(super) fn auditd(facts: &Facts) -> Vec<Row> {
    let row = Row::new("auditd", "host", WHY_AUDIT)
        .from("/proc/*/comm, /etc/audit/audit.rules, /etc/audit/rules.d/*.rules");
    let procs = match &facts.processes {
        Ok(p) => p,
        Err(e) => return vec![row.na(e.to_string())],
    };
    let running = procs.iter().find(|p| p.comm == "auditd");
    let mut rules = facts
        .file("/etc/audit/audit.rules")
        .map(text::audit_rule_count)
        .unwrap_or(0);
    rules += facts
        .audit_rules
        .iter()
        .filter_map(|(_, t)| t.as_ref().ok())
        .map(|t| text::audit_rule_count(t))
        .sum::<usize>();
    match running {
        None => vec![row.status(
            Status::Ok,
            format!("auditd not running ({rules} rules on disk)"),
        )],
        Some(p) if rules == 0 => vec![row.status(
            Status::Ok,
            format!("auditd running (pid {}) with no rules", p.pid),
        )],
        Some(p) => vec![row
            .status(
                Status::Warn,
                format!("auditd running (pid {}) with {rules} rules", p.pid),
            )
            .fix("auditctl -D (drop rules) or systemctl disable --now auditd")],
    }
}

const WHY_SELINUX: &str =
    "SELinux enforcing adds a permission check per socket operation on the hot path";

pub(super) fn selinux(facts: &Facts) -> Vec<Row> {
    let row = Row::new("selinux", "host", WHY_SELINUX).from("/sys/fs/selinux/enforce");
    vec![match facts.file("/sys/fs/selinux/enforce") {
        Err(e) if e.is_absent() => row.na("SELinux not enabled (no /sys/fs/selinux/enforce)"),
        Err(e) => row.na(e.to_string()),
        Ok(t) if t.trim() == "1" => row
            .status(Status::Warn, "enforcing")
            .fix("setenforce 0 (only if policy allows)"),
        Ok(t) => row.status(Status::Ok, format!("permissive ({})", t.trim())),
    }]
}
