//! The parts of latency, from kernel timestamps: what a thread records
//! ([`Decomposition`]) and what a report says ([`Parts`]).
//!
//! For each completed transaction inside the measurement window with both stamps:
//! - `rtt`: departed -> arrived, both kernel stamps on one clock: the network and the
//!   server, nothing of the generator's.
//! - `send_lag`: intended -> departed: how late the generator got the request out (its
//!   schedule, its wake-ups, its send call and the sender's stack).
//! - `recv_lag`: arrived -> read: how long the response waited for the generator.
//!
//! `latency` (intended -> arrival, corrected for coordinated omission) stays the headline;
//! it is `send_lag + rtt`, plus `recv_lag` where the generator times a response when it
//! reads it rather than from its arrival stamp. `departure_gaps` are the times between
//! consecutive departures of one generator thread: the arrivals the server saw.

use crate::report::{decode_histogram, encode_histogram, latency_of, new_histogram};
use crate::report::{HistogramError, LatencyUs, HIST_MAX_NS};
use firehose_sys::ifaddr::interface_of;
use firehose_sys::socket::UdpSock;
use firehose_sys::timestamping::ts_info;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The tags of the parts' lines in the HdrHistogram interval log (`--hdr-log`), in the order
/// of [`Decomposition::parts_mut`].
pub const PART_TAGS: [&str; 3] = ["rtt", "send_lag", "recv_lag"];

/// What one thread recorded (values in ns).
#[derive(Debug, Clone)]
pub struct Decomposition {
    pub rtt: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    pub recv_lag: Histogram<u64>,
    pub gaps: Histogram<u64>,
    /// Completed transactions without a departure or an arrival stamp.
    pub unstamped: u64,
    /// Completed transactions whose arrival stamp is older than their departure (a clock
    /// step): left out of the parts.
    pub misordered: u64,
    /// Transmit stamps whose key matched no request sent.
    pub unmatched: u64,
}

impl Default for Decomposition {
    fn default() -> Self {
        Self::new()
    }
}

/// Gaps are recorded from 1 ns: back-to-back departures may share a stamp.
fn record(h: &mut Histogram<u64>, ns: u64) {
    let _ = h.record(ns.clamp(1, HIST_MAX_NS));
}

impl Decomposition {
    pub fn new() -> Self {
        Decomposition {
            rtt: new_histogram(),
            send_lag: new_histogram(),
            recv_lag: new_histogram(),
            gaps: new_histogram(),
            unstamped: 0,
            misordered: 0,
            unmatched: 0,
        }
    }

    /// One transaction's parts.
    pub fn record(&mut self, rtt: u64, send_lag: u64, recv_lag: u64) {
        record(&mut self.rtt, rtt);
        record(&mut self.send_lag, send_lag);
        record(&mut self.recv_lag, recv_lag);
    }

    /// The parts' histograms: rtt, send_lag, recv_lag (the order of [`PART_TAGS`]).
    pub fn parts_mut(&mut self) -> [&mut Histogram<u64>; 3] {
        [&mut self.rtt, &mut self.send_lag, &mut self.recv_lag]
    }

    /// One gap between departures.
    pub fn record_gap(&mut self, ns: u64) {
        record(&mut self.gaps, ns);
    }

    /// Adds another thread's (histograms of the same bounds: cannot fail).
    pub fn add(&mut self, o: &Decomposition) {
        let _ = self.rtt.add(&o.rtt);
        let _ = self.send_lag.add(&o.send_lag);
        let _ = self.recv_lag.add(&o.recv_lag);
        let _ = self.gaps.add(&o.gaps);
        self.unstamped += o.unstamped;
        self.misordered += o.misordered;
        self.unmatched += o.unmatched;
    }
}

/// The report's `parts`: latency taken apart by kernel timestamps (docs/json.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parts {
    /// Where the stamps come from: "software" (the kernel stack's clock).
    pub stamps: String,
    /// Whether the sending device could stamp in hardware, from ETHTOOL_GET_TS_INFO
    /// (e.g. "unavailable on lo: ETHTOOL_GET_TS_INFO offers software stamps only").
    pub hardware: String,
    /// Completed transactions in the window with all four instants.
    pub stamped: u64,
    pub unstamped: u64,
    pub misordered: u64,
    pub unmatched: u64,
    pub rtt_us: LatencyUs,
    pub send_lag_us: LatencyUs,
    pub recv_lag_us: LatencyUs,
    /// Gaps between consecutive departures of one generator thread.
    pub departure_gaps_us: GapsUs,
    /// The histograms (ns), HdrHistogram V2 deflate base64 like `latency_histogram`.
    pub rtt_histogram: String,
    pub send_lag_histogram: String,
    pub recv_lag_histogram: String,
    pub departure_gaps_histogram: String,
}

/// The distribution of gaps between departures, in microseconds. `cv` (standard deviation
/// over mean) says how smooth the arrivals were: 0 for a perfectly even stream, 1 for
/// Poisson arrivals, above 1 for bursts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GapsUs {
    pub min: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    pub cv: f64,
}

impl GapsUs {
    fn of(h: &Histogram<u64>) -> GapsUs {
        if h.is_empty() {
            return GapsUs::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        GapsUs {
            min: us(h.min()),
            p10: us(h.value_at_quantile(0.10)),
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
            cv: if h.mean() > 0.0 {
                h.stdev() / h.mean()
            } else {
                0.0
            },
        }
    }
}

impl Parts {
    /// The report of `d`, with the hardware probe's answer.
    pub fn of(d: &Decomposition, hardware: String) -> Result<Parts, HistogramError> {
        Ok(Parts {
            stamps: "software".into(),
            hardware,
            stamped: d.rtt.len(),
            unstamped: d.unstamped,
            misordered: d.misordered,
            unmatched: d.unmatched,
            rtt_us: latency_of(&d.rtt).0,
            send_lag_us: latency_of(&d.send_lag).0,
            recv_lag_us: latency_of(&d.recv_lag).0,
            departure_gaps_us: GapsUs::of(&d.gaps),
            rtt_histogram: encode_histogram(&d.rtt)?,
            send_lag_histogram: encode_histogram(&d.send_lag)?,
            recv_lag_histogram: encode_histogram(&d.recv_lag)?,
            departure_gaps_histogram: encode_histogram(&d.gaps)?,
        })
    }

    /// The recorded figures back from a report (for merging agents' reports).
    pub fn decomposition(&self) -> Result<Decomposition, HistogramError> {
        Ok(Decomposition {
            rtt: decode_histogram(&self.rtt_histogram)?,
            send_lag: decode_histogram(&self.send_lag_histogram)?,
            recv_lag: decode_histogram(&self.recv_lag_histogram)?,
            gaps: decode_histogram(&self.departure_gaps_histogram)?,
            unstamped: self.unstamped,
            misordered: self.misordered,
            unmatched: self.unmatched,
        })
    }
}

/// Whether the device that sends to `target` could stamp in hardware, as a report says it:
/// the device is the one holding the address the route picks as source (loopback when the
/// target is an address of this host), asked with ETHTOOL_GET_TS_INFO.
pub fn hardware_stamps(target: &SocketAddr) -> String {
    match sending_device(target) {
        Err(e) => format!("unknown: {e}"),
        Ok(None) => "unknown: no interface holds the route's source address".into(),
        Ok(Some(dev)) => match ts_info(&dev) {
            Err(e) => format!("unavailable on {dev}: {e}"),
            Ok(i) if !i.tx_hardware() => format!(
                "unavailable on {dev}: ETHTOOL_GET_TS_INFO offers {}",
                if i.tx_software() {
                    "software stamps only"
                } else {
                    "no transmit stamps"
                }
            ),
            Ok(i) => format!(
                "offered by {dev} (PHC {}), not used: firehose takes software stamps",
                i.phc_index
            ),
        },
    }
}

fn sending_device(target: &SocketAddr) -> Result<Option<String>, firehose_sys::SysError> {
    if target.ip().is_loopback() || interface_of(target.ip())?.is_some() {
        return Ok(Some("lo".into()));
    }
    let probe = UdpSock::new_for(target)?;
    probe.connect(target)?;
    let local = probe.local_addr()?;
    Ok(interface_of(local.ip())?.map(|(_, name)| name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip_through_their_report() {
        let mut d = Decomposition::new();
        d.record(20_000, 3_000, 500);
        d.record(40_000, 0, 700);
        d.record_gap(1_000);
        d.unstamped = 2;
        let p = Parts::of(&d, "unavailable on lo".into()).unwrap();
        assert_eq!(p.stamped, 2);
        assert_eq!(p.rtt_us.min, 20.0);
        assert_eq!(p.send_lag_us.min, 0.001, "a zero lag is recorded as 1 ns");
        let back = p.decomposition().unwrap();
        assert_eq!(back.rtt.len(), 2);
        assert_eq!(back.gaps.len(), 1);
        assert_eq!(back.unstamped, 2);
        let mut sum = Decomposition::new();
        sum.add(&back);
        sum.add(&back);
        assert_eq!((sum.rtt.len(), sum.unstamped), (4, 4));
    }

    #[test]
    fn loopback_is_named_as_having_no_hardware_stamps() {
        for t in ["127.0.0.1:9", "[::1]:9"] {
            assert_eq!(
                hardware_stamps(&t.parse().unwrap()),
                "unavailable on lo: ETHTOOL_GET_TS_INFO offers software stamps only"
            );
        }
    }
}
