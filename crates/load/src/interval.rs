//! Interval histograms and the HdrHistogram interval log (`firehose load --hdr-log`).
//!
//! A generator thread records latencies into its interval histogram. When the driver asks
//! (one relaxed atomic load per loop turn tells the thread), and once more when the thread
//! finishes, the thread adds that histogram into its whole-run histogram and into its
//! [`IntervalSlot`], then resets it. Every latency thus lands in exactly one interval, and the
//! intervals of a log add up to the run's histogram. The slot's lock is taken once per
//! interval, never per request.

use crate::report::new_histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogWriter, IntervalLogWriterBuilder};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// Where one thread hands its interval histograms to the driver.
#[derive(Default)]
pub struct IntervalSlot {
    /// The interval the driver wants next (1, 2, ...).
    wanted: AtomicU64,
    /// The last interval the thread handed over.
    answered: AtomicU64,
    /// The thread has made its final handover.
    done: AtomicBool,
    hist: Mutex<Option<Histogram<u64>>>,
}

impl IntervalSlot {
    /// Thread side: hands `interval` over if the driver asked for a new interval since
    /// `seen`, folding it into `total`.
    pub(crate) fn poll(
        &self,
        seen: &mut u64,
        interval: &mut Histogram<u64>,
        total: &mut Histogram<u64>,
    ) {
        let want = self.wanted.load(Ordering::Relaxed);
        if want != *seen {
            self.hand_over(interval, total);
            *seen = want;
            self.answered.store(want, Ordering::Release);
        }
    }

    /// Thread side: the final handover, when the thread ends.
    pub(crate) fn finish(&self, interval: &mut Histogram<u64>, total: &mut Histogram<u64>) {
        self.hand_over(interval, total);
        self.done.store(true, Ordering::Release);
    }

    fn hand_over(&self, interval: &mut Histogram<u64>, total: &mut Histogram<u64>) {
        // Every histogram here has the same bounds (`new_histogram`), so adding cannot fail.
        let _ = total.add(&*interval);
        let mut slot = self.hist.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(h) => {
                let _ = h.add(&*interval);
            }
            None => *slot = Some(interval.clone()),
        }
        interval.reset();
    }

    fn answered(&self, epoch: u64) -> bool {
        self.answered.load(Ordering::Acquire) >= epoch || self.done.load(Ordering::Acquire)
    }

    fn take_into(&self, into: &mut Histogram<u64>) {
        let taken = self
            .hist
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(h) = taken {
            let _ = into.add(&h);
        }
    }
}

/// Asks every thread for interval `epoch`, waits up to `patience` for their answers (a thread
/// checks at least every 2 ms), and returns what they handed over. A thread that answers late
/// lands in the next interval; nothing is lost or counted twice.
pub fn collect(slots: &[&IntervalSlot], epoch: u64, patience: Duration) -> Histogram<u64> {
    collect_each(&[slots], epoch, patience).remove(0)
}

/// [`collect`] for several kinds of histogram at once (latency and its parts): every slot is
/// asked before any is waited for, so a thread hands all its kinds over at the same turn.
pub fn collect_each(
    kinds: &[&[&IntervalSlot]],
    epoch: u64,
    patience: Duration,
) -> Vec<Histogram<u64>> {
    for s in kinds.iter().flat_map(|k| k.iter()) {
        s.wanted.store(epoch, Ordering::Relaxed);
    }
    let deadline = Instant::now() + patience;
    while !kinds
        .iter()
        .flat_map(|k| k.iter())
        .all(|s| s.answered(epoch))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_micros(200));
    }
    kinds.iter().map(|k| take_all(k)).collect()
}

/// Takes what the threads handed over without asking: after they have all finished.
pub fn take_all(slots: &[&IntervalSlot]) -> Histogram<u64> {
    let mut h = new_histogram();
    for s in slots {
        s.take_into(&mut h);
    }
    h
}

/// The file and serializer an [`HdrLog`] writes with.
pub struct HdrLogFile {
    file: File,
    serializer: V2DeflateSerializer,
}

impl HdrLogFile {
    /// Creates (truncates) the log file.
    pub fn create(path: &Path) -> io::Result<HdrLogFile> {
        Ok(HdrLogFile {
            file: File::create(path)?,
            serializer: V2DeflateSerializer::new(),
        })
    }

    /// Writes the header: what wrote the log, the format version, and `base` as both
    /// StartTime and BaseTime, so interval timestamps are seconds since the run started.
    /// Values are latencies in ns; the max column is in ms, as HdrHistogram's Java writer
    /// writes it.
    pub fn begin(&mut self, base: SystemTime, writer: &str) -> io::Result<HdrLog<'_>> {
        let log = IntervalLogWriterBuilder::new()
            .add_comment(&format!("[Logged with {writer}; latencies in ns]"))
            .add_comment("[Histogram log format version 1.3]")
            .with_start_time(base)
            .with_base_time(base)
            .with_max_value_divisor(1e6)
            .begin_log_with(&mut self.file, &mut self.serializer)?;
        Ok(HdrLog { log })
    }
}

/// An HdrHistogram interval log being written: one line per interval.
pub struct HdrLog<'a> {
    log: IntervalLogWriter<'a, 'a, File, V2DeflateSerializer>,
}

impl HdrLog<'_> {
    /// Writes the interval that began `start` after the base time and lasted `length`.
    pub fn write(
        &mut self,
        h: &Histogram<u64>,
        start: Duration,
        length: Duration,
    ) -> io::Result<()> {
        self.write_tagged(h, start, length, None)
    }

    /// [`HdrLog::write`] with the line tagged `Tag=tag` (a part of latency: `rtt`,
    /// `send_lag`, `recv_lag`), as HdrHistogram's log format keeps several series in one log.
    pub fn write_tagged(
        &mut self,
        h: &Histogram<u64>,
        start: Duration,
        length: Duration,
        tag: Option<&str>,
    ) -> io::Result<()> {
        let tag = tag.and_then(hdrhistogram::serialization::interval_log::Tag::new);
        self.log
            .write_histogram(h, start, length, tag)
            .map_err(|e| io::Error::other(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn every_value_lands_in_exactly_one_interval_and_in_the_total() {
        let slots = [IntervalSlot::default(), IntervalSlot::default()];
        let refs: Vec<&IntervalSlot> = slots.iter().collect();
        let (mut iv, mut total, mut seen) = (new_histogram(), new_histogram(), 0);
        iv.record(1000).unwrap();
        // No request yet: nothing moves.
        slots[0].poll(&mut seen, &mut iv, &mut total);
        assert_eq!((iv.len(), total.len()), (1, 0));
        // The driver asks with no patience; thread 0 answers afterwards, thread 1 finishes.
        assert!(collect(&refs, 1, Duration::ZERO).is_empty());
        slots[0].poll(&mut seen, &mut iv, &mut total);
        assert_eq!((iv.len(), total.len(), seen), (0, 1, 1));
        let mut iv1 = new_histogram();
        let mut total1 = new_histogram();
        iv1.record(5000).unwrap();
        slots[1].finish(&mut iv1, &mut total1);
        iv.record(2000).unwrap();
        slots[0].finish(&mut iv, &mut total);
        let got = take_all(&refs);
        assert_eq!(got.len(), 3);
        assert_eq!(total.len() + total1.len(), 3);
        assert!(take_all(&refs).is_empty(), "taken once");
    }

    #[test]
    fn the_log_reads_back_through_the_interval_log_parser() {
        let path = std::env::temp_dir().join(format!("fh-hdrlog-{}", std::process::id()));
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut h = new_histogram();
        h.record(12_345).unwrap();
        {
            let mut file = HdrLogFile::create(&path).unwrap();
            let mut log = file.begin(base, "test").unwrap();
            log.write(&h, Duration::ZERO, Duration::from_secs(1))
                .unwrap();
            log.write(
                &new_histogram(),
                Duration::from_secs(1),
                Duration::from_secs(1),
            )
            .unwrap();
        }
        let text = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let entries: Vec<LogEntry<'_>> = IntervalLogIterator::new(&text)
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(
            entries[0],
            LogEntry::StartTime(Duration::from_secs(1_700_000_000))
        );
        assert_eq!(
            entries[1],
            LogEntry::BaseTime(Duration::from_secs(1_700_000_000))
        );
        let counts: Vec<u64> = entries[2..]
            .iter()
            .map(|e| match e {
                LogEntry::Interval(i) => {
                    let bytes = base64_decode(i.encoded_histogram());
                    let d: Histogram<u64> = Deserializer::new()
                        .deserialize(&mut bytes.as_slice())
                        .unwrap();
                    d.len()
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(counts, vec![1, 0]);
    }

    fn base64_decode(s: &str) -> Vec<u8> {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }
}
