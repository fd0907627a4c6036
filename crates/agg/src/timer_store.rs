//! The flusher's timers, numbered like its counters ([`Numbered`]): every key held gets an id
//! in order of first sight, its interval's samples sit in an array by id, and a map per reader
//! from the reader's timer ids to these ([`IdMap`], unmapped ids marked) finds a reader's timer with an array
//! lookup instead of hashing and comparing its key at every take; a flush lists the timers in
//! the key order the numbering keeps, without sorting them.
//!
//! A timer deleted (`deleteTimers`, an idle TTL, a management `deltimers`) stops being live but
//! keeps its id; one that comes back is admitted by the budgets again. Deleted timers are
//! numbered away as [`STALE_TIMERS`] says, and the readers' maps are then rebuilt at their next
//! take.

use std::borrow::Cow;

use crate::key_index::KeyList;
use crate::numbered::{IdMap, Numbered, Staleness};
use crate::timer_samples::{TimerPart, TimerSamples};
use crate::timers::TimerDelta;

/// Timers deleted and without a value for an interval since are stale, and numbered away once
/// there are more than 4096 of them and they outnumber the others: a burst of timer names
/// deleted by `deleteTimers` or an idle TTL gives its room back at the next flush but one.
const STALE_TIMERS: Staleness = Staleness { idle_flushes: 1, slack: 4096 };

/// A reader's timer id not mapped yet.
const UNMAPPED: u32 = u32::MAX;

/// Every timer key held, and this interval's samples of each.
#[derive(Debug, Default)]
pub(crate) struct TimerStore {
    ids: Numbered,
    samples: Vec<TimerSamples>,
}

impl TimerStore {
    /// The number of live timers.
    pub(crate) fn len(&self) -> usize {
        self.ids.live_ids().count()
    }

    /// True when `key` is a live timer.
    pub(crate) fn contains(&self, key: &str) -> bool {
        self.ids.live_id(key).is_some()
    }

    /// The live timer `key`'s samples.
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut TimerSamples> {
        let id = self.ids.live_id(key)?;
        Some(&mut self.samples[id as usize])
    }

    /// Makes `key` a live timer (numbered next when new) and merges `samples` into it.
    pub(crate) fn merge(&mut self, key: &str, samples: TimerSamples, limit: usize) {
        let id = self.live_id(key);
        self.samples[id as usize].merge(samples, limit);
    }

    /// Merges a forwarded part into the live timer `key` (looked for at `guess` first): its
    /// id; `None` (nothing merged) when `key` is not one.
    pub(crate) fn merge_part_if_live(
        &mut self,
        key: &str,
        part: &TimerPart<'_>,
        limit: usize,
        guess: u32,
    ) -> Option<u32> {
        let id = self.ids.find_from_guess(key, guess).filter(|&id| self.ids.is_live(id))?;
        self.samples[id as usize].merge_part(part, limit);
        Some(id)
    }

    /// Makes `key` a live timer (numbered next when new) and merges a forwarded part into it.
    pub(crate) fn merge_part(&mut self, key: &str, part: &TimerPart<'_>, limit: usize) {
        let id = self.live_id(key);
        self.samples[id as usize].merge_part(part, limit);
    }

    /// The id of `key`, made live (numbered next when new).
    fn live_id(&mut self, key: &str) -> u32 {
        let id = self.ids.id(key);
        self.make_live(id)
    }

    /// [`TimerStore::live_id`] of a reader's key `keys[at]`, referring to the reader's copy of
    /// it where it can.
    fn live_id_from(&mut self, keys: &KeyList, at: usize) -> u32 {
        let id = self.ids.id_from(keys, at);
        self.make_live(id)
    }

    /// Makes timer `id` live (its samples made when it was just numbered).
    fn make_live(&mut self, id: u32) -> u32 {
        if id as usize == self.samples.len() {
            self.samples.push(TimerSamples::default());
        }
        self.ids.set_live(id, true);
        id
    }

    /// Moves a reader's interval in. A reader's timer found in its map is merged by id; one
    /// not mapped yet, or deleted since, is looked up by key, and a key not live here is kept
    /// under the key `admit` gives it (its own, or an overflow series'). Only a timer kept
    /// under its own key is mapped: one folded into an overflow series asks the budgets again
    /// at every take, as they count each fold.
    pub(crate) fn absorb(
        &mut self,
        map: &mut IdMap,
        delta: TimerDelta,
        limit: usize,
        mut admit: impl FnMut(&str) -> Cow<'_, str>,
    ) {
        map.follow(&self.ids);
        let (keys, reset, timers) = delta.into_parts();
        if map.ids.len() < keys.len() {
            map.ids.resize(keys.len(), UNMAPPED);
        }
        for (reader_id, samples) in timers {
            let mapped = map.ids[reader_id as usize];
            let id = match mapped != UNMAPPED && self.ids.is_live(mapped) {
                true => mapped,
                false => {
                    let key = &keys[reader_id as usize];
                    let (id, own) = match self.contains(key) {
                        true => (self.live_id(key), true),
                        false => match admit(key) {
                            admitted if admitted == key => (self.live_id_from(&keys, reader_id as usize), true),
                            admitted => (self.live_id(&admitted), false),
                        },
                    };
                    map.ids[reader_id as usize] = if own { id } else { UNMAPPED };
                    id
                }
            };
            self.samples[id as usize].merge(samples, limit);
        }
        if reset {
            map.ids.clear();
        }
    }

    /// Calls `visit` with each live timer's key and samples, in key order.
    pub(crate) fn for_each_sorted(&mut self, mut visit: impl FnMut(&str, &mut TimerSamples)) {
        let ids: Vec<u32> = self.ids.sorted_live_ids().collect();
        let keys = self.ids.keys();
        for id in ids {
            visit(&keys[id as usize], &mut self.samples[id as usize]);
        }
    }

    /// The live timers' keys and samples, by id.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut TimerSamples)> {
        let ids = &self.ids;
        self.samples
            .iter_mut()
            .enumerate()
            .filter(|(id, _)| ids.is_live(*id as u32))
            .map(|(id, samples)| (ids.key(id as u32), samples))
    }

    /// The live timers' keys and samples, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &TimerSamples)> {
        self.ids.live_ids().map(|id| (self.ids.key(id), &self.samples[id as usize]))
    }

    /// Deletes the live timer `key`; true when there was one.
    pub(crate) fn remove(&mut self, key: &str) -> bool {
        match self.ids.live_id(key) {
            Some(id) => {
                self.ids.set_live(id, false);
                self.samples[id as usize] = TimerSamples::default();
                true
            }
            None => false,
        }
    }

    /// After a flush: every timer's samples start over; with `delete` every timer stops being
    /// live, and so do those without a value for `ttl` flushes (the idle TTL); renumbers when
    /// stale timers dominate. Returns how many timers the TTL ended and whether it renumbered
    /// (ids changed, and room was given back).
    pub(crate) fn reset_after_flush(&mut self, delete: bool, ttl: Option<u32>) -> (usize, bool) {
        let samples = &self.samples;
        let (expired, renumbered) = self.ids.age(delete, ttl, STALE_TIMERS, |id| samples[id].received > 0, |_| false);
        match renumbered {
            true => self.samples = (0..self.ids.len()).map(|_| TimerSamples::default()).collect(),
            false => self.samples.iter_mut().for_each(|samples| *samples = TimerSamples::default()),
        }
        (expired, renumbered)
    }

    /// Timers the store has room for.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.samples.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::hash_key;
    use crate::timers::ReaderTimers;

    /// One take of a reader that received `lines` (key, value), absorbed with budgets that
    /// fold the keys in `folded` into `overflow`; the keys the budgets were asked about.
    fn take(
        store: &mut TimerStore,
        map: &mut IdMap,
        reader: &mut ReaderTimers,
        lines: &[(&str, f64)],
        folded: &[&str],
    ) -> Vec<String> {
        for &(key, value) in lines {
            reader.add(hash_key(key), key, value, 1.0, 100, true);
        }
        let mut asked = Vec::new();
        store.absorb(map, reader.take(), 100, |key| {
            asked.push(key.to_string());
            match folded.contains(&key) {
                true => Cow::Borrowed("overflow"),
                false => Cow::Owned(key.to_string()),
            }
        });
        asked
    }

    fn sums(store: &mut TimerStore) -> Vec<(String, f64)> {
        let mut sums = Vec::new();
        store.for_each_sorted(|key, samples| sums.push((key.to_string(), samples.sum)));
        sums
    }

    #[test]
    fn a_readers_timers_are_found_by_id_and_new_or_deleted_ones_by_the_budgets() {
        let (mut store, mut map, mut reader) = (TimerStore::default(), IdMap::default(), ReaderTimers::default());
        // (lines of one take, keys folded by the budgets, keys the budgets were asked about,
        //  each live timer's sum after the take, in key order)
        type Step = (
            &'static [(&'static str, f64)],
            &'static [&'static str],
            &'static [&'static str],
            &'static [(&'static str, f64)],
        );
        let steps: &[Step] = &[
            (&[("b", 1.0), ("a", 2.0), ("b", 3.0)], &[], &["b", "a"], &[("a", 2.0), ("b", 4.0)]),
            (&[("a", 5.0), ("c", 1.0)], &["c"], &["c"], &[("a", 7.0), ("b", 4.0), ("overflow", 1.0)]),
            (&[("c", 2.0), ("a", 1.0)], &["c"], &["c"], &[("a", 8.0), ("b", 4.0), ("overflow", 3.0)]),
        ];
        for (number, &(lines, folded, asked, want)) in steps.iter().enumerate() {
            assert_eq!(take(&mut store, &mut map, &mut reader, lines, folded), asked, "take {number}: budgets asked");
            let want: Vec<(String, f64)> = want.iter().map(|&(key, sum)| (key.to_string(), sum)).collect();
            assert_eq!(sums(&mut store), want, "take {number}");
        }
        assert!(store.remove("a") && !store.remove("a") && !store.contains("a"));
        assert_eq!(
            take(&mut store, &mut map, &mut reader, &[("a", 1.0), ("b", 1.0)], &[]),
            ["a"],
            "deleted: asked again"
        );
        assert_eq!(sums(&mut store), [("a".to_string(), 1.0), ("b".to_string(), 5.0), ("overflow".to_string(), 3.0)]);
    }

    #[test]
    fn a_flush_starts_samples_over_and_deletes_by_the_rules() {
        // (deleteTimers, idle TTL in flushes, flushes without values after one with, timers live after)
        let cases = [(false, None, 3, 2), (true, None, 0, 0), (false, Some(2), 1, 2), (false, Some(2), 2, 0)];
        for (delete, ttl, idle_flushes, live) in cases {
            let (mut store, mut map, mut reader) = (TimerStore::default(), IdMap::default(), ReaderTimers::default());
            take(&mut store, &mut map, &mut reader, &[("a", 1.0), ("b", 2.0)], &[]);
            let mut expired = store.reset_after_flush(delete, ttl).0;
            for _ in 0..idle_flushes {
                expired += store.reset_after_flush(delete, ttl).0;
            }
            assert_eq!(store.len(), live, "{delete} {ttl:?} {idle_flushes}");
            assert_eq!(expired, if ttl.is_some() { 2 - live } else { 0 }, "{delete} {ttl:?} {idle_flushes}");
            store.iter().for_each(|(key, samples)| assert_eq!(samples.received, 0, "{key} starts over"));
        }
    }

    #[test]
    fn deleted_timers_past_the_slack_are_numbered_again_and_maps_rebuilt() {
        let (mut store, mut map, mut reader) = (TimerStore::default(), IdMap::default(), ReaderTimers::default());
        let burst: Vec<String> = (0..STALE_TIMERS.slack + 10).map(|i| format!("t{i}")).collect();
        let lines: Vec<(&str, f64)> = burst.iter().map(|key| (key.as_str(), 1.0)).collect();
        take(&mut store, &mut map, &mut reader, &lines, &[]);
        assert!(!store.reset_after_flush(true, None).1, "deleted, not yet stale");
        take(&mut store, &mut map, &mut reader, &[("t5", 2.0)], &[]);
        assert!(store.reset_after_flush(true, None).1, "renumbered");
        assert_eq!((store.samples.len(), store.ids.generation()), (1, 1), "only t5 kept");
        assert_eq!(take(&mut store, &mut map, &mut reader, &[("t5", 3.0), ("t7", 1.0)], &[]), ["t5", "t7"]);
        assert_eq!(sums(&mut store), [("t5".to_string(), 3.0), ("t7".to_string(), 1.0)]);
    }
}
