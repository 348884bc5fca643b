//! `firehose serve`: the engine with a protocol handler, every technique a switch.

mod args;
mod napi;
mod ntp;
mod output;
mod start;

use crate::args::{thousands, Usage};
use anyhow::{Context, Result};
pub(crate) use args::parse_on_off;
pub(crate) use args::{socket_only_flags, xdp_only_flags};
pub use args::{Proto, ServeArgs};
use firehose_engine::metrics_http::{Endpoint, Limits};
use firehose_engine::stats::syscalls_per_packet;
use firehose_engine::{IntervalRecord, ProcessCpu, StatsDocument, WorkerStats};
use firehose_sys::supervise::{Ended, Health};
use output::{print_applied, print_counters, reload};
pub(crate) use start::serve_error;
use start::{start_server, Running};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Runs `firehose serve`.
pub fn run(a: ServeArgs) -> Result<()> {
    let mut json = a.json.open()?;
    let mut cfg = a.config()?;
    let on = a.io.serve_on(&a, &mut cfg)?;
    let stop = crate::supervise::stop_on_signals()?;
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .context("installing signal handler")?;
    let Running {
        server,
        tcp,
        mut reloader,
        notes,
        mut clock,
    } = start_server(&cfg, a.proto, &a, on)?;
    print_applied(&server, a.proto, a.io);
    // Restored when this function returns, whichever way (dropped last but the server).
    let _napi = (cfg.busy_poll.is_some() && a.io.napi_busy_poll).then(|| {
        let listen = server.local_addr();
        napi::start(listen)
    });
    for n in notes {
        say!("{n}");
    }
    if let Some(t) = &tcp {
        say!(
            "  tcp: listening on {} ({} thread{}, max {} connections, {} per client, idle {:?}, AXFR to {})",
            t.local_addr(),
            a.dns.tcp_threads,
            if a.dns.tcp_threads == 1 { "" } else { "s" },
            a.dns.tcp_max_conns,
            a.dns.tcp_max_per_client,
            a.dns.tcp_idle,
            if a.dns.allow_transfer.is_empty() {
                "nobody".to_string()
            } else {
                let v: Vec<String> = a.dns.allow_transfer.iter().map(|p| p.to_string()).collect();
                v.join(" ")
            }
        );
    }
    // Serves scrapes until the server stops (dropped at the end of this function).
    let mut _metrics = None;
    if let Some(addr) = a.metrics {
        let mut source = server.metrics_source(a.proto.name());
        if let Some(t) = &tcp {
            source = source.with_provider(std::sync::Arc::new(t.counter_reader()));
        }
        let version = env!("CARGO_PKG_VERSION");
        let render = std::sync::Arc::new(move || source.render(version));
        let endpoint = Endpoint::start(addr, render, Limits::default()).map_err(|e| {
            Usage(format!(
                "--metrics {addr}: cannot listen there: {e} (pick another address:port)"
            ))
        })?;
        say!("  metrics: http://{}/metrics", endpoint.local_addr());
        _metrics = Some(endpoint);
    }
    if a.duration.is_none() {
        say!("  Ctrl-C to stop");
    }
    let started = Instant::now();
    let mut records = Vec::new();
    let mut last = WorkerStats::total(&server.worker_stats());
    let mut last_t = started;
    let mut sv = crate::supervise::supervisor(&stop, a.duration, a.interval);
    sv.poll = firehose_sys::supervise::QUIET_POLL;
    // The server is shared by the loop's two callbacks: one watches it, one reads its
    // counters at each interval.
    let server = std::cell::RefCell::new(server);
    let ended = sv.run(
        started,
        |_| {
            if hup.swap(false, Ordering::Relaxed) {
                match reloader.as_mut() {
                    Some(r) => reload(r),
                    None => say!(
                        "firehose serve: SIGHUP ignored: --proto {} has nothing to reload",
                        a.proto.name()
                    ),
                }
            }
            // NTP's clock thread is watched as a worker: the answers depend on it.
            if let Some(f) = clock.as_mut().and_then(|c| match c.health() {
                Health::Failed(f) => Some(f),
                _ => None,
            }) {
                return Ok(Health::Failed(f));
            }
            Ok::<_, anyhow::Error>(server.borrow_mut().health())
        },
        |now| {
            let server = server.borrow();
            let total = WorkerStats::total(&server.worker_stats());
            let d = total.delta(&last);
            let secs = now.duration_since(last_t).as_secs_f64();
            let drops: u64 = server.socket_stats().iter().map(|s| s.kernel_drops).sum();
            say!(
                "[{:7.1}s] rx {:>11} pps  tx {:>11} pps  syscalls/pkt {:.3}  kernel drops {}",
                started.elapsed().as_secs_f64(),
                thousands(d.packets_in as f64 / secs),
                thousands(d.packets_out as f64 / secs),
                if d.packets_in > 0 {
                    d.syscalls as f64 / d.packets_in as f64
                } else {
                    0.0
                },
                drops
            );
            if json.wanted() {
                records.push(IntervalRecord {
                    t: started.elapsed().as_secs_f64(),
                    rx_pps: d.packets_in as f64 / secs,
                    tx_pps: d.packets_out as f64 / secs,
                    totals: total.clone(),
                    kernel_drops: drops,
                });
            }
            last = total;
            last_t = now;
            Ok(())
        },
    )?;
    let mut server = server.into_inner();
    if let Ended::Failed(f) = ended {
        // Stop what still runs (the other workers, the TCP threads) before saying so.
        let _ = server.shutdown();
        if let Some(t) = tcp {
            t.shutdown();
        }
        return Err(crate::supervise::failed("the server", f));
    }
    let elapsed = started.elapsed().as_secs_f64();
    // The workers first: their counters are final only once they have stopped.
    let mut handler: std::collections::BTreeMap<String, u64> = server
        .join_workers()
        .map_err(|f| crate::supervise::failed("the server", f))?
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let workers = server.worker_stats();
    let sockets = server.socket_stats();
    let applied = server.applied().clone();
    drop(server);
    drop(clock);
    if let Some(t) = tcp {
        handler.extend(t.shutdown().into_iter().map(|(k, v)| (k.to_string(), v)));
    }
    let totals = WorkerStats::total(&workers);
    print_counters(&workers, &sockets, &totals, elapsed);
    if a.proto != Proto::Echo {
        let line: Vec<String> = handler
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        say!("  {}: {}", a.proto.name(), line.join(", "));
    }
    if json.wanted() {
        let (u, s) = firehose_sys::cpu::process_rusage()?;
        let stats = StatsDocument {
            proto: a.proto.name().to_string(),
            applied,
            elapsed_s: elapsed,
            syscalls_per_packet: syscalls_per_packet(&totals),
            totals,
            workers,
            sockets,
            handler,
            cpu: ProcessCpu {
                user_s: u.as_secs_f64(),
                sys_s: s.as_secs_f64(),
            },
            intervals: records,
            environment: firehose_host::env::Environment::capture(),
        };
        json.write(&stats)?;
    }
    Ok(())
}
