//! `firehose doctor`: audits a host for high-rate UDP work. Gather facts (I/O at the edge,
//! `facts.rs`) -> pure checks over facts (one file per area) -> rows with a status, the value
//! read and where from, why it matters and the fix -> rendered by the CLI as a table or JSON.
//! Fixes are [`plan::Step`]s that `apply.rs` carries out through a journal and reverts.

pub mod apply;
pub mod facts;
pub mod journal;
pub mod plan;

mod cpu;
mod irq;
mod kernel;
pub mod kthreads;
mod live;
mod nic;
mod ntp;
mod sysctl;

pub use facts::{gather, DropReasons, Facts, Scope};
pub use plan::Step;

/// The verdict of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Status {
    #[serde(rename = "ok")]
    Ok,
    #[serde(rename = "n/a")]
    NotApplicable,
    #[serde(rename = "warn")]
    Warn,
    #[serde(rename = "bad")]
    Bad,
}

impl Status {
    /// The word printed in the status column.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::NotApplicable => "n/a",
            Status::Warn => "warn",
            Status::Bad => "bad",
        }
    }
}

/// One finding: a check applied to one subject (the host, an interface, a socket group).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    /// The check's name, as given to `--apply CHECK`.
    pub check: &'static str,
    /// `host` or an interface name.
    pub subject: String,
    pub status: Status,
    /// What was read (or why nothing could be).
    pub value: String,
    /// Where it was read from.
    pub source: String,
    /// Why it matters, citing the technique.
    pub why: &'static str,
    /// The command that would fix it, when something needs fixing.
    pub fix: Option<String>,
    /// The fix as steps `--apply` can carry out (empty when the fix is manual).
    pub steps: Vec<Step>,
}

impl Row {
    fn new(check: &'static str, subject: &str, why: &'static str) -> Self {
        Row {
            check,
            subject: subject.to_string(),
            status: Status::Ok,
            value: String::new(),
            source: String::new(),
            why,
            fix: None,
            steps: Vec::new(),
        }
    }

    fn status(mut self, status: Status, value: impl Into<String>) -> Self {
        self.status = status;
        self.value = value.into();
        self
    }

    fn from(mut self, source: impl Into<String>) -> Self {
        self.source = source.into();
        self
    }

    /// A manual fix (a command the doctor does not run itself).
    fn fix(mut self, command: impl Into<String>) -> Self {
        self.fix = Some(command.into());
        self
    }

    /// A fix the doctor can apply; the fix column lists the steps' commands.
    fn steps(mut self, steps: Vec<Step>) -> Self {
        if !steps.is_empty() {
            let cmds: Vec<String> = steps.iter().map(Step::command).collect();
            self.fix = Some(cmds.join("; "));
        }
        self.steps = steps;
        self
    }

    /// The row for a check that cannot run here, saying why.
    fn na(self, why: impl Into<String>) -> Self {
        self.status(Status::NotApplicable, why)
    }
}

/// A check: a pure function from facts to rows.
pub type CheckFn = fn(&Facts) -> Vec<Row>;

/// Every check, in the order rows are printed, with a one-line description.
pub const CHECKS: &[(&str, &str, CheckFn)] = &[
    ("queues", "NIC queues vs CPUs (ethtool -l)", nic::queues),
    (
        "rss-table",
        "RSS indirection table coverage (ethtool -x)",
        nic::rss_table,
    ),
    (
        "udp-hash",
        "UDP 4-tuple RSS hash (ethtool -n rx-flow-hash udp4)",
        nic::udp_hash,
    ),
    (
        "irq-affinity",
        "NIC queue IRQ affinity vs hint and NUMA-local CPUs",
        irq::affinity,
    ),
    (
        "irqbalance",
        "irqbalance running and its options",
        irq::irqbalance,
    ),
    (
        "softirq-spread",
        "NET_RX softirq spread over CPUs",
        irq::softirq_spread,
    ),
    ("rps", "RPS masks per rx queue and RFS table", irq::rps),
    ("xps", "XPS masks per tx queue", irq::xps),
    ("gro", "GRO per interface", nic::gro),
    ("gso", "GSO per interface", nic::gso),
    (
        "netfilter",
        "iptables/conntrack modules and conntrack fill",
        kernel::netfilter,
    ),
    ("rp-filter", "reverse path filter", kernel::rp_filter),
    (
        "accept-local",
        "local source address check",
        kernel::accept_local,
    ),
    ("auditd", "auditd running with rules", kernel::auditd),
    ("selinux", "SELinux enforcing", kernel::selinux),
    ("smt", "hyperthreading siblings and busy CPUs", cpu::smt),
    ("numa", "NIC NUMA node vs CPUs", cpu::numa),
    ("governor", "CPU frequency governor", cpu::governor),
    ("cstates", "deep C-states", cpu::cstates),
    ("isolation", "isolcpus / nohz_full", cpu::isolation),
    (
        "kthreads",
        "busy kernel threads (kdamond, kswapd, ...) allowed on a server's CPUs",
        kthreads::kthreads,
    ),
    ("rmem", "socket receive buffer limits", sysctl::rmem),
    ("wmem", "socket send buffer limits", sysctl::wmem),
    ("udp-mem", "UDP memory limits", sysctl::udp_mem),
    (
        "tcp-buffers",
        "TCP autotuning limits for bulk flows",
        sysctl::tcp_buffers,
    ),
    ("optmem", "option memory for MSG_ZEROCOPY", sysctl::optmem),
    ("backlog", "netdev_max_backlog", sysctl::backlog),
    ("budget", "NAPI budget per softirq run", sysctl::budget),
    ("busy-poll", "busy polling", sysctl::busy_poll),
    (
        "softnet",
        "softnet drops and squeezes per CPU",
        live::softnet,
    ),
    ("udp-errors", "UDP receive errors", live::udp_errors),
    (
        "drop-reasons",
        "the kernel's drop reasons over the window (skb:kfree_skb, as firehose drops)",
        live::drop_reasons,
    ),
    (
        "port",
        "drops and steering of the sockets on --port",
        live::port,
    ),
    (
        "ntp-clock",
        "kernel clock synchronised (adjtimex), for serve --proto ntp",
        ntp::clock,
    ),
    (
        "ntp-port",
        "another NTP server on UDP 123 (or --port)",
        ntp::port,
    ),
];

/// True when `name` is a known check.
pub fn is_check(name: &str) -> bool {
    CHECKS.iter().any(|(n, _, _)| *n == name)
}

/// Runs the named checks (all when `only` is empty) over the facts.
pub fn audit(facts: &Facts, only: &[String]) -> Vec<Row> {
    CHECKS
        .iter()
        .filter(|(n, _, _)| only.is_empty() || only.iter().any(|o| o == n))
        .flat_map(|(_, _, f)| f(facts))
        .collect()
}

/// The process exit code of an audit: 1 when any row is bad, else 0.
pub fn exit_code(rows: &[Row]) -> i32 {
    i32::from(rows.iter().any(|r| r.status == Status::Bad))
}

/// A row per interface for checks that need one, or an n/a row when there is none.
fn per_iface(
    facts: &Facts,
    check: &'static str,
    why: &'static str,
    f: impl Fn(&facts::Iface, Row) -> Row,
) -> Vec<Row> {
    if facts.ifaces.is_empty() {
        return vec![Row::new(check, "host", why)
            .na("no NIC found (no /sys/class/net/*/device); pass --iface NAME")];
    }
    facts
        .ifaces
        .iter()
        .map(|i| f(i, Row::new(check, &i.name, why)))
        .collect()
}
