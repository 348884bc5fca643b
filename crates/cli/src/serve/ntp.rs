//! Starting `serve --proto ntp`: the clock state from the flags and the kernel, refused
//! when the clock is not synchronised and nothing allows it, and a handler per worker.

use super::args::{NtpArgs, Proto};
use super::start::{serve_error, Running};
use crate::args::Usage;
use crate::io_paths::{Handlers, IoPath, ServeOn};
use anyhow::Result;
use firehose_engine::{ServeConfig, SocketMode};
use firehose_ntpwire::{RefId, Short};
use firehose_proto::ntp::state::measure_precision;
use firehose_proto::ntp::{
    ClockConfig, ClockWatch, Interleave, NtpOptions, StateError, StateSource,
};
use std::sync::Arc;

/// Refuses the NTP flags with another protocol.
pub(super) fn refuse_ntp_flags(n: &NtpArgs, proto: Proto) -> Result<()> {
    if proto == Proto::Ntp {
        return Ok(());
    }
    let given = [
        (n.ntp_refid.is_some(), "--ntp-refid"),
        (n.ntp_root_delay.is_some(), "--ntp-root-delay"),
        (n.ntp_root_dispersion.is_some(), "--ntp-root-dispersion"),
        (n.ntp_local_stratum.is_some(), "--ntp-local-stratum"),
        (n.allow_unsynchronised, "--allow-unsynchronised"),
        (n.ntp_ratelimit.is_some(), "--ntp-ratelimit"),
    ];
    if let Some((_, flag)) = given.iter().find(|(g, _)| *g) {
        return Err(Usage(format!("{flag} applies only to --proto ntp")).into());
    }
    Ok(())
}

fn short(d: Option<std::time::Duration>) -> Option<Short> {
    d.map(|d| Short::from_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
}

/// Reads the clock state and starts the engine with an NTP handler per worker. A path
/// that stamps arrivals in the kernel ([`IoPath::rx_timestamps`]) hands the stamp over;
/// on the others the handler reads the clock first thing (counted apart).
pub(super) fn start_ntp(
    cfg: &ServeConfig,
    n: &NtpArgs,
    io: &IoPath,
    mut on: ServeOn,
) -> Result<Running> {
    if n.allow_unsynchronised && n.ntp_local_stratum.is_some() {
        return Err(Usage(
            "--allow-unsynchronised announces an unsynchronised clock and --ntp-local-stratum serves it as synchronised: pass one".into(),
        )
        .into());
    }
    let clock = ClockConfig {
        stratum: n.ntp_stratum,
        refid: n.ntp_refid.unwrap_or(RefId(0)),
        root_delay: short(n.ntp_root_delay),
        root_dispersion: short(n.ntp_root_dispersion),
        local_stratum: n.ntp_local_stratum,
        allow_unsynchronised: n.allow_unsynchronised,
    };
    let watch = ClockWatch::start(clock).map_err(|e| match e {
        StateError::Unsynchronised { .. } => anyhow::Error::from(Usage(e.to_string())),
        StateError::Kernel(_) => anyhow::anyhow!("{e}"),
    })?;
    let opts = NtpOptions {
        precision: measure_precision(),
        ratelimit: n.ntp_ratelimit,
        ratelimit_sources: n.ntp_ratelimit_sources,
        // cfg.tx_timestamps was set with the path and the sockets (ServeArgs::config).
        interleaved: cfg
            .tx_timestamps
            .then(|| Arc::new(Interleave::new(n.ntp_interleaved_entries))),
    };
    let st = watch.state();
    let mut notes = vec![format!(
        "  ntp: {} — leap {}, stratum {}, refid {}, root delay {:.6} s, root dispersion {:.6} s{}, precision 2^{} s",
        match st.source {
            StateSource::Kernel => "kernel clock synchronised",
            StateSource::Unsynchronised => "kernel clock NOT synchronised, announced as such",
            StateSource::Local => "kernel clock not synchronised, served as a local stratum",
        },
        st.leap.name(),
        st.stratum,
        st.refid.display(st.stratum),
        st.root_delay.to_secs(),
        st.root_dispersion.to_secs(),
        if st.source == StateSource::Kernel && n.ntp_root_dispersion.is_none() {
            " (kernel maxerror)"
        } else {
            ""
        },
        opts.precision,
    )];
    notes.push(format!(
        "  ntp: receive timestamps {}; rate limit {}",
        match io.rx_timestamps {
            Some(by) => format!("stamped in the kernel by {by}"),
            None => "read by the handler (this I/O path gives no kernel arrival stamp)".into(),
        },
        match n.ntp_ratelimit {
            None => "off".to_string(),
            Some(r) => format!(
                "interval 2^{} s, burst {}, leak 1/{}, kod {} ({} sources per worker)",
                r.interval,
                r.burst,
                1u32 << r.leak,
                if r.kod == 0 {
                    "none".to_string()
                } else {
                    format!("1/{}", 1u32 << r.kod)
                },
                n.ntp_ratelimit_sources
            ),
        }
    ));
    notes.push(format!(
        "  ntp: interleaved mode {}",
        match (&opts.interleaved, io.tx_timestamps) {
            (Some(t), Some(by)) => format!(
                "on: transmit stamps from {by}; {} responses remembered",
                t.capacity()
            ),
            _ if n.ntp_interleaved_entries == 0 => "off (--ntp-interleaved-entries 0)".into(),
            (_, None) => format!(
                "off: the {} path gives no transmit stamps; every answer is basic",
                io.name
            ),
            (None, Some(_)) if cfg.sockets == SocketMode::Shared && cfg.workers > 1 => format!(
                "off: {} workers share one socket, whose transmit stamps none of them could tell apart; every answer is basic (--sockets reuseport)",
                cfg.workers
            ),
            (None, Some(_)) => format!(
                "off: the kernel refused the {} path's transmit stamps (the backend's note says how); every answer is basic",
                io.name
            ),
        }
    ));
    // cfg.rx_timestamps was set with the path (ServeArgs::config).
    let server = on
        .start(cfg, &Handlers::Ntp(watch.live(), opts.clone()))
        .map_err(serve_error)?;
    Ok(Running {
        server,
        tcp: None,
        reloader: None,
        notes,
        clock: Some(watch),
    })
}
