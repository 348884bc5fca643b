//! `firehose load --stamps`: latency taken apart by kernel timestamps, every transaction
//! stamped, and each stall put where it happened.

use crate::load::{open_loop_with_a_stall, Stall};
use crate::util::{json_of, run, tmp, Served};

fn us(doc: &serde_json::Value, part: &str, p: &str) -> f64 {
    doc["parts"][part][p].as_f64().unwrap()
}

#[test]
fn every_transaction_has_its_four_instants() {
    let srv = Served::tuned(&[]);
    let target = srv.addr.to_string();
    let cases: [&[&str]; 4] = [
        &["--flows", "1", "--window", "1"],
        &["--flows", "4", "--window", "8"],
        &["--flows", "3", "--window", "2", "--rate", "20k"],
        &["--flows", "2", "--window", "4", "--rate", "5k", "--spin"],
    ];
    for (k, extra) in cases.into_iter().enumerate() {
        let out_path = tmp(&format!("load-stamps-{k}"));
        let mut args = vec![
            "load",
            "--target",
            &target,
            "--requests",
            "5000",
            "--stamps",
        ];
        args.extend(["--quiet", "--json-file", out_path.to_str().unwrap()]);
        args.extend(extra);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{extra:?}: {err}");
        let doc = json_of(&out_path);
        std::fs::remove_file(out_path).unwrap();
        assert_eq!(doc["completed"], 5000, "{extra:?}: {doc}");
        assert_eq!(doc["config"]["stamps"], true);
        // One stamp per datagram needs one datagram per send message.
        assert_eq!(doc["send_path"], "sendmmsg");
        let p = &doc["parts"];
        // Every completed transaction has a departure before its arrival, and no stamp
        // is left over.
        assert_eq!(p["stamped"], 5000, "{extra:?}: {p}");
        assert_eq!(p["unstamped"], 0, "{extra:?}: {p}");
        assert_eq!(p["misordered"], 0, "{extra:?}: {p}");
        assert_eq!(p["unmatched"], 0, "{extra:?}: {p}");
        assert_eq!(p["stamps"], "software");
        assert_eq!(
            p["hardware"],
            "unavailable on lo: ETHTOOL_GET_TS_INFO offers software stamps only"
        );
        // rtt is part of latency; the lags are never negative.
        assert!(us(&doc, "rtt_us", "min") > 0.0, "{p}");
        assert!(
            us(&doc, "rtt_us", "p50") <= doc["latency_us"]["p50"].as_f64().unwrap(),
            "{doc}"
        );
        assert!(us(&doc, "send_lag_us", "min") >= 0.0, "{p}");
        assert!(us(&doc, "recv_lag_us", "min") >= 0.0, "{p}");
        // 5000 departures of one thread: 4999 gaps, less the warm-up's none.
        let gaps = us(&doc, "departure_gaps_us", "mean");
        assert!(gaps > 0.0, "{p}");
    }
    drop(srv);
}

#[test]
fn a_server_stall_lands_in_rtt_and_a_generator_stall_in_send_lag() {
    let srv = Served::tuned(&["--rcvbuf", "4M"]);
    // The server stopped for 200 ms: the requests it sat on waited in the network part.
    let doc = open_loop_with_a_stall(&srv, "1000", Stall::Server, &["--stamps"]);
    let (rtt, lag) = (us(&doc, "rtt_us", "p99"), us(&doc, "send_lag_us", "p99"));
    assert!(rtt >= 100_000.0, "{}", doc["parts"]);
    assert!(lag * 10.0 < rtt, "{}", doc["parts"]);
    // The generator stopped: the requests due meanwhile that it still sent (the rest count
    // unsent) left up to 200 ms late, and their round trips were ordinary.
    let doc = open_loop_with_a_stall(&srv, "1000", Stall::Generator, &["--stamps"]);
    let (rtt, lag) = (us(&doc, "rtt_us", "p99"), us(&doc, "send_lag_us", "max"));
    assert!(lag >= 150_000.0, "{}", doc["parts"]);
    assert!(rtt * 10.0 < lag, "{}", doc["parts"]);
}

#[test]
fn stamps_are_refused_on_other_paths() {
    let out = run(&[
        "load",
        "--target",
        "127.0.0.1:9",
        "--io",
        "uring",
        "--stamps",
        "-t",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--stamps applies only to --io socket"),
        "{err}"
    );
}
