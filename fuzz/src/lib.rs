//! The checks behind firehose's fuzz targets, one module per target.
//!
//! Each `check(data)` feeds one input to a parser (or a state machine) and asserts what
//! must hold for any input: no panic, every length within its buffer, answers that echo
//! what they answer. The fuzz_targets/ binaries call them under libFuzzer (nightly,
//! `make fuzz`); tests/regressions.rs replays the seeds and every crash ever found through
//! the same checks on stable (`make test`). [`TARGETS`] lists them; a new protocol adds
//! its module here, a line to [`TARGETS`] and a three-line file in fuzz_targets/ (see
//! CONTRIBUTING.md).

pub mod btf;
pub mod dns_handler;
pub mod dns_message;
pub mod dns_tcp;
pub mod doctor_journal;
pub mod frame;
pub mod input;
pub mod kernel_text;
pub mod load_match;
pub mod metrics_http;
pub mod netdev_reply;
pub mod ntp_handler;
pub mod observe_text;
pub mod proc_thread;
pub mod radius_files;
pub mod radius_handler;
pub mod radius_request;
pub mod uring_recvmsg;
pub mod zone;
pub mod zone_reader;

/// A fuzz target: its name (the file in fuzz_targets/, the corpus directory), the check,
/// and the seed inputs its corpus starts from.
pub struct Target {
    pub name: &'static str,
    pub check: fn(&[u8]),
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "frame",
        check: frame::check,
        seeds: frame::seeds,
    },
    Target {
        name: "dns_message",
        check: dns_message::check,
        seeds: dns_message::seeds,
    },
    Target {
        name: "dns_handler",
        check: dns_handler::check,
        seeds: dns_handler::seeds,
    },
    Target {
        name: "zone",
        check: zone::check,
        seeds: zone::seeds,
    },
    Target {
        name: "zone_reader",
        check: zone_reader::check,
        seeds: zone_reader::seeds,
    },
    Target {
        name: "dns_tcp",
        check: dns_tcp::check,
        seeds: dns_tcp::seeds,
    },
    Target {
        name: "metrics_http",
        check: metrics_http::check,
        seeds: metrics_http::seeds,
    },
    Target {
        name: "doctor_journal",
        check: doctor_journal::check,
        seeds: doctor_journal::seeds,
    },
    Target {
        name: "netdev_reply",
        check: netdev_reply::check,
        seeds: netdev_reply::seeds,
    },
    Target {
        name: "load_match",
        check: load_match::check,
        seeds: load_match::seeds,
    },
    Target {
        name: "radius_request",
        check: radius_request::check,
        seeds: radius_request::seeds,
    },
    Target {
        name: "radius_handler",
        check: radius_handler::check,
        seeds: radius_handler::seeds,
    },
    Target {
        name: "radius_files",
        check: radius_files::check,
        seeds: radius_files::seeds,
    },
    Target {
        name: "kernel_text",
        check: kernel_text::check,
        seeds: kernel_text::seeds,
    },
    Target {
        name: "btf",
        check: btf::check,
        seeds: btf::seeds,
    },
    Target {
        name: "observe_text",
        check: observe_text::check,
        seeds: observe_text::seeds,
    },
    Target {
        name: "ntp_handler",
        check: ntp_handler::check,
        seeds: ntp_handler::seeds,
    },
    Target {
        name: "uring_recvmsg",
        check: uring_recvmsg::check,
        seeds: uring_recvmsg::seeds,
    },
    Target {
        name: "proc_thread",
        check: proc_thread::check,
        seeds: proc_thread::seeds,
    },
];

/// A stable 64-bit name for an input (FNV-1a), for seed file names.
pub fn fingerprint(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
