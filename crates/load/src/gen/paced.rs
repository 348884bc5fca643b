//! The paced open loop of a generator thread: what one wake-up sends (see
//! [`crate::pace`]), and how it drains the answers that arrived while it slept, timed by
//! their kernel receive stamps.

use super::Thread;
use crate::io::FlowIo;
use crate::pace::Pace;
use crate::report::HIST_MAX_NS;
use crate::workload::Workload;
use firehose_sys::SetupError;
use std::time::Duration;

impl<W: Workload, I: FlowIo> Thread<'_, W, I> {
    /// Open loop: sends what the schedule has due at `now` (see [`Pace`]), round robin
    /// over the flows, apart when on schedule and together when behind
    /// ([`Pace::send_shape`]); what the windows have no room for waits in the backlog.
    pub(super) fn send_paced(&mut self, now: u64) {
        let Some(pace) = self.plan.pace.clone() else {
            return;
        };
        let shape = pace.send_shape(now, self.next_seq);
        let end = self.schedule_end(&pace);
        let room: u64 = (0..self.flows.len())
            .map(|f| self.room(f) as u64)
            .fold(0, u64::saturating_add);
        let d = pace.due(now, self.next_seq, end, room);
        let mut due = d.send;
        if let Some(n) = self.plan.send_count {
            due = due.min(n.saturating_sub(self.sent_total));
        }
        let mut left = due;
        let flows = self.flows.len();
        let mut idle = 0;
        while left > 0 && idle < flows {
            let f = self.next_flow;
            self.next_flow = (self.next_flow + 1) % flows;
            let room = (self.room(f) as u64).min(self.plan.batch as u64).min(left) as usize;
            if room == 0 {
                idle += 1;
                continue;
            }
            idle = 0;
            let first = self.next_seq + (due - left);
            let sent = self.send_on(f, room, now, Some(first), shape);
            left -= sent as u64;
            if sent < room {
                break;
            }
        }
        // Requests the table had no id for, and those too far behind to catch up (the
        // server's or the generator's stall), are counted, not queued: queueing them would
        // hide the slowness (coordinated omission).
        let skipped_to = self.next_seq + due + d.skip;
        self.count_unsent(&pace, self.next_seq + (due - left), skipped_to);
        self.next_seq = skipped_to;
    }

    /// The end of a timed schedule (exclusive): requests intended before the send window
    /// closes.
    fn schedule_end(&self, pace: &Pace) -> u64 {
        self.plan
            .send_until_ns
            .map_or(u64::MAX, |u| pace.scheduled_before(u))
    }

    /// Counts scheduled requests `from..to` that fall in the measurement window as unsent.
    fn count_unsent(&mut self, pace: &Pace, from: u64, to: u64) {
        let first_measured = pace.scheduled_before(self.plan.measure_from_ns);
        self.unsent += to.saturating_sub(from.max(first_measured));
    }

    /// When a timed run stops sending: what the backlog still owed (due by `now`, never
    /// sent) is unsent, so every request of the schedule is sent or counted.
    pub(super) fn give_up_owed(&mut self, now: u64) {
        let Some(pace) = self
            .plan
            .pace
            .clone()
            .filter(|_| self.plan.send_until_ns.is_some())
        else {
            return;
        };
        let owed_to = pace.scheduled_by(now).min(self.schedule_end(&pace));
        self.count_unsent(&pace, self.next_seq, owed_to);
        self.next_seq = self.next_seq.max(owed_to);
    }

    /// Paced open loop: sleeps `wait` (arrivals do not wake it; in the path's own call
    /// when it has one, [`FlowIo::sleep`]), then reads everything that arrived meanwhile, each datagram timed from its kernel receive time; returns the
    /// clock read on waking.
    pub(super) fn sleep_and_drain(&mut self, wait: Duration) -> Result<u64, SetupError> {
        let asked = self.now_ns() + wait.as_nanos() as u64;
        // A path that sleeps in its own call sends there too (even when there is no time
        // to sleep); otherwise the thread sleeps.
        let slept = if self.io.sleep(wait)? {
            !wait.is_zero()
        } else if !wait.is_zero() {
            std::thread::sleep(wait);
            self.sleeps += 1;
            true
        } else {
            false
        };
        if slept {
            let woke = self.now_ns();
            let in_window = self.wall_at_start.is_some() && self.wall_at_end.is_none();
            if let (true, Some(h)) = (in_window, self.wake_late.as_mut()) {
                let _ = h.record(woke.saturating_sub(asked).clamp(1, HIST_MAX_NS));
            }
        }
        let ready = self.io.poll(Duration::ZERO)?;
        let now = self.now_ns();
        self.realtime_offset_ns = super::stamps::realtime_ns() - i128::from(now);
        for r in 0..ready {
            let src = self.io.source(r);
            if !self.worth_reading(src) {
                continue;
            }
            loop {
                let max = self.read_max(src);
                let got = self.io.recv(src, max)?;
                if got > 0 {
                    self.take_responses(got, now);
                }
                // Only a full batch may have left more behind.
                if got < self.plan.batch {
                    break;
                }
            }
        }
        Ok(now)
    }

    /// When a datagram received by the kernel at `rx_time_ns` (CLOCK_REALTIME) arrived,
    /// on the run's clock: that time when paced (never later than `now`, should the wall
    /// clock step), else `now`.
    pub(super) fn arrival(&self, rx_time_ns: Option<u64>, now: u64) -> u64 {
        if !self.paced {
            return now;
        }
        rx_time_ns
            .and_then(|t| u64::try_from(i128::from(t) - self.realtime_offset_ns).ok())
            .map_or(now, |t| t.min(now))
    }
}
