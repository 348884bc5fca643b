//! BPF maps read from user space: per-CPU hashes and arrays that tracing programs count
//! into, walked and summed here. A map lives as long as its fd (and any program using it).

use crate::bpf::bpf_call;
use crate::SysResult;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_MAP_GET_NEXT_KEY: i32 = 4;

/// The map types the tracing programs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// BPF_MAP_TYPE_PERCPU_HASH: one value per possible CPU per key.
    PerCpuHash,
    /// BPF_MAP_TYPE_PERCPU_ARRAY.
    PerCpuArray,
}

impl MapKind {
    fn code(self) -> u32 {
        match self {
            MapKind::PerCpuHash => 5,
            MapKind::PerCpuArray => 6,
        }
    }
}

/// The BPF_MAP_CREATE prefix of `union bpf_attr` (shared with the XSKMAP).
#[repr(C)]
#[derive(Default)]
pub(crate) struct MapCreateAttr {
    pub(crate) map_type: u32,
    pub(crate) key_size: u32,
    pub(crate) value_size: u32,
    pub(crate) max_entries: u32,
    pub(crate) map_flags: u32,
    pub(crate) inner_map_fd: u32,
    pub(crate) numa_node: u32,
    pub(crate) map_name: [u8; 16],
}

/// The element commands' part of `union bpf_attr` (lookup, update, next key).
#[repr(C)]
#[derive(Default)]
pub(crate) struct ElemAttr {
    pub(crate) map_fd: u32,
    pub(crate) _pad: u32,
    pub(crate) key: u64,
    pub(crate) value: u64,
    pub(crate) flags: u64,
}

/// A per-CPU map of u64 values.
#[derive(Debug)]
pub struct PerCpuMap {
    fd: OwnedFd,
    key_size: usize,
    cpus: usize,
}

/// The number of possible CPUs: the kernel's per-CPU values come in this many slots.
pub fn possible_cpus() -> SysResult<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").map_err(|source| {
        crate::SysError {
            what: "read(/sys/devices/system/cpu/possible)".into(),
            source,
        }
    })?;
    let set = crate::cpu::CpuSet::parse_list(text.trim()).map_err(|_| crate::SysError {
        what: format!("/sys/devices/system/cpu/possible: {:?}", text.trim()),
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })?;
    Ok(set.to_vec().last().map_or(1, |m| m + 1))
}

impl PerCpuMap {
    /// A map of `max_entries` keys of `key_size` bytes, each with one u64 per CPU.
    pub fn new(kind: MapKind, key_size: usize, max_entries: u32, name: &str) -> SysResult<Self> {
        let mut attr = MapCreateAttr {
            map_type: kind.code(),
            key_size: key_size as u32,
            value_size: 8,
            max_entries,
            ..Default::default()
        };
        let n = name.len().min(15);
        attr.map_name[..n].copy_from_slice(&name.as_bytes()[..n]);
        let fd = bpf_call(BPF_MAP_CREATE, &mut attr, || {
            format!("bpf(BPF_MAP_CREATE, {kind:?} {name}, {max_entries} entries)")
        })?;
        Ok(PerCpuMap {
            // SAFETY: the kernel returned a new fd owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) },
            key_size,
            cpus: possible_cpus()?,
        })
    }

    /// The values of `key` on every possible CPU, or None when the key is absent.
    pub fn get(&self, key: &[u8]) -> SysResult<Option<Vec<u64>>> {
        assert_eq!(key.len(), self.key_size, "key size");
        let mut values = vec![0u64; self.cpus];
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: values.as_mut_ptr() as u64,
            ..Default::default()
        };
        match bpf_call(BPF_MAP_LOOKUP_ELEM, &mut attr, || {
            "bpf(BPF_MAP_LOOKUP_ELEM)".into()
        }) {
            Ok(_) => Ok(Some(values)),
            Err(e) if e.errno() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The sum over CPUs of `key`'s values (0 when absent).
    pub fn sum(&self, key: &[u8]) -> SysResult<u64> {
        Ok(self
            .get(key)?
            .map_or(0, |v| v.iter().fold(0u64, |a, b| a.wrapping_add(*b))))
    }

    /// Every key with the sum of its values over CPUs. A key deleted while the walk runs
    /// is skipped; the kernel never deletes ours.
    pub fn sums(&self) -> SysResult<Vec<(Vec<u8>, u64)>> {
        let mut out = Vec::new();
        let mut prev: Option<Vec<u8>> = None;
        loop {
            let mut next = vec![0u8; self.key_size];
            let mut attr = ElemAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                key: prev.as_ref().map_or(0, |p| p.as_ptr() as u64),
                value: next.as_mut_ptr() as u64,
                ..Default::default()
            };
            match bpf_call(BPF_MAP_GET_NEXT_KEY, &mut attr, || {
                "bpf(BPF_MAP_GET_NEXT_KEY)".into()
            }) {
                Ok(_) => {}
                Err(e) if e.errno() == Some(libc::ENOENT) => break,
                Err(e) => return Err(e),
            }
            if let Some(v) = self.get(&next)? {
                out.push((next.clone(), v.iter().fold(0u64, |a, b| a.wrapping_add(*b))));
            }
            prev = Some(next);
        }
        Ok(out)
    }
}

impl AsRawFd for PerCpuMap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
