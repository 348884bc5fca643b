#![no_main]
// The checks live in src/radius_request.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::radius_request::check(data));
