//! `firehose drops`: where packets die. Parses the flags, runs a watch of the library
//! (`firehose_observe::session`) for --duration or until Ctrl-C, and prints its report:
//! the drops by reason, location, port and process, then the counters beside them.

use crate::args::{parse_duration, parse_port, thousands, Usage};
use crate::meta::JsonArgs;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use firehose_observe::drops::Via;
use firehose_observe::session::{Filter, Options, Report, Session};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How drops are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViaArg {
    /// BPF, else perf sampling where BPF is refused.
    Auto,
    /// A BPF program on skb:kfree_skb counting in per-CPU maps.
    Bpf,
    /// perf sampling of skb:kfree_skb into per-CPU rings (reason and location; a port only
    /// for UDP receive-buffer drops; no socket or process).
    Perf,
}

/// Arguments of `firehose drops`.
#[derive(Debug, Args)]
#[command(
    after_help = "Counts every skb the kernel frees as dropped (the skb:kfree_skb \
tracepoint) by reason, kernel location\nand, where it can tell, port, socket, network \
namespace and process; beside it XDP errors,\nAF_XDP ring statistics, softnet dropped and \
time_squeeze per CPU, UDP error counters and the\nNICs' drop and miss counters (per queue where \
the driver has them). Needs root (CAP_BPF and\nCAP_PERFMON; CAP_SYS_ADMIN where tracefs is not \
mounted). Nothing stays attached after exit,\nhowever it exits.\n\n\
EXAMPLES:\n  \
  firehose drops -t 5                        every drop on the host for 5 s\n  \
  firehose drops --port 9000                 drops at port 9000 until Ctrl-C\n  \
  firehose drops --netns fhlab1 -t 10 -J     one namespace's drops as JSON\n  \
  firehose drops --via perf -t 2             without BPF\n  \
  firehose drops --prog-stats -t 5           also the program's cost per drop"
)]
pub struct DropsArgs {
    /// Stop after this long, e.g. 5, 2.5s [default: until Ctrl-C].
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Only drops at this port: a socket's local port, or a packet's destination port.
    #[arg(long, value_name = "PORT", value_parser = parse_port)]
    port: Option<u16>,
    /// Only drops in this network namespace (a name under /run/netns, or a path to one).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// How to count.
    #[arg(long, value_enum, default_value = "auto")]
    via: ViaArg,
    /// Rows to print (the JSON has them all).
    #[arg(long, value_name = "N", default_value = "20", value_parser = crate::args::parse_positive)]
    top: usize,
    /// Interfaces whose counters to read (repeatable) [default: every one of this namespace].
    #[arg(long = "iface", value_name = "NAME")]
    ifaces: Vec<String>,
    /// Measure the drop program's own cost: run count and nanoseconds per run (turns on
    /// the kernel's BPF run-time statistics while it runs).
    #[arg(long)]
    prog_stats: bool,
    #[command(flatten)]
    json: JsonArgs,
}

/// The inode of a network namespace given by name or path.
fn netns_inode(name: &str) -> Result<u32, Usage> {
    let path = if name.contains('/') {
        name.to_string()
    } else {
        format!("/run/netns/{name}")
    };
    std::fs::metadata(&path)
        .map(|m| m.ino() as u32)
        .map_err(|e| Usage(format!("--netns {name}: {path}: {e} (see `ip netns list`)")))
}

pub fn run(a: DropsArgs) -> Result<()> {
    let netns = a.netns.as_deref().map(netns_inode).transpose()?;
    for i in &a.ifaces {
        if !std::path::Path::new("/sys/class/net").join(i).exists() {
            return Err(Usage(format!("--iface {i}: no such interface in this namespace")).into());
        }
    }
    let mut json = a.json.open()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let opts = Options {
        via: match a.via {
            ViaArg::Auto => Via::Auto,
            ViaArg::Bpf => Via::Bpf,
            ViaArg::Perf => Via::Perf,
        },
        prog_stats: a.prog_stats,
        ifaces: a.ifaces.clone(),
    };
    let mut session = Session::start(&opts).map_err(|e| {
        if e.is_permission() {
            anyhow::Error::new(Usage(format!("drops: {e}")))
        } else {
            anyhow::Error::new(e).context("drops")
        }
    })?;
    let m = session.method();
    eprintln!(
        "firehose drops: {} on skb:kfree_skb (tracefs: {}){}; {}",
        m.via,
        m.tracefs,
        m.bpf_refused
            .as_ref()
            .map(|r| format!(", BPF refused: {r}"))
            .unwrap_or_default(),
        match a.duration {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "Ctrl-C to stop".into(),
        }
    );
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && a.duration.is_none_or(|d| start.elapsed() < d) {
        let left = a.duration.map_or(Duration::from_millis(100), |d| {
            d.saturating_sub(start.elapsed())
        });
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    let report = session
        .report(
            Filter {
                port: a.port,
                netns,
            },
            true,
            5,
        )
        .context("drops: reading the counts")?;
    drop(session);
    print(&report, a.top);
    json.write(&report)?;
    Ok(())
}

fn print(r: &Report, top: usize) {
    say!(
        "drops: {} in {:.2} s ({} host-wide){}",
        thousands(r.drops as f64),
        r.seconds,
        thousands(r.drops_all as f64),
        if r.unkeyed + r.lost + r.missed > 0 {
            format!(
                "; not attributed: {} (map full), lost by perf: {}, skipped by the kernel: {}",
                r.unkeyed, r.lost, r.missed
            )
        } else {
            String::new()
        }
    );
    if !r.rows.is_empty() {
        say!(
            "  {:>9}  {:<22} {:<40} {:>10}  process",
            "drops",
            "reason",
            "location",
            "port"
        );
    }
    for row in r.rows.iter().take(top) {
        let port = match (row.port, row.port_from.as_deref()) {
            (Some(p), Some("socket")) => format!("{p}"),
            (Some(p), _) => format!("{p}/{}", row.protocol.as_deref().unwrap_or("pkt")),
            _ => "-".into(),
        };
        let who = row
            .process
            .as_ref()
            .map(|o| o.to_string())
            .or_else(|| row.socket_inode.map(|i| format!("socket:[{i}]")))
            .unwrap_or_else(|| "-".into());
        say!(
            "  {:>9}  {:<22} {:<40} {:>10}  {}",
            thousands(row.count as f64),
            row.reason,
            row.location,
            port,
            who
        );
    }
    if r.rows.len() > top {
        say!(
            "  ... {} more rows (--top, or --json for all)",
            r.rows.len() - top
        );
    }
    if let Some(p) = &r.program {
        say!(
            "program: id {}, {} runs, {}",
            p.id,
            p.runs,
            p.ns_per_run
                .map(|n| format!("{n:.0} ns per run"))
                .unwrap_or_else(|| "no runs".into())
        );
    }
    for x in &r.xdp_errors {
        say!(
            "xdp: {} {} x{} prog {} on {}{}",
            x.event,
            x.action,
            x.count,
            x.prog_id,
            x.iface
                .clone()
                .unwrap_or_else(|| format!("ifindex {}", x.ifindex)),
            x.errno
                .map(|e| format!(" ({})", firehose_sys::errno_name(e)))
                .unwrap_or_default()
        );
    }
    let c = &r.counters;
    for s in c
        .softnet
        .iter()
        .filter(|s| s.dropped + s.time_squeeze + s.flow_limit_count > 0)
    {
        say!(
            "softnet: cpu {} dropped {} time_squeeze {} flow_limit {} (of {} processed)",
            s.cpu,
            s.dropped,
            s.time_squeeze,
            s.flow_limit_count,
            s.processed
        );
    }
    for (name, u) in [("udp", &c.udp), ("udp6", &c.udp6)] {
        if u.in_errors + u.no_ports + u.rcvbuf_errors + u.sndbuf_errors + u.mem_errors > 0 {
            say!(
                "{name}: InErrors {} RcvbufErrors {} NoPorts {} SndbufErrors {} MemErrors {} InCsumErrors {}",
                u.in_errors,
                u.rcvbuf_errors,
                u.no_ports,
                u.sndbuf_errors,
                u.mem_errors,
                u.in_csum_errors
            );
        }
    }
    for n in &c.nic {
        say!(
            "nic: {} {}{} +{}",
            n.iface,
            n.counter,
            n.queue.map(|q| format!(" (queue {q})")).unwrap_or_default(),
            n.delta
        );
    }
    for x in &c.xsk {
        say!(
            "af_xdp: socket:[{}] {} queue {}: rx dropped {} invalid {} ring full {}, fill ring empty {}, tx invalid {} ring empty {}",
            x.inode,
            x.iface.as_deref().unwrap_or("?"),
            x.queue,
            x.stats.rx_dropped,
            x.stats.rx_invalid,
            x.stats.rx_ring_full,
            x.stats.fill_ring_empty,
            x.stats.tx_invalid,
            x.stats.tx_ring_empty
        );
    }
    for n in &r.notes {
        say!("note: {n}");
    }
}

/// A drop watch for a run (load, sink) as root, unless `off`; a note when it cannot start.
pub fn watch_loss(off: bool, who: &str) -> Option<firehose_observe::attribution::LossWatch> {
    if off || !firehose_sys::cpu::is_root() {
        return None;
    }
    match firehose_observe::attribution::LossWatch::start() {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("firehose {who}: note: losses are not attributed: {e}");
            None
        }
    }
}

/// The run's drops at `ports` or of sockets of `pids` (this process is added).
pub fn attribute(
    w: Option<firehose_observe::attribution::LossWatch>,
    ports: &[u16],
    pids: &[u32],
    who: &str,
) -> Option<firehose_observe::attribution::Attribution> {
    let mut scope = firehose_observe::attribution::Scope {
        ports: ports.to_vec(),
        pids: pids.to_vec(),
    };
    scope.pids.push(std::process::id());
    match w?.finish(&scope) {
        Ok(a) => Some(a),
        Err(e) => {
            eprintln!("firehose {who}: note: losses are not attributed: {e}");
            None
        }
    }
}

/// `  lost 2325: 2325 SOCKET_RCVBUFF at udp_queue_rcv_one_skb, port 9000 (firehose serve pid
/// 123)`, one line per attribution; `what` names the loss (`lost 2325`, `dropped 12`).
pub fn print_attribution(what: &str, a: &firehose_observe::attribution::Attribution) {
    let Some(first) = a.lines.first() else {
        say!(
            "  {what}: the kernel dropped nothing at these ports or sockets (watched by {})",
            a.via
        );
        return;
    };
    say!("  {what}: {first}");
    let indent = " ".repeat(what.len() + 4);
    for l in a.lines.iter().skip(1) {
        say!("{indent}{l}");
    }
    say!(
        "{indent}({} dropped by the kernel over the whole run, warm-up included; watched by {})",
        a.drops,
        a.via
    );
}
