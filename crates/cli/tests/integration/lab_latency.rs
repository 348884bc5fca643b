//! `firehose lab latency` bounded on loopback (two rates, one repetition of one second): the
//! document's shape, and every row with figures or the reason it has none.

use crate::util::{installed, lab_run, short_run, tempdir, tmp};
use serde_json::Value;

#[test]
fn latency_curve_rows_have_figures_or_a_reason_and_the_report_has_its_chart() {
    let cpus = firehose_sys::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        eprintln!("skipping: the lab needs 2 CPUs to keep server and client apart, have {cpus:?}");
        return;
    }
    let json = tmp("latency.json");
    let dir = tempdir("latency-report");
    let report = dir.join("r");
    let mut args = short_run(&["lab", "latency", "--percents", "50,100"], &json);
    args.extend(["--report".into(), report.display().to_string()]);
    let out = lab_run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["schema_version"], firehose_host::document::SCHEMA_VERSION);
    assert_eq!(v["study"], "latency");
    assert_eq!(v["topology"], "loopback");
    assert_eq!(v["percents"], serde_json::json!([50, 100]));
    assert!(
        v["environment"]["kernel"].is_string(),
        "{}",
        v["environment"]
    );
    assert!(v["load_average_after"].is_string());
    let rows = v["rows"].as_array().unwrap();
    let sockperf = installed("sockperf");
    let mut expected = 0;
    for p in ["tuned", "latency"] {
        let m = &v["max_tps"][p];
        let ours = |r: &&Value| r["profile"] == p && r["who"] == "firehose";
        if m["reason"].is_string() {
            // A profile without a max has no rows (the load on a busy host may keep no rate).
            assert!(m["tps"].is_null(), "{p}: {m}");
            assert_eq!(rows.iter().filter(ours).count(), 0, "{p}: {rows:#?}");
            continue;
        }
        // Both maxima; the percents are of the open-loop one, the search's steps with it.
        assert!(m["tps"].as_f64().is_some_and(|t| t > 0.0), "{p}: {m}");
        assert_eq!(m["percents_of"], "open_loop_tps", "{p}: {m}");
        assert_eq!(m["tps"], m["open_loop_tps"], "{p}: {m}");
        assert!(m["closed_loop_tps"].as_f64().is_some_and(|t| t > 0.0));
        assert!(m["lower_bound"].is_boolean(), "{p}: {m}");
        let steps = m["steps"].as_array().unwrap();
        assert!((1..=8).contains(&steps.len()), "{p}: {m}");
        assert_eq!(
            steps[0]["rate"],
            m["closed_loop_tps"].as_f64().unwrap().round()
        );
        assert!(steps
            .iter()
            .any(|s| s["outcome"] == "held" && s["rate"] == m["tps"]));
        for s in steps {
            assert!(
                ["held", "lost", "client-bound"].contains(&s["outcome"].as_str().unwrap()),
                "{s}"
            );
        }
        // Its rates: the percents of the open-loop max.
        let max = m["tps"].as_f64().unwrap();
        for r in rows.iter().filter(ours).filter(|r| r["unloaded"] == false) {
            let pct = r["percent"].as_f64().unwrap();
            assert_eq!(
                r["rate"].as_f64().unwrap(),
                (max * pct / 100.0).round(),
                "{r}"
            );
        }
        // The unloaded point: one request outstanding, stamped.
        let unloaded: Vec<&Value> = rows
            .iter()
            .filter(ours)
            .filter(|r| r["unloaded"] == true)
            .collect();
        assert_eq!(unloaded.len(), 1, "{p}: {rows:#?}");
        assert_eq!(unloaded[0]["percent"], 0);
        assert!(
            unloaded[0]["options"]
                .as_str()
                .unwrap()
                .contains("--flows 1 --window 1 --stamps"),
            "{}",
            unloaded[0]
        );
        // Per rate: ours, and sockperf's when installed (else skipped with why); and the
        // unloaded point.
        expected += 1 + if sockperf { 4 } else { 2 };
    }
    assert_eq!(rows.len(), expected, "{rows:#?}");
    for r in rows {
        let figures = r["latency_p50_us"]["median"]
            .as_f64()
            .is_some_and(|x| x > 0.0)
            && r["latency_p99_us"]["median"].as_f64().is_some()
            && r["tps"]["median"].as_f64().is_some_and(|x| x > 0.0);
        let reason = r["reason"].as_str().is_some_and(|s| !s.is_empty());
        assert!(
            figures || reason,
            "a row with neither figures nor a reason: {r}"
        );
        assert!(
            r["options"].as_str().unwrap().contains("serve --profile") || r["who"] == "sockperf"
        );
        if figures {
            // The server's busy thread was read from /proc around each run, on both sides.
            for k in [
                "server_sleeps_per_s",
                "server_preempted_per_s",
                "server_run_delay_us_per_s",
            ] {
                assert!(
                    r[k]["median"].as_f64().is_some_and(|x| x >= 0.0),
                    "{k}: {r}"
                );
            }
        }
        if r["who"] == "firehose" {
            // Like sockperf's sender, ours spins in every pair.
            assert!(r["options"].as_str().unwrap().ends_with("--spin"), "{r}");
        }
        if figures && r["who"] == "firehose" {
            // Kernel stamps: rtt from departure to arrival, never above latency's p99.9.
            assert!(r["rtt_p50_us"]["median"].as_f64().is_some(), "{r}");
            assert_eq!(r["sampling"], "every reply");
        }
        if r["who"] == "sockperf" {
            assert_eq!(r["sampling"], "1 reply in 100");
            assert!(r["rtt_p50_us"].is_null(), "{r}");
        }
    }
    if !sockperf {
        let skipped = v["skipped"].as_array().unwrap();
        assert!(skipped
            .iter()
            .all(|s| s["reason"].as_str().unwrap().contains("not installed")));
    }
    // Both sides' options are in the notes; the sampling and full round trips are stated.
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("--reply-every 100") && notes.contains("--full-rtt"),
        "{notes}"
    );
    assert!(
        text.contains("Latency against load") || text.contains("% max"),
        "{text}"
    );
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("p99 against load"),
        "no chart"
    );
}
