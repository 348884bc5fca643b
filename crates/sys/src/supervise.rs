//! Joining worker threads: the first error (or panic) wins, every thread is joined.

use crate::SysError;
use std::thread::JoinHandle;

/// Joins every handle; returns the first worker's error, a panic reported as one.
pub fn join_all(
    handles: Vec<JoinHandle<Result<(), SysError>>>,
    what: &str,
) -> Result<(), SysError> {
    let mut first_err = None;
    for h in handles {
        let res = h.join().unwrap_or_else(|_| {
            Err(SysError {
                what: format!("a {what} thread panicked"),
                source: std::io::Error::other("panic"),
            })
        });
        if let Err(e) = res {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}
