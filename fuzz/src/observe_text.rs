//! The text `firehose top` and `firehose drops` read from other programs: a server's
//! Prometheus exposition (`top` scrapes every `serve --metrics` it finds), command lines
//! (/proc/PID/cmdline: which processes are servers, who holds a socket), fd link targets
//! (`socket:[INODE]`) and NIC counter names (`ethtool -S`).
//!
//! Input: one control byte (which reader), then the text. What must hold: no panic; a
//! Prometheus sample written back in the exposition format reads back the same; a
//! metrics address found in a command line is one of its words; a socket inode only from
//! `socket:[digits]`; a counter named as loss says a loss word, with the queue and
//! direction the name gives.

use firehose_host::nic_stats::{loss_counter, queue_of};
use firehose_host::procfs::socket_owners::{command, socket_inode};
use firehose_host::prom::{self, Sample};
use firehose_observe::servers::metrics_addr;

pub fn check(data: &[u8]) {
    let Some((&c, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    match c % 4 {
        0 => check_prom(text),
        1 => {
            if let Some(a) = metrics_addr(text) {
                assert!(text
                    .split('\0')
                    .any(|w| w == a || w == format!("--metrics={a}")));
            }
            let (cmd, comm) = text.split_once('\n').unwrap_or((text, "comm"));
            let out = command(cmd, comm);
            assert!(out.len() <= cmd.len() + comm.len());
        }
        2 => {
            for line in text.lines() {
                if let Some(n) = socket_inode(line) {
                    let digits = &line["socket:[".len()..line.len() - 1];
                    assert_eq!(digits.parse::<u64>().ok(), Some(n), "{line:?}");
                }
            }
        }
        _ => {
            for name in text.lines() {
                if let Some(l) = loss_counter(name) {
                    let lower = name.to_ascii_lowercase();
                    assert!(!lower.ends_with("bytes"), "{name}");
                    assert_eq!(queue_of(name), Some(l.clone()), "{name}");
                    if let Some(q) = l.queue {
                        assert!(q <= 99_999 && name.contains(&q.to_string()), "{name}");
                    }
                }
            }
        }
    }
}

fn check_prom(text: &str) {
    let samples = prom::parse(text);
    for s in &samples {
        assert!(!s.name.is_empty(), "{s:?}");
        assert!(
            !s.name.contains(|c: char| c == '{' || c.is_whitespace()),
            "{s:?}"
        );
        let line = render(s);
        let back = prom::parse(&line);
        assert_eq!(back.len(), 1, "{line:?} from {s:?}");
        let b = &back[0];
        assert_eq!((&b.name, &b.labels), (&s.name, &s.labels), "{line:?}");
        assert!(
            b.value == s.value || (b.value.is_nan() && s.value.is_nan()),
            "{line:?}: {} read back as {}",
            s.value,
            b.value
        );
    }
}

/// A sample as the exposition format writes it.
fn render(s: &Sample) -> String {
    let mut out = s.name.clone();
    if !s.labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in s.labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(&s.value.to_string());
    out.push('\n');
    out
}

/// An exposition like `serve --metrics` writes, command lines, fd links and counter names.
pub fn seeds() -> Vec<Vec<u8>> {
    let prom = "# HELP firehose_packets_received_total Datagrams.\n# TYPE firehose_packets_received_total counter\nfirehose_packets_received_total{worker=\"0\"} 10\nfirehose_packets_received_total{worker=\"1\",note=\"a \\\"q\\\" b\\\\n\"} 5\nfirehose_uptime_seconds 3.5\nbad line\n{x=\"1\"} 3\nh_bucket{le=\"+Inf\"} +Inf\nh_sum -1e-7\n";
    let mut out = vec![[b"\x00", prom.as_bytes()].concat()];
    for cmd in [
        "/usr/bin/firehose\0serve\0--listen\x000.0.0.0:53\0--metrics\x00127.0.0.1:9100\0",
        "firehose\0serve\0--metrics=[::1]:9100\0",
        "/usr/sbin/knotd\0-c\0/etc/knot.conf\0\nknotd",
        "\nkworker/0:1",
    ] {
        out.push([b"\x01", cmd.as_bytes()].concat());
    }
    out.push(b"\x02socket:[12345]\nsocket:[]\npipe:[77]\nsocket:[99999999999999999999]\n".to_vec());
    out.push(
        b"\x03rx_queue_0_drops\nrx-1.drops\nrx0_xdp_drop\nqueue_2_rx_drops\ntx_dropped\nrx_xdp_drop_bytes\nrx_packets\n"
            .to_vec(),
    );
    out
}
