//! Open-loop pacing: how many scheduled requests leave at one wake-up.
//!
//! A wake-up costs a timer, a context switch and a send call whatever it carries, and the
//! requests it carries leave back to back, so the server sees them as a burst: the fewer
//! per wake-up, the smoother the arrivals and the dearer each request. By default the
//! generator spends a fixed CPU budget on wake-ups ([`WAKE_BUDGET_NS`]: at most one per
//! 80 µs per thread) and sends at each, in one batch, every request intended before its
//! next wake-up: one request per wake-up at low rates, 4 at 50k/s, 12 at 150k/s.
//! `--per-wake N` asks for N instead. On schedule a wake-up's batch leaves one datagram per
//! message, so the server receives them one by one; behind its schedule, or for a burst, it
//! leaves together ([`Pace::send_shape`]). Each leaves early by less than one wake-up
//! period and is timed from when it really left; a request that leaves late is timed from
//! when it was intended (coordinated omission). After a late wake-up the owed requests go
//! out at most `burst` at a time, the oldest first, so the server sees a bounded burst
//! rather than everything at once; requests no window has room for wait likewise. What
//! is owed beyond that and a short backlog is counted unsent instead of being queued
//! behind (which would hide the stall).

use crate::io::SendShape;
use std::sync::Arc;

/// The shape of the open-loop schedule: when each request is intended to leave
/// (`load --arrivals`). The rate is the same; the server sees different arrivals.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// One request every interval.
    Uniform,
    /// Exponential gaps of the same mean (a Poisson process), from a fixed seed: a
    /// pattern of [`POISSON_PERIOD`] requests, repeated.
    Poisson,
    /// `n` requests at one instant, every `n` intervals.
    Burst(u64),
}

/// Requests in one period of the Poisson pattern (a table of 512 KiB per thread).
pub const POISSON_PERIOD: usize = 1 << 16;

impl Arrivals {
    /// Parses `uniform`, `poisson` or `burst:N` (N from 1 to 1024).
    pub fn parse(s: &str) -> Result<Arrivals, String> {
        match s {
            "uniform" => Ok(Arrivals::Uniform),
            "poisson" => Ok(Arrivals::Poisson),
            _ => match s.strip_prefix("burst:").map(str::parse::<u64>) {
                Some(Ok(n)) if (1..=1024).contains(&n) => Ok(Arrivals::Burst(n)),
                _ => Err(format!(
                    "{s:?} is not an arrival pattern; use uniform, poisson or burst:N (N from 1 to 1024)"
                )),
            },
        }
    }

    /// The name `parse` takes.
    pub fn name(&self) -> String {
        match self {
            Arrivals::Uniform => "uniform".into(),
            Arrivals::Poisson => "poisson".into(),
            Arrivals::Burst(n) => format!("burst:{n}"),
        }
    }
}

/// When each request of a schedule is intended, in ns since the run began.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Uniform,
    /// Offsets of the requests of one period (ascending, the first 0), the period's length.
    Poisson(Arc<[u64]>, f64),
    Burst(u64),
}

/// The Poisson pattern for `seed`: cumulative exponential gaps, scaled so that the period
/// lasts exactly `POISSON_PERIOD` intervals (the rate holds over every period).
fn poisson_offsets(interval_ns: f64, seed: u64) -> (Arc<[u64]>, f64) {
    let mut x = seed;
    // SplitMix64: a fixed, well-mixed sequence for a seed; no outside generator needed.
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let gaps: Vec<f64> = (0..POISSON_PERIOD)
        .map(|_| {
            // Uniform in (0, 1]: never ln(0).
            let u = ((next() >> 11) + 1) as f64 / (1u64 << 53) as f64;
            -u.ln()
        })
        .collect();
    let total: f64 = gaps.iter().sum();
    let period = interval_ns * POISSON_PERIOD as f64;
    let mut at = 0.0;
    let offsets = gaps
        .iter()
        .map(|g| {
            let o = (at / total * period) as u64;
            at += g;
            o
        })
        .collect();
    (offsets, period)
}

/// The default pacing's CPU budget: a thread wakes at most once per this many ns (12,500
/// wake-ups a second), each wake-up carrying every request due before the next: 4 at
/// 50k/s. On the 2-vCPU VM of issue 25 a wake-up's fixed cost was about 26 µs (busy
/// host; its timer and switch, the server's wake, a cold stack), so this spends at most
/// about a third of a CPU on waking. Fewer wake-ups would cost less per request but stretch
/// the server's round trip (its queries leave back to back): the budget keeps rtt p50
/// within 1.2x of `--spin`'s at 50k/s and gives up half of dnsperf's CPU per query, which
/// needs about 30 per wake-up (docs/load.md, "the wake budget"; `make bench-wake-budget`).
pub const WAKE_BUDGET_NS: u64 = 80_000;
/// The most requests a wake-up on schedule sends apart. Sent apart, each costs the sender
/// more than in one GSO send (17-31% more CPU a request); up to 10 a wake-up (125k/s) that
/// bought a round trip a third shorter, at 12 (150k/s) it bought little or cost one: the
/// generator nears a full CPU, falls behind and its catch-up bursts are larger (quiet
/// `make bench-latency`, sessions 9 and 10: rtt p50 apart against together 31 against 46
/// µs at 50k/s, 30 against 44 at 75k/s, 30 against 49 at 100k/s, 33 against 52 at 125k/s;
/// at 150k/s 44 against 51 in one run and 75 against 55 in another).
pub const APART_MAX: u64 = 10;
/// Bounds of the wake-up period: below, a sleep on this VM lasts longer than asked
/// (the timer and the context switch); above, a low rate would leave in lumps.
const MIN_PERIOD_NS: f64 = 10_000.0;
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
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    /// ns between requests.
    pub interval_ns: f64,
    /// Requests intended up to this far after a wake-up leave at it: one period.
    pub ahead_ns: u64,
    /// The most requests one wake-up sends.
    pub burst: u64,
    /// Owed requests (beyond `burst`) carried to later wake-ups; the rest count unsent.
    pub backlog: u64,
    /// Requests one wake-up carries at the schedule's rate (`--per-wake`, or the budget's
    /// choice).
    pub per_wake: u64,
    /// Whether every wake-up's requests leave together: a burst's are intended at one
    /// instant, and `--per-wake N` asks for N per wake-up to spend less CPU per request,
    /// which sending them apart would give back.
    together: bool,
    shape: Shape,
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
    /// Pacing for one request every `interval_ns`, `per_wake` per wake-up (`None`: as many
    /// as the wake-up budget needs, [`WAKE_BUDGET_NS`]), with at most `in_flight_cap`
    /// requests outstanding (0: no cap): a wake-up carries at most half the cap, so the
    /// answers still on their way from the last one leave room for it.
    pub fn new(interval_ns: f64, in_flight_cap: u64, per_wake: Option<u64>) -> Pace {
        Pace::shaped(interval_ns, in_flight_cap, per_wake, &Arrivals::Uniform, 0)
    }

    /// As [`Pace::new`], for `arrivals` (a Poisson pattern drawn from `seed`). A burst of
    /// `n` is one wake-up's load, whatever `per_wake` says, and is never cut.
    pub fn shaped(
        interval_ns: f64,
        in_flight_cap: u64,
        per_wake: Option<u64>,
        arrivals: &Arrivals,
        seed: u64,
    ) -> Pace {
        // Asked for (a burst is one wake-up's load), or what the budget allows; the
        // budget's floor holds even when a small window cuts a wake-up's share (the window
        // then holds the rest back).
        let per_wake_asked = per_wake.is_some();
        let (per_wake, floor) = match (arrivals, per_wake) {
            (Arrivals::Burst(n), _) => (*n, MIN_PERIOD_NS),
            (_, Some(n)) => (n, MIN_PERIOD_NS),
            (_, None) => (
                (WAKE_BUDGET_NS as f64 / interval_ns).ceil() as u64,
                WAKE_BUDGET_NS as f64,
            ),
        };
        let per_wake = match in_flight_cap {
            0 => per_wake.max(1),
            c => (c / 2).clamp(1, per_wake.max(1)),
        };
        let period = (per_wake as f64 * interval_ns).clamp(floor, MAX_PERIOD_NS);
        let per_period = (period / interval_ns).round().max(1.0) as u64;
        let group = match arrivals {
            Arrivals::Burst(n) => *n,
            _ => 1,
        };
        Pace {
            interval_ns,
            per_wake: per_period,
            ahead_ns: period as u64,
            burst: (BURST_PERIODS * per_period)
                .min(MAX_BURST.max(2 * per_period))
                .max(MIN_BURST)
                .max(group),
            backlog: (BACKLOG_WAKES * per_period).max((BACKLOG_NS / interval_ns).ceil() as u64),
            together: matches!(arrivals, Arrivals::Burst(_)) || per_wake_asked,
            shape: match arrivals {
                Arrivals::Uniform => Shape::Uniform,
                Arrivals::Burst(n) => Shape::Burst(*n),
                Arrivals::Poisson => {
                    let (offsets, period) = poisson_offsets(interval_ns, seed);
                    Shape::Poisson(offsets, period)
                }
            },
        }
    }

    /// Intended send time of request `seq`, in ns since the run began.
    pub fn intended(&self, seq: u64) -> u64 {
        match &self.shape {
            Shape::Uniform => (seq as f64 * self.interval_ns) as u64,
            Shape::Burst(n) => ((seq / n * n) as f64 * self.interval_ns) as u64,
            Shape::Poisson(offsets, period) => {
                let m = offsets.len() as u64;
                ((seq / m) as f64 * period) as u64 + offsets[(seq % m) as usize]
            }
        }
    }

    /// How many requests (0, 1, ...) are intended at or before `t`.
    pub fn scheduled_by(&self, t: u64) -> u64 {
        match &self.shape {
            Shape::Uniform => (t as f64 / self.interval_ns).floor() as u64 + 1,
            Shape::Burst(n) => ((t as f64 / (*n as f64 * self.interval_ns)).floor() as u64 + 1) * n,
            Shape::Poisson(offsets, period) => {
                let q = (t as f64 / period).floor() as u64;
                let r = t.saturating_sub((q as f64 * period) as u64);
                q * offsets.len() as u64 + offsets.partition_point(|&o| o <= r) as u64
            }
        }
    }

    /// How many requests are intended before `t`: the first request intended at or after it.
    pub fn scheduled_before(&self, t: u64) -> u64 {
        match t {
            0 => 0,
            t => self.scheduled_by(t - 1),
        }
    }

    /// A wake-up at `now` whose next scheduled request is `next_seq`, where the schedule
    /// ends before request `end` (exclusive) and the flows' windows have `room` for more.
    pub fn due(&self, now: u64, next_seq: u64, end: u64, room: u64) -> Due {
        // One period of the schedule from the first request owed (not from now, so a
        // wake-up a little late still carries one period's worth, not one more), or
        // everything owed when later than that; the request at the period's end is the
        // next wake-up's.
        let from = now.min(self.intended(next_seq));
        let horizon = (from + self.ahead_ns).saturating_sub(1).max(now);
        let scheduled = self.scheduled_by(horizon).min(end);
        let owed = scheduled.saturating_sub(next_seq);
        let send = owed.min(self.burst).min(room);
        Due {
            send,
            skip: (owed - send).saturating_sub(self.backlog),
        }
    }

    /// Paces a sender that spins instead of sleeping: each request leaves when it is
    /// intended, nothing ahead of it, so the server sees the schedule's own shape; and a
    /// pass carries the one request due, so more than one owed is lateness, caught up in
    /// one send ([`Pace::send_shape`]).
    pub fn spinning(&mut self) {
        self.ahead_ns = 0;
        self.per_wake = 1;
    }

    /// How a wake-up at `now` whose next scheduled request is `next_seq` sends:
    /// [`SendShape::Apart`] when it is on schedule, so the server receives the requests
    /// one by one as a timely schedule spaces them (sent together, the later ones' round
    /// trip would hold the server's work on those ahead); [`SendShape::Together`] for
    /// requests intended at one instant (`burst:N`), for `--per-wake N` (asked for to
    /// spend less CPU per request, which one send for many is), and when the generator is behind:
    /// it holds more than one wake-up's worth of requests already due (late by more than
    /// a wake period, or held back by full windows), where one send for many is what
    /// lets it catch up (docs/load.md, "the wake budget"); and when a wake-up carries more
    /// than [`APART_MAX`].
    pub fn send_shape(&self, now: u64, next_seq: u64) -> SendShape {
        let owed = self.scheduled_by(now).saturating_sub(next_seq);
        if self.together || self.per_wake > APART_MAX || owed > self.per_wake {
            SendShape::Together
        } else {
            SendShape::Apart
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
    fn each_shape_keeps_the_rate_and_counts_what_it_intends() {
        let iv = 1e9 / 50_000.0; // 20 µs
        for a in [Arrivals::Uniform, Arrivals::Poisson, Arrivals::Burst(16)] {
            let p = Pace::shaped(iv, 0, Some(64), &a, 7);
            let mut last = 0;
            for seq in 0..200_000u64 {
                let t = p.intended(seq);
                assert!(t >= last, "{a:?}: {seq} intended before {}", seq - 1);
                last = t;
                // Everything up to this request is scheduled by its time, and nothing after
                // the requests sharing its instant.
                let by = p.scheduled_by(t);
                assert!(by > seq, "{a:?} {seq}: {by}");
                assert!(p.intended(by) > t, "{a:?} {seq}");
                assert!(p.scheduled_before(t) <= seq, "{a:?} {seq}");
            }
            // 200,000 requests take 4 s at 50k/s, within 1% (a Poisson period is 65,536).
            let span = p.intended(3 * POISSON_PERIOD as u64) as f64;
            let want = 3.0 * POISSON_PERIOD as f64 * iv;
            assert!((span - want).abs() / want < 1e-6, "{a:?}: {span} vs {want}");
        }
    }

    #[test]
    fn poisson_gaps_are_exponential_and_bursts_share_an_instant() {
        let iv = 20_000.0;
        let p = Pace::shaped(iv, 0, Some(64), &Arrivals::Poisson, 1);
        let gaps: Vec<f64> = (1..POISSON_PERIOD as u64)
            .map(|s| (p.intended(s) - p.intended(s - 1)) as f64)
            .collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // An exponential distribution's standard deviation equals its mean.
        assert!((mean - iv).abs() / iv < 0.01, "{mean}");
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.02,
            "cv {}",
            var.sqrt() / mean
        );
        // Another seed, another pattern; the same seed, the same one.
        let q = Pace::shaped(iv, 0, Some(64), &Arrivals::Poisson, 2);
        assert_ne!(p.intended(10), q.intended(10));
        assert_eq!(p, Pace::shaped(iv, 0, Some(64), &Arrivals::Poisson, 1));
        let b = Pace::shaped(iv, 0, Some(64), &Arrivals::Burst(300), 0);
        assert_eq!(
            (b.intended(0), b.intended(299), b.intended(300)),
            (0, 0, 6_000_000)
        );
        assert_eq!(b.scheduled_by(0), 300);
        // A wake-up carries a whole burst, even above the usual bound of 128.
        assert_eq!(b.due(0, 0, u64::MAX, u64::MAX).send, 300);
    }

    #[test]
    fn arrival_patterns_parse_by_name() {
        for (s, a) in [
            ("uniform", Arrivals::Uniform),
            ("poisson", Arrivals::Poisson),
            ("burst:64", Arrivals::Burst(64)),
        ] {
            assert_eq!(Arrivals::parse(s), Ok(a.clone()));
            assert_eq!(a.name(), s);
        }
        for bad in ["burst:0", "burst:2000", "burst:", "burst", "even"] {
            assert!(Arrivals::parse(bad)
                .unwrap_err()
                .contains("uniform, poisson or burst:N"));
        }
    }

    #[test]
    fn a_wake_up_carries_about_one_period_of_requests() {
        // 150k/s: 6.67 µs apart, 64 per wake-up, about 427 µs apart.
        let p = Pace::new(1e9 / 150_000.0, 0, Some(64));
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
        let p = Pace::new(1e9 / 150_000.0, 40, Some(64));
        assert_eq!(p.ahead_ns, 133_333);
        assert_eq!(Pace::new(1e9 / 150_000.0, 100, Some(64)).ahead_ns, 333_333);
        // Asked for 8 per wake-up: 53 µs apart; 1: every request on its own (10 µs at least).
        assert_eq!(Pace::new(1e9 / 150_000.0, 0, Some(8)).ahead_ns, 53_333);
        assert_eq!(Pace::new(1e9 / 10_000.0, 0, Some(1)).ahead_ns, 100_000);
        let p = Pace::new(1e9 / 150_000.0, 0, Some(1));
        assert_eq!((p.ahead_ns, p.per_wake), (10_000, 2));
        // 10 M/s would wake every 6.4 µs: held at 10 µs, 100 per wake-up, and a late
        // wake-up may send two periods' worth, above the usual bound.
        let p = Pace::new(100.0, 0, Some(64));
        assert_eq!((p.ahead_ns, p.burst, p.per_wake), (10_000, 200, 100));
        // 1000/s would wake every 32 ms: held at 1 ms, one request per wake-up.
        let p = Pace::new(1e6, 0, Some(64));
        assert_eq!((p.ahead_ns, p.burst, p.backlog), (1_000_000, 16, 20));
    }

    #[test]
    fn by_default_the_wake_up_budget_sets_the_batch() {
        // At most one wake-up per 80 µs: 4 requests each at 50k/s (80 µs apart), 12 at
        // 150k/s (80 µs), 3 at 30k/s (100 µs), one each at 10k/s (100 µs: below the
        // budget's rate).
        for (rate, per_wake, ahead) in [
            (50_000.0, 4, 80_000),
            (150_000.0, 12, 80_000),
            (30_000.0, 3, 100_000),
            (10_000.0, 1, 100_000),
        ] {
            let p = Pace::new(1e9 / rate, 0, None);
            assert_eq!(p.per_wake, per_wake, "{rate}");
            assert!(p.ahead_ns.abs_diff(ahead) <= 1, "{rate}: {}", p.ahead_ns);
            assert!(p.ahead_ns + 1 >= WAKE_BUDGET_NS);
            // Each wake-up sends its share, and no more.
            assert_eq!(p.due(0, 0, u64::MAX, u64::MAX).send, per_wake);
        }
        // A small window does not buy more wake-ups than the budget: 4 outstanding at most
        // (2 per wake-up's share) still wakes once per 80 µs, and the window holds the
        // rest back; asked for 2 per wake-up, it wakes every 13 µs.
        let capped = Pace::new(1e9 / 150_000.0, 4, None);
        assert!(capped.ahead_ns.abs_diff(80_000) <= 1, "{capped:?}");
        assert_eq!(Pace::new(1e9 / 150_000.0, 4, Some(2)).ahead_ns, 13_333);
    }

    #[test]
    fn a_late_wake_up_sends_a_bounded_burst_then_keeps_a_short_backlog() {
        let p = Pace::new(1e9 / 150_000.0, 0, Some(64));
        // 30 ms late: 4500 owed, and nothing ahead (it is behind).
        let late = 30_000_000;
        let d = p.due(late, 0, u64::MAX, u64::MAX);
        let owed = (late as f64 / p.interval_ns) as u64 + 1;
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
        let slow = Pace::new(1e6, 0, Some(64));
        let d = slow.due(1_200_000_000, 1000, u64::MAX, u64::MAX);
        assert_eq!(
            d,
            Due {
                send: 16,
                skip: 201 - 16 - 20
            }
        );
    }

    #[test]
    fn requests_no_window_has_room_for_wait_in_the_backlog() {
        let p = Pace::new(1e6, 0, Some(64));
        // 1000/s, 3 ms in, windows full: nothing leaves, the 4 owed wait.
        assert_eq!(p.due(3_000_000, 0, u64::MAX, 0), Due { send: 0, skip: 0 });
        // Room for 2 at 5 ms: the 2 oldest leave, 4 wait.
        assert_eq!(p.due(5_000_000, 0, u64::MAX, 2), Due { send: 2, skip: 0 });
        // Still full 200 ms on (199 owed): all but the backlog's 20 are given up.
        assert_eq!(
            p.due(200_000_000, 2, u64::MAX, 0),
            Due {
                send: 0,
                skip: 199 - 20
            }
        );
    }

    #[test]
    fn a_wake_up_on_schedule_sends_apart_and_one_behind_sends_together() {
        use SendShape::{Apart, Together};
        // 50k/s by the budget: 4 per wake-up, one wake-up per 80 µs.
        let p = Pace::new(1e9 / 50_000.0, 0, None);
        assert_eq!(p.per_wake, 4);
        // On time, and 10 µs late (one request already due): apart.
        assert_eq!(p.send_shape(p.intended(40), 40), Apart);
        assert_eq!(p.send_shape(p.intended(40) + 10_000, 40), Apart);
        // Four due (60 µs late): still one wake-up's worth.
        assert_eq!(p.send_shape(p.intended(43), 40), Apart);
        // Five due: more than a wake-up's worth is owed, so the generator is behind.
        assert_eq!(p.send_shape(p.intended(44), 40), Together);
        assert_eq!(p.send_shape(p.intended(40) + 5_000_000, 40), Together);
        // Woken early (the 2 ms check of losses): nothing due, apart.
        assert_eq!(p.send_shape(0, 40), Apart);
        // A burst's requests are intended at one instant: together, on time or not.
        let b = Pace::shaped(1e9 / 50_000.0, 0, None, &Arrivals::Burst(16), 0);
        assert_eq!(b.send_shape(0, 0), Together);
        assert_eq!(b.send_shape(b.intended(16), 16), Together);
        // Poisson keeps the rule of the uniform schedule.
        let q = Pace::shaped(1e9 / 50_000.0, 0, None, &Arrivals::Poisson, 3);
        assert_eq!(q.send_shape(q.intended(100), 100), Apart);
        assert_eq!(q.send_shape(q.intended(100 + q.per_wake), 100), Together);
        // 125k/s by the budget: 10 per wake-up, APART_MAX: apart on schedule.
        let h = Pace::new(1e9 / 125_000.0, 0, None);
        assert_eq!(h.per_wake, 10);
        assert_eq!(h.send_shape(h.intended(100), 100), Apart);
        assert_eq!(h.send_shape(h.intended(111), 100), Together);
        // 150k/s by the budget: 12 per wake-up, more than APART_MAX: together.
        let f = Pace::new(1e9 / 150_000.0, 0, None);
        assert_eq!(f.per_wake, 12);
        assert_eq!(f.send_shape(f.intended(120), 120), Together);
        // --per-wake N is a CPU trade: its wake-ups send together, on time or not.
        let w = Pace::new(1e9 / 50_000.0, 0, Some(64));
        assert_eq!(w.send_shape(w.intended(64), 64), Together);
        assert_eq!(w.send_shape(0, 64), Together);
    }

    #[test]
    fn a_wake_up_a_little_late_carries_one_period_not_one_more() {
        // 2000/s, one per wake-up: woken 80 µs after its request was due, it sends that
        // one alone; the next (due 420 µs on) is the next wake-up's.
        let p = Pace::new(500_000.0, 0, Some(1));
        assert_eq!(p.due(5_080_000, 10, u64::MAX, u64::MAX).send, 1);
        assert_eq!(p.wait_ns(5_080_000, 11), 420_000);
        // Woken early (the 2 ms check of losses), it sends nothing due later.
        assert_eq!(p.due(4_000_000, 10, u64::MAX, u64::MAX).send, 0);
        assert_eq!(p.due(4_600_000, 10, u64::MAX, u64::MAX).send, 1);
        // 64 per wake-up at 150k/s, 100 µs late: still 64.
        let p = Pace::new(1e9 / 150_000.0, 0, Some(64));
        assert_eq!(
            p.due(p.intended(640) + 100_000, 640, u64::MAX, u64::MAX)
                .send,
            64
        );
    }
}
