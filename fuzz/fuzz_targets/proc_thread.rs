#![no_main]
// The checks live in src/proc_thread.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::proc_thread::check(data));
