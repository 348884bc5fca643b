//! Where workers run: CPUs resolved against the allowed set and ordered for steering.

use crate::config::{Pin, ServeConfig};
use crate::server::ServeError;
use firehose_sys::cpu;

pub(crate) fn resolve_cpus(cfg: &ServeConfig) -> Result<Vec<Option<usize>>, ServeError> {
    let allowed = cpu::allowed_cpus()?;
    let list = match &cfg.pin {
        Pin::None => return Ok(vec![None; cfg.workers]),
        Pin::Auto => {
            if cfg.workers > allowed.len() {
                return Err(ServeError::Config(format!(
                    "--cpus auto needs a CPU per worker: {} workers but only {} allowed CPUs ({:?}); lower --workers or use --cpus none",
                    cfg.workers,
                    allowed.len(),
                    allowed
                )));
            }
            allowed[..cfg.workers].to_vec()
        }
        Pin::List(l) => {
            if l.len() < cfg.workers {
                return Err(ServeError::Config(format!(
                    "--cpus lists {} CPUs for {} workers; give one CPU per worker",
                    l.len(),
                    cfg.workers
                )));
            }
            for c in l {
                if !allowed.contains(c) {
                    return Err(ServeError::Config(format!(
                        "CPU {c} in --cpus does not exist or is not allowed for this process (allowed: {allowed:?})"
                    )));
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
pub(crate) fn order_for_steering(cpus: &[Option<usize>]) -> Result<Vec<Option<usize>>, ServeError> {
    let n = cpus.len();
    if cpus.iter().any(|c| c.is_none()) {
        return Ok(cpus.to_vec());
    }
    let mut ordered = vec![None; n];
    for c in cpus.iter().flatten() {
        let j = c % n;
        if ordered[j].is_some() {
            return Err(ServeError::Config(format!(
                "CPU steering maps CPU c to socket c % workers, so pinned CPUs must differ modulo {n}; {:?} do not (choose CPUs such as 0-{})",
                cpus.iter().flatten().collect::<Vec<_>>(),
                n - 1
            )));
        }
        ordered[j] = Some(*c);
    }
    Ok(ordered)
}
