//! `firehose top`: one refreshing screen of what the host is doing with packets. Parses the
//! flags, makes the library's sampler (`firehose_observe::top`), and either draws it
//! ([`tui`], ratatui over crossterm: any terminal, SSH included) or prints one frame
//! (`--once`, as text or `--json`).

mod text;
mod tui;

use crate::args::{parse_duration, parse_port, parse_positive, Usage};
use crate::meta::JsonArgs;
use anyhow::Result;
use clap::Args;
use firehose_observe::drops::{DropWatch, Options as DropOptions, Via};
use firehose_observe::top::{Frame, Sampler, View};
use std::io::IsTerminal;
use std::time::Duration;

/// Arguments of `firehose top`.
#[derive(Debug, Args)]
#[command(
    after_help = "Per-CPU usr/sys/softirq/idle and NET_RX/NET_TX softirqs, packets per \
second per interface and queue,\nUDP in/out/errors, the busiest UDP sockets (queue depth, \
drops, process), the top drop reasons\nwith their locations (as root: a BPF program on \
skb:kfree_skb, this namespace's drops), and every\n`firehose serve --metrics` it finds. \
Interfaces, sockets and drops are those of the network\nnamespace it runs in.\n\n\
Keys: s sort (drops, queue, port), p filter by port, i filter by interface, c clear \
filters,\nspace freeze, q or Ctrl-C quit.\n\n\
EXAMPLES:\n  \
  firehose top                         the screen, refreshed every second\n  \
  firehose top --port 9000 -i 2        one port, every 2 s\n  \
  firehose top --once                  one frame as text, for a log\n  \
  firehose top --once --json | jq .udp one frame as JSON"
)]
pub struct TopArgs {
    /// Refresh every DURATION (with --once: the window measured).
    #[arg(short = 'i', long, value_name = "DURATION", default_value = "1", value_parser = parse_duration)]
    interval: Duration,
    /// Print one frame (two readings one --interval apart) and exit.
    #[arg(long)]
    once: bool,
    /// Quit after this long [default: until q].
    #[arg(short = 't', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Show only this port's sockets and drops (the p key changes it).
    #[arg(long, value_name = "PORT", value_parser = parse_port)]
    port: Option<u16>,
    /// Show only this interface (the i key changes it).
    #[arg(long, value_name = "NAME")]
    iface: Option<String>,
    /// Rows per table.
    #[arg(long, value_name = "N", default_value = "8", value_parser = parse_positive)]
    rows: usize,
    /// Do not watch drop reasons (no BPF program is loaded).
    #[arg(long)]
    no_drops: bool,
    /// With --once (implied): the frame as one JSON document.
    #[command(flatten)]
    json: JsonArgs,
}

/// The drop watch, when permitted; a note saying why not otherwise.
fn drop_watch(off: bool) -> (Option<DropWatch>, Option<String>) {
    if off {
        return (None, Some("drop reasons: off (--no-drops)".into()));
    }
    match DropWatch::start(DropOptions {
        via: Via::Bpf,
        prog_stats: false,
    }) {
        Ok(w) => (Some(w), None),
        Err(e) => (None, Some(format!("drop reasons: not watched ({e})"))),
    }
}

/// The inode of this process's network namespace, to keep its own drops.
fn own_netns() -> Option<u32> {
    let l = std::fs::read_link("/proc/self/ns/net").ok()?;
    let s = l.to_string_lossy();
    s.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

pub fn run(a: TopArgs) -> Result<()> {
    if let Some(i) = &a.iface {
        if !std::path::Path::new("/sys/class/net").join(i).exists() {
            return Err(Usage(format!("--iface {i}: no such interface in this namespace")).into());
        }
    }
    let once = a.once || a.json.json || a.json.json_file.is_some();
    if !once && !std::io::stdout().is_terminal() {
        return Err(Usage(
            "top draws on a terminal; stdout is not one (use --once, or --once --json)".into(),
        )
        .into());
    }
    let mut json = a.json.open()?;
    let (watch, note) = drop_watch(a.no_drops);
    let mut sampler = Sampler::new(watch, own_netns());
    sampler.notes.extend(note);
    let view = View {
        port: a.port,
        iface: a.iface.clone(),
        ..View::default()
    };
    if once {
        let first = sampler.read();
        std::thread::sleep(a.interval);
        let second = sampler.read();
        let frame = sampler.frame(&first, &second, &view, a.rows);
        if json.wanted() {
            json.write(&frame)?;
        } else {
            print_frame(&frame);
        }
        return Ok(());
    }
    tui::run(sampler, view, a.interval, a.rows, a.duration)
}

fn print_frame(f: &Frame) {
    for line in text::lines(f) {
        say!("{line}");
    }
}
