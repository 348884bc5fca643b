//! The command line's conventions, checked over clap's own command tree (every subcommand,
//! however deep, with no hand list to forget one): one spelling per idea, the shared parsers
//! for durations, sizes, rates and CPU lists, and an EXAMPLES block in every help.

use clap::error::ErrorKind;
use clap::{Arg, Command, CommandFactory};

/// Every subcommand that runs something (a leaf of the tree), with its words.
fn leaves() -> Vec<(Vec<String>, Command)> {
    fn walk(path: Vec<String>, c: &Command, out: &mut Vec<(Vec<String>, Command)>) {
        // Hidden subcommands are helpers the lab runs, not for users to type.
        let subs: Vec<&Command> = c
            .get_subcommands()
            .filter(|s| s.get_name() != "help" && !s.is_hide_set())
            .collect();
        if subs.is_empty() {
            out.push((path.clone(), c.clone()));
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s.get_name().to_string());
            walk(p, s, out);
        }
    }
    let mut out = Vec::new();
    let top = crate::Cli::command();
    walk(Vec::new(), &top, &mut out);
    out
}

fn longs(c: &Command) -> Vec<(&str, &Arg)> {
    c.get_arguments()
        .filter_map(|a| a.get_long().map(|l| (l, a)))
        .collect()
}

fn value_name(a: &Arg) -> Option<String> {
    a.get_value_names()
        .and_then(|v| v.first())
        .map(|s| s.to_string())
}

/// Spellings of an idea that has another one everywhere else: (wrong, right).
const OTHER_SPELLINGS: &[(&str, &str)] = &[
    ("repeat", "repetitions"),
    ("reps", "repetitions"),
    ("time", "duration"),
    ("seconds", "duration"),
    ("secs", "duration"),
    ("cpu", "cpus"),
    ("cpu-list", "cpus"),
    ("pin", "cpus"),
    ("queue", "queues"),
    ("rx-queues", "queues"),
    ("json-out", "json-file"),
    ("output-json", "json-file"),
    ("interface", "iface"),
];

#[test]
fn there_are_leaves_to_check() {
    let names: Vec<String> = leaves().iter().map(|(p, _)| p.join(" ")).collect();
    for want in [
        "serve",
        "stream",
        "report merge",
        "lab sink",
        "lab flood",
        "lab zone-load",
        "drops",
        "top",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
}

#[test]
fn one_spelling_per_idea() {
    let mut bad = Vec::new();
    for (path, c) in leaves() {
        let words = path.join(" ");
        for (l, a) in longs(&c) {
            let all: Vec<&str> = std::iter::once(l)
                .chain(a.get_all_aliases().unwrap_or_default())
                .collect();
            for name in all {
                if let Some((_, right)) = OTHER_SPELLINGS.iter().find(|(w, _)| *w == name) {
                    bad.push(format!(
                        "{words}: --{name}, where everything else says --{right}"
                    ));
                }
            }
        }
        let json = c.get_arguments().find(|a| a.get_long() == Some("json"));
        let json_file = c.get_arguments().any(|a| a.get_long() == Some("json-file"));
        match json {
            Some(j) if j.get_short() != Some('J') || !json_file => {
                bad.push(format!("{words}: --json without -J and --json-file"))
            }
            None if json_file => bad.push(format!("{words}: --json-file without --json (-J)")),
            _ => {}
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// A flag's kind by its name: what its value name must be.
fn kind_of(long: &str) -> Option<&'static str> {
    match long {
        "duration" | "warmup" | "interval" | "timeout" => Some("DURATION"),
        "cpus" => Some("CPULIST"),
        l if l.ends_with("-cpus") => Some("CPULIST"),
        "rate" => Some("RATE"),
        _ => None,
    }
}

/// (value name, values every shared parser of that kind takes, a value none takes).
const SAMPLES: &[(&str, &[&str], &str)] = &[
    ("DURATION", &["1.5", "2.5s", "250ms"], "soon"),
    ("SIZE", &["1500", "64K", "1M"], "big"),
    ("RATE", &["50000", "50k"], "fast"),
    ("CPULIST", &["0", "0-1"], "cpu0"),
];

/// Parses `--flag value` alone on the subcommand: Err(kind) when the value itself is refused
/// (a missing required flag or a conflict is not the value's fault).
fn value_refused(c: &Command, long: &str, value: &str) -> bool {
    let argv = [
        "firehose".to_string(),
        format!("--{long}"),
        value.to_string(),
    ];
    match c.clone().try_get_matches_from(argv) {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            ErrorKind::ValueValidation | ErrorKind::InvalidValue
        ),
    }
}

#[test]
fn durations_sizes_rates_and_cpu_lists_take_the_shared_forms() {
    let mut bad = Vec::new();
    for (path, c) in leaves() {
        let words = path.join(" ");
        for (l, a) in longs(&c) {
            if !a.get_action().takes_values() {
                continue;
            }
            let name = value_name(a);
            if let Some(want) = kind_of(l) {
                if name.as_deref() != Some(want) {
                    bad.push(format!(
                        "{words}: --{l} <{}> should read <{want}>",
                        name.unwrap_or_default()
                    ));
                    continue;
                }
            }
            let Some((_, good, junk)) =
                SAMPLES.iter().find(|(k, _, _)| Some(*k) == name.as_deref())
            else {
                continue;
            };
            for v in *good {
                if value_refused(&c, l, v) {
                    bad.push(format!(
                        "{words}: --{l} refuses {v}, which the shared parser takes"
                    ));
                }
            }
            if !value_refused(&c, l, junk) {
                bad.push(format!(
                    "{words}: --{l} takes {junk:?}: no parser checks it"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_help_has_examples_and_names_its_values() {
    let mut bad = Vec::new();
    for (path, mut c) in leaves() {
        let words = path.join(" ");
        let help = c.render_long_help().to_string();
        if !help.contains("EXAMPLES") {
            bad.push(format!("{words}: no EXAMPLES"));
        }
        // clap's own value names are the field's name in capitals; ours say what the value
        // is (ADDR:PORT, FILE, DIR...).
        for generated in [
            "<LISTEN>",
            "<TARGET>",
            "<JSON>",
            "<JSON_FILE>",
            "<STATS_JSON>",
            "<REPORT>",
        ] {
            if help.contains(generated) {
                bad.push(format!("{words}: shows {generated}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
