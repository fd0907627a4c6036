//! The bottom layer every module may use: the wall clock, and locking a mutex whose data is
//! plain (a holder that panicked leaves it valid, so poisoning is ignored).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The current time in unix seconds (the runtime's clock; aggregation only receives it).
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The current time in unix milliseconds.
pub fn unix_now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Locks, ignoring poisoning: what histd keeps behind a mutex is plain data, valid even if a
/// holder panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
