//! Tracepoints: tracefs ([`tracefs`]), perf events on a tracepoint and their sampling rings
//! ([`perf`]), and BPF programs that count a tracepoint's hits ([`prog`], assembled by
//! [`asm`]). What `firehose drops` is built on.
//!
//! Contract: a caller reads a tracepoint's `format` and `id` through [`tracefs::TraceFs`],
//! builds a program from the format's offsets, loads it with [`load`], and attaches it with
//! [`perf::attach_tracepoint`]; it then reads the maps the program counts into. Where BPF is
//! refused, it opens a [`perf::PerfRing`] per CPU and decodes the raw records itself. Every
//! object is held by an fd: when the process ends, however it ends, nothing stays attached.

mod asm;
pub mod perf;
pub mod prog;
pub mod tracefs;

use crate::bpf::{bpf_call, prog_load, Insn};
use crate::SysResult;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_ENABLE_STATS: i32 = 32;

/// A loaded tracepoint program (not yet attached).
#[derive(Debug)]
pub struct TraceProg {
    fd: OwnedFd,
}

impl AsRawFd for TraceProg {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Loads `insns` as a BPF_PROG_TYPE_TRACEPOINT program named `name` (cut to 15 bytes).
pub fn load(insns: &[Insn], name: &str) -> SysResult<TraceProg> {
    let fd = prog_load(BPF_PROG_TYPE_TRACEPOINT, 0, insns, name, "tracepoint")?;
    Ok(TraceProg { fd })
}

/// What the kernel knows of a program's runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgStats {
    /// The kernel's id for the program.
    pub id: u32,
    /// Runs, counted while statistics are enabled ([`enable_stats`]).
    pub run_cnt: u64,
    /// Nanoseconds spent in the program over those runs.
    pub run_time_ns: u64,
    /// Hits the kernel skipped because a BPF program was already running on that CPU.
    pub recursion_misses: u64,
}

impl TraceProg {
    /// The program's id and run statistics (BPF_OBJ_GET_INFO_BY_FD).
    pub fn stats(&self) -> SysResult<ProgStats> {
        #[repr(C)]
        struct InfoAttr {
            bpf_fd: u32,
            info_len: u32,
            info: u64,
        }
        // struct bpf_prog_info up to recursion_misses (offset 208) and one more u64.
        let mut info = [0u8; 232];
        let mut attr = InfoAttr {
            bpf_fd: self.fd.as_raw_fd() as u32,
            info_len: std::mem::size_of_val(&info) as u32,
            info: info.as_mut_ptr() as u64,
        };
        bpf_call(BPF_OBJ_GET_INFO_BY_FD, &mut attr, || {
            "bpf(BPF_OBJ_GET_INFO_BY_FD)".into()
        })?;
        let u64_at = |o: usize| u64::from_ne_bytes(info[o..o + 8].try_into().unwrap());
        Ok(ProgStats {
            id: u32::from_ne_bytes([info[4], info[5], info[6], info[7]]),
            run_time_ns: u64_at(192),
            run_cnt: u64_at(200),
            recursion_misses: u64_at(208),
        })
    }
}

/// BPF run-time statistics, enabled for every program while this value lives
/// (BPF_ENABLE_STATS: no sysctl is changed, and the kernel drops it with the fd).
#[derive(Debug)]
pub struct StatsEnabled {
    _fd: OwnedFd,
}

/// Turns on run counts and run time for BPF programs until the result is dropped.
pub fn enable_stats() -> SysResult<StatsEnabled> {
    #[repr(C)]
    struct Attr {
        kind: u32,
    }
    let mut attr = Attr { kind: 0 };
    let fd = bpf_call(BPF_ENABLE_STATS, &mut attr, || {
        "bpf(BPF_ENABLE_STATS, BPF_STATS_RUN_TIME)".into()
    })?;
    Ok(StatsEnabled {
        // SAFETY: the kernel returned a new fd owned by nobody else.
        _fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
    })
}

/// The memory page size, for mmap'd rings.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}
