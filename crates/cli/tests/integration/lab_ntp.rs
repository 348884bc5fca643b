//! `firehose lab compare --proto ntp` end to end on loopback: our server and chronyd on one
//! CPU each in turn, one short repetition of the same generator; every answer validated,
//! hold time and offset measured for both, and nothing left running.

use crate::util::{bin, installed, lab_compare};

#[test]
fn ntp_compare_gives_a_row_per_server_with_hold_times() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs to pin server and client apart");
        return;
    }
    if !installed("chronyd") {
        eprintln!("skipped: chronyd is not installed (apt-get install chrony)");
        return;
    }
    let run = lab_compare("ntp", &["--flows", "2", "--window", "8"]);
    assert!(
        run.stdout.contains("resp/s median (min-max)"),
        "{}",
        run.stdout
    );
    let v = &run.doc;
    assert_eq!(v["study"], "compare --proto ntp");
    let rows = v["rows"].as_array().unwrap();
    let servers: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(servers, ["firehose", "chronyd"], "{v}");
    for r in rows {
        assert!(r["rps"]["median"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["server_cpu_us_per_req"]["median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        // The generator checks every answer (origin, mode, stratum, leap): both serve a
        // synchronised local stratum 10.
        assert_eq!(r["invalid"], 0, "{r}");
        // Both hold a request for a while (t3 >= t2), and on one host's clock the offset
        // is small.
        assert!(r["hold_p99_us"]["median"].as_f64().unwrap() >= 0.0, "{r}");
        assert!(
            r["offset_p50_us"]["median"].as_f64().unwrap().abs() < 1000.0,
            "{r}"
        );
    }
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

#[test]
fn ntp_compare_refuses_what_it_cannot_do() {
    for (args, want) in [
        (&["--topology", "veth"][..], "--topology veth"),
        (&["--servers", "ntpd"][..], "--servers"),
        (&["--generators", "ntpperf"][..], "one generator"),
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
