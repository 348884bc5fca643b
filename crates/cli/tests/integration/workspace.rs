//! Conventions of the workspace itself that the compiler enforces only when each crate opts
//! in: every crate but `crates/sys` takes the workspace lints, which forbid `unsafe`.

use std::path::Path;

#[test]
fn every_crate_but_sys_forbids_unsafe_through_the_workspace_lints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace = std::fs::read_to_string(root.join("../Cargo.toml")).unwrap();
    assert!(
        workspace.contains("unsafe_code = \"forbid\""),
        "the workspace lints forbid unsafe code"
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        seen += 1;
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let inherits = text.contains("[lints]\nworkspace = true");
        if name == "sys" {
            assert!(
                !inherits,
                "crates/sys keeps its own lint table (it may use unsafe)"
            );
            assert!(text.contains("undocumented_unsafe_blocks = \"deny\""));
        } else {
            assert!(
                inherits,
                "{} must have `[lints] workspace = true`",
                manifest.display()
            );
        }
    }
    assert!(seen >= 9, "found {seen} crates");
}

/// The firehose crates a manifest's `[dependencies]` names, without the prefix.
fn firehose_deps(manifest: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps {
            if let Some(rest) = line.strip_prefix("firehose-") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_architecture_doc_lists_every_crate_with_its_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    // Rows of the crates table: | `crates/NAME` (`firehose-NAME`) | what | depends on |
    let mut documented = std::collections::BTreeMap::new();
    for row in doc.lines().filter(|l| l.starts_with("| `crates/")) {
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        let name = cells[0]
            .trim_start_matches("`crates/")
            .split('`')
            .next()
            .unwrap()
            .to_string();
        let deps = cells.last().unwrap();
        let mut deps: Vec<String> = if *deps == "-" {
            Vec::new()
        } else {
            deps.split(", ").map(|d| d.trim().to_string()).collect()
        };
        deps.sort();
        documented.insert(name, deps);
    }
    let mut members = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        members.insert(name, firehose_deps(&text));
    }
    assert!(members.len() >= 10, "found {} crates", members.len());
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        members.keys().collect::<Vec<_>>(),
        "docs/architecture.md's crate table and the workspace's crates/"
    );
    for (name, deps) in &members {
        assert_eq!(
            &documented[name], deps,
            "docs/architecture.md: the dependencies of crates/{name} (its Cargo.toml's firehose crates)"
        );
    }
}
