//! Where the lab's own thread runs while trials run. It only waits for its children and
//! reads /proc, but each of its wake-ups takes a CPU from whatever runs there: on a server
//! CPU, from a worker that busy-polls (issue 25: traced, the lab's waits ran on the
//! `latency` profile's worker CPU and preempted it). So while trials run it is confined to
//! the allowed CPUs that are not the server's, and gets its mask back afterwards. Threads it
//! starts meanwhile inherit the mask; children are placed by taskset either way.

use crate::{LabError, LabResult};
use firehose_sys::cpu;

/// The calling thread kept off the server CPUs until dropped.
pub struct OffServer {
    /// The mask to give back; `None` when nothing was changed.
    before: Option<Vec<usize>>,
}

impl OffServer {
    /// Confines the calling thread to its allowed CPUs minus `server`. Nothing changes when
    /// that would leave no CPU (a one-CPU host) or none of `server` is allowed.
    pub fn enter(server: &[usize]) -> LabResult<OffServer> {
        let before = cpu::allowed_cpus().map_err(|e| LabError::Run(e.to_string()))?;
        let rest: Vec<usize> = before
            .iter()
            .copied()
            .filter(|c| !server.contains(c))
            .collect();
        if rest.is_empty() || rest.len() == before.len() {
            return Ok(OffServer { before: None });
        }
        cpu::confine_current_thread(&rest).map_err(|e| LabError::Run(e.to_string()))?;
        Ok(OffServer {
            before: Some(before),
        })
    }
}

impl Drop for OffServer {
    fn drop(&mut self) {
        if let Some(b) = self.before.take() {
            // The CPUs were allowed a moment ago; a failure leaves the thread confined,
            // which only narrows where the lab's own waits run.
            let _ = cpu::confine_current_thread(&b);
        }
    }
}
