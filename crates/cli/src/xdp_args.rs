//! The AF_XDP flags shared by `serve`, `load`, `sink` and `flood` (`--iface`, `--queues`, `--xdp-mode`,
//! the socket and ring flags), serve's `--io` and `--profile xdp`.

use crate::args::Usage;
use clap::Args;
use firehose_engine::{ModeChoice, Queues, ServeConfig, XdpConfig, ZeroCopy};
use firehose_sys::xdp::setup::{self, XdpOptions};
use firehose_sys::xdp::xsk::XskConfig;

/// `--xdp-mode`'s values (auto when absent); shared with `load --io xdp`.
pub fn xdp_mode_parser() -> impl clap::builder::TypedValueParser<Value = ModeChoice> {
    crate::args::choice(ModeChoice::ALL, ModeChoice::name)
}

/// `--zerocopy`'s values (auto when absent); shared with `load --io xdp`.
pub fn zerocopy_parser() -> impl clap::builder::TypedValueParser<Value = ZeroCopy> {
    crate::args::choice(ZeroCopy::ALL, ZeroCopy::name)
}

/// Flags that apply only with `--io xdp`.
#[derive(Debug, Args)]
pub struct XdpArgs {
    #[command(flatten)]
    pub rx: XdpRxArgs,
    /// With --io xdp: verify each request's IPv4 header and UDP checksums and drop (and
    /// count, xdp_bad_checksum) a frame whose checksum is wrong, as the kernel does on the
    /// socket path. A sender whose checksum offload is not done yet when the frame reaches
    /// XDP (a kernel socket on a veth peer) fails it: turn its offload off (ethtool -K tx off).
    #[arg(long)]
    pub verify_checksum: bool,
}

/// The AF_XDP socket flags, shared by serve, sink and flood.
#[derive(Debug, Args)]
pub struct XskArgs {
    /// AF_XDP zero-copy: probe (auto), insist (on), or never (off).
    #[arg(long, value_parser = zerocopy_parser())]
    zerocopy: Option<ZeroCopy>,
    /// Entries per AF_XDP ring (fill, completion, rx, tx): a power of two [default: 2048].
    #[arg(long)]
    ring: Option<u32>,
    /// UMEM frame size, 2048 or 4096 [default: 4096].
    #[arg(long)]
    frame_size: Option<u32>,
    /// XDP_USE_NEED_WAKEUP: enter the kernel only when a ring asks [default: on].
    #[arg(long, value_name = "on|off", value_parser = crate::serve::parse_on_off)]
    need_wakeup: Option<bool>,
}

impl XskArgs {
    /// The first of these flags given, by name.
    pub fn any_given(&self) -> Option<&'static str> {
        [
            (self.zerocopy.is_some(), "--zerocopy"),
            (self.ring.is_some(), "--ring"),
            (self.frame_size.is_some(), "--frame-size"),
            (self.need_wakeup.is_some(), "--need-wakeup"),
        ]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, name)| name)
    }

    /// The socket configuration, with UMEM frames for twice the ring.
    pub fn config(&self) -> Result<XskConfig, Usage> {
        let frame_size = self.frame_size.unwrap_or(4096);
        if !firehose_sys::xdp::umem::FRAME_SIZES.contains(&frame_size) {
            return Err(Usage(format!(
                "--frame-size {frame_size}: use 2048 or 4096"
            )));
        }
        let ring = self.ring.unwrap_or(2048);
        setup::check_ring(ring).map_err(|e| Usage(crate::refusal::text(&e, None)))?;
        Ok(XskConfig {
            ring,
            frame_size,
            frames: ring * 2,
            zerocopy: self.zerocopy.unwrap_or(ZeroCopy::Auto),
            need_wakeup: self.need_wakeup.unwrap_or(true),
        })
    }
}

/// The AF_XDP receive flags (interface, queues, program), shared by serve and sink.
#[derive(Debug, Args)]
pub struct XdpRxArgs {
    /// Interface for --io xdp (serve: the --listen address must be one of its own; sink:
    /// also --io packet, default the one holding --listen's address).
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    /// Rx queues for --io xdp: all, or a list like 0,2-3 (one worker each).
    #[arg(long)]
    queues: Option<String>,
    /// Where the XDP program runs: in the driver (native), on the skb path (generic), or
    /// native where the driver has it (auto).
    #[arg(long, value_parser = xdp_mode_parser())]
    xdp_mode: Option<ModeChoice>,
    /// SO_BUSY_POLL_BUDGET for the AF_XDP sockets when --busy-poll is set [default: --batch].
    #[arg(long)]
    busy_poll_budget: Option<i32>,
    /// Replace a foreign XDP program already attached to --iface.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    pub xsk: XskArgs,
}

impl XdpRxArgs {
    /// The first xdp-only flag given (--iface included), by name.
    pub fn any_given(&self) -> Option<&'static str> {
        [
            (self.iface.is_some(), "--iface"),
            (self.queues.is_some(), "--queues"),
            (self.xdp_mode.is_some(), "--xdp-mode"),
            (self.busy_poll_budget.is_some(), "--busy-poll-budget"),
            (self.force, "--force"),
        ]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, name)| name)
        .or_else(|| self.xsk.any_given())
    }

    /// With `--io xdp` one worker serves each queue, so `--workers N` means queues 0..N-1
    /// (in `o`); giving both is refused.
    pub fn workers_as_queues(
        &self,
        o: &mut XdpOptions,
        workers: Option<usize>,
    ) -> Result<(), Usage> {
        match (workers, self.queues.is_some()) {
            (Some(_), true) => Err(Usage(
                "--io xdp: give --queues or --workers, not both (one worker per queue)".into(),
            )),
            (Some(n), false) => {
                o.queues = Queues::List((0..n as u32).collect());
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The receive options: queues, attach mode, sockets, and busy polling from
    /// `busy_poll_us` (serve's and sink's --busy-poll) with --busy-poll-budget or `batch`.
    pub fn options(&self, busy_poll_us: Option<usize>, batch: usize) -> Result<XdpOptions, Usage> {
        if self.busy_poll_budget.is_some() && busy_poll_us.is_none() {
            return Err(Usage("--busy-poll-budget needs --busy-poll USEC".into()));
        }
        Ok(XdpOptions {
            queues: match &self.queues {
                Some(q) => parse_queues(q)?,
                None => Queues::All,
            },
            mode: self.xdp_mode.unwrap_or(ModeChoice::Auto),
            xsk: self.xsk.config()?,
            busy_poll: busy_poll_us.map(|us| {
                (
                    us.min(i32::MAX as usize) as i32,
                    self.busy_poll_budget.unwrap_or(batch as i32),
                )
            }),
            force: self.force,
        })
    }
}

/// `--profile xdp`: the tuned socket settings for the fallback socket, AF_XDP batches of 64
/// over rings of 2048 with need_wakeup, workers pinned one per queue.
pub const PROFILE_XDP: &str = "xdp";

fn parse_queues(s: &str) -> Result<Queues, Usage> {
    if s == "all" {
        return Ok(Queues::All);
    }
    // The same syntax as a CPU list: 0,2-3.
    let set = firehose_sys::cpu::CpuSet::parse_list(s).map_err(|e| {
        Usage(format!(
            "--queues: {}",
            e.to_string().replace("CPU", "queue")
        ))
    })?;
    if set.is_empty() {
        return Err(Usage(format!(
            "--queues '{s}' names no queue (all, or a list such as 0,2-3)"
        )));
    }
    let cpus = set.to_vec();
    Ok(Queues::List(cpus.into_iter().map(|q| q as u32).collect()))
}

impl XdpArgs {
    /// The AF_XDP configuration of `serve --io xdp`. `workers` is `--workers` as given: with
    /// `--io xdp` it names queues 0..N-1.
    pub fn config(&self, cfg: &ServeConfig, workers: Option<usize>) -> Result<XdpConfig, Usage> {
        let Some(iface) = self.rx.iface.clone() else {
            return Err(Usage(
                "--io xdp needs --iface IFACE (the interface whose queues to serve)".into(),
            ));
        };
        let mut o = self
            .rx
            .options(cfg.busy_poll.map(|us| us as usize), cfg.batch)?;
        self.rx.workers_as_queues(&mut o, workers)?;
        Ok(XdpConfig {
            iface,
            options: o,
            batch: cfg.batch,
            verify_checksum: self.verify_checksum,
            rx_timestamps: cfg.rx_timestamps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        rx: XdpRxArgs,
    }

    fn rx(args: &[&str]) -> XdpRxArgs {
        use clap::Parser;
        Wrap::parse_from([&["t"], args].concat()).rx
    }

    #[test]
    fn receive_options_from_the_shared_flags() {
        let o = rx(&["--queues", "1", "--xdp-mode", "generic", "--ring", "512"])
            .options(Some(50), 32)
            .unwrap();
        assert_eq!(o.queues, Queues::List(vec![1]));
        assert_eq!(o.mode, ModeChoice::Generic);
        assert_eq!(
            (o.xsk.ring, o.xsk.frames, o.xsk.frame_size),
            (512, 1024, 4096)
        );
        assert_eq!(o.busy_poll, Some((50, 32)));
        assert_eq!(rx(&[]).options(None, 64).unwrap(), XdpOptions::default());
        let e = rx(&["--busy-poll-budget", "8"])
            .options(None, 64)
            .unwrap_err();
        assert!(e.0.contains("--busy-poll"), "{}", e.0);
        let e = rx(&["--frame-size", "1000"]).options(None, 64).unwrap_err();
        assert!(e.0.contains("2048 or 4096"), "{}", e.0);
        let e = rx(&["--ring", "100"]).options(None, 64).unwrap_err();
        assert!(e.0.contains("power of two"), "{}", e.0);
        assert_eq!(rx(&["--force"]).any_given(), Some("--force"));
        assert_eq!(rx(&["--zerocopy", "off"]).any_given(), Some("--zerocopy"));
        assert_eq!(rx(&[]).any_given(), None);
    }

    #[test]
    fn with_xdp_workers_n_means_queues_0_to_n_minus_1_and_not_with_queues() {
        let mut o = rx(&[]).options(None, 64).unwrap();
        rx(&[]).workers_as_queues(&mut o, Some(1)).unwrap();
        assert_eq!(o.queues, Queues::List(vec![0]));
        rx(&[]).workers_as_queues(&mut o, Some(3)).unwrap();
        assert_eq!(o.queues, Queues::List(vec![0, 1, 2]));
        let e = rx(&["--queues", "1"])
            .workers_as_queues(&mut o, Some(1))
            .unwrap_err();
        assert!(e.0.contains("not both"), "{}", e.0);
        let mut o = rx(&["--queues", "1"]).options(None, 64).unwrap();
        rx(&["--queues", "1"])
            .workers_as_queues(&mut o, None)
            .unwrap();
        assert_eq!(o.queues, Queues::List(vec![1]));
    }

    #[test]
    fn queue_lists() {
        assert_eq!(parse_queues("all").unwrap(), Queues::All);
        assert_eq!(parse_queues("0,2-3").unwrap(), Queues::List(vec![0, 2, 3]));
        assert!(parse_queues("x").unwrap_err().0.contains("queue"));
    }
}
