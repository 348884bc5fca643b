//! What the caller of a run watches while it goes: the interval lines' figures
//! ([`IntervalLines`]), the HdrHistogram log cut into intervals ([`HdrIntervals`], with the
//! parts of latency as tagged lines under `--stamps`) and the
//! server's CPU time over the measured window ([`ServerWindow`]). The cli's supervisor loop
//! calls these; they print nothing.

use crate::decompose::PART_TAGS;
use crate::gen::{Length, Live, LoadConfig};
use crate::interval::{self, HdrLog, IntervalSlot};
use crate::report::{new_histogram, Interval, ServerCpu};
use firehose_host::cputime::{self, Scope};
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The counters at the last interval line, to print the next one as a difference.
pub struct IntervalLines {
    every: Duration,
    next: Duration,
    /// When the last interval ended, in seconds since the run started.
    pub t: f64,
    completed: u64,
    lost: u64,
    stray: u64,
}

impl IntervalLines {
    /// Intervals of `every` (none when zero).
    pub fn new(every: Duration) -> IntervalLines {
        IntervalLines {
            every,
            next: every,
            t: 0.0,
            completed: 0,
            lost: 0,
            stray: 0,
        }
    }

    /// The interval ending at `el`, if a line is due.
    pub fn due(&mut self, el: Duration, live: &[Live]) -> Option<Interval> {
        if self.every.is_zero() || el < self.next {
            return None;
        }
        let sum = |f: fn(&Live) -> u64| live.iter().map(f).sum::<u64>();
        let t = el.as_secs_f64();
        let c = sum(|l| l.completed.load(Ordering::Relaxed));
        let lost = sum(|l| l.lost.load(Ordering::Relaxed));
        let stray = sum(|l| l.stray.load(Ordering::Relaxed));
        let iv = Interval {
            t,
            tps: (c - self.completed) as f64 / (t - self.t),
            lost: lost - self.lost,
            stray: stray - self.stray,
        };
        (self.completed, self.lost, self.stray) = (c, lost, stray);
        self.t = t;
        self.next += self.every;
        Some(iv)
    }
}

/// The server's CPU time at both edges of the measured window (`--server-pid`): two
/// readings, the first once the warm-up is over, the second when the run ends.
pub struct ServerWindow {
    pid: u32,
    start: Option<(f64, Instant)>,
    end: Option<(f64, Instant)>,
}

impl ServerWindow {
    /// No reading yet of `pid`.
    pub fn new(pid: u32) -> ServerWindow {
        ServerWindow {
            pid,
            start: None,
            end: None,
        }
    }

    fn read(pid: u32) -> Option<(f64, Instant)> {
        cputime::seconds(pid, Scope::Process)
            .ok()
            .map(|s| (s, Instant::now()))
    }

    /// Takes the first reading once `measuring`, the second once `ending`.
    pub fn observe(&mut self, measuring: bool, ending: bool) {
        if self.start.is_none() && measuring {
            self.start = Self::read(self.pid);
        }
        if self.end.is_none() && self.start.is_some() && ending {
            self.end = Self::read(self.pid);
        }
    }

    /// The server's CPU over the window, when both readings were taken.
    pub fn finish(mut self) -> Option<ServerCpu> {
        self.observe(false, true);
        let ((c0, i0), (c1, i1)) = (self.start?, self.end?);
        Some(ServerCpu {
            pid: self.pid,
            cpu_s: (c1 - c0).max(0.0),
            window_s: i1.duration_since(i0).as_secs_f64(),
        })
    }
}

/// The `--hdr-log` side of a run. Intervals start where the warm-up ends (the warm-up records
/// nothing) and end every `--interval` after, when the driver asks the threads for them;
/// boundaries stop before the send window ends, so the last interval runs through the
/// drain and the intervals add up to the run's histogram.
pub struct HdrIntervals<'a> {
    log: HdrLog<'a>,
    every: Duration,
    send_end: Option<Duration>,
    /// When the next interval ends: the warm-up's end first (not written), then every
    /// `--interval`.
    next: Duration,
    in_warmup: bool,
    /// Where the interval being collected began.
    last: Duration,
    epoch: u64,
    pending: hdrhistogram::Histogram<u64>,
    /// With `--stamps`: the parts of latency, one tagged line each per interval.
    pending_parts: Option<[hdrhistogram::Histogram<u64>; 3]>,
}

impl<'a> HdrIntervals<'a> {
    /// Cuts `cfg`'s run into intervals of `every`, written to `log`.
    pub fn new(log: HdrLog<'a>, every: Duration, cfg: &LoadConfig) -> Self {
        let in_warmup = !cfg.warmup.is_zero();
        HdrIntervals {
            log,
            every,
            send_end: match cfg.length {
                Length::Duration(d) => Some(cfg.warmup + d),
                Length::Requests(_) => None,
            },
            next: if in_warmup { cfg.warmup } else { every },
            in_warmup,
            last: Duration::ZERO,
            epoch: 0,
            pending: new_histogram(),
            pending_parts: cfg
                .tx_stamps
                .then(|| [new_histogram(), new_histogram(), new_histogram()]),
        }
    }

    fn slots(live: &[Live]) -> Vec<&IntervalSlot> {
        live.iter().map(|l| &l.interval).collect()
    }

    fn part_slots(live: &[Live], k: usize) -> Vec<&IntervalSlot> {
        live.iter().map(|l| &l.parts[k]).collect()
    }

    /// Every kind of histogram this log holds: latency, then the parts with `--stamps`.
    fn kinds<'l>(&self, live: &'l [Live]) -> Vec<Vec<&'l IntervalSlot>> {
        let parts = if self.pending_parts.is_some() { 3 } else { 0 };
        std::iter::once(Self::slots(live))
            .chain((0..parts).map(|k| Self::part_slots(live, k)))
            .collect()
    }

    /// Adds what the threads handed over (in the order of [`HdrIntervals::kinds`]).
    fn add(&mut self, got: Vec<hdrhistogram::Histogram<u64>>) {
        let mut got = got.into_iter();
        // Same bounds everywhere: adding cannot fail.
        if let Some(h) = got.next() {
            let _ = self.pending.add(h);
        }
        for (p, h) in self.pending_parts.iter_mut().flatten().zip(got) {
            let _ = p.add(h);
        }
    }

    /// Collects, and writes, an interval if one ended by `el`.
    pub fn tick(&mut self, el: Duration, live: &[Live]) -> io::Result<()> {
        if el < self.next || self.send_end.is_some_and(|end| self.next >= end) {
            return Ok(());
        }
        let ended = self.next;
        self.next += self.every;
        self.epoch += 1;
        let kinds = self.kinds(live);
        let kinds: Vec<&[&IntervalSlot]> = kinds.iter().map(Vec::as_slice).collect();
        let got = interval::collect_each(&kinds, self.epoch, Duration::from_millis(50));
        self.add(got);
        if std::mem::take(&mut self.in_warmup) {
            // What was recorded since the warm-up ended goes into the first interval.
            self.last = ended;
            return Ok(());
        }
        self.write(el)
    }

    /// Writes the last interval, once every thread has finished.
    pub fn finish(mut self, el: Duration, live: &[Live]) -> io::Result<()> {
        let got = self
            .kinds(live)
            .iter()
            .map(|k| interval::take_all(k))
            .collect();
        self.add(got);
        self.write(el)
    }

    fn write(&mut self, until: Duration) -> io::Result<()> {
        let length = until.saturating_sub(self.last);
        self.log.write(&self.pending, self.last, length)?;
        self.pending.reset();
        for (p, tag) in self.pending_parts.iter_mut().flatten().zip(PART_TAGS) {
            self.log.write_tagged(p, self.last, length, Some(tag))?;
            p.reset();
        }
        self.last = until;
        Ok(())
    }
}
