//! What the server says about its clock besides the time: leap, stratum, reference ID,
//! reference time, root delay and root dispersion. The time itself is the system clock
//! (CLOCK_REALTIME); this state comes from flags and from the kernel's clock state
//! (`adjtimex`), re-read every second by [`ClockWatch`] and published to the handlers.
//!
//! The kernel knows whether a daemon keeps the clock synchronised, its error bound
//! (`maxerror`, which chronyd sets to its root distance) and a scheduled leap second; it
//! does not know the stratum or the reference ID, so those are flags. An unsynchronised
//! clock is announced as chronyd announces it (leap 3, stratum 0 on the wire: chrony's
//! internal stratum 16 is sent as 0, root delay and dispersion 1 s, no reference), or, with
//! a local stratum, served as chronyd's `local stratum N` serves it.

use crate::live::Live;
use firehose_ntpwire::{refid, Leap, RefId, Short};
use firehose_sys::clock::{realtime_ns, KernelClock, STA_DEL, STA_INS};
use firehose_sys::supervise::{Health, Label, Workers};
use firehose_sys::SysResult;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The state announced in every response, as of the last refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerState {
    pub leap: Leap,
    /// As sent: 0 for an unsynchronised clock, as chronyd sends it.
    pub stratum: u8,
    pub refid: RefId,
    /// The reference time in Unix ns; 0 sends the zero timestamp ("unknown").
    pub reference_ns: u64,
    pub root_delay: Short,
    pub root_dispersion: Short,
    /// False while announcing an unsynchronised clock (leap 3) or serving a local stratum.
    pub synchronised: bool,
    /// Where the state came from, for the start-up lines and the exit summary.
    pub source: StateSource,
}

/// Where a [`ServerState`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSource {
    /// The kernel's clock is synchronised.
    Kernel,
    /// The kernel's clock is not synchronised and it is announced so.
    Unsynchronised,
    /// The kernel's clock is not synchronised and served as a local stratum.
    Local,
}

/// How to build the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockConfig {
    /// Stratum announced while the kernel clock is synchronised (1 to 15).
    pub stratum: u8,
    pub refid: RefId,
    /// Root delay; `None`: 0 (the kernel's error bound is the whole root distance and is
    /// announced as the dispersion).
    pub root_delay: Option<Short>,
    /// Root dispersion; `None`: the kernel's maxerror.
    pub root_dispersion: Option<Short>,
    /// Serve an unsynchronised clock at this stratum (chronyd's `local stratum N`).
    pub local_stratum: Option<u8>,
    /// Announce an unsynchronised clock (leap 3) rather than refuse to start.
    pub allow_unsynchronised: bool,
}

/// The state being served, replaceable while serving.
pub type LiveState = Live<ServerState>;

/// Why the server must not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("the system clock is not synchronised (adjtimex: {state}, STA_UNSYNC set): no daemon disciplines it; pass --allow-unsynchronised to announce it as unsynchronised (leap 3, as chronyd does), or --ntp-local-stratum N to serve it anyway as chronyd's `local stratum N`")]
    Unsynchronised { state: &'static str },
    #[error("reading the kernel clock state: {0}")]
    Kernel(String),
}

/// The state for kernel clock `k` read at `now_ns`. `reference_ns` is the time the clock was
/// last known to be corrected (see [`ClockWatch`]).
pub fn state_of(k: &KernelClock, cfg: &ClockConfig, now_ns: u64, reference_ns: u64) -> ServerState {
    if k.synchronised() {
        let leap = if k.status & STA_INS != 0 {
            Leap::Insert
        } else if k.status & STA_DEL != 0 {
            Leap::Delete
        } else {
            Leap::None
        };
        let maxerror_ns = u64::try_from(k.maxerror_us).unwrap_or(0) * 1000;
        return ServerState {
            leap,
            stratum: cfg.stratum,
            refid: cfg.refid,
            reference_ns,
            root_delay: cfg.root_delay.unwrap_or(Short(0)),
            root_dispersion: cfg.root_dispersion.unwrap_or(Short::from_ns(maxerror_ns)),
            synchronised: true,
            source: StateSource::Kernel,
        };
    }
    match cfg.local_stratum {
        Some(stratum) => ServerState {
            leap: Leap::None,
            stratum,
            refid: refid::LOCAL,
            // chronyd keeps a local reference a second in the past, so a transmit
            // timestamp is never earlier than it.
            reference_ns: now_ns.saturating_sub(1_000_000_000),
            root_delay: Short(0),
            root_dispersion: Short(0),
            synchronised: false,
            source: StateSource::Local,
        },
        None => unsynchronised(),
    }
}

/// What chronyd announces without a synchronised clock.
pub fn unsynchronised() -> ServerState {
    ServerState {
        leap: Leap::Unsynchronised,
        stratum: 0,
        refid: RefId(0),
        reference_ns: 0,
        root_delay: Short(0x1_0000),
        root_dispersion: Short(0x1_0000),
        synchronised: false,
        source: StateSource::Unsynchronised,
    }
}

/// Re-reads the kernel clock state every second and publishes it; stopped on drop. Its
/// thread is supervised like a worker ([`Self::health`]): a clock it can no longer read,
/// or a panic, ends the run rather than leave the server announcing a stale state.
pub struct ClockWatch {
    live: Arc<LiveState>,
    stop: Arc<AtomicBool>,
    thread: Workers<(), StateError>,
}

/// Tracks the reference time: when the kernel's maxerror last went down (a daemon's
/// correction resets it; the kernel only grows it), or when watching began.
#[derive(Debug, Clone, Copy)]
struct Reference {
    maxerror_us: i64,
    at_ns: u64,
}

impl Reference {
    fn update(&mut self, k: &KernelClock, now_ns: u64) -> u64 {
        if k.maxerror_us < self.maxerror_us {
            self.at_ns = now_ns;
        }
        self.maxerror_us = k.maxerror_us;
        self.at_ns
    }
}

impl ClockWatch {
    /// Reads the state once (refusing an unsynchronised clock unless `cfg` allows or
    /// serves it) and starts the thread that refreshes it.
    pub fn start(cfg: ClockConfig) -> Result<ClockWatch, StateError> {
        Self::start_with(cfg, KernelClock::read)
    }

    /// [`Self::start`] with the kernel's clock state read by `read` (tests give one that
    /// fails or panics).
    fn start_with(
        cfg: ClockConfig,
        mut read: impl FnMut() -> SysResult<KernelClock> + Send + 'static,
    ) -> Result<ClockWatch, StateError> {
        let k = read().map_err(|e| StateError::Kernel(e.to_string()))?;
        if !k.synchronised() && !cfg.allow_unsynchronised && cfg.local_stratum.is_none() {
            return Err(StateError::Unsynchronised {
                state: k.state_name(),
            });
        }
        let now = realtime_ns();
        let mut reference = Reference {
            maxerror_us: k.maxerror_us,
            at_ns: now,
        };
        let live = Live::new(Arc::new(state_of(&k, &cfg, now, now)));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (live.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("fh-ntp-clock".into())
            .spawn(move || -> Result<(), StateError> {
                let mut last = *l.get().1;
                let mut read_at = std::time::Instant::now();
                while !s.load(Ordering::Relaxed) {
                    // Short sleeps, so a stop is seen at once; a read a second.
                    std::thread::sleep(Duration::from_millis(50));
                    if read_at.elapsed() < Duration::from_secs(1) {
                        continue;
                    }
                    read_at = std::time::Instant::now();
                    let now = realtime_ns();
                    let k = read().map_err(|e| StateError::Kernel(e.to_string()))?;
                    let at = reference.update(&k, now);
                    let st = state_of(&k, &cfg, now, at);
                    if st != last {
                        l.publish(Arc::new(st));
                        last = st;
                    }
                }
                Ok(())
            })
            .map_err(|e| StateError::Kernel(format!("starting the clock thread: {e}")))?;
        let mut thread = Workers::new(true);
        thread.push(Label::new("ntp clock thread", 0), handle);
        Ok(ClockWatch { live, stop, thread })
    }

    /// The clock thread's health for the run's supervisor loop: failed when it panicked,
    /// could not read the clock, or ended while the server runs.
    pub fn health(&mut self) -> Health {
        self.thread.health(self.stop.load(Ordering::Relaxed))
    }

    /// The state being served, for handlers.
    pub fn live(&self) -> Arc<LiveState> {
        self.live.clone()
    }

    /// The state now published.
    pub fn state(&self) -> ServerState {
        *self.live.get().1
    }
}

impl Drop for ClockWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::mem::replace(&mut self.thread, Workers::new(true)).join();
    }
}

/// The system clock's precision as NTP announces it: log2 of the larger of the clock's
/// resolution and the time one reading takes, both measured (as chronyd measures them:
/// `clock_getres` reports the timer's 1 ns, not the clocksource's steps).
pub fn measure_precision() -> i8 {
    let mut smallest_step = u64::MAX;
    let mut fastest_read = u64::MAX;
    let mut prev = realtime_ns();
    for _ in 0..10_000 {
        let t = realtime_ns();
        let d = t.saturating_sub(prev);
        if d > 0 {
            smallest_step = smallest_step.min(d);
        }
        prev = t;
    }
    // The time of one reading, from batches of 16 (so the loop's own cost is spread).
    for _ in 0..64 {
        let a = realtime_ns();
        for _ in 0..16 {
            std::hint::black_box(realtime_ns());
        }
        let b = realtime_ns();
        fastest_read = fastest_read.min(b.saturating_sub(a) / 17);
    }
    let ns = smallest_step.min(fastest_read.max(1)).max(1);
    // Rounded, as chronyd rounds it.
    let log2 = (ns as f64 / 1e9).log2().round();
    log2.clamp(-32.0, 0.0) as i8
}

#[cfg(test)]
mod tests {
    use super::*;
    use firehose_sys::clock::{STA_UNSYNC, TIME_ERROR};

    fn kernel(status: i32, state: i32, maxerror_us: i64) -> KernelClock {
        KernelClock {
            state,
            status,
            maxerror_us,
            esterror_us: 0,
            tai: 0,
        }
    }

    fn cfg() -> ClockConfig {
        ClockConfig {
            stratum: 2,
            refid: RefId::parse("192.0.2.1").unwrap(),
            root_delay: None,
            root_dispersion: None,
            local_stratum: None,
            allow_unsynchronised: false,
        }
    }

    #[test]
    fn a_synchronised_kernel_clock_announces_its_error_bound() {
        let s = state_of(&kernel(0, 0, 1500), &cfg(), 5, 3);
        assert_eq!(
            (s.leap, s.stratum, s.source),
            (Leap::None, 2, StateSource::Kernel)
        );
        assert_eq!(s.root_dispersion, Short::from_ns(1_500_000));
        assert_eq!((s.root_delay, s.reference_ns), (Short(0), 3));
        let ins = state_of(&kernel(STA_INS, 1, 10), &cfg(), 5, 3);
        assert_eq!(ins.leap, Leap::Insert);
        let flags = ClockConfig {
            root_delay: Some(Short(7)),
            root_dispersion: Some(Short(9)),
            ..cfg()
        };
        let s = state_of(&kernel(0, 0, 1500), &flags, 5, 3);
        assert_eq!((s.root_delay, s.root_dispersion), (Short(7), Short(9)));
    }

    #[test]
    fn an_unsynchronised_clock_is_announced_as_chronyd_announces_it() {
        let k = kernel(STA_UNSYNC, TIME_ERROR, 16_000_000);
        let s = state_of(&k, &cfg(), 5_000_000_000, 0);
        assert_eq!(
            (s.leap, s.stratum, s.refid),
            (Leap::Unsynchronised, 0, RefId(0))
        );
        assert_eq!(
            (s.root_delay, s.root_dispersion),
            (Short(0x10000), Short(0x10000))
        );
        let local = ClockConfig {
            local_stratum: Some(10),
            ..cfg()
        };
        let s = state_of(&k, &local, 5_000_000_000, 0);
        assert_eq!((s.leap, s.stratum, s.refid), (Leap::None, 10, refid::LOCAL));
        assert_eq!(s.reference_ns, 4_000_000_000, "a second in the past");
    }

    #[test]
    fn the_reference_moves_when_a_daemon_resets_maxerror() {
        let mut r = Reference {
            maxerror_us: 1000,
            at_ns: 1,
        };
        assert_eq!(r.update(&kernel(0, 0, 1500), 2), 1, "grown by the kernel");
        assert_eq!(r.update(&kernel(0, 0, 200), 3), 3, "reset by a daemon");
    }

    #[test]
    fn precision_is_measured_and_plausible() {
        let p = measure_precision();
        // A clock read costs between 1 ns and 1 ms on anything that runs this.
        assert!((-30..=-10).contains(&p), "{p}");
    }

    /// A clock watch whose reads after the first go through `then`, and its health once
    /// it is no longer running (within 10 s: one read a second).
    fn failing_after_start(
        then: impl FnMut() -> SysResult<KernelClock> + Send + 'static,
    ) -> Health {
        let mut first = true;
        let mut then = then;
        let mut w = ClockWatch::start_with(
            ClockConfig {
                local_stratum: Some(10),
                ..cfg()
            },
            move || {
                if std::mem::take(&mut first) {
                    Ok(kernel(0, 0, 100))
                } else {
                    then()
                }
            },
        )
        .unwrap();
        assert_eq!(w.health(), Health::Running);
        let by = std::time::Instant::now() + Duration::from_secs(10);
        while w.health() == Health::Running && std::time::Instant::now() < by {
            std::thread::sleep(Duration::from_millis(10));
        }
        w.health()
    }

    #[test]
    fn a_clock_that_can_no_longer_be_read_fails_the_run() {
        let h = failing_after_start(|| {
            Err(firehose_sys::SysError {
                what: "adjtimex".into(),
                source: std::io::Error::from_raw_os_error(1), // EPERM
            })
        });
        let Health::Failed(f) = h else {
            panic!("a failed read must fail the run, not keep serving: {h:?}");
        };
        let m = f.to_string();
        assert!(
            m.contains("ntp clock thread")
                && m.contains("failed: reading the kernel clock state: adjtimex")
                && m.contains("Operation not permitted"),
            "{m}"
        );
    }

    #[test]
    fn a_clock_thread_that_panics_fails_the_run() {
        let h = failing_after_start(|| panic!("injected"));
        let Health::Failed(f) = h else {
            panic!("a panic must fail the run: {h:?}");
        };
        assert!(f.to_string().contains("panicked: injected"), "{f}");
    }

    #[test]
    fn the_clock_thread_is_watched_as_a_worker() {
        let mut w = ClockWatch::start(ClockConfig {
            local_stratum: Some(10),
            ..cfg()
        })
        .unwrap();
        assert_eq!(w.health(), Health::Running);
        // Stopping is not a failure: the run asked for it.
        w.stop.store(true, Ordering::Relaxed);
        let by = std::time::Instant::now() + Duration::from_secs(5);
        while w.health() == Health::Running && std::time::Instant::now() < by {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(w.health(), Health::Done);
    }
}
