//! Old spellings of flags, kept for one release: each is rewritten to its new name before
//! parsing, with a one-line note on stderr saying what to write instead.

/// (subcommand, old flag, new flag). `--json FILE` (a following word that is not a flag)
/// is handled apart: `--json` alone is now the stdout switch.
const RENAMED: &[(&str, &str, &str)] = &[
    ("serve", "--pin", "--cpus"),
    ("serve", "--stats-json", "--json-file"),
    ("bench", "--server-cpu", "--server-cpus"),
    ("bench", "--client-cpu", "--client-cpus"),
    ("sink", "--interface", "--iface"),
    ("sink", "--repeat", "--repetitions"),
    ("lab", "--repeat", "--repetitions"),
];

/// Subcommands whose `--json` took a file before; none takes a positional argument, so a
/// word after `--json` can only be that file.
const JSON_TOOK_A_FILE: &[&str] = &["load", "bench", "sink", "flood", "lab"];

/// The arguments with old spellings replaced, and the notes to print.
pub fn rewrite(args: Vec<String>) -> (Vec<String>, Vec<String>) {
    let sub = args.get(1).cloned().unwrap_or_default();
    let mut out = Vec::with_capacity(args.len());
    let mut notes = Vec::new();
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        if a == "--" {
            out.push(a);
            out.extend(it.by_ref());
            break;
        }
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        if let Some((_, old, new)) = RENAMED.iter().find(|(s, o, _)| *s == sub && *o == flag) {
            notes.push(format!(
                "{old} is deprecated and will be removed; use {new}"
            ));
            out.push(match value {
                Some(v) => format!("{new}={v}"),
                None => new.to_string(),
            });
            continue;
        }
        if flag == "--json" && JSON_TOOK_A_FILE.contains(&sub.as_str()) {
            let file = match value {
                Some(v) => Some(v),
                None => it.next_if(|n| !n.starts_with('-') || n == "-"),
            };
            if let Some(f) = file {
                notes.push(format!(
                    "--json FILE is deprecated and will be removed; use --json-file {f} \
                     (--json alone writes to stdout)"
                ));
                out.push("--json-file".into());
                out.push(f);
                continue;
            }
        }
        out.push(a);
    }
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn old_spellings_become_new_ones_with_a_note() {
        let (a, n) = rewrite(words("firehose serve --pin 0-1 --workers 2"));
        assert_eq!(a, words("firehose serve --cpus 0-1 --workers 2"));
        assert_eq!(n, ["--pin is deprecated and will be removed; use --cpus"]);
        let (a, _) = rewrite(words("firehose lab sink --repeat 2"));
        assert_eq!(a, words("firehose lab sink --repetitions 2"));
        let (a, _) = rewrite(words("firehose sink --count 5 --repeat 2"));
        assert_eq!(a, words("firehose sink --count 5 --repetitions 2"));
        let (a, _) = rewrite(words("firehose serve --stats-json=x.json"));
        assert_eq!(a, words("firehose serve --json-file=x.json"));
        let (a, n) = rewrite(words("firehose load --target t --json out.json -q"));
        assert_eq!(a, words("firehose load --target t --json-file out.json -q"));
        assert_eq!(n.len(), 1);
        let (a, _) = rewrite(words("firehose sink --interface veth0 --io packet"));
        assert_eq!(a, words("firehose sink --iface veth0 --io packet"));
        let (a, n) = rewrite(words("firehose bench --server-cpu 0 --json"));
        assert_eq!(a, words("firehose bench --server-cpus 0 --json"));
        assert_eq!(n.len(), 1);
    }

    #[test]
    fn new_spellings_and_other_subcommands_pass_untouched() {
        for s in [
            "firehose load --target t --json --quiet",
            "firehose doctor --json rmem",
            "firehose load --pin 3",
            "firehose serve -- --pin",
        ] {
            let (a, n) = rewrite(words(s));
            assert_eq!(a, words(s));
            assert!(n.is_empty(), "{s}: {n:?}");
        }
    }
}
