//! A fix as data: what to change (a [`Target`]), to which value, and in which order. Checks
//! attach steps to their rows; `--dry-run` prints them; `--apply` carries them out through the
//! journal (see `journal.rs`).

use crate::nic::Feature;
use crate::text;
use firehose_sys::cpu::CpuSet;
pub use firehose_sys::netdev::NapiParam;

/// How two readings of a target are compared (the kernel reformats what it is given: writing
/// `3` to xps_cpus reads back `03`, udp_mem comes back tab-separated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Compared after trimming.
    Text,
    /// Compared word by word (udp_mem).
    Words,
    /// A hex CPU mask (rps_cpus, xps_cpus).
    Mask,
    /// A CPU list (smp_affinity_list).
    CpuList,
}

impl Kind {
    /// True when two readings mean the same value.
    pub fn same(self, a: &str, b: &str) -> bool {
        match self {
            Kind::Text => a.trim() == b.trim(),
            Kind::Words => a.split_whitespace().eq(b.split_whitespace()),
            Kind::Mask => CpuSet::from_mask_hex(a).is_ok_and(|x| CpuSet::from_mask_hex(b) == Ok(x)),
            Kind::CpuList => CpuSet::parse_list(a).is_ok_and(|x| CpuSet::parse_list(b) == Ok(x)),
        }
    }
}

/// Something on the host that a fix changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Target {
    /// A file under /proc/sys, /sys or /proc/irq, written as `echo value > path`.
    File { path: String, kind: Kind },
    /// An ethtool offload switch; values are `on`/`off`.
    Feature { iface: String, feature: Feature },
    /// The RSS indirection table; the value is the table as space-separated queue numbers.
    Rss { iface: String },
    /// A systemd service; values are `active`/`inactive`.
    Service { name: String },
    /// One busy-polling setting of one NAPI instance (netdev netlink `napi-set`, kernel
    /// 6.13+); values are decimal numbers. `iface` names the interface it serves, for
    /// messages and validation; the instance is found by `napi` (its id).
    Napi {
        iface: String,
        napi: u32,
        param: NapiParam,
    },
    /// A whole configuration file that `--apply --persist` writes (a file under
    /// /etc/sysctl.d/); its value is the file's text, [`ABSENT`] when there is no file.
    Config { path: String },
}

/// The value of a [`Target::Config`] file that does not exist: writing it removes the file.
pub const ABSENT: &str = "(absent)";

/// Where `--apply --persist` keeps the sysctl settings it applied, read at every boot.
pub const PERSIST_PATH: &str = "/etc/sysctl.d/90-firehose.conf";

/// The step that makes the applied sysctl settings survive a reboot: a file of
/// `key = value` lines for every `/proc/sys` target in `applied` (what was changed and read
/// back, never what was skipped), or `None` when there is none.
pub fn persist_step(applied: &[(Target, String)]) -> Option<Step> {
    let mut lines = String::from(
        "# Written by `firehose doctor --apply --persist`; `firehose doctor --revert` removes it.\n",
    );
    let mut any = false;
    for (t, value) in applied {
        if let Target::File { path, .. } = t {
            if let Some(key) = path.strip_prefix("/proc/sys/") {
                lines.push_str(&format!("{} = {}\n", sysctl_key(key), value.trim()));
                any = true;
            }
        }
    }
    any.then(|| Step {
        check: "persist",
        iface: None,
        phase: Phase::Cpu,
        target: Target::Config {
            path: PERSIST_PATH.into(),
        },
        value: lines,
        raise_only: false,
    })
}

impl Target {
    /// Shorthand for a file target.
    pub fn file(path: impl Into<String>, kind: Kind) -> Self {
        Target::File {
            path: path.into(),
            kind,
        }
    }

    /// How readings of this target compare.
    pub fn kind(&self) -> Kind {
        match self {
            Target::File { kind, .. } => *kind,
            Target::Rss { .. } => Kind::Words,
            _ => Kind::Text,
        }
    }

    /// A short name for messages: the path, `eth0 gro`, `irqbalance.service`.
    pub fn label(&self) -> String {
        match self {
            Target::File { path, .. } => path.clone(),
            Target::Feature { iface, feature } => format!("{iface} {}", feature.name()),
            Target::Rss { iface } => format!("{iface} rss indirection table"),
            Target::Service { name } => format!("{name}.service"),
            Target::Config { path } => path.clone(),
            Target::Napi { iface, napi, param } => {
                format!("{iface} napi {napi} {}", param.name())
            }
        }
    }

    /// The shell command a user would type to set `value`.
    pub fn command(&self, value: &str) -> String {
        match self {
            Target::File { path, .. } => match path.strip_prefix("/proc/sys/") {
                Some(key) if value.contains(char::is_whitespace) => {
                    format!("sysctl -w {}=\"{value}\"", sysctl_key(key))
                }
                Some(key) => format!("sysctl -w {}={value}", sysctl_key(key)),
                None => format!("echo {value} > {path}"),
            },
            Target::Feature { iface, feature } => {
                format!("ethtool -K {iface} {} {value}", feature.name())
            }
            Target::Rss { iface } => {
                let queues = value
                    .split_whitespace()
                    .filter_map(|q| q.parse::<u32>().ok())
                    .max()
                    .map_or(0, |m| m + 1);
                format!("ethtool -X {iface} equal {queues}")
            }
            Target::Service { name } => match value {
                "inactive" => format!("systemctl stop {name}"),
                _ => format!("systemctl start {name}"),
            },
            Target::Napi { napi, param, .. } => format!(
                "ynl --family netdev --do napi-set --json '{{\"id\": {napi}, \"{}\": {}}}'",
                param.name(),
                value.trim()
            ),
            Target::Config { path } if value == ABSENT => format!("rm {path}"),
            Target::Config { path } => format!("(write {} lines to {path})", value.lines().count()),
        }
    }
}

/// `net/ipv4/conf/eth0.100/rp_filter` -> `net.ipv4.conf.eth0/100.rp_filter` (sysctl swaps
/// the two separators so interface names with dots survive).
pub(crate) fn sysctl_key(path: &str) -> String {
    path.chars()
        .map(|c| match c {
            '/' => '.',
            '.' => '/',
            c => c,
        })
        .collect()
}

/// The order fixes run in, as the tuning guides require: irqbalance is stopped before IRQs are
/// pinned (or it moves them back), the RSS table is set before IRQs are placed for its queues,
/// then steering masks, offloads, sysctls and CPU power settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Irqbalance,
    Rss,
    IrqAffinity,
    Steering,
    Offload,
    Sysctl,
    Cpu,
}

/// One change of a plan.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Step {
    /// The check that proposed it.
    pub check: &'static str,
    /// The interface it concerns, if any (for `--iface` scoping).
    pub iface: Option<String>,
    pub phase: Phase,
    pub target: Target,
    /// The value to set.
    pub value: String,
    /// Buffer-like settings are only raised: skipped at apply time if already higher.
    pub raise_only: bool,
}

impl Step {
    /// A step that sets `target` to `value`.
    pub fn set(
        check: &'static str,
        phase: Phase,
        target: Target,
        value: impl Into<String>,
    ) -> Self {
        Step {
            check,
            iface: None,
            phase,
            target,
            value: value.into(),
            raise_only: false,
        }
    }

    /// Scopes the step to one interface.
    pub fn on(mut self, iface: &str) -> Self {
        self.iface = Some(iface.to_string());
        self
    }

    /// Marks the step as raise-only.
    pub fn raise(mut self) -> Self {
        self.raise_only = true;
        self
    }

    /// The shell equivalent of this step.
    pub fn command(&self) -> String {
        self.target.command(&self.value)
    }
}

/// True when `new` is not above `current` for a raise-only setting (compared number by
/// number, so udp_mem's three values must all be at least the current ones to count).
pub fn would_lower(current: &str, new: &str) -> bool {
    match (text::parse_numbers(current), text::parse_numbers(new)) {
        (Some(c), Some(n)) if c.len() == n.len() => c.iter().zip(&n).any(|(c, n)| n < c),
        _ => false,
    }
}

/// Orders steps by phase, keeping the checks' order within a phase.
pub fn order(mut steps: Vec<Step>) -> Vec<Step> {
    steps.sort_by_key(|s| s.phase);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_compare_by_kind() {
        assert!(Kind::Mask.same("00000000,00000003\n", "3"));
        assert!(!Kind::Mask.same("00000001", "3"));
        assert!(!Kind::Mask.same("zz", "zz"), "unparsable never matches");
        assert!(Kind::CpuList.same("0-2\n", "0,1,2"));
        assert!(Kind::Words.same("1\t2\t3\n", "1 2 3"));
        assert!(Kind::Text.same("performance\n", "performance"));
        assert!(!Kind::Text.same("1", "01"));
    }

    #[test]
    fn raise_only_compares_every_number() {
        assert!(would_lower("33554432\n", "16777216"));
        assert!(!would_lower("212992\n", "16777216"));
        assert!(would_lower("1 2 9", "5 5 5"));
        assert!(!would_lower("1 2 3", "5 5 5"));
        assert!(!would_lower("abc", "5"), "not numbers: nothing to protect");
    }

    #[test]
    fn commands_users_can_paste() {
        let t = Target::file("/proc/sys/net/ipv4/conf/eth0.100/rp_filter", Kind::Text);
        assert_eq!(
            t.command("0"),
            "sysctl -w net.ipv4.conf.eth0/100.rp_filter=0"
        );
        let t = Target::file("/proc/sys/net/ipv4/udp_mem", Kind::Words);
        assert_eq!(t.command("1 2 3"), "sysctl -w net.ipv4.udp_mem=\"1 2 3\"");
        let t = Target::file("/proc/irq/42/smp_affinity_list", Kind::CpuList);
        assert_eq!(t.command("3"), "echo 3 > /proc/irq/42/smp_affinity_list");
        let t = Target::Rss {
            iface: "eth0".into(),
        };
        assert_eq!(t.command("0 1 2 3 0 1 2 3"), "ethtool -X eth0 equal 4");
        let t = Target::Service {
            name: "irqbalance".into(),
        };
        assert_eq!(t.command("inactive"), "systemctl stop irqbalance");
        let n = Target::Napi {
            iface: "eth0".into(),
            napi: 8193,
            param: NapiParam::GroFlushTimeout,
        };
        assert_eq!(
            n.command("200000\n"),
            r#"ynl --family netdev --do napi-set --json '{"id": 8193, "gro-flush-timeout": 200000}'"#
        );
        assert_eq!(n.label(), "eth0 napi 8193 gro-flush-timeout");
        assert_eq!(t.command("active"), "systemctl start irqbalance");
    }
}
