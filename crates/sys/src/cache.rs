//! Cache hints. A server's AF_XDP frames arrive in memory another CPU has just written (the
//! kernel's copy into the UMEM runs in the sender's softirq), so the first read of each one
//! misses every cache level close to this CPU. Asking for all the frames of a batch before
//! reading the first lets those misses overlap instead of paying them one after another.

/// Bytes per cache line on the CPUs firehose runs on (x86-64, arm64).
pub const LINE: usize = 64;

/// Starts loading every cache line of `data` into this CPU's caches and returns at once. A
/// hint only: it never faults and never changes what a later read sees; a no-op on
/// architectures without a prefetch instruction here.
pub fn prefetch(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = data.as_ptr() as usize & !(LINE - 1);
        let end = data.as_ptr() as usize + data.len();
        let mut at = start;
        while at < end {
            // SAFETY: a prefetch does not access memory architecturally (it cannot fault
            // or be observed); the address lies in the line of a byte of `data` anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at as *const i8) };
            at += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetching_changes_no_byte_and_accepts_any_slice() {
        let v: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let before = v.clone();
        for (a, b) in [(0, 0), (0, 1), (1, 64), (63, 130), (0, 1000), (999, 1000)] {
            prefetch(&v[a..b]);
        }
        assert_eq!(v, before);
    }
}
