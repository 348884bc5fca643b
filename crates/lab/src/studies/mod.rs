//! The studies, each an implementation of [`crate::study::Study`]: what it measures is in
//! its module's doc comment, how to run it in docs/lab.md.

pub mod dns;
pub mod io;
pub mod stream;
pub mod zone_load;
