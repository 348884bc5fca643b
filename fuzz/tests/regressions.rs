//! On stable, in `make test`: every target's seeds, and every input that ever crashed a
//! target (fuzz/regressions/TARGET/, one file each), pass the target's checks. A crash's
//! fix has its own test beside the code it fixed; this replays the input itself.

use std::path::Path;

#[test]
fn every_seed_passes_its_target() {
    for t in firehose_fuzz::TARGETS {
        for s in (t.seeds)() {
            (t.check)(&s);
        }
    }
}

#[test]
fn every_crash_found_stays_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut replayed = 0;
    for t in firehose_fuzz::TARGETS {
        let Ok(dir) = std::fs::read_dir(root.join(t.name)) else {
            continue;
        };
        for f in dir {
            let p = f.expect("a directory entry").path();
            let data = std::fs::read(&p).expect("a regression input");
            println!("{}: {}", t.name, p.display());
            (t.check)(&data);
            replayed += 1;
        }
    }
    println!("{replayed} crash inputs replayed");
}

#[test]
fn every_target_has_a_fuzz_target_file_and_a_bin() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(here.join("Cargo.toml")).expect("Cargo.toml");
    for t in firehose_fuzz::TARGETS {
        let file = here.join("fuzz_targets").join(format!("{}.rs", t.name));
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|_| panic!("{} missing", file.display()));
        assert!(
            text.contains(&format!("firehose_fuzz::{}::check", t.name)),
            "{}",
            file.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{}\"", t.name)),
            "no [[bin]] for {}",
            t.name
        );
    }
}
