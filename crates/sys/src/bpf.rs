//! Reuseport steering programs: classic BPF built as data, eBPF loaded with bpf(2).
//!
//! Both return `cpu % n`, the index (in bind order) of the socket in the reuseport
//! group that should receive a packet processed on `cpu`. With one socket per worker,
//! created in the order of the CPUs the workers are pinned to, the packet stays on the
//! CPU whose softirq received it: no cross-CPU socket lock, warm caches.

use crate::{cvt, SysResult};
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `A = cpu; A %= n; return A` as classic BPF.
pub fn cbpf_cpu_mod(n: u32) -> Vec<libc::sock_filter> {
    let ins = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let ld_w_abs = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let alu_mod_k = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    let ret_a = (libc::BPF_RET | libc::BPF_A) as u16;
    vec![
        ins(ld_w_abs, (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32),
        ins(alu_mod_k, n.max(1)),
        ins(ret_a, 0),
    ]
}

/// Attaches a classic BPF socket filter (SO_ATTACH_FILTER) to any socket: a frame or
/// datagram the program returns 0 for is dropped before it is queued.
pub fn attach_cbpf(fd: RawFd, prog: &[libc::sock_filter]) -> SysResult<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: the kernel copies `len` instructions from `filter`, which lives for the call.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &fprog as *const _ as *const libc::c_void,
            mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    cvt(ret, || {
        format!("setsockopt(SO_ATTACH_FILTER, {} instructions)", prog.len())
    })
    .map(|_| ())
}

/// `return 0`: a filter that drops everything (holds a UDP port without queueing).
pub fn cbpf_drop_all() -> Vec<libc::sock_filter> {
    vec![libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    }]
}

/// One eBPF instruction in the kernel's layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    /// An instruction from its fields (registers 0..=10).
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }

    /// The opcode.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The offset field (jump distance or memory offset).
    pub fn off(&self) -> i16 {
        self.off
    }

    /// The immediate.
    pub fn imm(&self) -> i32 {
        self.imm
    }

    /// The jump offset, for assemblers that patch it after placing a label.
    pub fn set_off(&mut self, off: i16) {
        self.off = off;
    }
}

const BPF_FUNC_GET_SMP_PROCESSOR_ID: i32 = 8;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const BPF_PROG_LOAD: i32 = 5;

/// `r0 = bpf_get_smp_processor_id(); r0 %= n; exit` as eBPF.
pub fn ebpf_cpu_mod(n: u32) -> Vec<Insn> {
    vec![
        // BPF_JMP | BPF_CALL
        Insn {
            code: 0x85,
            regs: 0,
            off: 0,
            imm: BPF_FUNC_GET_SMP_PROCESSOR_ID,
        },
        // BPF_ALU (32-bit) | BPF_MOD | BPF_K, dst r0
        Insn {
            code: 0x94,
            regs: 0,
            off: 0,
            imm: n.max(1) as i32,
        },
        // BPF_JMP | BPF_EXIT
        Insn {
            code: 0x95,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// A loaded BPF program; closing the fd unloads it once nothing else holds it.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl AsRawFd for Program {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Loads the eBPF CPU-steering program for a group of `n` sockets.
pub fn load_cpu_steering(n: u32) -> SysResult<Program> {
    let fd = prog_load(
        BPF_PROG_TYPE_SOCKET_FILTER,
        0,
        &ebpf_cpu_mod(n),
        "fh_reuseport_c",
        "socket filter",
    )?;
    Ok(Program { fd })
}

/// BPF_PROG_LOAD with the verifier's log in the error; `name` is cut to 15 bytes.
pub(crate) fn prog_load(
    prog_type: u32,
    expected_attach_type: u32,
    insns: &[Insn],
    name: &str,
    kind: &str,
) -> SysResult<OwnedFd> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 65536];
    let mut attr = ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        expected_attach_type,
        ..Default::default()
    };
    let n = name.len().min(15);
    attr.prog_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: attr points to a live, initialised bpf_attr prefix whose size we pass; the
    // kernel reads insns/license and writes at most log_size bytes to log, all alive here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &mut attr as *mut ProgLoadAttr,
            mem::size_of::<ProgLoadAttr>() as u32,
        )
    };
    let fd = cvt(fd, || {
        let end = log.iter().position(|&b| b == 0).unwrap_or(0);
        let verifier = String::from_utf8_lossy(&log[..end])
            .trim()
            .replace('\n', "; ");
        if verifier.is_empty() {
            format!("bpf(BPF_PROG_LOAD, {kind})")
        } else {
            format!("bpf(BPF_PROG_LOAD, {kind}) [verifier: {verifier}]")
        }
    })?;
    // SAFETY: the kernel returned a new fd that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Issues bpf(cmd, attr) for a command whose attr is a plain struct; returns the result
/// (an fd or 0).
pub(crate) fn bpf_call<A>(cmd: i32, attr: &mut A, what: impl FnOnce() -> String) -> SysResult<i64> {
    // SAFETY: attr is a live, initialised #[repr(C)] bpf_attr variant whose size we pass;
    // pointers inside it (set by callers) point to buffers alive for this call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A,
            mem::size_of::<A>() as u32,
        )
    };
    cvt(ret, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbpf_program_shape() {
        let p = cbpf_cpu_mod(4);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].k as i32, -0x1000 + 36);
        assert_eq!(p[1].k, 4);
    }

    #[test]
    fn ebpf_divides_by_at_least_one() {
        assert_eq!(ebpf_cpu_mod(0)[1].imm, 1);
    }
}
