//! The flags of `firehose load --proto ntp` and the workload they make.

use super::{LoadArgs, Proto};
use crate::args::Usage;
use anyhow::Result;
use clap::Args;
use firehose_load::ntp::{NtpLoad, NtpWorkload};
use std::hash::{BuildHasher, Hasher};

/// Options of `--proto ntp`.
#[derive(Debug, Args)]
pub(crate) struct NtpLoadArgs {
    /// NTP version of the requests (1 to 4); a response must carry the same.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=4))]
    ntp_version: Option<u8>,
    /// Requests in interleaved mode (chronyd's `xleave`, version 4): each asks for when the
    /// server's previous answer really left, and answers that say so are measured again
    /// as interleaved_offset, interleaved_delay and interleaved_hold.
    #[arg(long)]
    ntp_interleaved: bool,
}

/// The NTP workload from the flags (refusing them with another protocol).
pub(super) fn ntp_workload(a: &LoadArgs) -> Result<Option<NtpWorkload>> {
    if a.proto != Proto::Ntp {
        if a.ntp.ntp_version.is_some() {
            return Err(Usage("--ntp-version applies only to --proto ntp".into()).into());
        }
        if a.ntp.ntp_interleaved {
            return Err(Usage("--ntp-interleaved applies only to --proto ntp".into()).into());
        }
        return Ok(None);
    }
    let cfg = NtpLoad {
        version: a.ntp.ntp_version.unwrap_or(4),
        warmup_ns: u64::try_from(a.warmup.as_nanos()).unwrap_or(u64::MAX),
        interleaved: a.ntp.ntp_interleaved,
    };
    let seed = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    if cfg.interleaved && cfg.version != 4 {
        return Err(Usage(format!(
            "--ntp-interleaved is NTP version 4's: leave --ntp-version {} out",
            cfg.version
        ))
        .into());
    }
    Ok(Some(NtpWorkload::new(cfg, seed).map_err(Usage)?))
}
