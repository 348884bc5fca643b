//! The `firehose` binary: parses arguments and hands each subcommand to its module.
//! One module per subcommand: `serve` (`firehose serve`), `load` (`firehose load`), `bench`
//! (`firehose bench`), `doctor` (`firehose doctor`) and `lab` (`firehose lab`, with
//! `lab/dns.rs` for `lab compare --proto dns`), `stream` (`firehose stream`); `metrics` serves `serve --metrics`; `args`
//! holds the value parsers they share and `Usage`, the error for bad input (exit code 2).
//! The work is in the library crates.

/// Prints a line to stdout, ignoring a closed pipe: a server must not die because whoever
/// read its output went away.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

mod args;
mod bench;
mod doctor;
mod flood;
mod lab;
mod load;
mod metrics;
mod serve;
mod serve_xdp;
mod sink;
mod stream;

use clap::{Parser, Subcommand};

/// Serve, generate and measure UDP transactions at line rate.
#[derive(Parser)]
#[command(name = "firehose", version, about, propagate_version = true)]
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve UDP transactions (echo or authoritative DNS) on a multi-core engine.
    Serve(serve::ServeArgs),
    /// Drive a UDP request/response server (echo or DNS) and measure tps, latency and loss.
    Load(load::LoadArgs),
    /// Receive-only packet-rate benchmark: recv, recvfrom, recvmsg, recvmmsg, AF_PACKET.
    Sink(sink::SinkArgs),
    /// Send-only packet-rate generator: sendto, sendmmsg, UDP GSO.
    Flood(flood::FloodArgs),
    /// The engine benchmark: profiles side by side on loopback, and ping-pong vs sockperf.
    Bench(bench::BenchArgs),
    /// Audit the host for high-rate UDP work; apply fixes with a journal and revert them.
    Doctor(doctor::DoctorArgs),
    /// Test hosts, the NTT ladder and peer comparisons, measured, with a report.
    Lab(lab::LabArgs),
    /// Bulk TCP with copy, MSG_ZEROCOPY, sendfile, splice or io_uring; Gbit/s, CPU and ROI.
    Stream(stream::StreamArgs),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(
                e.kind(),
                DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
                    2
                } else {
                    0
                });
            }
            // One line: clap's first paragraph names the argument and what was wrong.
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = first.join(" ");
            eprintln!(
                "firehose: {} (see --help)",
                first.trim_start_matches("error: ")
            );
            std::process::exit(2);
        }
    };
    let res = match cli.command {
        Command::Serve(a) => serve::run(a),
        Command::Load(a) => load::run(a),
        Command::Sink(a) => sink::run(a),
        Command::Flood(a) => flood::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Doctor(a) => doctor::run(a).map(|code| {
            if code != 0 {
                std::process::exit(code)
            }
        }),
        Command::Lab(a) => lab::run(a),
        Command::Stream(a) => stream::run(a),
    };
    if let Err(e) = res {
        let code = if e.downcast_ref::<args::Usage>().is_some() {
            2
        } else {
            1
        };
        eprintln!("firehose: {e:#}");
        std::process::exit(code);
    }
}
