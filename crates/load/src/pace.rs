//! Open-loop pacing: how many scheduled requests leave at one wake-up.
//!
//! A wake-up costs a timer, a context switch and a send call whatever it carries, so the
//! generator wakes about once per [`PER_WAKE`] requests and sends, in one batch, every
//! request intended before its next wake-up. Each leaves early by less than one wake-up
//! period and is timed from when it really left; a request that leaves late is timed from
//! when it was intended (coordinated omission). After a late wake-up the owed requests go
//! out at most `burst` at a time, the oldest first, so the server sees a bounded burst
//! rather than everything at once; requests no window has room for wait likewise. What
//! is owed beyond that and a short backlog is counted unsent instead of being queued
//! behind (which would hide the stall).

/// Requests one wake-up aims to carry unless told otherwise (`load --per-wake`).
pub const PER_WAKE: u64 = 64;
/// Bounds of the wake-up period: below, wake-ups cost more than they smooth; above, a
/// low rate would leave in lumps.
const MIN_PERIOD_NS: f64 = 50_000.0;
const MAX_PERIOD_NS: f64 = 1_000_000.0;
/// A late wake-up sends at most this many periods' worth at once (catching up at three
/// times the rate, so a server that stalls now and then is not left behind for long), and
/// at least `MIN_BURST` requests.
const BURST_PERIODS: u64 = 4;
const MIN_BURST: u64 = 16;
/// ... but no more than this many at once (a default 208 KiB server buffer holds about
/// 240 small datagrams) unless two periods' worth is more: the rate itself needs that.
const MAX_BURST: u64 = 128;
/// Owed requests kept for later wake-ups: 4 wake-ups' worth, or 20 ms of schedule if more,
/// so a thread that a busy host runs a few ms late catches up instead of giving up.
const BACKLOG_WAKES: u64 = 4;
const BACKLOG_NS: f64 = 20_000_000.0;

/// The pacing of one thread's schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// ns between requests.
    pub interval_ns: f64,
    /// Requests intended up to this far after a wake-up leave at it: one period.
    pub ahead_ns: u64,
    /// The most requests one wake-up sends.
    pub burst: u64,
    /// Owed requests (beyond `burst`) carried to later wake-ups; the rest count unsent.
    pub backlog: u64,
}

/// What one wake-up does with the schedule, from its next request on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// Send this many requests, the oldest owed first.
    pub send: u64,
    /// Then give up this many (counted unsent): they are too far behind to catch up.
    pub skip: u64,
}

impl Pace {
    /// Pacing for one request every `interval_ns`, `per_wake` per wake-up, with at most
    /// `in_flight_cap` requests outstanding (0: no cap): a wake-up carries at most half the
    /// cap, so the answers still on their way from the last one leave room for it.
    pub fn new(interval_ns: f64, in_flight_cap: u64, per_wake: u64) -> Pace {
        let per_wake = match in_flight_cap {
            0 => per_wake.max(1),
            c => (c / 2).clamp(1, per_wake.max(1)),
        };
        let period = (per_wake as f64 * interval_ns).clamp(MIN_PERIOD_NS, MAX_PERIOD_NS);
        let per_period = (period / interval_ns).round().max(1.0) as u64;
        Pace {
            interval_ns,
            ahead_ns: period as u64,
            burst: (BURST_PERIODS * per_period)
                .min(MAX_BURST.max(2 * per_period))
                .max(MIN_BURST),
            backlog: (BACKLOG_WAKES * per_period).max((BACKLOG_NS / interval_ns).ceil() as u64),
        }
    }

    /// Intended send time of request `seq`, in ns since the run began.
    pub fn intended(&self, seq: u64) -> u64 {
        (seq as f64 * self.interval_ns) as u64
    }

    /// How many requests (0, 1, ...) are intended at or before `t`.
    pub fn scheduled_by(&self, t: u64) -> u64 {
        (t as f64 / self.interval_ns).floor() as u64 + 1
    }

    /// A wake-up at `now` whose next scheduled request is `next_seq`, where the schedule
    /// ends before request `end` (exclusive) and the flows' windows have `room` for more.
    pub fn due(&self, now: u64, next_seq: u64, end: u64, room: u64) -> Due {
        let scheduled = self.scheduled_by(now + self.ahead_ns).min(end);
        let owed = scheduled.saturating_sub(next_seq);
        let send = owed.min(self.burst).min(room);
        Due {
            send,
            skip: (owed - send).saturating_sub(self.backlog),
        }
    }

    /// How long to sleep at `now` before the next wake-up, given the next request: until
    /// it is due, or one period if it is already owed (catching up one burst per period).
    pub fn wait_ns(&self, now: u64, next_seq: u64) -> u64 {
        match self.intended(next_seq).saturating_sub(now) {
            0 => self.ahead_ns,
            w => w,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_up_carries_about_one_period_of_requests() {
        // 150k/s: 6.67 µs apart, 64 per wake-up, about 427 µs apart.
        let p = Pace::new(1e9 / 150_000.0, 0, PER_WAKE);
        assert_eq!(p.ahead_ns, 426_666);
        assert_eq!((p.burst, p.backlog), (128, 3000), "20 ms of schedule");
        let first = p.due(0, 0, u64::MAX, u64::MAX);
        assert_eq!(first, Due { send: 64, skip: 0 }, "intended 0 ns .. 420 µs");
        // The next wake-up, one period on, carries the next period.
        let next = p.due(p.ahead_ns, 64, u64::MAX, u64::MAX);
        assert_eq!(next, Due { send: 64, skip: 0 });
        assert_eq!(p.wait_ns(10_000, 65), p.intended(65) - 10_000);
        // The schedule's end stops it.
        assert_eq!(p.due(0, 0, 10, u64::MAX), Due { send: 10, skip: 0 });
        assert_eq!(p.due(5_000_000, 10, 10, u64::MAX), Due { send: 0, skip: 0 });
    }

    #[test]
    fn the_in_flight_cap_shortens_the_period_and_rates_bound_it() {
        // 40 outstanding at most: 20 per wake-up; 100: 50.
        let p = Pace::new(1e9 / 150_000.0, 40, PER_WAKE);
        assert_eq!(p.ahead_ns, 133_333);
        assert_eq!(Pace::new(1e9 / 150_000.0, 100, PER_WAKE).ahead_ns, 333_333);
        // Asked for 8 per wake-up: 53 µs apart; 1: every request on its own (50 µs at least).
        assert_eq!(Pace::new(1e9 / 150_000.0, 0, 8).ahead_ns, 53_333);
        assert_eq!(Pace::new(1e9 / 10_000.0, 0, 1).ahead_ns, 100_000);
        // 10 M/s would wake every 6.4 µs: held at 50 µs, 500 per wake-up, and a late
        // wake-up may send two periods' worth, above the usual bound.
        let p = Pace::new(100.0, 0, PER_WAKE);
        assert_eq!((p.ahead_ns, p.burst), (50_000, 1000));
        // 1000/s would wake every 32 ms: held at 1 ms, one request per wake-up.
        let p = Pace::new(1e6, 0, PER_WAKE);
        assert_eq!((p.ahead_ns, p.burst, p.backlog), (1_000_000, 16, 20));
    }

    #[test]
    fn a_late_wake_up_sends_a_bounded_burst_then_keeps_a_short_backlog() {
        let p = Pace::new(1e9 / 150_000.0, 0, PER_WAKE);
        // 30 ms late: 4500 owed plus one period ahead.
        let late = 30_000_000;
        let d = p.due(late, 0, u64::MAX, u64::MAX);
        let owed = ((late + p.ahead_ns) as f64 / p.interval_ns) as u64 + 1;
        assert_eq!(d.send, p.burst);
        assert_eq!(d.skip, owed - p.burst - p.backlog);
        // The backlog is already owed: the next wake-up comes a period later, not at once.
        let next = d.send + d.skip;
        assert!(p.intended(next) < late);
        assert_eq!(p.wait_ns(late, next), p.ahead_ns);
        // A period later it sends another burst, and nothing more is skipped.
        let d2 = p.due(late + p.ahead_ns, next, u64::MAX, u64::MAX);
        assert_eq!(
            d2,
            Due {
                send: p.burst,
                skip: 0
            }
        );
        // 1000/s after a 200 ms stall: the 16 oldest leave, 20 wait, the rest are unsent.
        let slow = Pace::new(1e6, 0, PER_WAKE);
        let d = slow.due(1_200_000_000, 1000, u64::MAX, u64::MAX);
        assert_eq!(
            d,
            Due {
                send: 16,
                skip: 202 - 16 - 20
            }
        );
    }

    #[test]
    fn requests_no_window_has_room_for_wait_in_the_backlog() {
        let p = Pace::new(1e6, 0, PER_WAKE);
        // 1000/s, 3 ms in, windows full: nothing leaves, the 4 owed wait.
        assert_eq!(p.due(3_000_000, 0, u64::MAX, 0), Due { send: 0, skip: 0 });
        // Room for 2 at 5 ms: the 2 oldest leave, 4 wait.
        assert_eq!(p.due(5_000_000, 0, u64::MAX, 2), Due { send: 2, skip: 0 });
        // Still full 200 ms on: all but the backlog's 20 are given up.
        assert_eq!(
            p.due(200_000_000, 2, u64::MAX, 0),
            Due {
                send: 0,
                skip: 200 - 20
            }
        );
    }
}
