//! The io_uring ring options shared by `sink`, `flood`, `serve` and `load` with `--io uring`.

use crate::args::Usage;
use clap::Args;
use firehose_sys::uring_dgram::UringSetup;

/// IORING_SETUP_* flags of each worker's ring (with `--io uring` only).
#[derive(Debug, Args, Clone, Copy)]
pub struct UringArgs {
    /// io_uring: IORING_SETUP_SQPOLL, a kernel thread polls submissions (idle after 1 s).
    #[arg(long)]
    sqpoll: bool,
    /// io_uring: IORING_SETUP_SINGLE_ISSUER, only the worker's own thread submits.
    #[arg(long)]
    single_issuer: bool,
    /// io_uring: IORING_SETUP_DEFER_TASKRUN, completions run when the worker waits (needs
    /// --single-issuer).
    #[arg(long, requires = "single_issuer")]
    defer_taskrun: bool,
}

impl UringArgs {
    /// The ring setup, refusing the flags when the mode is not io_uring.
    pub fn setup(&self, uring_mode: bool) -> Result<UringSetup, Usage> {
        let any = self.sqpoll || self.single_issuer || self.defer_taskrun;
        if any && !uring_mode {
            return Err(Usage(
                "--sqpoll, --single-issuer and --defer-taskrun apply only to --io uring".into(),
            ));
        }
        Ok(UringSetup {
            sqpoll_idle_ms: self.sqpoll.then_some(1000),
            single_issuer: self.single_issuer,
            defer_taskrun: self.defer_taskrun,
        })
    }
}
