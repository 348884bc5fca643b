//! The doctor's checks over fake host trees (tests/samples/hosts/*) and a fake NIC: a
//! mis-tuned 8-CPU server ("bigbox", the NTT talk's findings in miniature) and a bare
//! container where almost nothing exists. No root needed.

use firehose_host::doctor::facts::Sample;
use firehose_host::doctor::{self, plan::Target, Facts, Row, Scope, Status};
use firehose_host::fs::HostFs;
use firehose_host::nic::{Channels, Feature, Napi, Nic, NicError};
use std::collections::BTreeMap;

/// A NIC that answers from fields; `None` means the driver refuses with EOPNOTSUPP.
#[derive(Default)]
struct FakeNic {
    channels: Option<Channels>,
    rss: Option<Vec<u32>>,
    udp4: Option<u64>,
    gro: Option<bool>,
    gso: Option<bool>,
    napis: Option<Vec<Napi>>,
}

fn eopnotsupp(what: &str) -> NicError {
    NicError {
        what: what.into(),
        errno: Some(95),
        message: "Operation not supported (EOPNOTSUPP)".into(),
    }
}

impl Nic for FakeNic {
    fn channels(&self, _: &str) -> Result<Channels, NicError> {
        self.channels.ok_or_else(|| eopnotsupp("ETHTOOL_GCHANNELS"))
    }
    fn rss_table(&self, _: &str) -> Result<Vec<u32>, NicError> {
        self.rss
            .clone()
            .ok_or_else(|| eopnotsupp("ETHTOOL_GRXFHINDIR"))
    }
    fn set_rss_table(&self, _: &str, _: &[u32]) -> Result<(), NicError> {
        Err(eopnotsupp("ETHTOOL_SRXFHINDIR"))
    }
    fn udp4_hash(&self, _: &str) -> Result<u64, NicError> {
        self.udp4.ok_or_else(|| eopnotsupp("ETHTOOL_GRXFH"))
    }
    fn feature(&self, _: &str, f: Feature) -> Result<bool, NicError> {
        match f {
            Feature::Gro => self.gro,
            Feature::Gso => self.gso,
        }
        .ok_or_else(|| eopnotsupp("ETHTOOL_GGRO"))
    }
    fn set_feature(&self, _: &str, _: Feature, _: bool) -> Result<(), NicError> {
        Err(eopnotsupp("ETHTOOL_SGRO"))
    }
    fn napis(&self, _: &str) -> Result<Vec<Napi>, NicError> {
        self.napis.clone().ok_or_else(|| NicError {
            what: "netlink netdev napi-get dump ifindex 2".into(),
            errno: Some(2),
            message: "No such file or directory (ENOENT)".into(),
        })
    }
}

fn tree(name: &str) -> HostFs {
    HostFs::new(format!(
        "{}/tests/samples/hosts/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

/// The talk's NIC: 8 combined queues of 63, an RSS table that only reaches queues 0-5, the
/// UDP hash on addresses only, GRO on.
fn ixgbe() -> FakeNic {
    FakeNic {
        channels: Some(Channels {
            max_combined: 63,
            combined: 8,
            ..Default::default()
        }),
        rss: Some((0..128).map(|i| i % 6).collect()),
        udp4: Some(0x30),
        gro: Some(true),
        gso: Some(true),
        napis: Some(
            (0..2)
                .map(|q| Napi {
                    id: 8193 + q,
                    ifindex: 2,
                    irq: Some(40 + q),
                    pid: None,
                    defer_hard_irqs: Some(2 * q),
                    gro_flush_timeout_ns: Some(200_000 * u64::from(q)),
                    irq_suspend_timeout_ns: Some(0),
                })
                .collect(),
        ),
    }
}

fn bigbox() -> Facts {
    doctor::gather(
        &tree("bigbox"),
        &ixgbe(),
        &Scope {
            port: Some(9000),
            ..Default::default()
        },
    )
}

fn row<'a>(rows: &'a [Row], check: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.check == check)
        .unwrap_or_else(|| panic!("no {check} row"))
}

#[test]
fn bigbox_finds_every_mistuning() {
    let facts = bigbox();
    assert_eq!(facts.ifaces.len(), 1, "only eth0 has a device");
    let rows = doctor::audit(&facts, &[]);
    // One row per check; ntp-port has two: port 123 and --port.
    assert_eq!(rows.len(), doctor::CHECKS.len() + 1);
    use Status::*;

    expect(
        &rows,
        "queues",
        Ok,
        &["8 combined queues (max 63) for 8 CPUs"],
    );
    expect(&rows, "rss-table", Bad, &["queues 6,7 never receive"]);
    assert_eq!(
        row(&rows, "rss-table").fix.as_deref(),
        Some("ethtool -X eth0 equal 8")
    );
    expect(&rows, "udp-hash", Warn, &["src-ip dst-ip)"]);
    expect(
        &rows,
        "irq-affinity",
        Warn,
        &[
            "8 queue IRQs on CPUs 0;",
            "IRQ 102 (eth0-TxRx-1) on 0 but hint 1",
        ],
    );
    // The link IRQ (named like the interface) is not a queue; queue IRQs follow their hints.
    let irq = row(&rows, "irq-affinity");
    assert!(!irq
        .steps
        .iter()
        .any(|s| s.target.label() == "/proc/irq/100/smp_affinity_list"));
    let s102 = irq
        .steps
        .iter()
        .find(|s| s.target.label() == "/proc/irq/102/smp_affinity_list");
    assert_eq!(s102.map(|s| s.value.as_str()), Some("1"));
    expect(&rows, "irqbalance", Warn, &["pid 412", "banned CPUs 7"]);
    expect(
        &rows,
        "softirq-spread",
        Warn,
        &["902150 NET_RX since boot: cpu0 100%"],
    );
    expect(
        &rows,
        "rps",
        Warn,
        &["6 of 8 rx queues receive (RSS) for 8 CPUs; RPS set on 0"],
    );
    expect(&rows, "xps", Bad, &["0 of 8 tx queues"]);
    let xps = row(&rows, "xps");
    assert_eq!(xps.steps.len(), 8);
    assert_eq!(xps.steps[3].value, "8", "tx-3 -> CPU 3");
    expect(&rows, "gro", Warn, &["on"]);
    expect(&rows, "gso", Ok, &["on"]);

    // conntrack 95/100 is nearly full.
    expect(
        &rows,
        "netfilter",
        Bad,
        &["iptable_filter,ip_tables,nf_conntrack", "conntrack 95/100"],
    );
    expect(&rows, "rp-filter", Warn, &["all=0 eth0=1 (effective 1)"]);
    assert_eq!(row(&rows, "rp-filter").steps.len(), 1, "all=0 already");
    expect(&rows, "accept-local", Warn, &["all=0 eth0=0"]);
    expect(&rows, "auditd", Warn, &["2 rules"]);
    expect(&rows, "selinux", Warn, &["enforcing"]);

    expect(&rows, "smt", Ok, &["4 cores x 2 threads"]);
    expect(&rows, "numa", Ok, &["node 0, local CPUs 0-1,4-5"]);
    expect(&rows, "governor", Warn, &["powersave on 8 CPUs"]);
    assert_eq!(row(&rows, "governor").steps.len(), 8);
    expect(&rows, "cstates", Warn, &["C6 (133 us)"]);
    assert!(
        !row(&rows, "cstates").value.contains("C1E"),
        "10 us is not deep"
    );
    expect(&rows, "isolation", Ok, &["isolated: 7; nohz_full: 7"]);

    expect(&rows, "rmem", Warn, &["rmem_max=212992"]);
    expect(&rows, "udp-mem", Warn, &["1000 2000 3000 pages"]);
    let um = &row(&rows, "udp-mem").steps[0];
    assert_eq!(um.value, "16384 24576 32768");
    assert!(um.raise_only);
    // The Bloomberg talk's bulk-TCP limits: only the max field is raised.
    expect(
        &rows,
        "tcp-buffers",
        Warn,
        &["tcp_rmem=4096 131072 6291456"],
    );
    let tb = &row(&rows, "tcp-buffers").steps;
    assert_eq!(tb.len(), 2);
    assert_eq!(tb[0].value, "4096 131072 67108864");
    assert!(tb.iter().all(|s| s.raise_only));
    expect(&rows, "optmem", Warn, &["optmem_max=20480"]);
    assert_eq!(row(&rows, "optmem").steps[0].value, "2097152");
    expect(&rows, "backlog", Warn, &["netdev_max_backlog=1000"]);
    expect(&rows, "budget", Warn, &["netdev_budget=300"]);
    // With each NAPI instance's busy-polling settings, as netdev netlink reports them.
    expect(
        &rows,
        "busy-poll",
        Warn,
        &[
            "only one of them is set",
            "; eth0 napi 8193 defer-hard-irqs=0 gro-flush-timeout=0 irq-suspend-timeout=0 (timeouts in ns)",
            "; eth0 napi 8194 defer-hard-irqs=2 gro-flush-timeout=200000 irq-suspend-timeout=0",
        ],
    );
    // Drops since boot are only a warning.
    expect(&rows, "softnet", Warn, &["cpu0 dropped 37 squeezed 26"]);
    expect(&rows, "udp-errors", Warn, &["since boot"]);
    expect(&rows, "port", Bad, &["2 socket(s), drops 1200"]);
    assert_eq!(row(&rows, "port").subject, "port 9000");
    // The DAMON thread, 8.61 s of CPU in 1,491 s of uptime, may run on every CPU.
    expect(
        &rows,
        "kthreads",
        Warn,
        &["kdamond.0 (pid 77) 0.58% of a CPU, allowed on 0-7 since boot"],
    );
    assert!(
        row(&rows, "kthreads").steps.is_empty(),
        "reported, not applied"
    );
    assert_eq!(doctor::exit_code(&rows), 1);
}

#[test]
fn plan_is_ordered_and_scoped() {
    let rows = doctor::audit(&bigbox(), &[]);
    let all = doctor::apply::select(&rows, &[], &[]);
    let phases: Vec<_> = all.iter().map(|s| s.phase).collect();
    let mut sorted = phases.clone();
    sorted.sort();
    assert_eq!(phases, sorted);
    // irqbalance is stopped before any IRQ is pinned, and the RSS table comes before IRQs.
    assert!(matches!(all[0].target, Target::Service { .. }));
    assert!(matches!(all[1].target, Target::Rss { .. }));

    // Naming irq-affinity pulls in stopping irqbalance, nothing else.
    let irq = doctor::apply::select(&rows, &["irq-affinity".into()], &[]);
    assert!(matches!(irq[0].target, Target::Service { .. }));
    assert!(irq[1..].iter().all(|s| s.check == "irq-affinity"));

    // Scoped to another interface: per-interface steps drop out, host-wide ones stay.
    let other = doctor::apply::select(&rows, &["xps".into(), "rmem".into()], &["eth1".into()]);
    assert!(other.iter().all(|s| s.check == "rmem"), "{other:?}");
    assert_eq!(other.len(), 2);
}

#[test]
fn xps_is_judged_by_cpu_coverage() {
    let mut facts = bigbox();
    let tx = &mut facts.ifaces[0].tx;
    // Queues 0-3 cover CPUs 0-7 two by two; queues 4-7 stay unset: fine.
    for (q, mask) in ["03", "0c", "30", "c0"].iter().enumerate() {
        tx[q].mask = Ok(format!("{mask}\n"));
    }
    let rows = doctor::audit(&facts, &["xps".into()]);
    assert_eq!(rows[0].status, Status::Ok, "{}", rows[0].value);
    assert!(
        rows[0].value.contains("4 of 8 tx queues"),
        "{}",
        rows[0].value
    );
    // CPU 7 loses its queue: a warning that names it, with a plan for every queue.
    facts.ifaces[0].tx[3].mask = Ok("40\n".into());
    let rows = doctor::audit(&facts, &["xps".into()]);
    assert_eq!(rows[0].status, Status::Warn);
    assert!(
        rows[0].value.contains("CPUs 7 have no queue"),
        "{}",
        rows[0].value
    );
    assert!(!rows[0].steps.is_empty());
}

/// A 2-second window over bigbox: CPUs 0, 4 (siblings) and 3 busy, drops on CPU 0, a
/// reuseport pair on port 9000 where only one socket backs up and drops.
fn sampled_bigbox() -> Facts {
    let mut facts = bigbox();
    let fs = tree("bigbox");
    let mut before = BTreeMap::new();
    for p in doctor::facts::SAMPLED {
        before.insert(p.to_string(), fs.read(p));
    }
    let mut after = before.clone();
    let stat: String = before["/proc/stat"]
        .as_ref()
        .unwrap()
        .lines()
        .map(|l| match l.split_whitespace().next() {
            Some("cpu0" | "cpu3" | "cpu4") => {
                let f: Vec<u64> = l
                    .split_whitespace()
                    .skip(1)
                    .map(|v| v.parse().unwrap())
                    .collect();
                format!(
                    "{} {} {} {} {} 0 0 {} 0 0 0\n",
                    l.split_whitespace().next().unwrap(),
                    f[0] + 150,
                    f[1],
                    f[2] + 20,
                    f[3] + 10,
                    f[6] + 20
                )
            }
            Some(c) if c.starts_with("cpu") && c != "cpu" => {
                let f: Vec<u64> = l
                    .split_whitespace()
                    .skip(1)
                    .map(|v| v.parse().unwrap())
                    .collect();
                format!(
                    "{c} {} {} {} {} 0 0 {} 0 0 0\n",
                    f[0],
                    f[1],
                    f[2],
                    f[3] + 200,
                    f[6]
                )
            }
            _ => format!("{l}\n"),
        })
        .collect();
    after.insert("/proc/stat".into(), Ok(stat));
    let softnet = before["/proc/net/softnet_stat"].as_ref().unwrap().replacen(
        "00100000 00000025",
        "00200000 0000002a",
        1,
    );
    after.insert("/proc/net/softnet_stat".into(), Ok(softnet));
    let snmp = before["/proc/net/snmp"].as_ref().unwrap().replace(
        "5000000 10 1200 4990000 1200",
        "5100000 10 1300 5090000 1300",
    );
    after.insert("/proc/net/snmp".into(), Ok(snmp));
    let udp = before["/proc/net/udp"].as_ref().unwrap().replace(
        "20001 2 0000000000000000 1200",
        "20001 2 0000000000000000 1300",
    );
    after.insert("/proc/net/udp".into(), Ok(udp.clone()));
    let empty6 = before["/proc/net/udp6"].clone();
    facts.sample = Some(Sample {
        seconds: 2.0,
        ticks_per_s: 100,
        before,
        after,
        polls: (0..19).map(|_| (Ok(udp.clone()), empty6.clone())).collect(),
    });
    facts
}

/// Asserts a row's status and that its value contains every piece.
fn expect(rows: &[Row], check: &str, status: Status, pieces: &[&str]) {
    let r = row(rows, check);
    assert_eq!(r.status, status, "{check}: {}", r.value);
    for p in pieces {
        assert!(r.value.contains(p), "{check}: {p:?} not in {}", r.value);
    }
}

#[test]
fn a_sample_judges_deltas_busy_cpus_and_steering() {
    let rows = doctor::audit(&sampled_bigbox(), &[]);
    expect(
        &rows,
        "softnet",
        Status::Bad,
        &[
            "over 2.0 s: processed 1048576, dropped 5, time_squeeze 0",
            "cpu0 1048576/0 cpu1 0/0",
        ],
    );
    expect(
        &rows,
        "udp-errors",
        Status::Bad,
        &["InDatagrams 100000 InErrors 100 RcvbufErrors 100"],
    );
    expect(
        &rows,
        "smt",
        Status::Warn,
        &[
            "busy: cpu0 95% cpu3 95% cpu4 95%",
            "busy siblings share cores 0,4 while 2 cores idle",
        ],
    );
    expect(
        &rows,
        "numa",
        Status::Warn,
        &["busy CPUs 3 are on another node"],
    );
    expect(
        &rows,
        "port",
        Status::Bad,
        &[
            "drops 100 in the sample",
            "inode 20001 drops 100 queued 19/19; 0.0.0.0:9000 inode 20002 drops 0 queued 0/19",
            "uneven",
        ],
    );
    // No NET_RX moved in the window: too little to judge.
    expect(
        &rows,
        "softirq-spread",
        Status::NotApplicable,
        &["0 NET_RX softirqs over 2.0 s"],
    );
}

#[test]
fn a_cpu_paced_between_ticks_is_busy_by_its_idle_time() {
    // cpu1 idle 80 of the window's 200 ticks and no busy tick sampled: a paced load that
    // ran between the ticks. Busy is wall time less idle, 60%, not the ticks' 0%.
    let mut facts = sampled_bigbox();
    let sample = facts.sample.as_mut().unwrap();
    let stat: String = sample.after["/proc/stat"]
        .as_ref()
        .unwrap()
        .lines()
        .map(|l| match l.strip_prefix("cpu1 ") {
            Some(rest) => {
                let mut f: Vec<u64> = rest
                    .split_whitespace()
                    .map(|v| v.parse().unwrap())
                    .collect();
                f[3] -= 120;
                let cols: Vec<String> = f.iter().map(u64::to_string).collect();
                format!("cpu1 {}\n", cols.join(" "))
            }
            None => format!("{l}\n"),
        })
        .collect();
    sample.after.insert("/proc/stat".into(), Ok(stat));
    let rows = doctor::audit(&facts, &[]);
    expect(
        &rows,
        "smt",
        Status::Warn,
        &["busy: cpu0 95% cpu1 60% cpu3 95% cpu4 95%"],
    );
}

#[test]
fn named_checks_filter_the_audit() {
    let rows = doctor::audit(&bigbox(), &["xps".into(), "rmem".into()]);
    let names: Vec<&str> = rows.iter().map(|r| r.check).collect();
    assert_eq!(names, ["xps", "rmem"]);
    assert!(doctor::is_check("udp-mem"));
    assert!(!doctor::is_check("udpmem"));
}

#[test]
fn container_without_files_says_na_and_never_panics() {
    let facts = doctor::gather(
        &tree("container"),
        &FakeNic::default(),
        &Scope {
            ifaces: vec!["eth0".into()],
            ..Default::default()
        },
    );
    let rows = doctor::audit(&facts, &[]);
    assert_eq!(rows.len(), doctor::CHECKS.len());
    let st = |c: &str| row(&rows, c).status;
    for c in [
        "rss-table",
        "udp-hash",
        "irq-affinity",
        "gro",
        "gso",
        "rp-filter",
        "selinux",
        "numa",
        "governor",
        "cstates",
        "udp-mem",
        "busy-poll",
        "udp-errors",
        "port",
    ] {
        assert_eq!(st(c), Status::NotApplicable, "{c}: {:?}", row(&rows, c));
    }
    assert!(row(&rows, "rss-table").value.contains("EOPNOTSUPP"));
    assert!(row(&rows, "udp-mem")
        .value
        .contains("No such file or directory (ENOENT)"));
    // An odd format is n/a with the reason, not a crash.
    assert_eq!(st("softirq-spread"), Status::NotApplicable);
    assert!(
        row(&rows, "softirq-spread").value.contains("NET_RX"),
        "{}",
        row(&rows, "softirq-spread").value
    );
    assert_eq!(st("softnet"), Status::NotApplicable);
    assert!(row(&rows, "softnet").value.contains("2 columns"));
    let backlog = row(&rows, "backlog");
    assert_eq!(backlog.status, Status::NotApplicable);
    assert!(backlog.value.contains("not a number"), "{}", backlog.value);
    // Only the one CPU of /proc/stat is known.
    assert_eq!(facts.online().len(), 1);
    assert_eq!(doctor::exit_code(&rows), 0);
}

#[test]
fn no_nic_gives_one_na_row_per_interface_check() {
    let facts = doctor::gather(&tree("container"), &FakeNic::default(), &Scope::default());
    assert!(facts.ifaces.is_empty(), "eth0 there has no device link");
    let rows = doctor::audit(&facts, &["xps".into()]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, Status::NotApplicable);
    assert!(rows[0].value.contains("--iface"));
}

#[test]
fn the_live_host_audits_without_panicking() {
    let nic = firehose_host::nic::LiveNic::new();
    let facts = doctor::gather(&HostFs::live(), &nic, &Scope::default());
    let rows = doctor::audit(&facts, &[]);
    assert!(rows.len() >= doctor::CHECKS.len());
    assert!(
        rows.iter()
            .all(|r| !r.value.is_empty() && !r.source.is_empty()),
        "{rows:#?}"
    );
}

/// The drop watch's counts over the window: at --port a drop is `bad` with the kernel's
/// reason in the value; none is `ok`; a refused watch is `n/a` with its reason; no window
/// (--apply reads settings only) is `n/a`.
#[test]
fn drop_reasons_row_reads_the_drop_watch() {
    let mut facts = sampled_bigbox();
    facts.drop_reasons = Some(Ok(doctor::DropReasons {
        via: "bpf".into(),
        total: 137,
        lines: vec!["137 NO_SOCKET at __udp4_lib_rcv, port 9000".into()],
    }));
    let rows = doctor::audit(&facts, &["drop-reasons".to_string()]);
    let r = row(&rows, "drop-reasons");
    assert_eq!(r.status, Status::Bad, "{r:?}");
    assert!(
        r.value.ends_with(
            "137 dropped at port 9000: 137 NO_SOCKET at __udp4_lib_rcv, port 9000 (watched by bpf)"
        ),
        "{r:?}"
    );
    assert_eq!(
        r.fix.as_deref(),
        Some("firehose drops --duration 10 --port 9000 (the full table, by socket and process)")
    );
    facts.port = None;
    let r = doctor::audit(&facts, &["drop-reasons".to_string()]).remove(0);
    assert_eq!(r.status, Status::Warn, "{r:?}");
    facts.drop_reasons = Some(Ok(doctor::DropReasons {
        via: "perf".into(),
        total: 0,
        lines: Vec::new(),
    }));
    let r = doctor::audit(&facts, &["drop-reasons".to_string()]).remove(0);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.value
            .ends_with("the kernel dropped nothing anywhere on the host (watched by perf)"),
        "{r:?}"
    );
    facts.drop_reasons = Some(Err("needs CAP_BPF or CAP_PERFMON".into()));
    let r = doctor::audit(&facts, &["drop-reasons".to_string()]).remove(0);
    assert_eq!(
        (r.status, r.value.as_str()),
        (Status::NotApplicable, "needs CAP_BPF or CAP_PERFMON")
    );
    let r = doctor::audit(&bigbox(), &["drop-reasons".to_string()]).remove(0);
    assert_eq!(r.status, Status::NotApplicable, "no window: {r:?}");
}
