//! Latency taken apart by the kernel's timestamps: each transaction's four instants
//! (intended, departed, arrived, read) give `send_lag` (intended -> departed: the
//! generator's own delay), `rtt` (departed -> arrived: the network and the server) and
//! `recv_lag` (arrived -> read), beside `latency` (from intended, as always).
//!
//! A flow's transmit stamps carry a key: the one each send gave (SCM_TS_OPT_ID, where the
//! kernel takes it: the segments of a UDP GSO send share their send's key and its one
//! stamp, taken as the device took them all), or else the kernel's count of the datagrams
//! the socket accepted. The path says which key each request went under
//! ([`FlowIo::sent_keys`]); the thread keeps, per flow, the requests it sent in key order,
//! and reads the stamps from the error queue right after each send, when they are already
//! there (the device stamps a packet as it takes it). A response whose request has no
//! departure yet reads the queue once more before it is matched.
//! Departure times also give the gaps between consecutive departures of the thread: the
//! arrivals the server really saw.

use super::Thread;
use crate::decompose::Decomposition;
use crate::io::{FlowIo, TxStamp, NOT_SENT};
use crate::workload::Workload;
use firehose_sys::SetupError;
use std::collections::VecDeque;

/// One thread's stamp bookkeeping.
pub(super) struct Stamps {
    /// Per flow: (key, table ticket) of each request sent and not yet stamped, in key
    /// order (requests of one GSO send share a key).
    pub(super) sent: Vec<VecDeque<(u32, u64)>>,
    /// Table tickets of the requests of the send being made.
    batch: Vec<u64>,
    pub(super) read: Vec<TxStamp>,
    /// The latest departure seen (CLOCK_REALTIME ns), for the gaps.
    pub(super) last_departure: u64,
    /// Most requests a flow's list keeps (a path that stops stamping must not grow it).
    keep: usize,
    /// The whole run's parts (and counts); the parts reach it through the interval
    /// handover, like latency.
    pub(super) figures: Decomposition,
    /// The parts since the last interval handover (`--hdr-log`).
    interval: Decomposition,
    /// Per part, the last interval the driver asked for.
    seen: [u64; 3],
    /// A failed error-queue read, for the thread's loop to end the run with.
    pub(super) failure: Option<SetupError>,
}

impl Stamps {
    pub(super) fn new(flows: usize, keep: usize) -> Self {
        Stamps {
            sent: (0..flows).map(|_| VecDeque::new()).collect(),
            batch: Vec::new(),
            read: Vec::new(),
            last_departure: 0,
            keep: keep.max(64),
            figures: Decomposition::new(),
            interval: Decomposition::new(),
            seen: [0; 3],
            failure: None,
        }
    }
}

/// CLOCK_REALTIME in ns since the Unix epoch: the clock of kernel timestamps (receive and
/// transmit).
pub(super) fn realtime_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl Stamps {
    /// Whether some request sent has no departure yet (its stamp is still to be read).
    pub(super) fn unread(&self) -> bool {
        self.sent.iter().any(|l| !l.is_empty())
    }
}

impl<W: Workload, I: FlowIo> Thread<'_, W, I> {
    /// Notes request `k` of the send being built (wire id `id`).
    pub(super) fn stamp_queued(&mut self, k: usize, id: u64) {
        if let Some(st) = self.stamps.as_mut() {
            if k == 0 {
                st.batch.clear();
            }
            st.batch.push(self.table.ticket(id).unwrap_or(u64::MAX));
        }
    }

    /// After a send on flow `f`: notes the key each accepted request went under, then
    /// reads the flow's stamps.
    pub(super) fn stamp_sent(&mut self, f: usize) {
        let Some(st) = self.stamps.as_mut() else {
            return;
        };
        let keys = self.io.sent_keys();
        let list = &mut st.sent[f];
        for (&ticket, &key) in st.batch.iter().zip(keys) {
            if key != NOT_SENT {
                list.push_back((key, ticket));
            }
        }
        while list.len() > st.keep {
            list.pop_front();
        }
        st.batch.clear();
        self.read_stamps(f)
    }

    /// Reads flow `f`'s queued transmit stamps and records each on its request.
    fn read_stamps(&mut self, f: usize) {
        let Some(st) = self.stamps.as_mut() else {
            return;
        };
        st.read.clear();
        if let Err(e) = self.io.tx_stamps(f, &mut st.read) {
            st.failure.get_or_insert(e);
        }
        for s in &st.read {
            let list = &mut st.sent[f];
            // Requests before this key never got a stamp (they end without a departure).
            while list
                .front()
                .is_some_and(|&(k, _)| (s.key.wrapping_sub(k) as i32) > 0)
            {
                list.pop_front();
            }
            if list.front().is_none_or(|&(k, _)| k != s.key) {
                st.figures.unmatched += 1;
                continue;
            }
            // Every request the send carried (the segments of a GSO send) left with it.
            while let Some(&(_, ticket)) = list.front().filter(|&&(k, _)| k == s.key) {
                list.pop_front();
                let counted = self.table.set_departed(ticket, s.ns);
                if counted == Some(true) && st.last_departure != 0 && s.ns >= st.last_departure {
                    st.figures.record_gap(s.ns - st.last_departure);
                }
                st.last_departure = st.last_departure.max(s.ns);
            }
        }
    }

    /// Before response `id` on flow `f` is matched: reads the flow's stamps if its request
    /// has no departure yet.
    pub(super) fn stamp_before_answer(&mut self, id: u64, f: usize) {
        if self.stamps.is_some() && f < self.flows.len() && self.table.awaits_departure(id) {
            self.read_stamps(f);
        }
    }

    /// Hands the parts recorded since the last interval over when the driver asks for an
    /// interval (`--hdr-log`), or for good when `last`; either way they join the run's.
    pub(super) fn hand_over_parts(&mut self, last: bool) {
        let Some(st) = self.stamps.as_mut() else {
            return;
        };
        let parts = st.interval.parts_mut().into_iter();
        let whole = st.figures.parts_mut().into_iter();
        let slots = self.live.parts.iter().zip(st.seen.iter_mut());
        for (((slot, seen), interval), total) in slots.zip(parts).zip(whole) {
            if last {
                slot.finish(interval, total);
            } else {
                slot.poll(seen, interval, total);
            }
        }
    }

    /// The error a stamp read met, once: the run ends with it.
    pub(super) fn stamp_failure(&mut self) -> Result<(), SetupError> {
        match self.stamps.as_mut().and_then(|s| s.failure.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Records a counted transaction's parts: intended at `intended` (this thread's clock),
    /// departed and arrived by the kernel (CLOCK_REALTIME), read at `read` (this thread's
    /// clock), with `offset` = CLOCK_REALTIME - this thread's clock.
    pub(super) fn stamp_completed(
        &mut self,
        intended: u64,
        departed: u64,
        arrived: Option<u64>,
        read: u64,
        offset: i128,
    ) {
        let Some(st) = self.stamps.as_mut() else {
            return;
        };
        let (Some(arrived), true) = (arrived, departed != 0) else {
            st.figures.unstamped += 1;
            return;
        };
        if arrived < departed {
            st.figures.misordered += 1;
            return;
        }
        let intended_rt = i128::from(intended) + offset;
        let read_rt = i128::from(read) + offset;
        let send_lag = (i128::from(departed) - intended_rt).max(0) as u64;
        let recv_lag = (read_rt - i128::from(arrived)).max(0) as u64;
        st.interval.record(arrived - departed, send_lag, recv_lag);
    }
}
