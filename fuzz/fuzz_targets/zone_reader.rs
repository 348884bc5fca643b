#![no_main]
// The checks live in src/zone_reader.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::zone_reader::check(data));
