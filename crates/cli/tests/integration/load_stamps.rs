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
    // Where the kernel takes a stamp's key in the send, requests sent together keep UDP GSO
    // (a send's segments share its stamp); otherwise one datagram per send message.
    let keyed = firehose_sys::timestamping::key_per_send().is_ok();
    let cases: [&[&str]; 5] = [
        &["--flows", "1", "--window", "1"],
        &["--flows", "4", "--window", "8"],
        &["--flows", "3", "--window", "2", "--rate", "20k"],
        &["--flows", "2", "--window", "4", "--rate", "5k", "--spin"],
        // Bursts: 64 requests intended at one instant, one GSO send each where keyed.
        &["--flows", "2", "--rate", "50k", "--arrivals", "burst:64"],
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
        // A window of 1 sends one request at a time (never GSO); a window of 8 starts with
        // 8 on each flow (a closed loop's refills leave together), and a burst of 64 is 64
        // a send. (A paced wake-up on schedule sends apart, by sendmmsg, but one behind
        // sends together, as may a spinning sender whose pass comes late.)
        match k {
            0 => assert_eq!(doc["send_path"], "sendmmsg", "{extra:?}"),
            1 | 4 if keyed => assert_eq!(doc["send_path"], "gso", "{extra:?}"),
            _ => {}
        }
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
    // (A busy host delays the generator's wake-ups by some ms too: its p90, not its p99.)
    let doc = open_loop_with_a_stall(&srv, "1000", Stall::Server, &["--stamps"]);
    let (rtt, lag) = (us(&doc, "rtt_us", "p99"), us(&doc, "send_lag_us", "p90"));
    assert!(rtt >= 100_000.0, "{}", doc["parts"]);
    assert!(lag * 4.0 < rtt, "{}", doc["parts"]);
    // The generator stopped: the requests due meanwhile that it still sent (the rest count
    // unsent) left up to 200 ms late, and their round trips were ordinary.
    let doc = open_loop_with_a_stall(&srv, "1000", Stall::Generator, &["--stamps"]);
    let (rtt, lag) = (us(&doc, "rtt_us", "p90"), us(&doc, "send_lag_us", "max"));
    assert!(lag >= 150_000.0, "{}", doc["parts"]);
    assert!(rtt * 4.0 < lag, "{}", doc["parts"]);
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

/// `firehose load --stamps` at 200 requests/s, one per wake-up, with `arrivals`; returns
/// the gaps between departures the transmit stamps saw.
fn departure_gaps(srv: &Served, arrivals: &str) -> serde_json::Value {
    let out_path = tmp(&format!("load-arrivals-{}", arrivals.replace(':', "-")));
    let target = srv.addr.to_string();
    let mut args = vec!["load", "--target", &target, "--requests", "600"];
    args.extend([
        "--rate",
        "200",
        "--stamps",
        "--quiet",
        "--arrivals",
        arrivals,
    ]);
    if !arrivals.starts_with("burst") {
        args.extend(["--per-wake", "1"]);
    }
    args.extend(["--json-file", out_path.to_str().unwrap()]);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out_path);
    std::fs::remove_file(out_path).unwrap();
    assert_eq!(doc["completed"], 600, "{doc}");
    assert_eq!(doc["config"]["arrivals"], arrivals);
    doc["parts"]["departure_gaps_us"].clone()
}

#[test]
fn the_departure_gaps_show_the_arrival_pattern_asked_for() {
    let srv = Served::tuned(&[]);
    let uniform = departure_gaps(&srv, "uniform");
    let burst = departure_gaps(&srv, "burst:30");
    let at = |g: &serde_json::Value, p: &str| g[p].as_f64().unwrap();
    // The rate holds whatever the shape: 5 ms apart on average.
    for g in [&uniform, &burst] {
        assert!((4000.0..6000.0).contains(&at(g, "mean")), "{g}");
    }
    // Evenly spaced: most gaps are whole intervals (a busy host's late wake-ups send a few
    // back to back). Bursts of 30: 29 of every 30 gaps back to back, in one sendmmsg.
    assert!(at(&uniform, "p50") > 2000.0, "{uniform}");
    assert!(at(&burst, "p90") < 200.0, "{burst}");
    assert!(at(&burst, "cv") > at(&uniform, "cv"), "{burst} {uniform}");
}

/// `--hdr-log` with `--stamps`: each interval has a line per part, tagged `rtt`, `send_lag`
/// and `recv_lag`, over the same span as its latency line; each part's lines add up to the
/// JSON's histogram of that part, as the latency lines add up to `latency_histogram`.
#[test]
fn the_hdr_log_carries_each_part_as_tagged_intervals_that_add_up() {
    use crate::report_merge::decode;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use std::collections::BTreeMap;
    let srv = Served::tuned(&[]);
    let (log, json) = (tmp("stamps.hlog"), tmp("stamps-hlog.json"));
    let target = srv.addr.to_string();
    let out = run(&[
        "load",
        "--target",
        &target,
        "--warmup",
        "1",
        "--duration",
        "2",
        "--rate",
        "5k",
        "--stamps",
        "--quiet",
        "--hdr-log",
        log.to_str().unwrap(),
        "--json-file",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read(&log).unwrap();
    let doc = json_of(&json);
    // Per tag ("" for latency): the (start, length) of each line and their sum.
    let mut lines: BTreeMap<String, (Vec<_>, hdrhistogram::Histogram<u64>)> = BTreeMap::new();
    for e in IntervalLogIterator::new(&text) {
        if let LogEntry::Interval(i) = e.unwrap() {
            let tag = i.tag().map(|t| t.as_str().to_string()).unwrap_or_default();
            let h = decode(i.encoded_histogram());
            let entry = lines.entry(tag).or_insert_with(|| {
                let empty = hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3);
                (Vec::new(), empty.unwrap())
            });
            entry.0.push((i.start_timestamp(), i.duration()));
            entry.1.add(&h).unwrap();
        }
    }
    let tags: Vec<&str> = lines.keys().map(String::as_str).collect();
    assert_eq!(tags, ["", "recv_lag", "rtt", "send_lag"], "{lines:?}");
    let spans = &lines[""].0;
    assert_eq!(spans.len(), 2, "one interval per second of --duration 2");
    for (tag, part) in [
        ("rtt", "rtt"),
        ("send_lag", "send_lag"),
        ("recv_lag", "recv_lag"),
    ] {
        let (s, sum) = &lines[tag];
        assert_eq!(s, spans, "{tag}: the same intervals as latency");
        let whole = decode(doc["parts"][format!("{part}_histogram")].as_str().unwrap());
        assert_eq!(
            *sum, whole,
            "{tag}: the lines add up to the JSON's histogram"
        );
        assert_eq!(
            sum.len(),
            doc["parts"]["stamped"].as_u64().unwrap(),
            "{tag}"
        );
    }
    assert_eq!(
        lines[""].1,
        decode(doc["latency_histogram"].as_str().unwrap())
    );
    std::fs::remove_file(log).unwrap();
    std::fs::remove_file(json).unwrap();
}
