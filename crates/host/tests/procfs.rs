//! The shared /proc parsers on real samples from a 2-CPU VM (kernel 6.18) and hand-made
//! samples of other hosts and kernels.

use firehose_host::procfs::{self, pidstat, snmp, softirqs, softnet, stat, udp_sockets};
use std::net::SocketAddr;

fn sample(name: &str) -> String {
    let path = format!("{}/tests/samples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn stat_real_vm() {
    let s = stat::parse(&sample("proc_stat.txt")).unwrap();
    assert_eq!(s.total.user, 4566);
    assert_eq!(s.total.system, 2113);
    assert_eq!(s.total.steal, 8);
    assert_eq!(s.cpus.len(), 2);
    assert_eq!(s.cpus[1].0, 1);
    assert_eq!(s.cpus[1].1.iowait, 508);
    assert_eq!(s.cpus[1].1.softirq, 40);
}

#[test]
fn stat_offline_cpu_keeps_real_ids() {
    let s = stat::parse(&sample("proc_stat_4cpu_offline.txt")).unwrap();
    let ids: Vec<usize> = s.cpus.iter().map(|(c, _)| *c).collect();
    assert_eq!(ids, vec![0, 1, 3]);
    assert_eq!(s.cpus[0].1.softirq, 500);
}

#[test]
fn stat_old_kernel_missing_columns_are_zero() {
    let s = stat::parse(&sample("proc_stat_old_4col.txt")).unwrap();
    assert_eq!(s.total.idle, 1000);
    assert_eq!(s.total.iowait, 0);
    assert_eq!(s.total.steal, 0);
}

#[test]
fn stat_errors() {
    assert!(matches!(
        stat::parse("intr 1 2\n"),
        Err(procfs::ParseError::Missing { .. })
    ));
    let e = stat::parse("cpu  1 2 x 4\n").unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("\"x\""), "{e}");
    assert!(stat::parse("cpu 1 2\n").is_err());
}

#[test]
fn split_of_a_delta() {
    let before = stat::CpuTimes::default();
    let after = stat::CpuTimes {
        user: 30,
        nice: 10,
        system: 20,
        idle: 15,
        iowait: 5,
        irq: 5,
        softirq: 10,
        steal: 5,
    };
    let s = stat::split(&before, &after);
    assert_eq!(s.usr, 40.0);
    assert_eq!(s.sys, 20.0);
    assert_eq!(s.irq, 5.0);
    assert_eq!(s.soft, 10.0);
    assert_eq!(s.idle, 20.0);
    assert_eq!(s.steal, 5.0);
    // No time passed: all zero, no NaN.
    let z = stat::split(&after, &after);
    assert_eq!(z.usr, 0.0);
    assert_eq!(z.idle, 0.0);
    // iowait going backwards counts as 0, not as a wrapped huge number.
    let mut back = after.clone();
    back.iowait = 0;
    back.idle += 10;
    let s = stat::split(&after, &back);
    assert_eq!(s.idle, 100.0);
}

#[test]
fn softirqs_real_and_four_cpus() {
    let s = softirqs::parse(&sample("proc_softirqs.txt")).unwrap();
    assert_eq!(s.cpus, vec![0, 1]);
    assert_eq!(s.row("NET_RX"), Some(&[2137, 3245][..]));
    assert_eq!(s.row("BLOCK"), Some(&[0, 56544][..]));
    assert_eq!(s.row("NOPE"), None);
    let s = softirqs::parse(&sample("proc_softirqs_4cpu.txt")).unwrap();
    assert_eq!(s.cpus, vec![0, 1, 2, 3]);
    assert_eq!(s.row("NET_RX"), Some(&[9000000, 12, 3, 0][..]));
    assert_eq!(s.rows.len(), 10);
}

#[test]
fn softirqs_errors() {
    assert!(softirqs::parse("").is_err());
    let e = softirqs::parse("  CPU0 CPU1\nNET_RX: 1\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2") && e.contains("1 counts for 2 CPUs"),
        "{e}"
    );
    assert!(softirqs::parse("  CPUx\n").is_err());
}

#[test]
fn softnet_15_columns_real() {
    let rows = softnet::parse(&sample("softnet_stat_15col.txt")).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].cpu, 0);
    assert_eq!(rows[0].processed, 0x1f);
    assert_eq!(rows[1].cpu, 1);
    assert_eq!(rows[1].processed, 0x112d);
    assert_eq!(rows[1].backlog_len, Some(0));
}

#[test]
fn softnet_13_columns_uses_cpu_id_column() {
    let rows = softnet::parse(&sample("softnet_stat_13col.txt")).unwrap();
    assert_eq!(rows[0].cpu, 0);
    assert_eq!(rows[0].processed, 0xffff);
    assert_eq!(rows[0].dropped, 1);
    assert_eq!(rows[0].time_squeeze, 2);
    assert_eq!(rows[0].received_rps, 3);
    assert_eq!(rows[0].flow_limit_count, 4);
    assert_eq!(rows[0].backlog_len, Some(5));
    // The second row is CPU 2 (CPU 1 offline), as its id column says.
    assert_eq!(rows[1].cpu, 2);
}

#[test]
fn softnet_11_and_10_columns() {
    let rows = softnet::parse(&sample("softnet_stat_11col.txt")).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].processed, 0x0ad1f00e);
    assert_eq!(rows[0].dropped, 2);
    assert_eq!(rows[0].time_squeeze, 0x1a);
    assert_eq!(rows[0].received_rps, 0x10);
    assert_eq!(rows[0].flow_limit_count, 3);
    assert_eq!(rows[0].backlog_len, None);
    assert_eq!(rows[1].cpu, 1);
    let rows = softnet::parse(&sample("softnet_stat_10col.txt")).unwrap();
    assert_eq!(rows[0].received_rps, 7);
    assert_eq!(rows[0].flow_limit_count, 0);
}

#[test]
fn softnet_errors() {
    assert!(softnet::parse("0001 0002\n").is_err());
    let e = softnet::parse("zz 0 0 0 0 0 0 0 0 0 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("processed") && e.contains("not hexadecimal"),
        "{e}"
    );
    assert_eq!(softnet::parse("").unwrap(), vec![]);
}

#[test]
fn snmp_udp_real_skips_udplite() {
    let c = snmp::parse_udp(&sample("proc_net_snmp.txt")).unwrap();
    assert_eq!(c.in_datagrams, 59);
    assert_eq!(c.out_datagrams, 60);
    assert_eq!(c.rcvbuf_errors, 0);
}

#[test]
fn snmp_udp_old_kernel_fewer_counters() {
    let c = snmp::parse_udp(&sample("proc_net_snmp_old.txt")).unwrap();
    assert_eq!(c.in_datagrams, 1000);
    assert_eq!(c.no_ports, 3);
    assert_eq!(c.in_errors, 250);
    assert_eq!(c.rcvbuf_errors, 240);
    assert_eq!(c.mem_errors, 0);
}

#[test]
fn snmp_errors() {
    assert!(snmp::parse_udp("Ip: A\nIp: 1\n").is_err());
    assert!(snmp::parse_udp("Udp: InDatagrams NoPorts\nUdp: 1\n").is_err());
    assert!(snmp::parse_udp6("Ip6InReceives 3\n").is_err());
}

#[test]
fn snmp6_udp() {
    let c = snmp::parse_udp6(&sample("proc_net_snmp6.txt")).unwrap();
    assert_eq!(c, snmp::UdpCounters::default());
    let c = snmp::parse_udp6("Udp6InDatagrams  12\nUdp6RcvbufErrors\t3\nUdpLite6InDatagrams 9\n")
        .unwrap();
    assert_eq!(c.in_datagrams, 12);
    assert_eq!(c.rcvbuf_errors, 3);
}

#[test]
fn pidstat_real_and_odd_comm() {
    let p = pidstat::parse(&sample("proc_pid_stat.txt")).unwrap();
    assert_eq!(p.comm, "cat");
    assert_eq!(p.state, 'R');
    assert_eq!(p.processor, Some(1));
    let p = pidstat::parse(&sample("proc_pid_stat_odd_comm.txt")).unwrap();
    assert_eq!(p.comm, "my ) (srv");
    assert_eq!(p.state, 'S');
    assert_eq!(p.utime, 1234);
    assert_eq!(p.stime, 567);
    assert_eq!(p.processor, Some(3));
    assert_eq!(p.ppid, 1);
}

#[test]
fn pidstat_of_a_shell_holds_its_waited_childs_cpu() {
    // `sh -c 'timeout 0.3 sh -c "while :; do :; done"; cat /proc/$$/stat'`
    let p = pidstat::parse(&sample("proc_pid_stat_after_child.txt")).unwrap();
    assert_eq!(p.comm, "sh");
    assert_eq!(p.ppid, 7553);
    assert_eq!((p.utime, p.stime), (0, 0));
    assert_eq!((p.cutime, p.cstime), (30, 0));
}

#[test]
fn pidstat_short_line_has_no_processor() {
    let p = pidstat::parse("1 (init) S 0 1 1 0 -1 0 0 0 0 0 7 8 9 10 20 0 1 0 5").unwrap();
    assert_eq!((p.utime, p.stime, p.processor), (7, 8, None));
    assert_eq!((p.ppid, p.cutime, p.cstime), (0, 9, 10));
    assert!(pidstat::parse("1 (init) S 0 1").is_err());
    assert!(pidstat::parse("garbage").is_err());
}

#[test]
fn udp_sockets_real_v4_v6() {
    let rows = udp_sockets::parse(&sample("proc_net_udp.txt")).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].local,
        "127.0.0.1:5353".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(rows[0].remote, "0.0.0.0:0".parse::<SocketAddr>().unwrap());
    assert_eq!(rows[0].inode, 10858);
    assert_eq!(
        rows[1].remote,
        "127.0.0.2:40000".parse::<SocketAddr>().unwrap()
    );
    let rows = udp_sockets::parse(&sample("proc_net_udp6.txt")).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].local, "[::1]:9001".parse::<SocketAddr>().unwrap());
}

#[test]
fn udp_sockets_reuseport_group_with_drops() {
    let rows = udp_sockets::parse(&sample("proc_net_udp_drops.txt")).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].local.port(), 10000);
    assert_eq!(rows[0].rx_queue, 0x34000);
    assert_eq!(rows[0].drops, 17);
    assert_eq!(rows[0].uid, 998);
    assert_eq!(
        rows[2].local,
        "10.0.0.10:10001".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(rows[2].drops, 1 << 32);
}

#[test]
fn udp_sockets_errors() {
    let e = udp_sockets::parse("  sl x\n 1: 0100007F:14E9 00000000:0000 07\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2"), "{e}");
    assert!(udp_sockets::parse(
        " 1: 0100007:14E9 00000000:0000 07 00000000:00000000 00:00000000 00000000 0 0 1 2 0 0\n"
    )
    .is_err());
}

#[test]
fn read_reports_path() {
    let e = procfs::read("/nonexistent/softnet_stat", softnet::parse).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/softnet_stat"));
    let dir = std::env::temp_dir().join(format!("fh-procfs-{}", std::process::id()));
    std::fs::write(&dir, "x y\n").unwrap();
    let e = procfs::read(dir.to_str().unwrap(), stat::parse).unwrap_err();
    std::fs::remove_file(&dir).unwrap();
    assert!(matches!(e, procfs::ReadError::Parse { .. }));
    // The live files of this host parse.
    procfs::read("/proc/stat", stat::parse).unwrap();
    procfs::read("/proc/softirqs", softirqs::parse).unwrap();
    procfs::read("/proc/net/softnet_stat", softnet::parse).unwrap();
    procfs::read("/proc/net/snmp", snmp::parse_udp).unwrap();
    procfs::read("/proc/self/stat", pidstat::parse).unwrap();
    procfs::read("/proc/net/udp", udp_sockets::parse).unwrap();
}
