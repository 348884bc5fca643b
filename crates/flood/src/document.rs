//! What `firehose flood` reports, as printed and as its JSON document (docs/json.md).

use firehose_host::document::{required, Document, PacketRates};
use firehose_host::env::Environment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `firehose flood --json`: the envelope and a [`FloodReport`].
pub type FloodDocument = Document<FloodReport>;

/// A flood run's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloodReport {
    /// The send call ([`crate::FloodIo::name`]).
    pub mode: String,
    pub target: String,
    /// UDP payload bytes per datagram.
    pub payload: usize,
    /// Bytes per frame on the wire (Ethernet header and FCS included).
    pub frame: usize,
    pub flows: usize,
    pub threads: usize,
    pub source_ports: Vec<u16>,
    pub sent: u64,
    /// `seconds`, `pps`, `mbit_s` (of frames), `cpu_us_per_packet`, `syscalls_per_packet`.
    #[serde(flatten)]
    pub rates: PacketRates,
    pub enobufs: u64,
    pub other_errors: u64,
    /// The errno of the last refused send other than ENOBUFS, by name.
    #[serde(deserialize_with = "required")]
    pub last_errno: Option<String>,
    /// Xdp mode: sends cut short by a full tx ring (retried), frames never completed.
    pub xdp_tx_ring_full: u64,
    pub xdp_uncompleted: u64,
    /// Xdp mode: what the kernel granted (interface, queues, zerocopy, ...).
    #[serde(deserialize_with = "required")]
    pub xdp: Option<BTreeMap<String, String>>,
    pub per_thread: Vec<u64>,
    pub environment: Environment,
}
