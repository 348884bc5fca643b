//! A value being served, replaceable while serving (zones, RADIUS clients and users).
//!
//! A reload builds a whole new value aside and publishes it with one store; a handler
//! compares a generation number (one atomic load, no lock, no shared write) before each
//! request and takes the lock only on the first request after a swap. A request is
//! therefore answered entirely from the old value or entirely from the new one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The current value and its generation.
#[derive(Debug)]
pub struct Live<T> {
    generation: AtomicU64,
    current: Mutex<Arc<T>>,
}

impl<T> Live<T> {
    /// Starts serving `v` as generation 0.
    pub fn new(v: Arc<T>) -> Arc<Self> {
        Arc::new(Live {
            generation: AtomicU64::new(0),
            current: Mutex::new(v),
        })
    }

    /// The generation now published (cheap: read before every request).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The value now served, with its generation.
    pub fn get(&self) -> (u64, Arc<T>) {
        let cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        (self.generation.load(Ordering::Acquire), cur.clone())
    }

    /// Publishes `v`; handlers pick it up at their next request.
    pub fn publish(&self, v: Arc<T>) {
        let mut cur = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        *cur = v;
        // Bumped under the lock, after the value: whoever sees the new number and then
        // takes the lock finds the new value.
        self.generation.fetch_add(1, Ordering::Release);
    }
}
