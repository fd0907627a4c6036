//! The reader's map from series key to state for timers, gauges and sets (counters go by id:
//! `crate::counters`): open addressing over one flat array of slots, built so the hot path can
//! ask for a key's slot to be fetched into cache well before it is needed
//! ([`SeriesMap::prefetch`]). [`Slots`], the slot array with its hash, is shared with the
//! counters' key index.
//!
//! At high cardinality the cost of a line is the cache miss on its series' state, not the
//! parsing. A reader parses a run of lines, prefetching each line's slot, then updates them
//! all: the misses overlap instead of following one another. Each slot holds the key inline
//! when it is at most 24 bytes (`CompactString`) next to the value, so one fetched cache line
//! usually answers the lookup. Linear probing, at most 7/8 full.

use compact_str::CompactString;
use hashbrown::DefaultHashBuilder;
use std::hash::{BuildHasher, Hasher};

/// The hasher every series map of this process uses (randomly seeded once): tables and the
/// flusher's maps that hash alike can be merged in hash order, which walks memory in order.
pub(crate) fn shared_hasher() -> DefaultHashBuilder {
    static SHARED: std::sync::OnceLock<DefaultHashBuilder> = std::sync::OnceLock::new();
    *SHARED.get_or_init(DefaultHashBuilder::default)
}

/// The hash of a series key, the one every map of the process places keys by: the key's
/// bytes alone (no terminator as `str`'s `Hash` adds: a key is never part of a longer tuple),
/// inlined into the reader's line path.
#[inline(always)]
pub(crate) fn hash_key(key: &str) -> u64 {
    hash_key_with(&shared_hasher(), key)
}

/// [`hash_key`] with the shared hasher already at hand (a reader keeps a copy, so a line
/// does not ask the process-wide cell for it).
#[inline(always)]
pub(crate) fn hash_key_with(shared: &DefaultHashBuilder, key: &str) -> u64 {
    match proto::ShortKey::new(key.as_bytes()) {
        Some(short) => hash_short(shared, short),
        None => {
            let mut hasher = shared.build_hasher();
            hasher.write(key.as_bytes());
            hasher.finish()
        }
    }
}

/// [`hash_key`] of a key of at most 15 bytes, from its short form: one multiplication of its
/// two halves, each mixed with a seed, folded (what the hasher does for a 128-bit number).
#[inline(always)]
pub(crate) fn hash_short(shared: &DefaultHashBuilder, short: proto::ShortKey) -> u64 {
    let mut hasher = shared.build_hasher();
    hasher.write_u128(short.get());
    hasher.finish()
}

/// The slots of an open-addressing table (none, or a power of two of them), placed by
/// [`hash_key`]: what [`SeriesMap`] and the key index share.
#[derive(Debug, Clone)]
pub(crate) struct Slots<S> {
    cells: Box<[S]>,
}

impl<S> Slots<S> {
    /// No slots.
    pub(crate) fn empty() -> Self {
        Slots { cells: Box::new([]) }
    }

    /// The first slot probed for `hash` (any index when there are no slots).
    #[inline]
    pub(crate) fn home(&self, hash: u64) -> usize {
        hash as usize & self.cells.len().wrapping_sub(1)
    }

    /// Asks the CPU to start loading the first slot probed for `hash`.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        match self.cells.get(self.home(hash)) {
            Some(slot) if self.is_large() => prefetch_lines(slot),
            _ => {}
        }
    }

    /// The slot probed first for `hash`, when the slots are many enough to be prefetched (read
    /// after [`Slots::prefetch`], to prefetch what it points at).
    #[inline]
    pub(crate) fn home_if_large(&self, hash: u64) -> Option<&S> {
        self.cells.get(self.home(hash)).filter(|_| self.is_large())
    }

    /// True when the slots are too many to stay in the nearest caches ([`PREFETCH_FROM_SLOTS`]):
    /// below that, prefetching is work for nothing.
    #[inline]
    pub(crate) fn is_large(&self) -> bool {
        self.cells.len() >= PREFETCH_FROM_SLOTS
    }

    /// Puts `capacity` slots made by `fill` in place of the slots, returning the old ones.
    /// Tables of several MiB ask the kernel for huge pages before their memory is first
    /// written: one TLB entry per 2 MiB instead of per 4 KiB, so a lookup at high
    /// cardinality costs one cache miss rather than a cache miss and a page walk.
    pub(crate) fn replace_with(&mut self, capacity: usize, fill: impl Fn() -> S) -> Box<[S]> {
        let mut cells: Vec<S> = Vec::with_capacity(capacity);
        advise_huge_pages(cells.as_ptr().cast(), capacity * std::mem::size_of::<S>());
        cells.extend((0..capacity).map(|_| fill()));
        std::mem::replace(&mut self.cells, cells.into_boxed_slice())
    }

    /// The slots themselves.
    pub(crate) fn into_cells(self) -> Box<[S]> {
        self.cells
    }
}

impl<S> std::ops::Deref for Slots<S> {
    type Target = [S];

    fn deref(&self) -> &[S] {
        &self.cells
    }
}

impl<S> std::ops::DerefMut for Slots<S> {
    fn deref_mut(&mut self) -> &mut [S] {
        &mut self.cells
    }
}

/// Tables with fewer slots than this are not prefetched (they stay in cache anyway).
pub(crate) const PREFETCH_FROM_SLOTS: usize = 1 << 13;

/// A slot: empty, or a key and its state.
type Slot<V> = Option<(CompactString, V)>;

/// A map from series key to `V`, with lookups split into hash, prefetch and update.
#[derive(Debug, Clone)]
pub struct SeriesMap<V> {
    slots: Slots<Slot<V>>,
    len: usize,
}

impl<V> Default for SeriesMap<V> {
    /// An empty map (allocates nothing).
    fn default() -> Self {
        SeriesMap { slots: Slots::empty(), len: 0 }
    }
}

impl<V> SeriesMap<V> {
    /// The number of keys.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Asks the CPU to start loading the slot where the key with `hash` would be found.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.slots.prefetch(hash);
    }

    /// True when the slots are too many to stay in the nearest caches.
    #[inline]
    pub fn is_large(&self) -> bool {
        self.slots.is_large()
    }

    /// The state of `key` (whose hash is `hash`), inserted by `make` if absent; the key is
    /// copied only then.
    #[inline]
    pub fn get_or_insert_with(&mut self, hash: u64, key: &str, make: impl FnOnce() -> V) -> &mut V {
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            self.grow();
        }
        let index = match self.find(hash, key) {
            Ok(found) => found,
            Err(empty) => {
                self.slots[empty] = Some((CompactString::from(key), make()));
                self.len += 1;
                empty
            }
        };
        match &mut self.slots[index] {
            Some((_, value)) => value,
            None => unreachable!("slot {index} was just found or filled"),
        }
    }

    /// The state of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&V> {
        if self.slots.is_empty() {
            return None;
        }
        let index = self.find(hash_key(key), key).ok()?;
        self.slots[index].as_ref().map(|(_, value)| value)
    }

    /// `Ok(index)` of the slot holding `key`, or `Err(index)` of the empty slot where it goes.
    /// There is always an empty slot: the map is never more than 7/8 full.
    #[inline]
    fn find(&self, hash: u64, key: &str) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut index = self.slots.home(hash);
        loop {
            match &self.slots[index] {
                None => return Err(index),
                Some((stored, _)) if same_key(stored, key) => return Ok(index),
                Some(_) => index = (index + 1) & mask,
            }
        }
    }

    /// Doubles the slots (16 at first) and puts every key back.
    #[cold]
    fn grow(&mut self) {
        let capacity = (self.slots.len() * 2).max(16);
        let old = self.slots.replace_with(capacity, || None);
        for (key, value) in old.into_vec().into_iter().flatten() {
            let Err(empty) = self.find(hash_key(&key), &key) else { unreachable!("keys are unique") };
            self.slots[empty] = Some((key, value));
        }
    }
}

impl<V> IntoIterator for SeriesMap<V> {
    type Item = (CompactString, V);
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Slot<V>>>;

    /// Every key and its state, in no particular order.
    fn into_iter(self) -> Self::IntoIter {
        self.slots.into_cells().into_vec().into_iter().flatten()
    }
}

impl<V> std::ops::Index<&str> for SeriesMap<V> {
    type Output = V;

    /// The state of `key`; panics when absent.
    fn index(&self, key: &str) -> &V {
        self.get(key).unwrap_or_else(|| panic!("no series {key:?}"))
    }
}

/// Key equality without a call to `memcmp` for the short keys most series have.
#[inline(always)]
pub(crate) fn same_key(stored: &str, key: &str) -> bool {
    let (a, b) = (stored.as_bytes(), key.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    match a.len() {
        8..=16 => word(a, 0) == word(b, 0) && word(a, a.len() - 8) == word(b, b.len() - 8),
        _ => a == b,
    }
}

/// A hint to load `value`'s cache line; no effect where there is no such instruction.
#[inline(always)]
pub(crate) fn prefetch_read<T>(value: &T) {
    prefetch_address((value as *const T).cast());
}

/// A hint to load the cache lines of the first [`HOT_BYTES`] of `value` (a slot larger than a
/// line: its key and the start of its state).
/// Prefetching more lines per slot, for a run of slots, asks more of the core's outstanding
/// misses than it can hold.
#[inline(always)]
fn prefetch_lines<T>(value: &T) {
    let start = (value as *const T).cast::<u8>();
    let end = std::mem::size_of::<T>().min(HOT_BYTES);
    let mut offset = 0;
    while offset < end {
        prefetch_address(start.wrapping_add(offset));
        offset += 64;
    }
    if end > 8 {
        prefetch_address(start.wrapping_add(end - 1));
    }
}

/// The bytes of a slot prefetched ahead of its update.
const HOT_BYTES: usize = 128;

/// Asks for transparent huge pages over the 2 MiB-aligned part of `len` bytes at `start`, when
/// that is at least 4 MiB and not yet written (Linux with THP in `madvise` mode; elsewhere,
/// or when refused, ordinary pages: only speed depends on it).
pub(crate) fn advise_huge_pages(start: *const u8, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 2 * HUGE {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let first = (start as usize).next_multiple_of(HUGE);
        let end = (start as usize + len) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside one live allocation of `len` bytes; MADV_HUGEPAGE
            // changes how its pages are backed, never their contents or validity.
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
}

/// A hint to load the cache line at `address`, which need not be valid: a prefetch never
/// faults.
#[inline(always)]
pub(crate) fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults (whatever the address) and changes no
    // state visible to Rust.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_stored_across_growth() {
        let mut map = SeriesMap::<u64>::default();
        let keys: Vec<String> = (0..5000)
            .map(|i| if i % 3 == 0 { format!("a.rather.long.series.name.{i}") } else { format!("k{i}") })
            .collect();
        for (round, _) in (0..2).enumerate() {
            for (i, key) in keys.iter().enumerate() {
                let hash = hash_key(key);
                map.prefetch(hash);
                *map.get_or_insert_with(hash, key, || 0) += i as u64 + round as u64;
            }
        }
        assert_eq!(map.len(), keys.len());
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(map[key.as_str()], 2 * i as u64 + 1, "{key}");
        }
        assert!(map.get("k5000").is_none() && map.get("").is_none());
        let mut all: Vec<_> = map.into_iter().map(|(key, value)| (key.to_string(), value)).collect();
        all.sort();
        assert_eq!(all.len(), keys.len());
    }

    #[test]
    fn compares_keys_of_every_length_exactly() {
        let cases = [
            ("", "", true),
            ("a", "b", false),
            ("abcdefgh", "abcdefgh", true),
            ("abcdefgh", "abcdefgi", false),
            ("abcdefghijk", "abcdefghijk", true),
            ("abcdefghijk", "abcdXfghijk", false),
            ("abcdefghijklmnop", "abcdefghijklmnoX", false),
            ("abcdefghijklmnopq", "abcdefghijklmnopq", true),
            ("abcdefghijklmnopq", "abcdefghXjklmnopq", false),
            ("short", "shorter", false),
        ];
        for (stored, key, want) in cases {
            assert_eq!(same_key(&CompactString::from(stored), key), want, "{stored:?} vs {key:?}");
        }
    }

    #[test]
    fn an_empty_map_answers_without_allocating() {
        let map = SeriesMap::<f64>::default();
        map.prefetch(12345);
        assert_eq!((map.get("x"), map.len()), (None, 0));
    }
}
