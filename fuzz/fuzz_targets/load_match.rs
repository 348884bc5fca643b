#![no_main]
// The checks live in src/load_match.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::load_match::check(data));
