#![no_main]
// The checks live in src/doctor_journal.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::doctor_journal::check(data));
