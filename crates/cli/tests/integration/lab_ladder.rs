//! `firehose lab ladder` end to end on loopback: a tiny ladder (two steps, one short
//! repetition) writes a complete JSON document and a report whose HTML renders in headless
//! Chromium without console errors; bad input is refused with exit code 2.

use crate::util::{bin, installed, lab_cmd, lab_run, short_run, stderr, tempdir};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Renders `html` in headless Chromium: (console error lines, screenshot bytes).
fn chromium(html: &Path, png: &Path) -> Option<(Vec<String>, Vec<u8>)> {
    if Command::new("chromium").arg("--version").output().is_err() {
        eprintln!(
            "skipping the browser check: chromium is not installed (apt-get install -y chromium)"
        );
        return None;
    }
    let profile = tempdir("ladder-chromium-profile");
    let mut browser = Command::new("chromium");
    browser
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,1600")
        .arg(format!("file://{}", html.display()));
    let out = lab_cmd(browser);
    let _ = std::fs::remove_dir_all(&profile);
    let errors = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("Uncaught") || l.contains("ERROR:CONSOLE"))
        .map(str::to_string)
        .collect();
    Some((
        errors,
        std::fs::read(png).expect("chromium wrote no screenshot"),
    ))
}

/// The verdict the README defines, from two `{median, min, max}` summaries of tps: helped
/// or hurt only when the medians differ by more than the larger relative spread of the two
/// (at least 5%) and the min-max ranges do not overlap; otherwise within noise.
fn expected_verdict(before: &Value, after: &Value) -> &'static str {
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
    let spread = |v: &Value| (f(v, "max") - f(v, "min")) / f(v, "median");
    let change = f(after, "median") / f(before, "median") - 1.0;
    let band = spread(before).max(spread(after)).max(0.05);
    let separated = f(after, "min") > f(before, "max") || f(after, "max") < f(before, "min");
    if change.abs() <= band || !separated {
        "within-noise"
    } else if change > 0.0 {
        "helped"
    } else {
        "hurt"
    }
}

#[test]
fn tiny_ladder_writes_complete_json_and_a_report_that_renders() {
    let dir = tempdir("ladder-tiny");
    let json = dir.join("ladder.json");
    let report = dir.join("report");
    let args = ["lab", "ladder", "--steps", "shared,reuseport", "--report"];
    let mut args = short_run(&args, &json);
    args.insert(5, report.display().to_string());
    let out = lab_run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    // Off a terminal, a progress line per trial on stderr, and the table alone on stdout.
    let err = stderr(&out);
    let progress: Vec<&str> = err.lines().collect();
    assert_eq!(progress.len(), 2, "{err}");
    assert!(
        progress[0].starts_with("firehose lab: run 1 of 2: shared (repetition 1 of 1), about ")
            && progress[1]
                .starts_with("firehose lab: run 2 of 2: reuseport (repetition 1 of 1), about "),
        "{err}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("shared") && table.contains("reuseport"),
        "{table}"
    );

    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["study"], "ladder");
    assert_eq!(v["topology"], "loopback");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["shared", "reuseport"]
    );
    assert_eq!(rows[0]["verdict"], "baseline");
    // Each row can be read against the talk's table.
    assert!(rows[1]["describe"]
        .as_str()
        .unwrap()
        .contains("the talk: 2,540,000 tps"));
    // The gain and the verdict follow from the JSON's own medians and ranges.
    assert_eq!(rows[1]["verdict_on"], "tps");
    let (before, after) = (&rows[0]["tps"], &rows[1]["tps"]);
    let gain = after["median"].as_f64().unwrap() / before["median"].as_f64().unwrap();
    assert!(
        (rows[1]["gain"].as_f64().unwrap() - gain).abs() < 1e-9,
        "gain {} is not the ratio of the medians {gain}",
        rows[1]["gain"]
    );
    assert_eq!(
        rows[1]["verdict"],
        expected_verdict(before, after),
        "{before} -> {after}"
    );
    let trials = v["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2);
    let ncpu = v["environment"]["nproc"].as_u64().unwrap() as usize;
    for t in trials {
        let completed = t["completed"].as_u64().unwrap();
        assert!(completed > 0, "{t}");
        assert!(t["tps"].as_f64().unwrap() > 0.0);
        // The server's namespace (the host, on loopback) saw at least our requests.
        assert!(t["window"]["udp_server"]["in_datagrams"].as_u64().unwrap() > 0);
        assert_eq!(t["window"]["cpus"].as_array().unwrap().len(), ncpu);
        assert!(t["server_cpu_us_per_txn"].as_f64().unwrap() > 0.0);
        assert_eq!(t["syscalls_source"], "engine");
        assert!(t["syscalls_per_txn"].as_f64().unwrap() >= 1.0);
        assert!(
            t["latency_us"]["p99"].as_f64().unwrap() >= t["latency_us"]["p50"].as_f64().unwrap()
        );
        assert!(t["server_command"].as_str().unwrap().contains("--sockets"));
        assert!(t["server_stats"]["totals"]["packets_in"].as_u64().unwrap() >= completed);
    }
    let server_cpus = v["placement"]["server_cpus"].as_array().unwrap();
    let client_cpus = v["placement"]["client_cpus"].as_array().unwrap();
    assert!(!server_cpus.is_empty() && !client_cpus.is_empty());
    assert!(server_cpus.iter().all(|c| !client_cpus.contains(c)));
    // What ran where, as seen: every thread of each side on that side's CPUs.
    for t in trials {
        let seen = &t["placement_seen"];
        for (side, cpus) in [("server", server_cpus), ("client", client_cpus)] {
            let threads = seen[side].as_array().unwrap();
            assert!(!threads.is_empty(), "{side}: {seen}");
            for th in threads {
                assert!(
                    cpus.contains(&th["cpu"]),
                    "{side} thread off its CPUs: {th}"
                );
            }
        }
    }
    assert!(v["environment"]["sysctls"]["net.core.netdev_max_backlog"].is_string());
    // Only application steps were asked for: nothing to skip on loopback.
    assert!(
        v["skipped"].as_array().unwrap().is_empty(),
        "--steps named only application steps"
    );

    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        // A row may carry " [client-bound]" after its name.
        md.contains("| shared") && md.contains("| reuseport"),
        "{md}"
    );
    let html = report.join("report.html");
    assert_eq!(
        std::fs::read_to_string(&html)
            .unwrap()
            .matches("<svg")
            .count(),
        3
    );
    assert!(report.join("runs").join("shared-r0-server.json").exists());

    let png = report.join("report.png");
    if let Some((errors, shot)) = chromium(&html, &png) {
        assert!(errors.is_empty(), "console errors: {errors:?}");
        assert_eq!(&shot[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
        assert!(shot.len() > 10_000, "the screenshot has content");
        eprintln!("screenshot saved: {}", png.display());
    }
}

#[test]
fn a_cpu_this_host_lacks_is_refused() {
    let out = lab_run(&[
        "lab",
        "ladder",
        "--server-cpus",
        "0",
        "--client-cpus",
        "4096",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("CPU 4096 is not available"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["lab", "ladder", "--steps", "shared,turbo"],
            "unknown ladder step 'turbo' (valid: shared, reuseport",
        ),
        (&["lab", "ladder", "--steps", "rps"], "use --topology veth"),
        (
            &["lab", "ladder", "--topology", "tap"],
            "invalid value 'tap' for '--topology",
        ),
        (
            &["lab", "ladder", "--server-cpus", "0", "--client-cpus", "0"],
            "CPU 0 is in both",
        ),
        (
            &["lab", "ladder", "--repetitions", "0"],
            "must be at least 1",
        ),
        (&["lab", "ladder", "--queues", "2"], "--topology veth"),
        (
            &[
                "lab",
                "ladder",
                "--workers",
                "64",
                "--server-cpus",
                "0",
                "--client-cpus",
                "1",
            ],
            "the pin step pins one worker per CPU",
        ),
        (
            &[
                "lab",
                "compare",
                "--servers",
                "tuned",
                "--workers",
                "64",
                "--server-cpus",
                "0",
                "--client-cpus",
                "1",
            ],
            "the steered, tuned and latency profiles pin",
        ),
        (
            &["lab", "compare", "--servers", "nginx"],
            "unknown server 'nginx'",
        ),
        (
            &["lab", "compare", "--generators", "iperf"],
            "unknown generator 'iperf'",
        ),
    ];
    for (args, want) in cases {
        let out = lab_run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains(want), "{args:?}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}

#[test]
fn veth_without_root_suggests_loopback() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipping: setpriv (util-linux) is not installed");
        return;
    }
    // As root, run as nobody (the binary must be reachable for that user); without root,
    // the test already is an unprivileged user.
    let args = [
        "lab",
        "ladder",
        "--topology",
        "veth",
        "--json-file",
        "/dev/null",
    ];
    let out = if firehose_sys::cpu::is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .args(args);
        lab_cmd(c)
    } else {
        lab_run(&args)
    };
    if stderr(&out).contains("Permission denied") {
        eprintln!("skipping: the test binary is not executable by nobody here");
        return;
    }
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("needs root") && stderr(&out).contains("--topology loopback"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_run_on_a_terminal_shows_progress() {
    if !installed("script") {
        eprintln!("skipping: script (util-linux) is not installed to give the run a terminal");
        return;
    }
    let dir = tempdir("ladder-progress");
    let json = dir.join("p.json");
    let line = format!(
        "{} lab ladder --steps shared --repetitions 2 --duration 1 --warmup 0 --json-file {}",
        bin(),
        json.display()
    );
    // script(1) runs the command on a pseudo-terminal and copies what it wrote.
    let mut script = Command::new("script");
    script.args(["-qec", &line, "/dev/null"]);
    let out = lab_cmd(script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("run 1 of 2: shared (repetition 1 of 2)"),
        "{text}"
    );
    assert!(
        text.contains("run 2 of 2: shared (repetition 2 of 2), about"),
        "{text}"
    );
    assert!(text.contains("s left"), "{text}");
}

/// Runs a tiny three-step ladder with `extra` flags: (JSON, stdout).
fn tiny_climb(name: &str, extra: &[&str]) -> (Value, String) {
    let dir = tempdir(name);
    let json = dir.join("ladder.json");
    let mut args = vec!["lab", "ladder", "--steps", "shared,reuseport,pin"];
    args.extend(extra);
    let out = lab_run(&short_run(&args, &json));
    assert!(out.status.success(), "{}", stderr(&out));
    let v = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (v, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn server_command<'a>(v: &'a Value, step: &str) -> &'a str {
    v["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["cell"] == step)
        .unwrap()["server_command"]
        .as_str()
        .unwrap()
}

#[test]
fn a_step_that_hurt_is_reverted_unless_keep_hurt() {
    // Whether a step hurts on this host is the measurement's business; what must hold
    // either way: each step is judged against the last step kept, a step is reverted
    // exactly when it hurt, and a reverted step's technique is absent from later servers.
    let (v, table) = tiny_climb("ladder-revert", &[]);
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .contains("reverted before the next one"),
        "{}",
        v["notes"]
    );
    let rows = v["rows"].as_array().unwrap();
    let mut kept = &rows[0];
    assert_eq!(rows[0]["reverted"], false);
    for row in &rows[1..] {
        let verdict = expected_verdict(&kept["tps"], &row["tps"]);
        assert_eq!(
            row["verdict"], verdict,
            "{} against {}",
            row["name"], kept["name"]
        );
        assert_eq!(row["reverted"], verdict == "hurt", "{}", row["name"]);
        if verdict == "hurt" {
            assert!(table.contains("hurt, reverted"), "{table}");
        } else {
            kept = row;
        }
    }
    // pin builds on reuseport and steering unless reuseport was reverted (then steering,
    // which needs it, goes too).
    let pin = server_command(&v, "pin");
    let base = if rows[1]["reverted"] == true {
        "--sockets shared --steer none --cpus auto"
    } else {
        "--sockets reuseport --steer cpu --cpus auto"
    };
    assert!(pin.contains(base), "{pin}");

    let (v, table) = tiny_climb("ladder-keep-hurt", &["--keep-hurt"]);
    assert!(v["notes"][0].as_str().unwrap().contains("--keep-hurt"));
    let rows = v["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["reverted"] == false), "{rows:?}");
    assert!(!table.contains("reverted"), "{table}");
    for i in 1..rows.len() {
        let verdict = expected_verdict(&rows[i - 1]["tps"], &rows[i]["tps"]);
        assert_eq!(rows[i]["verdict"], verdict, "{}", rows[i]["name"]);
    }
    assert!(server_command(&v, "pin").contains("--sockets reuseport --steer cpu"));
}
