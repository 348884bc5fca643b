//! The stamped replies of one socket, for the backends that stamp sends (the socket path
//! and io_uring): each reply sent asking for its transmit stamp is awaited under a key,
//! and a stamp read from the socket's error queue (the one reader,
//! [`firehose_sys::timestamping::ErrQueue`]) completes the reply with that key.
//!
//! Two ways to key, one per backend:
//! - **counted** (the socket path, [`TxStamps::sent_counted`]): SO_TIMESTAMPING's OPT_ID
//!   counts the socket's stamped datagrams from 0, so the replies the kernel accepted
//!   take the next keys in send order and a refused one takes none (sendmmsg sends in
//!   order);
//! - **given** (io_uring, [`TxStamps::next_key`] and [`TxStamps::sent_given`]): each
//!   reply carries its key in the send (SCM_TS_OPT_ID), because the ring may complete a
//!   send that found the socket's buffer full after later ones, and a count would then
//!   pair a stamp with the wrong reply.
//!
//! Either way stamps come back in the order the device took the datagrams. A stamp whose
//! key is past an awaited reply's gives that reply up (`tx_stamps_missing`: its stamp
//! would have come first); a stamp for a reply already given up is ignored. So a stamp is
//! never handed to the wrong reply; at worst the reply is answered without one.

use crate::backend::TxStamped;
use firehose_sys::socket::UdpSock;
use firehose_sys::timestamping::{ErrQueue, TxStamp};
use std::collections::VecDeque;

/// Most stamped replies awaited at once; an older one is given up (counted) when more are
/// sent, as when a device stamps nothing.
const TX_AWAITED: usize = 4096;

/// One socket's stamped replies: queued since the last flush, then awaited by key.
pub(crate) struct TxStamps {
    errq: ErrQueue,
    /// (position, tag) of the stamped replies queued since the last flush: the position
    /// in the send queue (counted) or among the flush's stamped replies (given).
    queued: Vec<(usize, u64)>,
    /// (key, tag) of the replies sent and not yet stamped, in key order.
    awaited: VecDeque<(u32, u64)>,
    next_key: u32,
    read: Vec<TxStamp>,
    out: Vec<(u64, u64)>,
    /// `tx_stamped`: stamps handed back; `tx_stamps_missing`: replies whose stamp never
    /// came (a later key came first, or too many were awaited).
    counters: [(&'static str, u64); 2],
}

impl TxStamps {
    /// Reading up to `batch` stamps per call.
    pub(crate) fn new(batch: usize) -> Self {
        TxStamps {
            // A batch of stamps in one call (and the call that finds the queue empty only
            // when more came than that).
            errq: ErrQueue::new(batch.clamp(16, 64)),
            queued: Vec::new(),
            awaited: VecDeque::new(),
            next_key: 0,
            read: Vec::new(),
            out: Vec::new(),
            counters: [("tx_stamped", 0), ("tx_stamps_missing", 0)],
        }
    }

    /// A reply tagged `tag` was queued stamped at `pos`.
    pub(crate) fn queue(&mut self, pos: usize, tag: u64) {
        self.queued.push((pos, tag));
    }

    /// The key the next reply [`Self::queue`]d gives in its send (given keys).
    pub(crate) fn next_key(&self) -> u32 {
        self.next_key.wrapping_add(self.queued.len() as u32)
    }

    /// After a flush, counted keys: the stamped replies the kernel accepted take the next
    /// keys, in order; one at a `refused` position takes none.
    pub(crate) fn sent_counted(&mut self, refused: &[usize]) {
        for (pos, tag) in std::mem::take(&mut self.queued) {
            if refused.contains(&pos) {
                continue;
            }
            self.await_key(self.next_key, tag);
            self.next_key = self.next_key.wrapping_add(1);
        }
    }

    /// After a flush, given keys: each queued reply gave [`Self::next_key`] as it was at
    /// its queueing; those whose key is in `refused` are not awaited.
    pub(crate) fn sent_given(&mut self, refused: &[u32]) {
        for (_, tag) in std::mem::take(&mut self.queued) {
            let key = self.next_key;
            self.next_key = self.next_key.wrapping_add(1);
            if !refused.contains(&key) {
                self.await_key(key, tag);
            }
        }
    }

    fn await_key(&mut self, key: u32, tag: u64) {
        if self.awaited.len() == TX_AWAITED {
            self.awaited.pop_front();
            self.counters[1].1 += 1;
        }
        self.awaited.push_back((key, tag));
    }

    /// A failed flush saw no send's result: its replies are not awaited (their keys are
    /// spent).
    pub(crate) fn forget_queued(&mut self) {
        let n = std::mem::take(&mut self.queued).len();
        self.next_key = self.next_key.wrapping_add(n as u32);
    }

    /// Reads `sock`'s error queue when a stamp is awaited and matches what came by key:
    /// (tag, ns) for each reply stamped.
    pub(crate) fn read(&mut self, sock: &UdpSock) -> TxStamped<'_> {
        let (syscalls, errors) = self.collect(sock);
        self.stamped(syscalls, errors)
    }

    /// [`Self::read`]'s first half: reads and matches, returns the system calls and the
    /// refused reads.
    pub(crate) fn collect(&mut self, sock: &UdpSock) -> (u64, u64) {
        self.out.clear();
        if self.awaited.is_empty() {
            return (0, 0);
        }
        self.read.clear();
        let (messages, errors) = match self.errq.drain(sock, &mut self.read) {
            Ok(n) => (n, 0),
            Err(_) => (0, 1),
        };
        self.match_read();
        // drain() reads until a call returns less than its batch.
        ((messages / self.errq.batch() + 1) as u64, errors)
    }

    /// Pairs the stamps read with the replies awaited, by key.
    fn match_read(&mut self) {
        for s in &self.read {
            while let Some(&(key, tag)) = self.awaited.front() {
                // Keys wrap: `key` is before `s.key` when the distance is positive.
                let ahead = s.key.wrapping_sub(key) as i32;
                if ahead < 0 {
                    break;
                }
                self.awaited.pop_front();
                if ahead == 0 {
                    self.out.push((tag, s.ns));
                    self.counters[0].1 += 1;
                    break;
                }
                self.counters[1].1 += 1;
            }
        }
    }

    /// [`Self::read`]'s second half: what the last [`Self::collect`] matched.
    pub(crate) fn stamped(&self, syscalls: u64, errors: u64) -> TxStamped<'_> {
        TxStamped {
            stamps: &self.out,
            syscalls,
            errors,
        }
    }

    /// `tx_stamped` and `tx_stamps_missing`, as the backend publishes them.
    pub(crate) fn counters(&self) -> &[(&'static str, u64)] {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamps(t: &mut TxStamps, came: &[u32]) -> Vec<(u64, u64)> {
        t.out.clear();
        t.read = came
            .iter()
            .map(|&key| TxStamp {
                key,
                ns: 1000 + u64::from(key),
            })
            .collect();
        t.match_read();
        t.out.clone()
    }

    /// Given keys: each queued reply gives the next key whether or not the kernel took it;
    /// a refused one is not awaited, so the later stamps still find their replies.
    #[test]
    fn given_keys_skip_refused_replies_and_never_pair_a_stamp_wrongly() {
        let mut t = TxStamps::new(16);
        for tag in [10, 11, 12] {
            assert_eq!(t.next_key(), tag as u32 - 10);
            t.queue(0, tag);
        }
        t.sent_given(&[1]);
        assert_eq!(stamps(&mut t, &[0, 2]), [(10, 1000), (12, 1002)]);
        assert_eq!(t.counters(), [("tx_stamped", 2), ("tx_stamps_missing", 0)]);
        // Keys go on from 3. A stamp that overtakes gives the earlier reply up; the late
        // stamp of that reply is ignored, never handed to another.
        t.queue(0, 20);
        t.queue(0, 21);
        assert_eq!(t.next_key(), 5);
        t.sent_given(&[]);
        assert_eq!(stamps(&mut t, &[4, 3]), [(21, 1004)]);
        assert_eq!(t.counters(), [("tx_stamped", 3), ("tx_stamps_missing", 1)]);
        // A failed flush spends its keys and awaits none.
        t.queue(0, 30);
        t.forget_queued();
        assert_eq!(t.next_key(), 6);
        assert!(t.awaited.is_empty());
    }

    /// Counted keys: only the accepted replies take keys, in send order.
    #[test]
    fn counted_keys_go_to_the_accepted_replies_in_order() {
        let mut t = TxStamps::new(16);
        for (pos, tag) in [(0, 10), (1, 11), (2, 12)] {
            t.queue(pos, tag);
        }
        t.sent_counted(&[1]);
        assert_eq!(stamps(&mut t, &[0, 1]), [(10, 1000), (12, 1001)]);
    }
}
