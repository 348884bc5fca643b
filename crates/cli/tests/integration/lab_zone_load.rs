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
