//! The system clock as the kernel keeps it: its synchronisation state from `adjtimex`
//! (read only: `modes` 0 changes nothing and needs no privilege), and CLOCK_REALTIME.
//!
//! An NTP daemon (chronyd, ntpd, phc2sys) that disciplines the clock tells the kernel
//! whether it is synchronised (STA_UNSYNC clear), a bound on its error (maxerror, which
//! chronyd sets to its root distance and the kernel then grows by 500 ppm a second) and any
//! leap second it has scheduled (STA_INS, STA_DEL). The kernel does not know the stratum
//! or the reference ID; those come from elsewhere.

use crate::{cvt, SysResult};

/// The kernel clock state, read with `adjtimex` (modes 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelClock {
    /// adjtimex's return value: TIME_OK, TIME_INS, TIME_DEL, TIME_OOP, TIME_WAIT or
    /// TIME_ERROR (the clock is not synchronised).
    pub state: i32,
    /// The status bits (STA_*).
    pub status: i32,
    /// Maximum error bound, in µs.
    pub maxerror_us: i64,
    /// Estimated error, in µs.
    pub esterror_us: i64,
    /// TAI - UTC in seconds, as the daemon set it (0 when unknown).
    pub tai: i32,
}

/// Bits of `status` read by [`KernelClock`]'s methods.
pub const STA_INS: i32 = libc::STA_INS;
pub const STA_DEL: i32 = libc::STA_DEL;
pub const STA_UNSYNC: i32 = libc::STA_UNSYNC;
/// adjtimex's return for a clock not synchronised.
pub const TIME_ERROR: i32 = libc::TIME_ERROR;

impl KernelClock {
    /// Reads the state. Changes nothing.
    pub fn read() -> SysResult<KernelClock> {
        // SAFETY: timex is plain data; all-zero (modes 0: read only) is valid.
        let mut t: libc::timex = unsafe { std::mem::zeroed() };
        // SAFETY: the kernel reads `modes` (0: nothing to set) and fills the live struct.
        let state = cvt(unsafe { libc::adjtimex(&mut t) }, || "adjtimex".into())?;
        Ok(KernelClock {
            state,
            status: t.status,
            maxerror_us: t.maxerror,
            esterror_us: t.esterror,
            tai: t.tai,
        })
    }

    /// True when a daemon has marked the clock synchronised (STA_UNSYNC clear and the
    /// kernel does not report TIME_ERROR).
    pub fn synchronised(&self) -> bool {
        self.status & STA_UNSYNC == 0 && self.state != TIME_ERROR
    }

    /// The adjtimex state by name.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            libc::TIME_OK => "TIME_OK",
            libc::TIME_INS => "TIME_INS",
            libc::TIME_DEL => "TIME_DEL",
            libc::TIME_OOP => "TIME_OOP",
            libc::TIME_WAIT => "TIME_WAIT",
            libc::TIME_ERROR => "TIME_ERROR",
            _ => "unknown",
        }
    }
}

/// CLOCK_REALTIME in ns since the Unix epoch (0 before 1970).
#[inline]
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// CLOCK_TAI minus CLOCK_REALTIME in ns: the kernel's TAI offset (adjtimex's `tai`, whole
/// seconds; 0 until a daemon sets it), read from the two clocks (no system call with the
/// vDSO), to turn a CLOCK_TAI stamp (`bpf_ktime_get_tai_ns`) into the system time.
pub fn tai_offset_ns() -> i64 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec, which lives on this stack.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
    };
    let real = read(libc::CLOCK_REALTIME);
    let tai = read(libc::CLOCK_TAI);
    // Whole seconds: the reads are nanoseconds apart.
    let secs = ((tai - real) as f64 / 1e9).round() as i64;
    secs * 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tai_offset_is_the_one_adjtimex_reports() {
        let k = KernelClock::read().unwrap();
        assert_eq!(tai_offset_ns(), i64::from(k.tai) * 1_000_000_000);
    }

    #[test]
    fn reading_the_state_changes_nothing() {
        let a = KernelClock::read().unwrap();
        let b = KernelClock::read().unwrap();
        assert_eq!((a.status, a.tai), (b.status, b.tai));
        assert!(a.maxerror_us >= 0 && a.esterror_us >= 0);
        assert_ne!(a.state_name(), "unknown");
        // TIME_ERROR exactly when the clock is marked unsynchronised (or out of range).
        if a.status & STA_UNSYNC != 0 {
            assert!(!a.synchronised());
        }
    }
}
