//! The command line's conventions: help text (value names, possible values, examples, exit
//! codes), old spellings with their note, completions that load in bash, a man page that
//! renders, `--version`, `--json` on stdout, and load's exit code.

use crate::util::{bin, installed, run, stderr, tmp};
use std::process::Command;

fn help(words: &[&str]) -> String {
    let mut args: Vec<&str> = words.to_vec();
    args.push("--help");
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{words:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The value names a reader expects for flags of each kind, in the help the binary prints.
/// (Every subcommand, found from clap's own tree, is checked for one spelling per idea, the
/// shared parsers and an EXAMPLES block by the cli's unit tests: src/conventions.rs.)
#[test]
fn every_help_names_values_and_lists_choices() {
    let expect: &[(&[&str], &[&str])] = &[
        (
            &["serve"],
            &[
                "--listen <ADDR:PORT>",
                "--cpus <CPULIST>",
                "-t, --duration <DURATION>",
                "-J, --json",
                "--json-file <FILE>",
                "naive, reuseport, steered, tuned, latency, xdp",
                "EXAMPLES",
            ],
        ),
        (
            &["load"],
            &[
                "--target <ADDR:PORT>",
                "-q, --queries <FILE>",
                "-i, --interval <DURATION>",
                "--rate <RATE>",
                "--max-loss <PCT>",
                "EXAMPLES",
            ],
        ),
        (
            &["bench"],
            &[
                "--server-cpus <CPULIST>",
                "--client-cpus <CPULIST>",
                "EXAMPLES",
            ],
        ),
        (
            &["lab", "ladder"],
            &[
                "[possible values: loopback, veth]",
                "--steps <STEPS>",
                "EXAMPLES",
            ],
        ),
        (
            &["lab", "compare"],
            &["--servers <SERVERS>", "naive", "EXAMPLES"],
        ),
        (
            &["lab", "stream"],
            &[
                "--mtus <MTUS>",
                "--cells <CELLS>",
                "--send <MODES>",
                "-J, --json",
                "EXAMPLES",
            ],
        ),
        (&["doctor"], &["-v, --verbose", "EXAMPLES"]),
        (
            &["drops"],
            &[
                "-t, --duration <DURATION>",
                "--port <PORT>",
                "-J, --json",
                "--json-file <FILE>",
                "--via <VIA>",
                "perf:",
                "EXAMPLES",
            ],
        ),
        (&["sink"], &["--listen <ADDR:PORT>", "EXAMPLES"]),
        (
            &["top"],
            &[
                "-i, --interval <DURATION>",
                "-t, --duration <DURATION>",
                "--port <PORT>",
                "--once",
                "-J, --json",
                "EXAMPLES",
            ],
        ),
        (&["flood"], &["--target <ADDR:PORT>", "EXAMPLES"]),
    ];
    for (words, wants) in expect {
        let h = help(words);
        for w in *wants {
            assert!(h.contains(w), "{words:?} --help lacks {w:?}:\n{h}");
        }
    }
    // Compare's notes are not in the ladder's help.
    assert!(!help(&["lab", "ladder"]).contains("--proto dns"));
    let top = help(&[]);
    assert!(
        top.contains("Exit codes:") && top.contains("bench"),
        "{top}"
    );
}

#[test]
fn a_mistyped_subcommand_gets_clap_s_suggestion() {
    let o = run(&["srve"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("similar subcommand") && e.contains("'serve'"),
        "{e}"
    );
}

#[test]
fn old_spellings_work_with_a_note() {
    let json = tmp("conventions-stats.json");
    let o = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--pin",
        "none",
        "--duration",
        "0.2",
        "--stats-json",
        json.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("--pin is deprecated") && e.contains("use --cpus"),
        "{e}"
    );
    assert!(e.contains("use --json-file"), "{e}");
    let doc = crate::util::json_of(&json);
    assert_eq!(doc["schema_version"], 1, "{doc}");
    std::fs::remove_file(&json).unwrap();
}

#[test]
fn json_goes_to_stdout_alone_and_a_dead_target_exits_1() {
    // Nothing listens on a port we bound and closed: every request is lost.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{port}");
    let o = run(&[
        "load",
        "--target",
        &target,
        "-t",
        "0.3",
        "--timeout",
        "100ms",
        "-J",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["completed"], 0, "{doc}");
    assert!(doc["firehose"]["commit"].is_string(), "{doc}");
    assert!(doc["environment"]["kernel"].is_string(), "{doc}");
    let e = stderr(&o);
    assert!(e.contains("summary:"), "the text goes to stderr: {e}");
    assert!(e.contains("no transaction completed"), "{e}");
}

#[test]
fn version_names_commit_rustc_and_target() {
    let o = run(&["--version"]);
    let v = String::from_utf8_lossy(&o.stdout);
    for k in ["firehose 0.", "commit: ", "rustc:  rustc ", "target: "] {
        assert!(v.contains(k), "{v}");
    }
}

#[test]
fn bash_completion_loads() {
    if !installed("bash") {
        eprintln!("skipping: bash is not installed");
        return;
    }
    let script = format!(
        "source <({} completions bash) && complete -p firehose",
        bin()
    );
    let o = Command::new("bash").args(["-c", &script]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("firehose"), "{out}");
}

#[test]
fn man_pages_render() {
    let dir = crate::util::tempdir("conventions-man");
    let o = run(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for page in ["firehose.1", "firehose-serve.1", "firehose-lab-ladder.1"] {
        assert!(dir.join(page).exists(), "no {page}");
    }
    let page = dir.join("firehose.1");
    let (prog, args): (&str, Vec<&str>) = if installed("man") {
        ("man", vec!["-l", page.to_str().unwrap()])
    } else if installed("groff") {
        ("groff", vec!["-man", "-Tutf8", page.to_str().unwrap()])
    } else {
        eprintln!("skipping the rendering: neither man (man-db) nor groff is installed");
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    };
    let o = Command::new(prog)
        .args(&args)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        text.contains("firehose") && text.contains("serve"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's quick-start pair, run exactly as written: the `firehose serve` and
/// `firehose load` lines of its "terminal 1 / terminal 2" block.
#[test]
fn readme_quick_start_pair_runs_as_written() {
    let readme = include_str!("../../../../README.md");
    let block = readme
        .split("```sh\n")
        .find(|b| b.starts_with("# terminal 1"))
        .and_then(|b| b.split("```").next())
        .expect("README has a terminal 1 / terminal 2 block");
    let line = |p: &str| -> Vec<String> {
        let l = block.lines().find(|l| l.starts_with(p)).unwrap();
        l.split_whitespace().skip(1).map(String::from).collect()
    };
    let (serve, load) = (line("firehose serve "), line("firehose load "));
    let mut srv = Command::new(bin())
        .args(&serve)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut out = std::io::BufReader::new(srv.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    if !first.starts_with("firehose serve: listening on") {
        let _ = srv.wait();
        let mut e = String::new();
        let _ = std::io::Read::read_to_string(&mut srv.stderr.take().unwrap(), &mut e);
        assert!(e.contains("EADDRINUSE"), "serve did not start: {first}{e}");
        eprintln!("skipping: the README's port is in use here ({e})");
        return;
    }
    let o = Command::new(bin()).args(&load).output().unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &srv.id().to_string()])
        .status();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut rest);
    srv.wait().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", stderr(&o));
    assert!(
        text.contains("summary: 127.0.0.1:9000 closed loop"),
        "{text}"
    );
    assert!(
        rest.contains("Ctrl-C to stop") && rest.contains("stopped after"),
        "{rest}"
    );
}
