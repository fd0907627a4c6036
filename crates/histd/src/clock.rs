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

/// The first grid point strictly after `now_ms` (a late flush skips to the next point rather
/// than bunching up).
pub fn next_grid_point(start_ms: u64, interval_ms: u64, now_ms: u64) -> u64 {
    let elapsed = now_ms.saturating_sub(start_ms);
    start_ms + (elapsed / interval_ms + 1) * interval_ms
}

#[cfg(test)]
mod tests {
    use super::next_grid_point;

    #[test]
    fn stays_on_the_grid() {
        let cases = [(1000, 0), (1000, 999), (2000, 1000), (2000, 1999), (5000, 4500)];
        for (want, now) in cases {
            assert_eq!(next_grid_point(0, 1000, now), want, "now {now}");
        }
        assert_eq!(next_grid_point(10_000, 250, 10_600), 10_750);
    }
}
