//! Where a trial's loss went: the drop attribution a `firehose load` or `firehose sink` run
//! as root writes into its JSON (`loss_attribution`), carried into the lab's summary, pages
//! and document ([`crate::study::page`], [`crate::study::document`]), so a lab figure of
//! loss is never without the kernel's reason for it.

use serde::Serialize;
use serde_json::Value;

/// What one trial's generator or receiver saw dropped, and where the kernel dropped it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LossAttribution {
    /// The program that watched the drops: `load`, `sink` or `stream`.
    pub by: String,
    /// What that program counted lost (load: requests never answered; sink: datagrams the
    /// kernel dropped before it read them; stream: segments TCP retransmitted).
    pub lost: u64,
    /// `bpf` or `perf`.
    pub via: String,
    /// The kernel's drops at the run's ports or of its processes' sockets.
    pub drops: u64,
    /// `2325 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000 (firehose serve pid 123)`,
    /// busiest first.
    pub lines: Vec<String>,
    pub notes: Vec<String>,
}

impl LossAttribution {
    /// From a document's `loss_attribution` object (null without root or with
    /// `--no-drops`: `None`).
    pub fn from_document(by: &str, lost: u64, doc: &Value) -> Option<LossAttribution> {
        let a = doc.get("loss_attribution")?.as_object()?;
        let strings = |k: &str| -> Vec<String> {
            a.get(k)
                .and_then(Value::as_array)
                .map(|v| {
                    v.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(LossAttribution {
            by: by.into(),
            lost,
            via: a.get("via")?.as_str()?.into(),
            drops: a.get("drops")?.as_u64()?,
            lines: strings("lines"),
            notes: strings("notes"),
        })
    }

    /// `load lost 12: 12 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000 (...); ...
    /// (12 kernel drops, watched by bpf)`: the line the summary and the pages carry.
    pub fn line(&self) -> String {
        let whence = if self.lines.is_empty() {
            "the kernel dropped nothing at these ports or sockets (the loss is elsewhere: a reply late past the timeout, a peer that never answered)".to_string()
        } else {
            self.lines.join("; ")
        };
        format!(
            "{} lost {}: {whence} ({} kernel drops over the whole run, watched by {})",
            self.by, self.lost, self.drops, self.via
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_from_a_document_and_printed_on_one_line() {
        let doc = serde_json::json!({"loss_attribution": {
            "via": "bpf", "drops": 12, "rows": [],
            "lines": ["12 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000 (firehose serve pid 1)"],
            "notes": []}});
        let a = LossAttribution::from_document("load", 12, &doc).unwrap();
        assert_eq!(
            a.line(),
            "load lost 12: 12 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000 (firehose serve pid 1) (12 kernel drops over the whole run, watched by bpf)"
        );
        let none = serde_json::json!({"loss_attribution": null});
        assert_eq!(LossAttribution::from_document("load", 3, &none), None);
        let empty = serde_json::json!({"loss_attribution": {"via": "perf", "drops": 0, "lines": [], "notes": []}});
        let e = LossAttribution::from_document("sink", 0, &empty).unwrap();
        assert!(
            e.line()
                .starts_with("sink lost 0: the kernel dropped nothing"),
            "{}",
            e.line()
        );
    }
}
