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
