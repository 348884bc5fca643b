//! A small eBPF assembler for the tracing programs: named opcodes, jumps to labels resolved
//! when the program is finished, and the few idioms they repeat (a field of the tracepoint
//! record, a kernel read into the stack, a per-CPU counter bump).

use crate::bpf::Insn;

pub(crate) const MOV64_X: u8 = 0xbf;
pub(crate) const MOV64_K: u8 = 0xb7;
pub(crate) const ADD64_K: u8 = 0x07;
pub(crate) const ADD64_X: u8 = 0x0f;
pub(crate) const AND64_K: u8 = 0x57;
pub(crate) const LSH64_K: u8 = 0x67;
pub(crate) const TO_BE: u8 = 0xdc;
pub(crate) const LD_IMM64: u8 = 0x18;
pub(crate) const JA: u8 = 0x05;
pub(crate) const JEQ_K: u8 = 0x15;
pub(crate) const JNE_K: u8 = 0x55;
pub(crate) const CALL: u8 = 0x85;
pub(crate) const EXIT: u8 = 0x95;
const BPF_PSEUDO_MAP_FD: u8 = 1;

pub(crate) const FN_MAP_LOOKUP_ELEM: i32 = 1;
pub(crate) const FN_MAP_UPDATE_ELEM: i32 = 2;
pub(crate) const FN_PROBE_READ_KERNEL: i32 = 113;

/// `BPF_LDX | BPF_MEM | size` for a field of 1, 2, 4 or 8 bytes.
pub(crate) fn ldx(size: u8) -> u8 {
    0x61 | size_bits(size)
}

/// `BPF_STX | BPF_MEM | size`.
pub(crate) fn stx(size: u8) -> u8 {
    0x63 | size_bits(size)
}

/// `BPF_ST | BPF_MEM | size` (store an immediate).
pub(crate) fn st(size: u8) -> u8 {
    0x62 | size_bits(size)
}

fn size_bits(size: u8) -> u8 {
    match size {
        1 => 0x10,
        2 => 0x08,
        4 => 0x00,
        _ => 0x18,
    }
}

/// A program under construction; labels are plain numbers chosen by the caller.
pub(crate) struct Asm {
    insns: Vec<Insn>,
    fixups: Vec<(usize, u32)>,
    labels: Vec<(u32, usize)>,
}

impl Asm {
    pub(crate) fn new() -> Self {
        Asm {
            insns: Vec::with_capacity(128),
            fixups: Vec::new(),
            labels: Vec::new(),
        }
    }

    pub(crate) fn op(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(Insn::new(code, dst, src, off, imm));
    }

    /// A jump (conditional on `dst` against `imm` unless `code` is JA) to `to`.
    pub(crate) fn jump(&mut self, code: u8, dst: u8, imm: i32, to: u32) {
        self.fixups.push((self.insns.len(), to));
        self.op(code, dst, 0, 0, imm);
    }

    pub(crate) fn label(&mut self, l: u32) {
        self.labels.push((l, self.insns.len()));
    }

    /// `dst = fd of a map` (the two-instruction BPF_LD_IMM64 with BPF_PSEUDO_MAP_FD).
    pub(crate) fn map(&mut self, dst: u8, fd: i32) {
        self.op(LD_IMM64, dst, BPF_PSEUDO_MAP_FD, 0, fd);
        self.op(0, 0, 0, 0, 0);
    }

    /// `r2 = r10 + off`: a pointer to the stack.
    pub(crate) fn stack_ptr(&mut self, dst: u8, off: i16) {
        self.op(MOV64_X, dst, 10, 0, 0);
        self.op(ADD64_K, dst, 0, 0, off as i32);
    }

    /// `bpf_probe_read_kernel(r10 + to, size, r3)`: `r3` holds the kernel address.
    pub(crate) fn read_kernel(&mut self, to: i16, size: i32) {
        self.stack_ptr(1, to);
        self.op(MOV64_K, 2, 0, 0, size);
        self.op(CALL, 0, 0, 0, FN_PROBE_READ_KERNEL);
    }

    /// `*(u64 *)r0 += 1` when `r0` is a per-CPU value of this CPU (no other writer).
    pub(crate) fn bump_r0(&mut self) {
        self.op(ldx(8), 1, 0, 0, 0);
        self.op(ADD64_K, 1, 0, 0, 1);
        self.op(stx(8), 0, 1, 0, 0);
    }

    /// Adds one to the per-CPU hash `map` at the key at `r10 + key`, inserting it at 1 when
    /// absent; when the map is full, adds one to slot 0 of the per-CPU array `overflow`.
    /// `val` is 8 bytes of scratch stack. Ends by jumping to `done`.
    pub(crate) fn count(&mut self, map: i32, overflow: i32, key: i16, val: i16, done: u32) {
        const INSERT: u32 = u32::MAX - 1;
        self.map(1, map);
        self.stack_ptr(2, key);
        self.op(CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM);
        self.jump(JEQ_K, 0, 0, INSERT);
        self.bump_r0();
        self.jump(JA, 0, 0, done);
        self.label(INSERT);
        // This CPU's slot of a key another CPU just inserted is 0, and only this CPU writes
        // it: an update to 1 (BPF_ANY) is exact either way.
        self.op(st(8), 10, 0, val, 1);
        self.map(1, map);
        self.stack_ptr(2, key);
        self.stack_ptr(3, val);
        self.op(MOV64_K, 4, 0, 0, 0);
        self.op(CALL, 0, 0, 0, FN_MAP_UPDATE_ELEM);
        self.jump(JEQ_K, 0, 0, done);
        self.op(st(4), 10, 0, val, 0);
        self.map(1, overflow);
        self.stack_ptr(2, val);
        self.op(CALL, 0, 0, 0, FN_MAP_LOOKUP_ELEM);
        self.jump(JEQ_K, 0, 0, done);
        self.bump_r0();
        self.jump(JA, 0, 0, done);
    }

    /// Resolves every jump; panics on a jump to a label never placed (a bug in a builder).
    pub(crate) fn finish(mut self) -> Vec<Insn> {
        for (at, to) in self.fixups {
            let target = self.labels.iter().find(|(l, _)| *l == to).map(|(_, i)| *i);
            let target = target.expect("every jump target is placed");
            self.insns[at].set_off((target as i64 - at as i64 - 1) as i16);
        }
        self.insns
    }
}
