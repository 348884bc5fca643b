//! The firehose load generator: drives any UDP request/response server and measures it.
//!
//! [`gen`] runs the flows; [`table`] keeps outstanding requests; [`workload`] says what
//! a request looks like; [`report`] turns counts and histograms into the figures;
//! [`interval`] hands interval histograms to the HdrHistogram log; [`merge`] adds the
//! reports of several agents into one.

pub mod decompose;
pub mod dns;
pub mod document;
pub mod gen;
pub mod interval;
pub mod io;
pub mod measure;
pub mod merge;
pub mod ntp;
pub mod pace;
pub mod radius;
pub mod report;
pub mod table;
pub mod uring;
pub mod watch;
pub mod workload;
pub mod xdp;

pub use gen::{
    pacing, socket_flows, start, start_with, validate, Length, LoadConfig, Run, ThreadResult,
};
pub use report::{summarize, LoadReport};
pub use workload::{EchoWorkload, Workload};
