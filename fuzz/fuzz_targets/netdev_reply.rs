#![no_main]
// The checks live in src/netdev_reply.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::netdev_reply::check(data));
