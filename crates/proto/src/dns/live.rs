//! The zone set being served, replaceable while serving.
//!
//! A reload builds a whole new [`ZoneSet`] aside and publishes it with one store; a
//! handler compares a generation number (one atomic load, no lock, no shared write)
//! before each query and takes the lock only on the first query after a swap. A query
//! is therefore answered entirely from the old set or entirely from the new one.

use super::db::ZoneSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The current zone set and its generation.
#[derive(Debug)]
pub struct LiveZones {
    generation: AtomicU64,
    current: Mutex<Arc<ZoneSet>>,
}

impl LiveZones {
    /// Starts serving `db` as generation 0.
    pub fn new(db: Arc<ZoneSet>) -> Arc<Self> {
        Arc::new(LiveZones {
            generation: AtomicU64::new(0),
            current: Mutex::new(db),
        })
    }

    /// The generation now published (cheap: read before every query).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The set now served, with its generation.
    pub fn get(&self) -> (u64, Arc<ZoneSet>) {
        let cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (self.generation.load(Ordering::Acquire), cur.clone())
    }

    /// Publishes `db`; handlers pick it up at their next query.
    pub fn publish(&self, db: Arc<ZoneSet>) {
        let mut cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        *cur = db;
        // Bumped under the lock, after the set: whoever sees the new number and then
        // takes the lock finds the new set.
        self.generation.fetch_add(1, Ordering::Release);
    }
}
