//! Where workers run: CPUs resolved against the allowed set and ordered for steering.

use crate::config::{Pin, ServeConfig};
use firehose_sys::{cpu, Setting, SetupError, Usage};

pub(crate) fn resolve_cpus(cfg: &ServeConfig) -> Result<Vec<Option<usize>>, SetupError> {
    let allowed = cpu::allowed_cpus()?;
    let list = match &cfg.pin {
        Pin::None => return Ok(vec![None; cfg.workers]),
        Pin::Auto => {
            if cfg.workers > allowed.len() {
                let cpus = Setting::Cpus.r();
                return Err(Usage::new(
                    Setting::Cpus,
                    format!(
                        "{cpus} auto needs a CPU per worker: {} workers but only {} allowed CPUs ({:?}); lower {} or use {cpus} none",
                        cfg.workers,
                        allowed.len(),
                        allowed,
                        Setting::Workers.r()
                    ),
                )
                .into());
            }
            allowed[..cfg.workers].to_vec()
        }
        Pin::List(l) => {
            if l.len() < cfg.workers {
                return Err(Usage::new(
                    Setting::Cpus,
                    format!(
                        "{} lists {} CPUs for {} workers; give one CPU per worker",
                        Setting::Cpus.r(),
                        l.len(),
                        cfg.workers
                    ),
                )
                .into());
            }
            for c in l {
                if !allowed.contains(c) {
                    return Err(Usage::new(
                        Setting::Cpus,
                        format!(
                            "CPU {c} in {} does not exist or is not allowed for this process (allowed: {allowed:?})",
                            Setting::Cpus.r()
                        ),
                    )
                    .into());
                }
            }
            l[..cfg.workers].to_vec()
        }
    };
    Ok(list.into_iter().map(Some).collect())
}

/// Orders workers so that socket `j` (bind order) is read by the worker pinned to a CPU
/// `c` with `c % n == j`: the steering program sends a packet received on CPU `c` to
/// socket `c % n`, so each packet is read on the CPU that received it.
pub(crate) fn order_for_steering(cpus: &[Option<usize>]) -> Result<Vec<Option<usize>>, SetupError> {
    let n = cpus.len();
    if cpus.iter().any(|c| c.is_none()) {
        return Ok(cpus.to_vec());
    }
    let mut ordered = vec![None; n];
    for c in cpus.iter().flatten() {
        let j = c % n;
        if ordered[j].is_some() {
            return Err(Usage::new(
                Setting::Cpus,
                format!(
                    "CPU steering maps CPU c to socket c % workers, so pinned CPUs must differ modulo {n}; {:?} do not (choose CPUs such as 0-{})",
                    cpus.iter().flatten().collect::<Vec<_>>(),
                    n - 1
                ),
            )
            .into());
        }
        ordered[j] = Some(*c);
    }
    Ok(ordered)
}
