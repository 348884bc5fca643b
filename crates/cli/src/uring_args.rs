//! The io_uring ring options shared by `sink`, `flood`, `serve` and `load` with `--io uring`.

use crate::args::Usage;
use clap::Args;
use firehose_sys::uring::UringSetup;

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
    /// The ring setup for a mode that is io_uring (`uring_mode`), else the refusal of
    /// these flags (sink's and flood's modes; serve and load refuse through their path
    /// table).
    pub fn setup(&self, uring_mode: bool) -> Result<UringSetup, Usage> {
        match self.refusal() {
            Some(m) if !uring_mode => Err(Usage(m)),
            _ => Ok(self.ring()),
        }
    }

    /// The ring setup of `--io uring`.
    pub fn ring(&self) -> UringSetup {
        UringSetup {
            sqpoll_idle_ms: self.sqpoll.then_some(1000),
            single_issuer: self.single_issuer,
            defer_taskrun: self.defer_taskrun,
        }
    }

    /// The refusal of these flags under another `--io` path, when any was given.
    pub fn refusal(&self) -> Option<String> {
        (self.sqpoll || self.single_issuer || self.defer_taskrun).then(|| {
            "--sqpoll, --single-issuer and --defer-taskrun apply only to --io uring".into()
        })
    }
}

/// The fix for an io_uring refusal, by what was refused and the errno's name; `None` when
/// the refusal is not io_uring's.
pub fn uring_hint(what: &str, errno: Option<&str>) -> Option<&'static str> {
    if !what.contains("io_uring") && !what.contains("IORING") {
        return None;
    }
    Some(match errno {
        Some("EPERM") | Some("EACCES") if what.contains("SQPOLL") => {
            " — io_uring is restricted here (SQPOLL may need root, or kernel.io_uring_disabled \
             is set): drop --sqpoll, run as root, or use --io socket"
        }
        Some("EPERM") | Some("EACCES") => {
            " — io_uring is disabled or restricted: set the sysctl kernel.io_uring_disabled=0 \
             (with 1, only root or the kernel.io_uring_group may use it), or use --io socket"
        }
        Some("ENOSYS") => " — this kernel has no io_uring; use --io socket",
        Some("EINVAL") | Some("EOPNOTSUPP") => {
            " — this kernel lacks what --io uring needs (multishot RECVMSG and provided-buffer \
             rings, Linux 6.0+) or these --sqpoll/--single-issuer/--defer-taskrun flags; \
             use --io socket"
        }
        _ => " — use --io socket",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_sys::SysError;

    /// `errno` as a raw number (EPERM 1, EINVAL 22, ENOSYS 38): the CLI has no libc.
    fn refused(what: &str, errno: i32) -> String {
        let k = SysError {
            what: what.into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        crate::refusal::setup_error(k.into(), None).to_string()
    }

    #[test]
    fn each_refusal_names_the_errno_and_the_fix() {
        let m = refused("io_uring_setup(flags none, kernel.io_uring_disabled=2)", 1);
        assert!(
            m.contains("io_uring_disabled=2") && m.contains("EPERM"),
            "{m}"
        );
        assert!(m.contains("sysctl kernel.io_uring_disabled=0"), "{m}");
        assert!(m.contains("--io socket") && !m.contains('\n'), "{m}");
        let m = refused("io_uring_setup(flags SQPOLL)", 1);
        assert!(m.contains("drop --sqpoll"), "{m}");
        let m = refused("IORING_OP_RECVMSG multishot (needs Linux 6.0+)", 22);
        assert!(m.contains("EINVAL") && m.contains("Linux 6.0+"), "{m}");
        let m = refused("io_uring_setup(flags none)", 38);
        assert!(m.contains("no io_uring"), "{m}");
        assert_eq!(uring_hint("bind", Some("EADDRINUSE")), None);
    }
}
