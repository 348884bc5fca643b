//! Reading a host: what the kernel says about CPUs, NICs, sockets and tunables.
//!
//! Parsers are pure `&str -> struct` functions tested on captured samples; the only file I/O
//! lives at the edges ([`procfs::read`]), so most code here runs without root or a real NIC.

pub mod cputime;
pub mod doctor;
pub mod document;
pub mod env;
pub mod fs;
pub mod kernel;
pub mod napi;
pub mod nic;
pub mod nic_stats;
pub mod procfs;
pub mod prom;
pub mod text;
