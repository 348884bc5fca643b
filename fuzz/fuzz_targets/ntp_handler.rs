#![no_main]
// The checks live in src/ntp_handler.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::ntp_handler::check(data));
