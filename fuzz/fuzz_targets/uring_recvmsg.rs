#![no_main]
// The checks live in src/uring_recvmsg.rs (run on stable by tests/regressions.rs).
libfuzzer_sys::fuzz_target!(|data: &[u8]| firehose_fuzz::uring_recvmsg::check(data));
