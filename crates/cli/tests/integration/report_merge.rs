//! Load from several agents: `load --start-at` starts them together, `--json` carries the
//! whole latency histogram, `report merge` adds the agents exactly, and `--hdr-log` writes
//! an HdrHistogram interval log whose intervals add up to the run.

use crate::bad_input::assert_usage_error;
use crate::util::{bin, json_of, run, tmp, Served, Spawned};
use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A histogram as the JSON and the log carry it: HdrHistogram V2 deflate, base64.
pub(crate) fn decode(b64: &str) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap()
}

#[test]
fn two_agents_merge_to_the_sum_of_their_counts_and_histograms() {
    let srv = Served::tuned(&[]);
    let target = srv.addr.to_string();
    let at = (now_unix() + 3.0).floor();
    let paths = [tmp("merge-a.json"), tmp("merge-b.json")];
    let agents: Vec<_> = [("1", "2"), ("3", "4")]
        .iter()
        .zip(&paths)
        .map(|((flows, window), p)| {
            Command::new(bin())
                .args(["load", "--target", &target, "--requests", "4000"])
                .args(["--flows", flows, "--window", window, "--quiet"])
                .args(["--start-at", &at.to_string(), "--json-file"])
                .arg(p)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .map(Spawned::of)
        .collect();
    for a in agents {
        let o = a.output(Duration::from_secs(60));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let docs: Vec<_> = paths.iter().map(|p| json_of(p)).collect();
    for d in &docs {
        assert!(
            d["start_unix"].as_f64().unwrap() >= at - 0.001,
            "an agent started before --start-at {at}: {}",
            d["start_unix"]
        );
        assert_eq!(d["sent"], 4000);
    }
    let merged_path = tmp("merge-total.json");
    let mut args: Vec<String> = vec!["report".into(), "merge".into()];
    args.extend(paths.iter().map(|p| p.display().to_string()));
    args.extend(["--json-file".into(), merged_path.display().to_string()]);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  total "), "{text}");
    assert!(text.contains("summary: "), "{text}");
    let m = json_of(&merged_path);
    let sum = |k: &str| docs.iter().map(|d| d[k].as_u64().unwrap()).sum::<u64>();
    for k in ["completed", "lost", "sent", "stray", "dup"] {
        assert_eq!(m[k].as_u64().unwrap(), sum(k), "{k}");
    }
    assert_eq!(m["agents"].as_array().unwrap().len(), 2);
    // The union of both agents' histograms, added here, gives the merged percentiles.
    let mut union = decode(docs[0]["latency_histogram"].as_str().unwrap());
    union
        .add(decode(docs[1]["latency_histogram"].as_str().unwrap()))
        .unwrap();
    assert_eq!(union.len(), sum("completed"));
    let us = |ns: u64| ns as f64 / 1000.0;
    let l = &m["latency_us"];
    for (key, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p999", 0.999),
        ("p9999", 0.9999),
    ] {
        assert_eq!(
            l[key].as_f64().unwrap(),
            us(union.value_at_quantile(q)),
            "{key}"
        );
    }
    assert_eq!(l["min"].as_f64().unwrap(), us(union.min()));
    assert_eq!(l["max"].as_f64().unwrap(), us(union.max()));
    assert_eq!(decode(m["latency_histogram"].as_str().unwrap()), union);
    for p in paths.iter().chain([&merged_path]) {
        std::fs::remove_file(p).unwrap();
    }
    drop(srv);
}

#[test]
fn hdr_log_has_its_header_and_one_decodable_interval_per_second() {
    let srv = Served::tuned(&[]);
    let (log, json) = (tmp("hdr.hlog"), tmp("hdr.json"));
    let out = run(&[
        "load",
        "--target",
        &srv.addr.to_string(),
        "--warmup",
        "1",
        "--duration",
        "2",
        "--rate",
        "5k",
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
    let head: Vec<&str> = std::str::from_utf8(&text)
        .unwrap()
        .lines()
        .take(4)
        .collect();
    assert!(
        head[0].starts_with("#[Logged with firehose load"),
        "{head:?}"
    );
    assert_eq!(head[1], "#[Histogram log format version 1.3]");
    assert!(head[2].starts_with("#[StartTime: "), "{head:?}");
    assert!(head[3].starts_with("#[BaseTime: "), "{head:?}");
    let doc = json_of(&json);
    let mut intervals = Vec::new();
    for e in IntervalLogIterator::new(&text) {
        match e.unwrap() {
            LogEntry::Interval(i) => intervals.push((
                i.start_timestamp(),
                i.duration(),
                decode(i.encoded_histogram()),
            )),
            LogEntry::StartTime(t) | LogEntry::BaseTime(t) => {
                // The run's clock zero; the measured window starts after the 1 s warm-up.
                let window = t.as_secs_f64() + 1.0;
                let start = doc["start_unix"].as_f64().unwrap();
                assert!((window - start).abs() < 0.002, "{window} vs {start}");
            }
        }
    }
    assert_eq!(
        intervals.len(),
        2,
        "one interval per second of --duration 2"
    );
    assert_eq!(
        intervals[0].0,
        Duration::from_secs(1),
        "logged from the warm-up's end"
    );
    let mut all: Histogram<u64> = Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    for (k, (start, _, h)) in intervals.iter().enumerate() {
        if k > 0 {
            assert_eq!(
                *start,
                intervals[k - 1].0 + intervals[k - 1].1,
                "contiguous"
            );
        }
        assert!(!h.is_empty(), "interval {k} recorded nothing at 5k tps");
        all.add(h).unwrap();
    }
    assert_eq!(all.len(), doc["completed"].as_u64().unwrap());
    assert_eq!(all, decode(doc["latency_histogram"].as_str().unwrap()));
    std::fs::remove_file(log).unwrap();
    std::fs::remove_file(json).unwrap();
    drop(srv);
}

#[test]
fn bad_input_for_several_agents_is_one_line_and_exit_2() {
    let now = now_unix() as u64;
    let past = (now - 60).to_string();
    let far = ((now + 2 * 86_400) * 1000).to_string();
    for (at, says) in [(&past, "in the past"), (&far, "more than a day")] {
        assert_usage_error(&["load", "--target", "127.0.0.1:9", "--start-at", at], says);
    }
    assert_usage_error(
        &[
            "load",
            "--target",
            "127.0.0.1:9",
            "--hdr-log",
            "/x",
            "--interval",
            "0",
        ],
        "--interval",
    );
    let missing = tmp("merge-missing.json");
    assert_usage_error(
        &["report", "merge", missing.to_str().unwrap()],
        "No such file",
    );
    let other = tmp("merge-other.json");
    std::fs::write(&other, "{\"tps\": 1}").unwrap();
    assert_usage_error(
        &["report", "merge", other.to_str().unwrap()],
        "is not a load report",
    );
    // A load report without its histogram (as older versions wrote it).
    let srv = Served::tuned(&[]);
    let old = tmp("merge-old.json");
    let out = run(&[
        "load",
        "--target",
        &srv.addr.to_string(),
        "--requests",
        "10",
        "--quiet",
        "--json-file",
        old.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let mut doc = json_of(&old);
    doc.as_object_mut().unwrap().remove("latency_histogram");
    std::fs::write(&old, doc.to_string()).unwrap();
    assert_usage_error(
        &["report", "merge", old.to_str().unwrap()],
        "has no latency_histogram",
    );
    doc["latency_histogram"] = "HISTFAAAnotahistogram".into();
    std::fs::write(&old, doc.to_string()).unwrap();
    assert_usage_error(
        &["report", "merge", old.to_str().unwrap()],
        "latency_histogram is unreadable",
    );
    for p in [other, old] {
        std::fs::remove_file(p).unwrap();
    }
}
