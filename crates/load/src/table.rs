//! The table of outstanding requests of one generator thread.
//!
//! Slots are handed out from a FIFO free list, so a slot is reused as late as possible
//! and a late answer rarely meets a new request in its slot. For 64-bit workloads the
//! wire id also carries the slot's generation, which makes a late answer unmistakable.

use std::collections::VecDeque;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free,
    Pending,
    Done,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    gen: u32,
    flow: u32,
    intended_ns: u64,
    /// When the kernel sent it (CLOCK_REALTIME ns, from its transmit stamp); 0 unknown.
    departed_ns: u64,
    /// Counted in the measurement window (sent after warm-up, before the end).
    counted: bool,
    state: State,
}

/// A request that just ended, as the table saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub flow: u32,
    pub intended_ns: u64,
    /// Its transmit stamp (CLOCK_REALTIME ns), 0 when none came.
    pub departed_ns: u64,
    pub counted: bool,
}

/// What an answer turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// It completes this outstanding request.
    Completes(Ended),
    /// Its request was already answered.
    Duplicate,
    /// It matches nothing outstanding.
    Stray,
}

/// Outstanding requests, keyed by wire id.
pub struct Table {
    entries: Vec<Entry>,
    free: VecDeque<u32>,
    /// (slot, generation) in send order, for finding expired requests oldest first.
    order: VecDeque<(u32, u32)>,
    wide_ids: bool,
}

impl Table {
    /// A table of `capacity` slots. With `wide_ids` (64-bit workload ids) the id carries
    /// the generation in its upper 32 bits.
    pub fn new(capacity: usize, wide_ids: bool) -> Self {
        let capacity = capacity.max(1);
        Table {
            entries: vec![
                Entry {
                    gen: 0,
                    flow: 0,
                    intended_ns: 0,
                    departed_ns: 0,
                    counted: false,
                    state: State::Free,
                };
                capacity
            ],
            free: (0..capacity as u32).collect(),
            order: VecDeque::with_capacity(capacity),
            wide_ids,
        }
    }

    /// Slots not in use.
    pub fn free_slots(&self) -> usize {
        self.free.len()
    }

    /// Takes a slot for a request on `flow`; returns its wire id, or `None` when full.
    pub fn take(&mut self, flow: u32, intended_ns: u64, counted: bool) -> Option<u64> {
        let slot = self.free.pop_front()?;
        let e = &mut self.entries[slot as usize];
        e.gen = e.gen.wrapping_add(1);
        e.flow = flow;
        e.intended_ns = intended_ns;
        e.departed_ns = 0;
        e.counted = counted;
        e.state = State::Pending;
        let gen = e.gen;
        self.order.push_back((slot, gen));
        Some(self.id_of(slot, gen))
    }

    fn id_of(&self, slot: u32, gen: u32) -> u64 {
        if self.wide_ids {
            (u64::from(gen) << 32) | u64::from(slot)
        } else {
            u64::from(slot)
        }
    }

    fn slot_of(&self, id: u64) -> Option<(usize, Option<u32>)> {
        let slot = (id & 0xffff_ffff) as usize;
        if slot >= self.entries.len() {
            return None;
        }
        let gen = if self.wide_ids {
            Some((id >> 32) as u32)
        } else {
            None
        };
        Some((slot, gen))
    }

    /// The flow a pending id was sent on, if it is pending.
    pub fn pending_flow(&self, id: u64) -> Option<u32> {
        let (slot, gen) = self.slot_of(id)?;
        let e = &self.entries[slot];
        (e.state == State::Pending && gen.is_none_or(|g| g == e.gen)).then_some(e.flow)
    }

    /// A handle on pending request `id` that stays unambiguous after its slot is reused
    /// (slot and generation, whatever the workload's id width): what a transmit stamp,
    /// read later, is matched back through.
    pub fn ticket(&self, id: u64) -> Option<u64> {
        let (slot, _) = self.slot_of(id)?;
        Some((u64::from(self.entries[slot].gen) << 32) | slot as u64)
    }

    /// Records when the request of `ticket` left; returns whether it is counted, or `None`
    /// when that request has ended (or its slot has moved on) meanwhile.
    pub fn set_departed(&mut self, ticket: u64, ns: u64) -> Option<bool> {
        let e = self.entries.get_mut((ticket & 0xffff_ffff) as usize)?;
        if e.gen != (ticket >> 32) as u32 || e.state != State::Pending {
            return None;
        }
        e.departed_ns = ns;
        Some(e.counted)
    }

    /// Whether pending request `id` still waits for its transmit stamp.
    pub fn awaits_departure(&self, id: u64) -> bool {
        self.slot_of(id).is_some_and(|(slot, gen)| {
            let e = &self.entries[slot];
            e.state == State::Pending && gen.is_none_or(|g| g == e.gen) && e.departed_ns == 0
        })
    }

    /// Records an answer to wire id `id` arriving on `flow`.
    pub fn answer(&mut self, id: u64, flow: u32) -> Answer {
        let Some((slot, gen)) = self.slot_of(id) else {
            return Answer::Stray;
        };
        let e = &mut self.entries[slot];
        if gen.is_some_and(|g| g != e.gen) || e.flow != flow {
            return Answer::Stray;
        }
        match e.state {
            State::Pending => {
                e.state = State::Done;
                self.free.push_back(slot as u32);
                Answer::Completes(Ended {
                    flow: e.flow,
                    intended_ns: e.intended_ns,
                    departed_ns: e.departed_ns,
                    counted: e.counted,
                })
            }
            State::Done => Answer::Duplicate,
            State::Free => Answer::Stray,
        }
    }

    /// Ends every request sent before `deadline_ns` that is still pending (lost), calling
    /// `lost` for each; returns how many.
    pub fn expire(&mut self, deadline_ns: u64, mut lost: impl FnMut(Ended)) -> usize {
        let mut n = 0;
        while let Some(&(slot, gen)) = self.order.front() {
            let e = &mut self.entries[slot as usize];
            if e.gen != gen || e.state != State::Pending {
                self.order.pop_front();
                continue;
            }
            if e.intended_ns >= deadline_ns {
                break;
            }
            e.state = State::Free;
            self.free.push_back(slot);
            self.order.pop_front();
            lost(Ended {
                flow: e.flow,
                intended_ns: e.intended_ns,
                departed_ns: e.departed_ns,
                counted: e.counted,
            });
            n += 1;
        }
        n
    }

    /// Requests still pending.
    pub fn pending(&self) -> usize {
        self.entries.len() - self.free.len()
    }
}

/// What a datagram received on `flow` is: the answer to an outstanding request, a
/// duplicate of a finished one's, or a stray (not a response of `w`, or a response whose
/// id is pending but which does not answer that request, e.g. another question), with the
/// response's result code. The generator's only way of matching a reply to a request.
/// `arrived` is the kernel's receive stamp where the socket gives one
/// ([`crate::Workload::matches_at`]).
pub fn classify<W: crate::Workload + ?Sized>(
    table: &mut Table,
    w: &mut W,
    data: &[u8],
    flow: u32,
    arrived: Option<u64>,
) -> (Answer, u16) {
    let Some((id, code)) = w.response_id(data) else {
        return (Answer::Stray, 0);
    };
    let answer = if table.pending_flow(id).is_none() {
        // Not pending: a duplicate if it answers a finished request, else stray.
        table.answer(id, flow)
    } else if w.matches_at(id, data, arrived) {
        table.answer(id, flow)
    } else {
        Answer::Stray
    };
    (answer, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_duplicate_and_stray() {
        let mut t = Table::new(4, true);
        let a = t.take(0, 10, true).unwrap();
        let b = t.take(1, 20, false).unwrap();
        assert_eq!(t.pending(), 2);
        assert!(matches!(t.answer(a, 0), Answer::Completes(e) if e.intended_ns == 10 && e.counted));
        assert_eq!(t.answer(a, 0), Answer::Duplicate);
        assert_eq!(t.answer(b, 0), Answer::Stray, "wrong flow");
        assert_eq!(t.answer(99, 0), Answer::Stray);
        assert_eq!(t.pending_flow(b), Some(1));
        assert_eq!(t.pending(), 1);
    }

    #[test]
    fn expiry_is_oldest_first_and_frees_slots() {
        let mut t = Table::new(3, true);
        let a = t.take(0, 10, true).unwrap();
        let _b = t.take(0, 20, true).unwrap();
        let _c = t.take(0, 30, true).unwrap();
        assert_eq!(t.take(0, 40, true), None, "full");
        t.answer(a, 0);
        let mut lost = vec![];
        assert_eq!(t.expire(25, |e| lost.push(e.intended_ns)), 1);
        assert_eq!(lost, vec![20]);
        assert_eq!(t.free_slots(), 2);
    }

    #[test]
    fn late_answer_after_reuse_is_stray_with_wide_ids() {
        let mut t = Table::new(1, true);
        let a = t.take(0, 10, true).unwrap();
        t.expire(11, |_| {});
        let b = t.take(0, 20, true).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.answer(a, 0), Answer::Stray);
        assert!(matches!(t.answer(b, 0), Answer::Completes(_)));
    }

    #[test]
    fn a_departure_reaches_only_its_own_request() {
        let mut t = Table::new(1, false);
        let a = t.take(0, 10, true).unwrap();
        let ta = t.ticket(a).unwrap();
        assert!(t.awaits_departure(a));
        assert_eq!(t.set_departed(ta, 500), Some(true));
        assert!(!t.awaits_departure(a));
        assert!(matches!(t.answer(a, 0), Answer::Completes(e) if e.departed_ns == 500));
        // The slot is taken again (narrow ids: the same wire id): the old ticket misses.
        let b = t.take(0, 20, false).unwrap();
        assert_eq!(a, b);
        assert_eq!(t.set_departed(ta, 600), None);
        assert!(t.awaits_departure(b));
        let tb = t.ticket(b).unwrap();
        assert_eq!(t.set_departed(tb, 700), Some(false));
        let mut lost = vec![];
        t.expire(u64::MAX, |e| lost.push(e.departed_ns));
        assert_eq!(lost, vec![700]);
    }

    #[test]
    fn narrow_ids_are_slot_numbers() {
        let mut t = Table::new(2, false);
        assert_eq!(t.take(0, 1, true), Some(0));
        assert_eq!(t.take(0, 1, true), Some(1));
    }
}
