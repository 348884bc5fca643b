//! `firehose lab compare --proto ntp` end to end, on loopback (our server and chronyd) and
//! across the veth pair (and ntpsec's ntpd): one CPU each in turn, one short repetition of
//! the same generator; every answer validated, hold time and offset measured for each, and
//! nothing left running.

use crate::util::{bin, installed, lab_compare, root_or_skip};
use serde_json::Value;

/// Two CPUs to pin server and client apart; otherwise says why not.
fn two_cpus() -> bool {
    let ok = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if !ok {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
    }
    ok
}

/// A row per server of `servers`, in that order, each with answers, none invalid (the
/// generator checks origin, mode, stratum and leap: all serve a synchronised stratum 10),
/// a hold time (t3 >= t2) and, on one host's clock, a small offset.
fn every_server_answered_well(v: &Value, servers: &[&str]) {
    assert_eq!(v["study"], "compare --proto ntp");
    let rows = v["rows"].as_array().unwrap();
    let got: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(got, servers, "{v}");
    for r in rows {
        assert!(r["rps"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["server_cpu_us_per_req"]["median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert_eq!(r["invalid"], 0, "{r}");
        assert!(r["hold_p99_us"]["median"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(
            r["offset_p50_us"]["median"].as_f64().unwrap().abs() < 1000.0,
            "{r}"
        );
    }
}

#[test]
fn ntp_compare_gives_a_row_per_server_with_hold_times() {
    if !two_cpus() {
        return;
    }
    if !installed("chronyd") {
        eprintln!("skipped: chronyd is not installed (apt-get install chrony)");
        return;
    }
    let run = lab_compare(
        "ntp",
        &[
            "--servers",
            "firehose,chronyd",
            "--flows",
            "2",
            "--window",
            "8",
        ],
    );
    assert!(
        run.stdout.contains("resp/s median (min-max)"),
        "{}",
        run.stdout
    );
    let v = &run.doc;
    every_server_answered_well(v, &["firehose", "chronyd"]);
    assert_eq!(v["trials"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["ratios"][0]
        .as_str()
        .unwrap()
        .starts_with("responses/s per server CPU, firehose / chronyd, 1 CPU(s): "));
    assert!(
        run.md.contains("| chronyd | 1 instance(s), reuseport |"),
        "{}",
        run.md
    );
}

/// `--topology veth` (root): firehose over each of its I/O paths (sockets, AF_XDP on the
/// server's veth, io_uring where this kernel has it), chronyd and ntpsec's ntpd in the
/// server namespace (ntpd on port 123, which is the lab's own there), the generator in
/// the client namespace; a peer that is not installed is left out with the reason
/// printed. The kernel clock's status bits are the same after the run: ntpd, which tries
/// to start the kernel's loop whatever its configuration says, ran without CAP_SYS_TIME.
#[test]
fn ntp_compare_runs_firehose_chronyd_and_ntpd_across_the_veth_pair() {
    if !root_or_skip() || !two_cpus() {
        return;
    }
    let mut ios = vec!["socket", "xdp"];
    if crate::util::uring_or_skip("recvmsg") {
        ios.push("uring");
    }
    let mut servers = vec!["firehose"];
    let ntpd = firehose_lab::peers::ntpd::find().is_some();
    for (peer, found, how) in [
        ("chronyd", installed("chronyd"), "apt-get install chrony"),
        (
            "ntpd",
            ntpd,
            "as root, sh mk/deps lab unpacks ntpsec's ntpd",
        ),
    ] {
        if found {
            servers.push(peer);
        } else {
            eprintln!("{peer} left out: not installed ({how})");
        }
    }
    let status = || firehose_sys::clock::KernelClock::read().unwrap().status;
    let before = status();
    let run = lab_compare(
        "ntp",
        &[
            "--topology",
            "veth",
            "--servers",
            &servers.join(","),
            "--io",
            &ios.join(","),
            "--flows",
            "2",
            "--window",
            "8",
        ],
    );
    assert_eq!(status(), before, "the kernel clock's status changed");
    let v = &run.doc;
    assert_eq!(v["topology"], "veth", "{v}");
    // A row per path of ours, then the peers.
    let rows: Vec<&str> = ios
        .iter()
        .map(|_| "firehose")
        .chain(servers[1..].iter().copied())
        .collect();
    every_server_answered_well(v, &rows);
    let paths: Vec<&str> = v["rows"].as_array().unwrap()[..ios.len()]
        .iter()
        .map(|r| r["io"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ios, "{v}");
    // AF_XDP serves the veth's one queue: the pair was built with one queue a side.
    assert_eq!(v["queues"], 1, "{v}");
    let ratios = v["ratios"].to_string();
    assert!(
        ratios.contains("firehose --io socket / --io xdp, 1 CPU(s): server CPU per response "),
        "{ratios}"
    );
    let notes = v["notes"].to_string();
    assert!(notes.contains("10.199.0.2"), "{notes}");
    assert!(
        notes.contains("--io xdp --iface DEV --profile xdp"),
        "{notes}"
    );
    if servers.contains(&"ntpd") {
        assert!(
            notes.contains("orphan") && notes.contains("port 123"),
            "{notes}"
        );
        assert!(
            run.md.contains("| ntpd | 1 process, port 123 |"),
            "{}",
            run.md
        );
    }
}

#[test]
fn ntp_compare_refuses_what_it_cannot_do() {
    for (args, want) in [
        (&["--servers", "ntpq"][..], "--servers"),
        (&["--generators", "ntpperf"][..], "one generator"),
        (&["--size", "100"][..], "48 bytes"),
        (&["--io", "xdp"][..], "--topology veth"),
        (&["--io", "socket,dpdk"][..], "socket, xdp, uring"),
    ] {
        let out = std::process::Command::new(bin())
            .args(["lab", "compare", "--proto", "ntp"])
            .args(args)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want) && e.lines().count() == 1, "{args:?}: {e}");
    }
}
