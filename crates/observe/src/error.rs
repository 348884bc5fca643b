//! The one error of this crate: what could not be watched, and which permission or kernel
//! feature it needed.

use firehose_sys::SysError;

/// Watching failed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The kernel refused for lack of a privilege; `needs` names it.
    #[error("{what}: {needs}")]
    Permission {
        /// What was refused, with its errno.
        what: String,
        /// The missing permission, e.g. "CAP_BPF and CAP_PERFMON (or root)".
        needs: String,
    },
    /// This kernel lacks what is needed (a tracepoint, a field, BTF).
    #[error("{0}")]
    Unsupported(String),
    /// A kernel call failed for another reason.
    #[error(transparent)]
    Sys(#[from] SysError),
    /// A kernel file did not parse.
    #[error("{0}")]
    Parse(String),
}

/// True for the errnos of a missing privilege.
pub(crate) fn is_permission(e: &SysError) -> bool {
    matches!(e.errno(), Some(libc_eperm) if libc_eperm == 1 || libc_eperm == 13)
}

impl ObserveError {
    /// True when the cause is a missing privilege (a usage problem: exit code 2).
    pub fn is_permission(&self) -> bool {
        matches!(self, ObserveError::Permission { .. })
    }

    /// `e` as a permission error naming `needs` when its errno is EPERM or EACCES.
    pub(crate) fn from_sys(e: SysError, needs: &str) -> Self {
        if is_permission(&e) {
            ObserveError::Permission {
                what: e.to_string(),
                needs: format!("needs {needs}"),
            }
        } else {
            ObserveError::Sys(e)
        }
    }
}
