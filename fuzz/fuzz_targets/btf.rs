#![no_main]
// The checks live in src/btf.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::btf::check(data));
