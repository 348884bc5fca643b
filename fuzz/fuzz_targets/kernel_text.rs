#![no_main]
// The checks live in src/kernel_text.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::kernel_text::check(data));
