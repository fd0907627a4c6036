//! Counters by id, the bulk of statsd traffic, kept so that a million of them cost each key
//! once in a reader and once in the flusher.
//!
//! A reader numbers its counter keys in order of first sight and keeps them across intervals
//! ([`ReaderCounters`]); an interval is an array of values by id plus a bitset of the ids it
//! touched. The flusher takes that array (a swap), with the keys numbered since its last take,
//! and keeps per reader a map from the reader's ids to its own ([`ReaderMap`]), so absorbing is
//! an array walk: no hashing, no key copies. Each interval's arrays are fresh zeroed
//! allocations (pages the kernel maps on first write), so ids a reader does not see in an
//! interval cost no memory in it. The flusher's [`CounterStore`] numbers keys the
//! same way; a flush's [`Counters`] shares its key list and holds ids and counts.
//!
//! Keys are forgotten by starting over, so names that churn cannot grow memory without bound: a
//! reader whose keys outnumber twice what it saw in the interval plus [`CHURN_SLACK`] starts
//! again from no key when it is taken (its keys come back as new ones as they arrive); and when
//! more than half of the flusher's counters have been deleted for two flushes or more (and over
//! [`CHURN_SLACK`] of them), it renumbers the rest and every reader's map is rebuilt from the
//! reader's keys at its next take. Without `deleteCounters` counters are never deleted (Etsy
//! keeps reporting them as 0), so only readers start over.

use std::sync::Arc;

use compact_str::CompactString;

use crate::key_index::{KeyIndex, KeyList, SharedKeys};
use crate::numbered::{IdMap, Numbered, Staleness};

/// How many points ahead a walk of a flush's counters loads their keys.
const PREFETCH_AHEAD: usize = 8;

/// Keys a reader or the flusher may hold beyond what is in use before it starts over.
pub const CHURN_SLACK: usize = 65_536;

/// A reader's counters: keys kept across intervals, this interval's values by id.
#[derive(Debug, Default)]
pub struct ReaderCounters {
    index: KeyIndex,
    values: Vec<f64>,
    touched: Vec<u64>,
    touched_count: usize,
    handed_over: usize,
}

/// One reader's interval of counters, taken by the flusher.
#[derive(Debug, Default)]
pub struct CounterDelta {
    values: Vec<f64>,
    touched: Vec<u64>,
    /// The reader's keys (shared chunks); those from `first_new` on are new to the flusher.
    keys: KeyList,
    first_new: usize,
    reset: bool,
}

impl CounterDelta {
    /// True when the reader started over and handed back more than `keys` keys (their room
    /// is free once this delta is absorbed).
    pub(crate) fn released_more_than(&self, keys: usize) -> bool {
        self.reset && self.keys.len() > keys
    }
}

impl ReaderCounters {
    /// Starts loading where `hash`'s key is looked for (hashes from `series::hash_key`).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// True when the counters' slots are too many to stay in the nearest caches.
    #[inline]
    pub fn is_large(&self) -> bool {
        self.index.is_large()
    }

    /// Second stage, after [`ReaderCounters::prefetch`]: starts loading the key and value the
    /// first probed slot points at.
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(id) = self.index.likely_id(hash) {
            self.index.prefetch_key(id);
            if let Some(value) = self.values.get(id as usize) {
                crate::series::prefetch_read(value);
            }
        }
    }

    /// Adds `amount` to the counter `key` (whose hash is `hash`; `short` its short form, when
    /// the caller has it). Always inlined: a call of its
    /// own cost a stack frame and spills on every counter line (the line's scan keeps its
    /// state in registers around it).
    #[inline(always)]
    pub fn add(&mut self, hash: u64, key: &str, short: Option<proto::ShortKey>, amount: f64) {
        let id = self.index.id_or_insert(hash, key, short) as usize;
        if id >= self.values.len() {
            self.values.resize(id + 1, 0.0);
            self.touched.resize(id / 64 + 1, 0);
        }
        self.values[id] += amount;
        let (word, bit) = (id / 64, 1u64 << (id % 64));
        if self.touched[word] & bit == 0 {
            self.touched[word] |= bit;
            self.touched_count += 1;
        }
    }

    /// The interval so far, leaving zeroed values; with `reset` (or when the keys held are
    /// mostly idle) every key is forgotten too.
    pub fn take(&mut self, reset: bool) -> CounterDelta {
        let reset = reset || self.index.len() > 2 * self.touched_count + CHURN_SLACK;
        let first_new = self.handed_over;
        let keys = self.index.keys().clone();
        if reset {
            self.index = KeyIndex::default();
        }
        let values = std::mem::replace(&mut self.values, vec![0.0; self.index.len()]);
        let touched = std::mem::replace(&mut self.touched, vec![0; self.index.len().div_ceil(64)]);
        self.touched_count = 0;
        self.handed_over = self.index.len();
        CounterDelta { values, touched, keys, first_new, reset }
    }

    /// This interval's value for `key`, if it arrived.
    #[cfg(test)]
    pub fn get(&self, key: &str) -> Option<f64> {
        let id = self.index.id(key)? as usize;
        is_set(&self.touched, id).then(|| self.values[id])
    }

    /// This interval's keys and values, sorted by key.
    #[cfg(test)]
    pub fn interval_values(&self) -> Vec<(CompactString, f64)> {
        let mut all: Vec<_> =
            set_bits(&self.touched).map(|id| (CompactString::from(&self.index.keys()[id]), self.values[id])).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// The flusher's map from one reader's counter and timer ids to its own.
#[derive(Debug, Default)]
pub struct ReaderMap {
    /// Its counters' ids.
    pub(crate) counters: IdMap,
    /// Its timers' ids.
    pub(crate) timers: IdMap,
}

/// The flusher's counters: every key seen (until deleted and renumbered), this interval's
/// count of each, and which are live (reported at the flush).
#[derive(Debug, Default)]
pub(crate) struct CounterStore {
    ids: Numbered,
    /// This interval's count by id, as long as the ids once a count arrives (else empty): a
    /// flush moves the array into its snapshot rather than copying the counts, and the next
    /// interval's costs nothing until its first count.
    values: Vec<f64>,
    /// Whether each counter was added to this interval.
    updated: Vec<bool>,
}

/// Counters deleted and not added to for two flushes are stale, and numbered away once there
/// are more than [`CHURN_SLACK`] of them and they outnumber the others.
const STALE_COUNTERS: Staleness = Staleness { idle_flushes: 2, slack: CHURN_SLACK };

impl CounterStore {
    /// The id of `key`, numbered next (not live) when new.
    pub(crate) fn id(&mut self, key: &str) -> u32 {
        let id = self.ids.id(key);
        self.grow_to(id);
        id
    }

    /// The id of a reader's key `keys[at]`, numbered next (not live) when new, referring to
    /// the reader's copy of it where it can.
    fn id_from(&mut self, keys: &KeyList, at: usize) -> u32 {
        let id = self.ids.id_from(keys, at);
        self.grow_to(id);
        id
    }

    /// Grows the array by id when `id` was just numbered (the counts grow as they arrive).
    fn grow_to(&mut self, id: u32) {
        if id as usize == self.updated.len() {
            self.updated.push(false);
        }
    }

    /// Adds to counter `id`, making it live.
    pub(crate) fn add(&mut self, id: u32, amount: f64) {
        if id as usize >= self.values.len() {
            self.values.resize(self.ids.len(), 0.0);
        }
        self.values[id as usize] += amount;
        self.updated[id as usize] = true;
        self.ids.set_live(id, true);
    }

    /// Adds to the counter `key`, making it live.
    pub(crate) fn add_key(&mut self, key: &str, amount: f64) {
        let id = self.id(key);
        self.add(id, amount);
    }

    /// Adds `amount` to `key` when it is numbered already (looked for at `guess` first): its
    /// id; `None` (nothing added) when it is not.
    pub(crate) fn add_if_held(&mut self, key: &str, amount: f64, guess: u32) -> Option<u32> {
        let id = self.ids.find_from_guess(key, guess)?;
        self.add(id, amount);
        Some(id)
    }

    /// Every key numbered.
    pub(crate) fn all_keys(&self) -> impl Iterator<Item = &str> {
        (0..self.ids.len() as u32).map(|id| self.ids.key(id))
    }

    /// Moves a reader's interval in. The map is extended with the reader's new keys, or built
    /// again from all of them after a renumbering; a key new here is kept under the key
    /// `admit` gives it (its own, or an overflow series').
    pub(crate) fn absorb(
        &mut self,
        map: &mut IdMap,
        delta: CounterDelta,
        mut admit: impl FnMut(&str) -> std::borrow::Cow<'_, str>,
    ) {
        let CounterDelta { values, touched, keys, first_new, reset } = delta;
        map.follow(&self.ids);
        debug_assert!(map.ids.is_empty() || map.ids.len() == first_new, "a reader's ids are mapped in order");
        map.ids.truncate(first_new);
        let unmapped = map.ids.len()..keys.len();
        // Counted first, so that the store's index and arrays grow once, to their size.
        let unknown = unmapped.clone().filter(|&at| self.ids.find(&keys[at]).is_none()).count();
        self.ids.reserve(unknown);
        self.updated.reserve(unknown);
        map.ids.reserve(unmapped.len());
        for reader_id in unmapped {
            let key = &keys[reader_id];
            let id = match self.ids.find(key) {
                Some(id) => id,
                None => match admit(key) {
                    admitted if admitted == key => self.id_from(&keys, reader_id),
                    admitted => self.id(&admitted),
                },
            };
            map.ids.push(id);
        }
        for reader_id in set_bits(&touched) {
            self.add(map.ids[reader_id], values[reader_id]);
        }
        if reset {
            map.ids.clear();
        }
    }

    /// After a flush: zeroes every count; with `delete`, counters for which `keep` is false
    /// stop being live, and so do those not added to for `ttl` flushes (the idle TTL);
    /// renumbers when stale counters dominate. Returns whether it renumbered (keys went) and
    /// how many counters the TTL ended.
    pub(crate) fn reset_after_flush(
        &mut self,
        delete: bool,
        ttl: Option<u32>,
        keep: impl Fn(&str) -> bool,
    ) -> (bool, usize) {
        let updated = &self.updated;
        let (expired, renumbered) = self.ids.age(delete, ttl, STALE_COUNTERS, |id| updated[id], keep);
        self.values = Vec::new();
        match renumbered {
            true => self.updated = vec![false; self.ids.len()],
            false => self.updated.fill(false),
        }
        (renumbered, expired)
    }

    /// The live counters, sorted by key, sharing the key list and taking this interval's
    /// counts (every count is 0 until the next one arrives).
    pub(crate) fn flush_points(&mut self, interval_seconds: f64) -> Counters {
        let ids = self.ids.live_order();
        let counts = std::mem::take(&mut self.values);
        Counters { keys: self.ids.keys().clone(), ids, counts, interval_seconds }
    }

    /// This interval's count of counter `id` (0 before any).
    fn count(&self, id: u32) -> f64 {
        self.values.get(id as usize).copied().unwrap_or(0.0)
    }

    /// Live keys and counts, sorted by key.
    pub(crate) fn live_values(&mut self) -> Vec<(CompactString, f64)> {
        let ids: Vec<u32> = self.ids.sorted_live_ids().collect();
        ids.into_iter().map(|id| (CompactString::from(&self.ids.keys()[id as usize]), self.count(id))).collect()
    }

    /// Stops reporting `key`; true when it was live.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        match self.ids.live_id(key) {
            Some(id) => {
                self.ids.set_live(id, false);
                if let Some(count) = self.values.get_mut(id as usize) {
                    *count = 0.0;
                }
                true
            }
            None => false,
        }
    }

    /// The numbering's generation (bumped by every renumbering).
    #[cfg(test)]
    fn generation(&self) -> u64 {
        self.ids.generation()
    }
}

/// A flush's counters: each live counter's count this interval, sorted by key.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    keys: SharedKeys,
    /// The live counters' ids, in key order (the store's order itself when all are live).
    ids: Arc<Vec<u32>>,
    /// The interval's counts by id (the store's array, moved here): an id past its end counts 0.
    counts: Vec<f64>,
    interval_seconds: f64,
}

/// One counter of a flush.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterPoint<'a> {
    /// The series key (tags included, `;k=v`).
    pub key: &'a str,
    /// The sum of `value / rate` this interval.
    pub count: f64,
    /// `count` per second of the flush interval.
    pub rate: f64,
}

impl Counters {
    /// The counters, sorted by key.
    pub fn iter(&self) -> CounterIter<'_> {
        CounterIter { counters: self, next: 0 }
    }

    /// The number of counters.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The counter at `index` in key order.
    pub fn get(&self, index: usize) -> Option<CounterPoint<'_>> {
        let id = *self.ids.get(index)? as usize;
        let count = crate::finite::saturated(self.counts.get(id).copied().unwrap_or(0.0));
        let rate = crate::finite::saturated(count / self.interval_seconds);
        Some(CounterPoint { key: &self.keys[id], count, rate })
    }

    /// The bytes its arrays hold (the keys, and the ids when all are live, are shared with
    /// the flusher but counted: they stay while the flush is held).
    pub fn heap_bytes(&self) -> usize {
        self.ids.len() * std::mem::size_of::<u32>() + self.counts.len() * std::mem::size_of::<f64>()
    }

    /// True when there is no counter.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

impl<'a> IntoIterator for &'a Counters {
    type Item = CounterPoint<'a>;
    type IntoIter = CounterIter<'a>;

    fn into_iter(self) -> CounterIter<'a> {
        self.iter()
    }
}

/// The iterator of [`Counters::iter`].
#[derive(Debug, Clone)]
pub struct CounterIter<'a> {
    counters: &'a Counters,
    next: usize,
}

impl<'a> Iterator for CounterIter<'a> {
    type Item = CounterPoint<'a>;

    fn next(&mut self) -> Option<CounterPoint<'a>> {
        let Counters { keys, ids, .. } = self.counters;
        // Ids in key order are all over the key list: load each key's reference, then the key,
        // ahead of the point that needs it.
        if let Some(&ahead) = ids.get(self.next + 2 * PREFETCH_AHEAD) {
            keys.prefetch_reference(ahead as usize);
        }
        if let Some(&ahead) = ids.get(self.next + PREFETCH_AHEAD) {
            keys.prefetch_key(ahead as usize);
        }
        let point = self.counters.get(self.next)?;
        self.next += 1;
        Some(point)
    }
}

#[cfg(test)]
fn is_set(bits: &[u64], id: usize) -> bool {
    bits.get(id / 64).is_some_and(|word| word & (1 << (id % 64)) != 0)
}

/// The positions of the set bits, in ascending order.
fn set_bits(bits: &[u64]) -> impl Iterator<Item = usize> + '_ {
    bits.iter().enumerate().flat_map(|(index, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                index * 64 + bit
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(reader: &mut ReaderCounters, key: &str, amount: f64) {
        reader.add(crate::series::hash_key(key), key, None, amount);
    }

    fn cycle(reader: &mut ReaderCounters, store: &mut CounterStore, map: &mut IdMap, reset: bool) {
        store.absorb(map, reader.take(reset), |key| std::borrow::Cow::Borrowed(key));
    }

    fn flushed(store: &mut CounterStore) -> Vec<(String, f64)> {
        store.flush_points(1.0).iter().map(|p| (p.key.to_string(), p.count)).collect()
    }

    #[test]
    fn intervals_move_to_the_flusher_by_id_and_keys_stay() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        add(&mut reader, "b", 1.0);
        add(&mut reader, "a", 2.0);
        add(&mut reader, "b", 3.0);
        let delta = reader.take(false);
        assert_eq!((delta.first_new, delta.keys.len()), (0, 2));
        store.absorb(&mut map, delta, |key| std::borrow::Cow::Borrowed(key));
        assert_eq!(flushed(&mut store), [("a".into(), 2.0), ("b".into(), 4.0)]);
        store.reset_after_flush(false, None, |_| true);

        add(&mut reader, "c", 0.0);
        add(&mut reader, "b", 5.0);
        let delta = reader.take(false);
        assert_eq!((delta.first_new, delta.keys.len()), (2, 3), "only keys numbered since the last take are new");
        store.absorb(&mut map, delta, |key| std::borrow::Cow::Borrowed(key));
        assert_eq!(flushed(&mut store), [("a".into(), 0.0), ("b".into(), 5.0), ("c".into(), 0.0)]);
        assert_eq!(reader.get("b"), None, "a taken interval starts from nothing");
    }

    #[test]
    fn a_flush_takes_the_counts_and_the_next_interval_starts_without_an_array() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        add(&mut reader, "a", 1.0);
        add(&mut reader, "b", 2.0);
        cycle(&mut reader, &mut store, &mut map, false);
        let taken = store.flush_points(1.0);
        assert_eq!((store.values.len(), taken.heap_bytes()), (0, 2 * 4 + 2 * 8), "moved, not copied");
        store.reset_after_flush(false, None, |_| true);
        // Nothing counted: live counters report 0 from a flush that has no array of counts.
        let idle = store.flush_points(1.0);
        let points: Vec<(&str, f64)> = idle.iter().map(|p| (p.key, p.count)).collect();
        assert_eq!((points, idle.heap_bytes()), (vec![("a", 0.0), ("b", 0.0)], 2 * 4));
        store.reset_after_flush(false, None, |_| true);
        // A count for a key new to the store sizes the array to every id.
        add(&mut reader, "c", 3.0);
        cycle(&mut reader, &mut store, &mut map, false);
        assert_eq!(store.values.len(), 3);
        assert_eq!(flushed(&mut store), [("a".into(), 0.0), ("b".into(), 0.0), ("c".into(), 3.0)]);
    }

    #[test]
    fn a_flush_shares_the_key_order_while_every_counter_is_live() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        let keys = |counters: &Counters| -> Vec<String> { counters.iter().map(|p| p.key.to_string()).collect() };
        ["b", "a", "c"].iter().for_each(|key| add(&mut reader, key, 1.0));
        cycle(&mut reader, &mut store, &mut map, false);
        let held = store.flush_points(1.0);
        assert!(Arc::ptr_eq(&held.ids, &store.ids.live_order()), "all live: shared");
        store.reset_after_flush(false, None, |_| true);
        // A key placed while the flush is held: the store's order is copied, the flush's kept.
        add(&mut reader, "0", 1.0);
        cycle(&mut reader, &mut store, &mut map, false);
        let next = store.flush_points(1.0);
        assert_eq!(
            (keys(&held), keys(&next)),
            (vec!["a".into(), "b".into(), "c".into()], vec!["0".into(), "a".into(), "b".into(), "c".into()])
        );
        store.reset_after_flush(false, None, |_| true);
        // One removed: the flush gets the live ids alone.
        assert!(store.remove("b"));
        assert_eq!(keys(&store.flush_points(1.0)), ["0", "a", "c"]);
    }

    #[test]
    fn the_flusher_keeps_a_readers_keys_by_reference_except_the_last_partial_chunk() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        let keys: Vec<String> = (0..5000).map(|i| format!("many.{i}")).collect();
        keys.iter().for_each(|key| add(&mut reader, key, 1.0));
        store.absorb(&mut map, reader.take(false), |key| std::borrow::Cow::Borrowed(key));
        assert_eq!(store.ids.keys().copies(), 5000 - 4096);
        // Folded into another key by the budgets: that key is a copy.
        add(&mut reader, "many.new", 1.0);
        store.absorb(&mut map, reader.take(false), |_| std::borrow::Cow::Owned("overflow".to_string()));
        assert_eq!(store.ids.keys().copies(), 5000 - 4096 + 1);
        let flushed = flushed(&mut store);
        assert_eq!(flushed.len(), 5001);
        assert!(keys.iter().all(|key| flushed.binary_search_by(|(k, _)| k.as_str().cmp(key)).is_ok()));
    }

    #[test]
    fn a_reset_reader_is_mapped_again_from_its_new_keys() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        add(&mut reader, "x", 1.0);
        add(&mut reader, "y", 1.0);
        cycle(&mut reader, &mut store, &mut map, true);
        assert!(map.ids.is_empty());
        add(&mut reader, "y", 2.0);
        cycle(&mut reader, &mut store, &mut map, false);
        assert_eq!(flushed(&mut store), [("x".into(), 1.0), ("y".into(), 3.0)]);
    }

    #[test]
    fn counters_deleted_for_two_flushes_are_renumbered_away() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        for i in 0..(CHURN_SLACK + 10) {
            add(&mut reader, &format!("gone.{i}"), 1.0);
        }
        add(&mut reader, "kept", 7.0);
        let keep_none = |_: &str| false;
        for flush in 0..3 {
            cycle(&mut reader, &mut store, &mut map, false);
            assert_eq!(store.generation(), 0, "flush {flush}: deleted once, idle once: not stale yet");
            store.reset_after_flush(true, None, keep_none);
            add(&mut reader, "kept", 1.0);
        }
        assert_eq!(
            (store.generation(), store.ids.len(), store.updated.len()),
            (1, 1, 1),
            "only the counter in use is left"
        );
        add(&mut reader, "new", 2.0);
        cycle(&mut reader, &mut store, &mut map, false);
        assert_eq!(flushed(&mut store), [("kept".into(), 1.0), ("new".into(), 2.0)], "the map was rebuilt");
        store.reset_after_flush(false, None, keep_none);
        cycle(&mut reader, &mut store, &mut map, false);
        assert_eq!(flushed(&mut store), [("kept".into(), 0.0), ("new".into(), 0.0)]);
    }

    /// Counters idle for their TTL stop being reported and, once they dominate, are renumbered
    /// away; live ones idle for less stay reported (as zero).
    #[test]
    fn counters_idle_for_their_ttl_expire_and_are_renumbered_away() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        for i in 0..(CHURN_SLACK + 10) {
            add(&mut reader, &format!("gone.{i}"), 1.0);
        }
        let mut expired = Vec::new();
        for _ in 0..5 {
            add(&mut reader, "kept", 1.0);
            cycle(&mut reader, &mut store, &mut map, false);
            let (_, went) = store.reset_after_flush(false, Some(2), |_| false);
            expired.push(went);
        }
        assert_eq!(expired, [0, 0, CHURN_SLACK + 10, 0, 0], "reported at flushes 1 to 3, gone after the third");
        assert_eq!(
            (store.generation(), store.ids.len(), store.updated.len()),
            (1, 1, 1),
            "only the counter in use is left"
        );
        cycle(&mut reader, &mut store, &mut map, false);
        assert_eq!(flushed(&mut store), [("kept".into(), 0.0)], "idle once: reported as zero");
    }

    #[test]
    fn counters_deleted_every_flush_but_in_use_stay_numbered() {
        let (mut reader, mut store, mut map) = (ReaderCounters::default(), CounterStore::default(), IdMap::default());
        for flush in 0..4 {
            for i in 0..(CHURN_SLACK + 10) {
                add(&mut reader, &format!("busy.{i}"), 1.0);
            }
            cycle(&mut reader, &mut store, &mut map, false);
            assert_eq!(store.flush_points(1.0).len(), CHURN_SLACK + 10, "flush {flush}");
            store.reset_after_flush(true, None, |_| false);
        }
        assert_eq!(store.generation(), 0);
    }

    #[test]
    fn a_reader_holding_mostly_idle_keys_starts_over() {
        let mut reader = ReaderCounters::default();
        for i in 0..(CHURN_SLACK + 10) {
            add(&mut reader, &format!("k{i}"), 1.0);
        }
        assert!(!reader.take(false).reset, "every key was used this interval");
        add(&mut reader, "k1", 1.0);
        assert!(reader.take(false).reset, "one key of 65k used");
        assert_eq!(reader.index.len(), 0);
    }

    #[test]
    fn set_bits_are_listed_in_order() {
        let bits = [0b1010_0001u64, 0, 1 << 63];
        assert_eq!(set_bits(&bits).collect::<Vec<_>>(), [0, 5, 7, 191]);
        assert!(is_set(&bits, 191) && !is_set(&bits, 1) && !is_set(&bits, 500));
    }
}
