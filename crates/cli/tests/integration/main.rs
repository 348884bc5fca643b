//! The `firehose` binary's integration tests, one test binary (as ripgrep does): each
//! module runs the real binary for one area; `util` holds what they share.

mod bad_input;
mod bench;
mod conventions;
mod dns;
mod dns_tcp;
mod doctor_cli;
mod doctor_netns;
mod echo;
mod gso;
mod lab_compare;
mod lab_dns;
mod lab_ladder;
mod lab_sink;
mod lab_stream;
mod lab_veth;
mod load;
mod load_stamps;
mod metrics;
mod radius;
mod report_merge;
mod serve;
mod sink_flood;
mod stream;
mod stream_veth;
mod uring;
mod util;
mod workspace;
mod xdp;
mod xdp_clamp;
mod xdp_frames;
mod xdp_hostile;
mod xdp_load;
mod xdp_sink_flood;
mod xdp_util;
