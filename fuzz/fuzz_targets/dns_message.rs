#![no_main]
// The checks live in src/dns_message.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::dns_message::check(data));
