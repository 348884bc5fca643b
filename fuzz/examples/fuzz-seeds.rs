//! Writes every target's seed inputs into fuzz/corpus/TARGET/ (named by content), the
//! corpus `make fuzz` starts from; a corpus that grew in earlier runs is kept.
//!
//! Usage: cargo run --example fuzz-seeds [DIR]   (default: the corpus/ directory beside this
//! crate). An example, not a binary: cargo fuzz builds every binary with coverage
//! instrumentation and links each with libFuzzer.

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    for t in firehose_fuzz::TARGETS {
        let d = dir.join(t.name);
        if let Err(e) = std::fs::create_dir_all(&d) {
            eprintln!("fuzz-seeds: cannot create {}: {e}", d.display());
            std::process::exit(1);
        }
        let seeds = (t.seeds)();
        for s in &seeds {
            let p = d.join(format!("seed-{:016x}", firehose_fuzz::fingerprint(s)));
            if let Err(e) = std::fs::write(&p, s) {
                eprintln!("fuzz-seeds: cannot write {}: {e}", p.display());
                std::process::exit(1);
            }
        }
        println!("{:<15} {} seeds in {}", t.name, seeds.len(), d.display());
    }
}
