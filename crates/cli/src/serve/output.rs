//! What `firehose serve` prints: the applied configuration, the counters at exit, reloads.

use super::args::Proto;
use super::start::Reload;
use crate::io_paths::IoPath;
use firehose_engine::{Server, WorkerStats};
use firehose_proto::dns::{Outcome, Reloader};
use std::time::Instant;

/// Re-reads what the server answers from (SIGHUP) and says what happened.
pub(super) fn reload(r: &mut Reload) {
    match r {
        Reload::Dns(r) => reload_zones(r),
        Reload::Radius(r) => {
            let t = Instant::now();
            for (p, o) in r.reload() {
                match o {
                    Ok(n) => say!("firehose serve: reloaded {} ({n} entries)", p.display()),
                    Err(e) => say!(
                        "firehose serve: reload of {} failed, still serving its previous version: {e}",
                        p.display()
                    ),
                }
            }
            say!(
                "firehose serve: radius clients and users swapped in {:.1} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}

/// Re-reads the zone files and says what happened to each.
fn reload_zones(r: &mut Reloader) {
    let t = Instant::now();
    match r.reload() {
        Ok(outcomes) => {
            for (p, o) in outcomes {
                match o {
                    Outcome::Loaded(n) => {
                        say!("firehose serve: reloaded {} ({n} records)", p.display())
                    }
                    Outcome::Kept(e) => say!(
                        "firehose serve: reload of {} failed, still serving its previous version: {e}",
                        p.display()
                    ),
                }
            }
            say!(
                "firehose serve: zones swapped in {:.1} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        Err(e) => say!("firehose serve: reload failed, nothing changed: {e}"),
    }
}

pub(super) fn print_applied(server: &Server, proto: Proto, io: &IoPath) {
    let a = server.applied();
    say!("firehose serve: listening on {}", a.listen);
    say!(
        "  proto {}, {} worker(s), sockets {}, steer {}, batch {} ({}){}, busy-poll {}",
        proto.name(),
        a.workers,
        a.sockets.name(),
        a.socket_detail
            .first()
            .map_or("none", |s| s.steering.as_str()),
        a.batch,
        (io.calls)(a.batch),
        match a.send_batch {
            Some(1) => ", one send per reply (--send-batch 1)".to_string(),
            Some(n) => format!(", a send every {n} replies (--send-batch)"),
            None => String::new(),
        },
        if a.busy_poll {
            "on (workers poll)"
        } else {
            "off"
        }
    );
    for (i, c) in a.worker_cpus.iter().enumerate() {
        say!(
            "  worker {i}: {} -> socket {}",
            c.map(|c| format!("pinned to CPU {c}"))
                .unwrap_or_else(|| "unpinned".into()),
            a.worker_sockets[i]
        );
    }
    for s in &a.socket_detail {
        let mut line = format!(
            "  socket {}: SO_REUSEPORT={} SO_RCVBUF={} SO_SNDBUF={} IP_MTU_DISCOVER={} SO_BUSY_POLL={} SO_RXQ_OVFL={}",
            s.index, s.reuseport as u8, s.rcvbuf, s.sndbuf, s.mtu_discover, s.busy_poll_us, s.rxq_ovfl as u8
        );
        if let Some(p) = s.prefer_busy_poll {
            line.push_str(&format!(" SO_PREFER_BUSY_POLL={}", p as u8));
        }
        if let Some(b) = s.busy_poll_budget {
            line.push_str(&format!(" SO_BUSY_POLL_BUDGET={b}"));
        }
        if let Some(why) = &s.busy_poll_budget_unread {
            line.push_str(&format!(" SO_BUSY_POLL_BUDGET ({why})"));
        }
        if let Some(option) = timestamp_option(s) {
            line.push(' ');
            line.push_str(option);
        }
        say!("{line}");
    }
    if let Some(p) = &a.epoll_busy_poll {
        say!(
            "  epoll (idle wait, EPIOCGPARAMS): busy_poll_usecs={} busy_poll_budget={} prefer_busy_poll={}",
            p.busy_poll_usecs,
            p.busy_poll_budget,
            p.prefer_busy_poll
        );
    }
    if let Some(b) = &a.backend {
        say!("  {b}");
    }
    for n in a
        .notes
        .iter()
        .chain(a.backend.iter().flat_map(|b| &b.notes))
    {
        say!("  note: {n}");
    }
}

/// The stamping option the socket holds, as read back: interleaved NTP asks for
/// SO_TIMESTAMPING (arrival stamps and keyed transmit stamps), which replaces SO_TIMESTAMPNS.
fn timestamp_option(s: &firehose_engine::AppliedSocket) -> Option<&'static str> {
    if s.tx_timestamps {
        Some("SO_TIMESTAMPING=RX_SOFTWARE|SOFTWARE|OPT_ID|OPT_TSONLY")
    } else if s.rx_timestamps {
        Some("SO_TIMESTAMPNS=1")
    } else {
        None
    }
}

pub(super) fn print_counters(
    workers: &[WorkerStats],
    sockets: &[firehose_engine::SocketStats],
    t: &WorkerStats,
    elapsed: f64,
) {
    say!("firehose serve: stopped after {elapsed:.1} s");
    say!(
        "  {:>6} {:>5} {:>13} {:>13} {:>10} {:>12} {:>8} {:>8} {:>8}",
        "worker",
        "cpu",
        "packets_in",
        "packets_out",
        "batches",
        "syscalls",
        "h_err",
        "h_drop",
        "send_err"
    );
    for w in workers.iter().chain(std::iter::once(t)) {
        let name = if std::ptr::eq(w, t) {
            "total".to_string()
        } else {
            w.worker.to_string()
        };
        say!(
            "  {:>6} {:>5} {:>13} {:>13} {:>10} {:>12} {:>8} {:>8} {:>8}",
            name,
            w.cpu.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            w.packets_in,
            w.packets_out,
            w.batches,
            w.syscalls,
            w.handler_errors,
            w.handler_drops,
            w.send_errors
        );
    }
    for s in sockets {
        say!(
            "  socket {}: kernel drops {} (SO_MEMINFO), last incoming CPU {}",
            s.index,
            s.kernel_drops,
            s.incoming_cpu
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into())
        );
    }
    if t.unknown_peer > 0 {
        say!(
            "  unknown_peer: {} requests from a sender no reply can be addressed to",
            t.unknown_peer
        );
    }
    if t.rxq_ovfl > 0 {
        say!("  SO_RXQ_OVFL reported {} drops in-band", t.rxq_ovfl);
    }
    for (name, v) in &t.backend {
        say!("  {name}: {v}");
    }
}

#[cfg(test)]
mod tests {
    use super::timestamp_option;

    fn socket(rx: bool, tx: bool) -> firehose_engine::AppliedSocket {
        serde_json::from_value(serde_json::json!({
            "index": 0, "local": "127.0.0.1:123", "reuseport": true, "steering": "kernel",
            "rcvbuf": 212992, "sndbuf": 212992, "mtu_discover": "dont", "busy_poll_us": 0,
            "rxq_ovfl": false, "rx_timestamps": rx, "tx_timestamps": tx
        }))
        .unwrap()
    }

    #[test]
    fn the_socket_line_names_the_stamping_option_the_socket_holds() {
        assert_eq!(
            timestamp_option(&socket(true, true)),
            Some("SO_TIMESTAMPING=RX_SOFTWARE|SOFTWARE|OPT_ID|OPT_TSONLY")
        );
        assert_eq!(
            timestamp_option(&socket(true, false)),
            Some("SO_TIMESTAMPNS=1")
        );
        assert_eq!(timestamp_option(&socket(false, false)), None);
    }
}
