//! NIC counters that mean loss, by name: the driver's `ethtool -S` names and the kernel's
//! /sys/class/net/IFACE/statistics files. Drivers name per-queue counters their own way
//! (`rx_queue_0_drops` on virtio and veth, `rx-0.drops` on i40e, `rx0_xdp_drop` on mlx5,
//! `queue_0_rx_drops` on ena); [`loss_counter`] reads the queue out of each.

/// A counter that counts lost packets, with the queue it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LossCounter {
    /// The queue number, for a per-queue counter.
    pub queue: Option<u32>,
    /// `rx` or `tx` when the name says which.
    pub dir: Option<&'static str>,
}

/// Words in a counter's name that mean packets were lost or refused.
const LOSS_WORDS: [&str; 10] = [
    "drop", "miss", "discard", "fifo", "full", "nobuf", "no_buf", "over", "err", "fail",
];

/// The sysfs statistics files that count loss (`ip -s link` shows them).
pub const SYSFS_LOSS: [&str; 7] = [
    "rx_dropped",
    "tx_dropped",
    "rx_missed_errors",
    "rx_fifo_errors",
    "rx_over_errors",
    "rx_errors",
    "tx_errors",
];

/// The queue number after `prefix` at the start of `s` and the rest: `("rx_queue_", "3_x")`.
fn number_after<'a>(s: &'a str, prefix: &str) -> Option<(u32, &'a str)> {
    let rest = s.strip_prefix(prefix)?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 5 {
        return None;
    }
    Some((rest[..digits].parse().ok()?, &rest[digits..]))
}

/// Whether `name` counts loss and, if per queue, which queue; None for other counters.
pub fn loss_counter(name: &str) -> Option<LossCounter> {
    let lower = name.to_ascii_lowercase();
    // Packets and bytes counters are not loss even when they say "xdp_drop_bytes".
    if lower.ends_with("bytes") || !LOSS_WORDS.iter().any(|w| lower.contains(w)) {
        return None;
    }
    queue_of(&lower)
}

/// The queue and direction a counter's name gives (any counter: `rx_queue_0_packets` is
/// queue 0, rx); `queue` is None for a device-wide counter.
pub fn queue_of(name: &str) -> Option<LossCounter> {
    let lower = name.to_ascii_lowercase();
    let dir_of = |s: &str| {
        if s.starts_with("rx") || s.contains("_rx") {
            Some("rx")
        } else if s.starts_with("tx") || s.contains("_tx") {
            Some("tx")
        } else {
            None
        }
    };
    for (prefix, dir) in [
        ("rx_queue_", Some("rx")),
        ("tx_queue_", Some("tx")),
        ("rx-", Some("rx")),
        ("tx-", Some("tx")),
        ("rx", Some("rx")),
        ("tx", Some("tx")),
        ("queue_", None),
    ] {
        if let Some((q, rest)) = number_after(&lower, prefix) {
            if rest.starts_with(['_', '.']) {
                return Some(LossCounter {
                    queue: Some(q),
                    dir: dir.or_else(|| dir_of(rest)),
                });
            }
        }
    }
    Some(LossCounter {
        queue: None,
        dir: dir_of(&lower),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_several_drivers() {
        let q = |n: &str| loss_counter(n).map(|c| (c.queue, c.dir));
        assert_eq!(q("rx_queue_0_xdp_drops"), Some((Some(0), Some("rx"))));
        assert_eq!(q("rx_queue_12_drops"), Some((Some(12), Some("rx"))));
        assert_eq!(q("tx_queue_1_xdp_xmit_errors"), Some((Some(1), Some("tx"))));
        assert_eq!(q("rx-3.drops"), Some((Some(3), Some("rx"))));
        assert_eq!(q("rx0_xdp_drop"), Some((Some(0), Some("rx"))));
        assert_eq!(q("queue_2_rx_drops"), Some((Some(2), Some("rx"))));
        assert_eq!(q("rx_missed_errors"), Some((None, Some("rx"))));
        assert_eq!(q("rx_queue_0_packets"), None);
        assert_eq!(q("rx_queue_0_xdp_bytes"), None);
        assert_eq!(q("peer_ifindex"), None);
        assert_eq!(q("rx99999999_drop"), Some((None, Some("rx"))));
        let any = |n: &str| queue_of(n).map(|c| (c.queue, c.dir));
        assert_eq!(any("rx_queue_1_"), Some((Some(1), Some("rx"))));
        assert_eq!(any("rx-2."), Some((Some(2), Some("rx"))));
        assert_eq!(any("queue_3_tx_"), Some((Some(3), Some("tx"))));
    }
}
