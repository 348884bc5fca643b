//! placeholder
pub mod workload;
