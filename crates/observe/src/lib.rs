//! Watching a host lose packets: which kernel code freed each dropped skb and why
//! ([`drops`]), and the counters beside it (XDP errors, AF_XDP rings, softnet backlog, NIC
//! queues). The kernel objects come from `firehose-sys`, the file formats from
//! `firehose-host`; this crate joins them into reports and never prints.

pub mod attribution;
pub mod counters;
pub mod drops;
pub mod error;
pub mod servers;
pub mod session;
pub mod top;
pub mod xdp;

pub use error::ObserveError;
