//! `firehose lab zone-load` measures a server's whole process tree: NSD's started process
//! becomes its zone-transfer daemon and the zone lives in a child it forks, so the started
//! process's own peak (about 11 MiB) is not the server's memory (issue 24).

use crate::util::{installed, lab_run, tmp};

#[test]
fn the_memory_of_a_forking_server_is_its_whole_tree() {
    if !installed("nsd") {
        eprintln!("skipping: nsd is not installed (apt-get install -y nsd)");
        return;
    }
    let json = tmp("zone-load-nsd.json");
    let out = lab_run(&[
        "lab",
        "zone-load",
        "--zone-size",
        "5M",
        "--servers",
        "nsd",
        "--repetitions",
        "1",
        "--settle",
        "500ms",
        "--json-file",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let t = &v["trials"][0];
    assert_eq!(t["cell"], "nsd", "{v}");
    let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("no {k}: {t}"));
    assert!(
        t["processes"].as_u64().unwrap() >= 3,
        "xfrd, main, a server: {t}"
    );
    // The zone (5 MB of text, about 80 MiB in NSD) is in "main", not in the started process.
    assert!(
        f("peak_rss_mib") > 3.0 * f("root_hwm_mib"),
        "the tree's peak, not the started process's: {t}"
    );
    assert!(f("pss_after_mib") > f("root_hwm_mib"), "{t}");
    assert!(f("peak_rss_mib") >= f("pss_after_mib"), "{t}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("peak RSS MiB (min-max)") && text.contains("PSS after MiB"),
        "{text}"
    );
}

/// `lab zone-load` end to end, bounded (a 1 MB zone, one start each, the lab's deadline):
/// firehose and every installed peer (knotd, nsd; the others are skipped with a printed
/// reason) answer, their figures hold together (the sampled peak of a one-process server is
/// at most its kernel high-water mark and at least what it holds after), and each printed
/// ratio is the ratio of the medians in the JSON.
#[test]
fn zone_load_end_to_end_with_every_installed_server() {
    let mut servers = vec!["firehose"];
    for (server, package) in [("knotd", "knot"), ("nsd", "nsd")] {
        if installed(server) {
            servers.push(server);
        } else {
            eprintln!("zone-load end to end: {server} left out: not installed (apt-get install -y {package})");
        }
    }
    let list = servers.join(",");
    let json = tmp("zone-load-e2e.json");
    let out = lab_run(&[
        "lab",
        "zone-load",
        "--zone-size",
        "1M",
        "--servers",
        &list,
        "--repetitions",
        "1",
        "--settle",
        "200ms",
        "--json-file",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["server"].as_str().unwrap()).collect();
    assert_eq!(names, servers, "{v}");
    let median = |server: &str, k: &str| -> f64 {
        rows.iter().find(|r| r["server"] == server).unwrap()[k]["median"]
            .as_f64()
            .unwrap_or_else(|| panic!("{server}: no {k}: {v}"))
    };
    for t in v["trials"].as_array().unwrap() {
        let f = |k: &str| t[k].as_f64().unwrap_or_else(|| panic!("no {k}: {t}"));
        assert!(f("ready_s") > 0.0 && f("cpu_s") > 0.0, "{t}");
        assert!(f("peak_rss_mib") >= f("rss_after_mib"), "{t}");
        if t["processes"] == 1 {
            // Sampled every 10 ms, the peak cannot pass the kernel's own high-water mark.
            assert!(f("peak_rss_mib") <= f("root_hwm_mib"), "{t}");
        }
    }
    assert_eq!(v["trials"][0]["processes"], 1, "firehose is one process");
    for peer in &servers[1..] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("firehose / {peer}: load time x")))
            .unwrap_or_else(|| panic!("no ratio line for {peer}: {text}"));
        let printed: f64 = line
            .split("load time x")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        let want = median("firehose", "ready_s") / median(peer, "ready_s");
        assert!(
            (printed - want).abs() <= 0.005 + 1e-9,
            "{line}: the medians give x{want:.2}"
        );
    }
}
