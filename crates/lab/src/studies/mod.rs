//! The studies, each an implementation of [`crate::study::Study`]: what it measures is in
//! its module's doc comment, how to run it in docs/lab.md.

pub mod bench;
pub mod compare;
pub mod dns;
pub mod echo;
pub mod io;
pub mod ladder;
pub mod latency;
pub mod ntp;
pub mod radius;
pub mod served;
pub mod sink;
pub mod stream;
pub mod zone_load;
