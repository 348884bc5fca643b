//! The programs the lab runs beside firehose, each configured and started in one place:
//! its command lines, its config files, how the lab knows it is ready, and how its output
//! is read. A study never writes a peer's command line itself.
//!
//! Adding a peer: a module here with the command line (a `Vec<String>` argv, placed on a
//! side of the test host and its CPUs by [`crate::study::Lab::spawn`]), the config file
//! text if it takes one (written into the run's private work directory), the parser of
//! what it prints (tested on a captured sample in `crates/lab/tests/samples/`), and its
//! Debian package in `cmd::install_hint` and `mk/deps` (docs/lab.md, "Adding a peer").

pub mod chronyd;
pub mod dns_server;
pub mod dnsperf;
pub mod firehose;
pub mod freeradius;
pub mod iperf3;
pub mod knot;
pub mod nsd;
pub mod perf;
pub mod radius_server;
pub mod sockperf;
pub mod trafgen;
pub mod udp_sink;
