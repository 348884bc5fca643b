//! What the kernel enforces of a ring's IORING_SETUP_* flags, read back from the ring itself
//! and not from what was asked: the ring of another process (or another thread's), found
//! by its file descriptor. For tests and diagnostics of a running server's rings.
//!
//! - SQPOLL: the ring's `/proc/PID/fdinfo/FD` names its submission-queue thread
//!   (`SqThread:`, -1 without one).
//! - SINGLE_ISSUER: the kernel refuses io_uring_register from any task but the one that
//!   created the ring (EEXIST); a harmless IORING_REGISTER_PROBE asks.
//! - DEFER_TASKRUN: the kernel refuses to wait for completions from any task but the
//!   submitter (EEXIST); an io_uring_enter(GETEVENTS) with nothing to wait for asks.
//!
//! The ring is reached through a duplicate of its descriptor (pidfd_getfd, which needs
//! ptrace rights over the process: root, or the parent of a child under Yama's default).
//! The two questions change nothing in the ring: the probe only reads the opcode table and
//! the wait asks for no completion.

use super::uring_err;
use crate::SysResult;
use std::os::fd::{FromRawFd, OwnedFd};

/// A ring's setup flags as the kernel enforces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingFlags {
    /// The submission-queue polling thread's pid, when the ring has one (SQPOLL).
    pub sq_thread: Option<i32>,
    /// Only the creating task may submit or register (SINGLE_ISSUER).
    pub single_issuer: bool,
    /// Completions run only when the submitter waits (DEFER_TASKRUN).
    pub defer_taskrun: bool,
}

/// The io_uring descriptors of process `pid` (those whose link is `anon_inode:[io_uring]`),
/// in ascending order.
pub fn rings_of(pid: u32) -> SysResult<Vec<i32>> {
    let dir = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&dir).map_err(|e| uring_err(format!("read {dir}"), e))?;
    let mut fds: Vec<i32> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            let fd = e.file_name().to_str()?.parse().ok()?;
            (link.as_os_str() == "anon_inode:[io_uring]").then_some(fd)
        })
        .collect();
    fds.sort_unstable();
    Ok(fds)
}

/// Reads back the flags of ring `fd` of process `pid`, asking from the calling thread
/// (which must not be the ring's creator for SINGLE_ISSUER and DEFER_TASKRUN to show).
pub fn read_back(pid: u32, fd: i32) -> SysResult<RingFlags> {
    let info_path = format!("/proc/{pid}/fdinfo/{fd}");
    let info = std::fs::read_to_string(&info_path)
        .map_err(|e| uring_err(format!("read {info_path}"), e))?;
    let sq_thread = info
        .lines()
        .find_map(|l| l.strip_prefix("SqThread:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .ok_or_else(|| {
            uring_err(
                format!("{info_path}: no SqThread line (not an io_uring?)"),
                std::io::Error::from_raw_os_error(libc::EINVAL),
            )
        })?;
    let ring = dup_from(pid, fd)?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&ring);
    // Zeroed, as the kernel requires: a struct io_uring_probe (16 bytes) and room for 32
    // io_uring_probe_op entries (8 bytes each).
    let mut probe = [0u64; 2 + 32];
    // SAFETY: io_uring_register(2) with IORING_REGISTER_PROBE writes at most 16 + 32 * 8
    // bytes into `probe`, which is that large and lives across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            raw,
            IORING_REGISTER_PROBE,
            probe.as_mut_ptr(),
            32u32,
        )
    };
    let single_issuer = refused(r, "io_uring_register(PROBE) from another task")?;
    // SAFETY: io_uring_enter(2) with GETEVENTS, no submission, min_complete 0 and no
    // argument pointer: it reads and writes no user memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            raw,
            0u32,
            0u32,
            IORING_ENTER_GETEVENTS,
            std::ptr::null::<libc::c_void>(),
            0usize,
        )
    };
    let defer_taskrun = refused(r, "io_uring_enter(GETEVENTS) from another task")?;
    Ok(RingFlags {
        sq_thread: (sq_thread > 0).then_some(sq_thread),
        single_issuer,
        defer_taskrun,
    })
}

const IORING_REGISTER_PROBE: libc::c_uint = 8;
const IORING_ENTER_GETEVENTS: libc::c_uint = 1;

/// True when a call from a foreign task was refused with EEXIST (the task check), false
/// when it succeeded, an error for any other failure.
fn refused(r: libc::c_long, what: &str) -> SysResult<bool> {
    if r >= 0 {
        return Ok(false);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EEXIST) {
        Ok(true)
    } else {
        Err(uring_err(what, e))
    }
}

/// A duplicate, in this process, of descriptor `fd` of process `pid`.
fn dup_from(pid: u32, fd: i32) -> SysResult<OwnedFd> {
    let pidfd = crate::pidfd::PidFd::open(pid)?;
    let raw = std::os::fd::AsRawFd::as_raw_fd(&pidfd);
    // SAFETY: pidfd_getfd(2) takes a pidfd, a descriptor number in that process and flags,
    // and returns a new descriptor or -1.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, raw, fd, 0u32) };
    if dup < 0 {
        return Err(uring_err(
            format!("pidfd_getfd({pid}, {fd}) (needs ptrace rights over the process)"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: pidfd_getfd returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(dup as i32) })
}
