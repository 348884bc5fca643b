//! Resource limits (getrlimit(2), setrlimit(2)): a program or test that holds many
//! descriptors at once raises its soft limit to what it needs first, or says why it cannot.

use crate::{cvt, SysResult};

/// The soft and hard limits on open files (RLIMIT_NOFILE).
pub fn open_files() -> SysResult<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through the pointer, which lives across the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    cvt(rc, || "getrlimit(RLIMIT_NOFILE)".into())?;
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raises the soft limit on open files to `want` when it is lower (never above the hard
/// limit, which an unprivileged process cannot raise); returns the soft limit in force.
/// Children started afterwards inherit it.
pub fn raise_open_files(want: u64) -> SysResult<u64> {
    let (soft, hard) = open_files()?;
    if soft >= want {
        return Ok(soft);
    }
    let r = libc::rlimit {
        rlim_cur: want.min(hard),
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit through the pointer, which lives across the call.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    cvt(rc, || format!("setrlimit(RLIMIT_NOFILE, {})", r.rlim_cur))?;
    Ok(want.min(hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_what_is_asked_within_the_hard_one() {
        let (soft, hard) = open_files().unwrap();
        assert!(soft <= hard);
        assert_eq!(raise_open_files(soft).unwrap(), soft, "never lowered");
        let want = (soft + 16).min(hard);
        assert_eq!(raise_open_files(want).unwrap(), want);
        assert_eq!(open_files().unwrap().0, want);
    }
}
