//! The `firehose` binary: parses arguments and hands each subcommand to its module.
//! One module per subcommand: `serve` (`firehose serve`), `load` (`firehose load`), `bench`
//! (`firehose bench`), `doctor` (`firehose doctor`) and `lab` (`firehose lab`, with
//! `lab/dns.rs` for `lab compare --proto dns`), `stream` (`firehose stream`), `report`
//! (`firehose report merge`); `metrics` serves `serve --metrics`; `args`
//! holds the value parsers they share and `Usage`, the error for bad input (exit code 2);
//! `meta` the version and the JSON convention; `compat` the old flag spellings. The work
//! is in the library crates.

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
mod compat;
#[cfg(test)]
mod conventions;
mod doctor;
mod drops;
mod flood;
mod io_paths;
mod lab;
mod load;
mod meta;
mod proto;
mod refusal;
mod report;
mod serve;
mod sink;
mod stream;
mod supervise;
mod top;
mod uring_args;
mod xdp_args;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  a failed check or run: doctor found a bad setting, load completed nothing (or lost
     more than --max-loss), a measurement or a change failed
  2  bad usage: an unknown flag or value, a missing file, a setting the kernel refused

Guides: docs/serve.md, load.md, dns.md, doctor.md, lab.md in the source repository.";

/// Serve, generate and measure UDP transactions at line rate.
#[derive(Parser)]
#[command(name = "firehose", about, propagate_version = true)]
#[command(version = meta::VERSION, long_version = meta::LONG_VERSION)]
#[command(args_override_self = true, allow_negative_numbers = true)]
#[command(after_help = EXIT_CODES)]
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
    /// Where packets die: kernel drops by reason, location, port and process, and the
    /// counters beside them (XDP, AF_XDP, softnet, NIC queues).
    Drops(drops::DropsArgs),
    /// Test hosts, the NTT ladder and peer comparisons, measured, with a report.
    Lab(lab::LabArgs),
    /// One refreshing screen: CPUs, softirqs, interfaces and queues, UDP, the busiest
    /// sockets, drop reasons and firehose servers; --once and --json for scripts.
    Top(top::TopArgs),
    /// Bulk TCP with copy, MSG_ZEROCOPY, sendfile, splice or io_uring; Gbit/s, CPU and ROI.
    Stream(stream::StreamArgs),
    /// Work on saved reports: `report merge` adds several agents' `load --json` into one.
    Report(report::ReportArgs),
    /// Print a shell completion script, e.g. `firehose completions bash`.
    #[command(after_help = "EXAMPLES:\n  \
  firehose completions bash > /etc/bash_completion.d/firehose\n  \
  source <(firehose completions bash)")]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum, value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Write the man pages: firehose.1 to stdout, or every page into --dir.
    #[command(after_help = "EXAMPLES:\n  \
  firehose man | man -l -\n  \
  firehose man --dir /usr/local/share/man/man1")]
    Man {
        /// Write firehose.1 and one page per subcommand (firehose-serve.1, ...) here.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `firehose completions SHELL`.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "firehose", &mut out);
    Ok(())
}

/// `firehose man [--dir DIR]`.
fn man(dir: Option<PathBuf>) -> anyhow::Result<()> {
    use anyhow::Context;
    match dir {
        Some(d) => {
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            clap_mangen::generate_to(Cli::command(), &d)
                .with_context(|| format!("writing man pages into {}", d.display()))
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .context("writing the man page")
        }
    }
}

/// One line for a parse error: clap's first paragraph (what was wrong) and its tip (a
/// similar flag or subcommand), if any.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let mut line = first.join(" ").trim_start_matches("error: ").to_string();
    for tip in text.lines().filter_map(|l| l.trim().strip_prefix("tip: ")) {
        line.push_str("; ");
        line.push_str(tip);
    }
    format!("firehose: {line} (see --help)")
}

fn main() {
    let (argv, notes) = compat::rewrite(std::env::args().collect());
    let cli = match Cli::try_parse_from(argv) {
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
            eprintln!("{}", one_line(&e));
            std::process::exit(2);
        }
    };
    for n in notes {
        eprintln!("firehose: note: {n}");
    }
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
        Command::Drops(a) => drops::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Stream(a) => stream::run(a),
        Command::Top(a) => top::run(a),
        Command::Report(a) => report::run(a),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir),
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
