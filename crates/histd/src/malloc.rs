//! glibc's allocator, set for a daemon whose memory is what an operator budgets: one arena
//! unless the environment asks otherwise, blocks of 128 KiB or more in mappings of their own, and
//! freed memory given back after bursts.
//!
//! glibc gives each thread that allocates an arena of its own (up to 8 per core), and memory
//! freed in one arena serves only the threads of that arena. histd's flush runs on whichever
//! control-plane thread is free, so each flush's snapshot (30 MB at 100k timers) can grow a
//! different arena, and every one of them keeps its peak: one arena gives the flusher the room
//! the last flush and the readers' freed lists left (docs/benchmarks-history.md, "Timers in 2 bytes,
//! statistics in 8, one malloc arena"). The readers do not allocate per line (a timer's list
//! once an interval, and as it grows), and glibc's per-thread cache serves most small
//! allocations without the arena's lock.

use std::ffi::OsStr;

/// The arenas histd asks glibc for: `Some(1)` unless `MALLOC_ARENA_MAX` or an `arena_max` in
/// `GLIBC_TUNABLES` (glibc's own settings, `tunables` here) is set, which glibc then follows.
pub fn arena_limit(malloc_arena_max: Option<&OsStr>, tunables: Option<&OsStr>) -> Option<i32> {
    let tuned = tunables.is_some_and(|tunables| tunables.to_string_lossy().contains("malloc.arena_max"));
    (malloc_arena_max.is_none() && !tuned).then_some(1)
}

/// Limits glibc to [`arena_limit`]'s arenas: called first thing, before any thread starts.
pub fn limit_arenas() {
    let limit =
        arena_limit(std::env::var_os("MALLOC_ARENA_MAX").as_deref(), std::env::var_os("GLIBC_TUNABLES").as_deref());
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Some(arenas) = limit {
        // SAFETY: mallopt only changes a malloc parameter; called before other threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = limit;
}

/// Serves every allocation of 128 KiB or more (reader tables and their arrays by id, the
/// flusher's, flush snapshots' arrays) with its own mapping, returned to the system when freed:
/// glibc otherwise raises that threshold after the first large free, so arrays rebuilt every
/// interval come from the heap and the holes they leave stay in the resident set. A mapping
/// of its own also grows in place (`mremap`: no copy, no old and new block at once), and a
/// zeroed one costs only the pages written. Called by `histd run` before any other thread
/// exists.
pub fn return_large_blocks_to_the_system() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's tuning; it is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 17);
    }
}

/// Asks the allocator to give freed memory back to the system (after a burst's tables were
/// emptied, glibc would otherwise keep it in its heaps for good).
pub(crate) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory at the top of glibc's heaps and arenas;
    // no live allocation is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_arena_unless_glibc_is_told_otherwise() {
        // (MALLOC_ARENA_MAX, GLIBC_TUNABLES, the arenas histd asks for)
        let cases: [(Option<&str>, Option<&str>, Option<i32>); 5] = [
            (None, None, Some(1)),
            (Some("4"), None, None),
            (None, Some("glibc.malloc.arena_max=2"), None),
            (None, Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=8"), None),
            (None, Some("glibc.malloc.trim_threshold=131072"), Some(1)),
        ];
        for (max, tunables, want) in cases {
            assert_eq!(arena_limit(max.map(OsStr::new), tunables.map(OsStr::new)), want, "{max:?} {tunables:?}");
        }
    }
}
