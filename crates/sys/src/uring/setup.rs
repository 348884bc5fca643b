//! What a ring is asked to be ([`UringSetup`]: the IORING_SETUP_* flags) and what the kernel
//! offers ([`UringSupport`]: kernel.io_uring_disabled, io_uring_setup itself, the opcode
//! probe). A refusal carries its errno.

use super::uring_err;
use crate::{SysError, SysResult};
use io_uring::{opcode, IoUring, Probe};

/// IORING_SETUP_* options of a ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UringSetup {
    /// IORING_SETUP_SQPOLL with this idle time in milliseconds: a kernel thread polls the
    /// submission queue, so submitting needs no system call while it is awake.
    pub sqpoll_idle_ms: Option<u32>,
    /// IORING_SETUP_SINGLE_ISSUER: only the creating thread submits.
    pub single_issuer: bool,
    /// IORING_SETUP_DEFER_TASKRUN: completions are run only when the thread waits for them.
    pub defer_taskrun: bool,
}

impl UringSetup {
    /// The flags as the kernel names them, e.g. "SQPOLL|SINGLE_ISSUER", or "none".
    pub fn flags(&self) -> String {
        let mut f = Vec::new();
        if self.sqpoll_idle_ms.is_some() {
            f.push("SQPOLL");
        }
        if self.single_issuer {
            f.push("SINGLE_ISSUER");
        }
        if self.defer_taskrun {
            f.push("DEFER_TASKRUN");
        }
        if f.is_empty() {
            "none".into()
        } else {
            f.join("|")
        }
    }

    /// A ring of `entries` with these flags, or the refusal with its errno (and the sysctl
    /// kernel.io_uring_disabled when it is set).
    pub fn build(&self, entries: u32) -> SysResult<IoUring> {
        let mut b = IoUring::builder();
        if let Some(ms) = self.sqpoll_idle_ms {
            b.setup_sqpoll(ms);
        }
        if self.single_issuer {
            b.setup_single_issuer();
        }
        if self.defer_taskrun {
            b.setup_defer_taskrun();
        }
        b.build(entries).map_err(|e| {
            let sysctl = disabled_sysctl()
                .filter(|&v| v != 0)
                .map(|v| format!(", kernel.io_uring_disabled={v}"))
                .unwrap_or_default();
            uring_err(format!("io_uring_setup(flags {}{sysctl})", self.flags()), e)
        })
    }

    /// Checks on the calling thread, before any worker starts, that this kernel has
    /// opcode `op` and gives a ring with these flags: a refusal (the sysctl, SQPOLL without
    /// privilege, DEFER_TASKRUN without SINGLE_ISSUER) stops a run before it begins.
    pub fn check(&self, op: &str) -> SysResult<()> {
        UringSupport::probe().require(op)?;
        drop(self.build(4)?);
        Ok(())
    }

    /// Whether the submissions of a ring with these flags may need no system call.
    pub(crate) fn sqpoll(&self) -> bool {
        self.sqpoll_idle_ms.is_some()
    }
}

/// kernel.io_uring_disabled (0 allowed, 1 only for a group, 2 disabled), if readable.
fn disabled_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// What this kernel offers of io_uring, for the modes that need it.
#[derive(Debug)]
pub struct UringSupport {
    /// kernel.io_uring_disabled (0 allowed, 1 only for a group, 2 disabled), if readable.
    pub disabled_sysctl: Option<u32>,
    /// Why io_uring_setup failed, if it did.
    pub setup_error: Option<SysError>,
    pub send: bool,
    pub send_zc: bool,
    pub recv: bool,
    pub recvmsg: bool,
}

impl UringSupport {
    /// Probes the kernel once.
    pub fn probe() -> UringSupport {
        let mut out = UringSupport {
            disabled_sysctl: disabled_sysctl(),
            setup_error: None,
            send: false,
            send_zc: false,
            recv: false,
            recvmsg: false,
        };
        let ring: IoUring = match IoUring::new(4) {
            Ok(r) => r,
            Err(e) => {
                out.setup_error = Some(uring_err("io_uring_setup", e));
                return out;
            }
        };
        let mut probe = Probe::new();
        if let Err(e) = ring.submitter().register_probe(&mut probe) {
            out.setup_error = Some(uring_err("io_uring_register(PROBE)", e));
            return out;
        }
        out.send = probe.is_supported(opcode::Send::CODE);
        out.send_zc = probe.is_supported(opcode::SendZc::CODE);
        out.recv = probe.is_supported(opcode::Recv::CODE);
        out.recvmsg = probe.is_supported(opcode::RecvMsg::CODE);
        out
    }

    /// Ok when `op` can be used, else the reason with an errno.
    pub fn require(&self, op: &str) -> SysResult<()> {
        if let Some(e) = &self.setup_error {
            let sysctl = match self.disabled_sysctl {
                Some(v) if v != 0 => format!(" (kernel.io_uring_disabled={v})"),
                _ => String::new(),
            };
            return Err(uring_err(
                format!("{}{sysctl}", e.what),
                std::io::Error::from_raw_os_error(e.errno().unwrap_or(libc::ENOSYS)),
            ));
        }
        let ok = match op {
            "send" => self.send,
            "send_zc" => self.send_zc,
            "recv" => self.recv,
            "recvmsg" => self.recvmsg,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(uring_err(
                format!("io_uring opcode probe: {op} not supported by this kernel"),
                std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            ))
        }
    }
}
