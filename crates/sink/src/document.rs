//! What `firehose sink` reports, as printed and as its JSON document (docs/json.md). The
//! lab reads it back by this type: a missing field is an error, never 0.

use crate::drops::HostDrops;
use crate::WorkerSnapshot;
use firehose_host::document::{required, Document, PacketRates};
use firehose_host::env::Environment;
use firehose_observe::attribution::Attribution;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `firehose sink --json`: the envelope and a [`SinkReport`].
pub type SinkDocument = Document<SinkReport>;

/// One round of `--count` datagrams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub packets: u64,
    pub seconds: f64,
    pub pps: f64,
}

/// A sink run's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// The receive call ([`crate::SinkIo::name`]).
    pub mode: String,
    pub listen: String,
    pub workers: usize,
    #[serde(deserialize_with = "required")]
    pub interface: Option<String>,
    /// Packet mode with several workers: the PACKET_FANOUT mode.
    #[serde(deserialize_with = "required")]
    pub fanout: Option<String>,
    #[serde(deserialize_with = "required")]
    pub rcvbuf_granted: Option<i32>,
    pub packets: u64,
    pub bytes: u64,
    /// `seconds`, `pps`, `mbit_s` (of payload), `cpu_us_per_packet`, `syscalls_per_packet`.
    #[serde(flatten)]
    pub rates: PacketRates,
    pub socket_drops: u64,
    pub ring_drops: u64,
    pub ring_freezes: u64,
    /// Xdp mode: the sockets' XDP_STATISTICS, summed.
    pub xsk_rx_dropped: u64,
    pub xsk_rx_ring_full: u64,
    pub xsk_fill_ring_empty: u64,
    /// Xdp mode: what the kernel granted (interface, queues, xdp_mode, zerocopy, ...).
    #[serde(deserialize_with = "required")]
    pub xdp: Option<BTreeMap<String, String>>,
    pub host: HostDrops,
    /// Packet mode: datagrams the port-holding socket's filter discarded, by design
    /// (subtracted from host.udp_in_errors).
    pub held_port_filtered: u64,
    pub rounds: Vec<Round>,
    pub per_worker: Vec<WorkerSnapshot>,
    /// (cpu, packets) for each CPU that counted any.
    pub per_cpu: Vec<(usize, u64)>,
    /// Where the kernel dropped datagrams to `listen` (null without root or with
    /// `--no-drops`).
    #[serde(deserialize_with = "required")]
    pub loss_attribution: Option<Attribution>,
    pub environment: Environment,
}
