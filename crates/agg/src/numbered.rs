//! The flusher's numbering of one type's series, shared by its counters ([`crate::counters`])
//! and timers ([`crate::timer_store`]): every key held gets an id in order of first sight, so
//! a store keeps its values in arrays by id and finds a reader's series through a map from the
//! reader's ids ([`crate::ReaderMap`]) instead of a hash lookup by key.
//!
//! An id is live while its series is reported at the flush; a series deleted (`delete*`, an
//! idle TTL, a management command) keeps its id, not live, and comes back on the same id. Ids
//! stay sorted by key in `order` (new ones merged in when asked), so a flush lists its series
//! in key order without sorting them. Once stale ids (not live, idle for a given number of
//! flushes) outnumber the others and a slack, the ids are numbered again in a new generation:
//! every reader's map of an older one is rebuilt at its next take.

use std::sync::Arc;

use crate::key_index::{place_new_ids, KeyList, SharedIndex, SharedKeys};
use crate::series::hash_key;

/// The flusher's map from one reader's ids (counter or timer) to a [`Numbered`]'s, kept
/// between takes: `ids[reader id]` is the store's id.
#[derive(Debug, Default)]
pub(crate) struct IdMap {
    /// By the reader's id, the store's (what a reader id not mapped holds is the store's to say).
    pub(crate) ids: Vec<u32>,
    /// The numbering the ids belong to.
    generation: u64,
}

impl IdMap {
    /// Forgets every id when they belong to an older numbering than `numbered`'s (it was
    /// numbered again since): the map is built again from the reader's keys.
    pub(crate) fn follow(&mut self, numbered: &Numbered) {
        if self.generation != numbered.generation() {
            (self.ids, self.generation) = (Vec::new(), numbered.generation());
        }
    }
}

/// Keys of a reader's chunk that must survive a renumbering for the others to keep referring
/// to it (1/8 of a chunk: a chunk held for fewer would cost more than copying them).
const KEPT_SHARE: usize = 512;

/// When a store's deleted series are numbered away.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staleness {
    /// Flushes a series not live must go without a value to be stale.
    pub idle_flushes: u32,
    /// Stale series kept however many there are, before they must also outnumber the others.
    pub slack: usize,
}

/// Keys numbered by a flusher's store, whether each is live, flushes since each had a value,
/// and the ids in key order.
#[derive(Debug, Default)]
pub(crate) struct Numbered {
    index: SharedIndex,
    live: Vec<bool>,
    /// Flushes since each series last had a value (0: it had one in the last flushed interval).
    idle_flushes: Vec<u32>,
    /// Ids sorted by key; ids from `order.len()` on are not placed yet. Shared with the
    /// flush that took it whole (copied if it changes while that flush is held).
    order: Arc<Vec<u32>>,
    /// Bumped by every renumbering.
    generation: u64,
}

impl Numbered {
    /// The number of ids (live or not): the length of a store's arrays by id.
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// The numbering readers' maps must belong to.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The id of `key`, numbered next (not live) when new: the store then grows its arrays.
    pub(crate) fn id(&mut self, key: &str) -> u32 {
        let id = self.index.id_or_insert(hash_key(key), key);
        self.note_new(id);
        id
    }

    /// The id of a reader's key `keys[at]`, numbered next (not live) when new: as a reference
    /// to the reader's chunk when the key is in a full one, else as a copy.
    pub(crate) fn id_from(&mut self, keys: &KeyList, at: usize) -> u32 {
        let hash = hash_key(&keys[at]);
        let id = match keys.full_chunk(at) {
            Some((chunk, place)) => self.index.id_or_refer(hash, chunk, place),
            None => self.index.id_or_insert(hash, &keys[at]),
        };
        self.note_new(id);
        id
    }

    /// Makes room for `additional` new ids at once.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.index.reserve(additional);
        self.live.reserve(additional);
        self.idle_flushes.reserve(additional);
    }

    /// Grows the per-id state when `id` was just numbered.
    fn note_new(&mut self, id: u32) {
        if id as usize == self.live.len() {
            self.live.push(false);
            self.idle_flushes.push(0);
        }
    }

    /// The id of `key`, if it is numbered (live or not).
    pub(crate) fn find(&self, key: &str) -> Option<u32> {
        self.index.id(key)
    }

    /// The id of `key`, if numbered, trying `guess` first: a reader of series in the order
    /// they were numbered (a global merging its locals' batches, each cut in the same order)
    /// finds each after the last without hashing it.
    pub(crate) fn find_from_guess(&self, key: &str, guess: u32) -> Option<u32> {
        if (guess as usize) < self.len() && self.key(guess) == key {
            return Some(guess);
        }
        self.find(key)
    }

    /// The id of `key` when its series is live.
    pub(crate) fn live_id(&self, key: &str) -> Option<u32> {
        self.find(key).filter(|&id| self.is_live(id))
    }

    /// True when series `id` is reported at the flush.
    pub(crate) fn is_live(&self, id: u32) -> bool {
        self.live[id as usize]
    }

    /// Makes series `id` reported at the flush, or not.
    pub(crate) fn set_live(&mut self, id: u32, live: bool) {
        self.live[id as usize] = live;
    }

    /// The key numbered `id`.
    pub(crate) fn key(&self, id: u32) -> &str {
        self.index.key(id)
    }

    /// Every key, by id.
    pub(crate) fn keys(&self) -> &SharedKeys {
        self.index.keys()
    }

    /// The live ids by id.
    pub(crate) fn live_ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len() as u32).filter(|&id| self.is_live(id))
    }

    /// The live ids in key order (placing the ids numbered since the last call first).
    pub(crate) fn sorted_live_ids(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.place_new_ids();
        self.order.iter().copied().filter(|&id| self.live[id as usize])
    }

    /// The live ids in key order, as [`Numbered::sorted_live_ids`]: when every id is live (as
    /// counters are unless deleted) the order itself, shared rather than copied.
    pub(crate) fn live_order(&mut self) -> Arc<Vec<u32>> {
        self.place_new_ids();
        match self.live.iter().all(|&live| live) {
            true => Arc::clone(&self.order),
            false => Arc::new(self.sorted_live_ids().collect()),
        }
    }

    /// Brings `order` up to date with the ids numbered since.
    fn place_new_ids(&mut self) {
        if self.order.len() < self.live.len() {
            place_new_ids(Arc::make_mut(&mut self.order), self.index.keys(), self.live.len());
        }
    }

    /// After a flush: counts a flush for every series (`had_value`: it had one in the flushed
    /// interval); with `delete` every series stops being live, and so do those without a value
    /// for `ttl` flushes, except those `keep` names. Renumbers when stale ids dominate (the
    /// store then starts its arrays over, as long as [`Numbered::len`], all values reset).
    /// Returns how many series the TTL ended and whether it renumbered.
    pub(crate) fn age(
        &mut self,
        delete: bool,
        ttl: Option<u32>,
        stale: Staleness,
        had_value: impl Fn(usize) -> bool,
        keep: impl Fn(&str) -> bool,
    ) -> (usize, bool) {
        let (mut stale_ids, mut expired) = (0, 0);
        for id in 0..self.len() {
            let idle = &mut self.idle_flushes[id];
            *idle = if had_value(id) { 0 } else { idle.saturating_add(1) };
            let ends = delete || ttl.is_some_and(|ttl| *idle >= ttl);
            if self.live[id] && ends && !keep(self.index.key(id as u32)) {
                self.live[id] = false;
                expired += usize::from(!delete);
            }
            stale_ids += usize::from(!self.live[id] && self.idle_flushes[id] >= stale.idle_flushes);
        }
        let renumber = stale_ids > stale.slack && stale_ids * 2 > self.len();
        if renumber {
            self.renumber(stale.idle_flushes);
        }
        (expired, renumber)
    }

    /// Keeps the ids that are not stale, numbered again in key order, in a new generation. A
    /// kept key that refers to a reader's chunk still does when at least [`KEPT_SHARE`] of that
    /// chunk's keys are kept: otherwise it is copied, and the chunk let go.
    fn renumber(&mut self, stale_after: u32) {
        self.place_new_ids();
        let kept = |id: usize| self.live[id] || self.idle_flushes[id] < stale_after;
        let keys = self.index.keys();
        let (mut kept_per_chunk, mut kept_count) = (vec![0usize; keys.chunks().len()], 0);
        for id in (0..self.len()).filter(|&id| kept(id)) {
            if let Some((chunk, _)) = keys.reference(id) {
                kept_per_chunk[chunk] += 1;
            }
            kept_count += 1;
        }
        let mut renumbered = Numbered { generation: self.generation + 1, ..Numbered::default() };
        renumbered.reserve(kept_count);
        for &id in self.order.iter().filter(|&&id| kept(id as usize)) {
            let (id, key) = (id as usize, &keys[id as usize]);
            let new = match keys.reference(id) {
                Some((chunk, place)) if kept_per_chunk[chunk] >= KEPT_SHARE => {
                    renumbered.index.id_or_refer(hash_key(key), &keys.chunks()[chunk], place)
                }
                _ => renumbered.index.id_or_insert(hash_key(key), key),
            };
            renumbered.note_new(new);
            renumbered.live[new as usize] = self.live[id];
            renumbered.idle_flushes[new as usize] = self.idle_flushes[id];
        }
        renumbered.order = Arc::new((0..renumbered.len() as u32).collect());
        *self = renumbered;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALE: Staleness = Staleness { idle_flushes: 1, slack: 2 };

    #[test]
    fn deleted_ids_go_once_stale_ones_dominate_and_the_rest_keep_key_order() {
        let mut numbered = Numbered::default();
        for key in ["d", "b", "a", "e", "c", "f"] {
            let id = numbered.id(key);
            numbered.set_live(id, true);
        }
        let sorted = |numbered: &mut Numbered| -> Vec<String> {
            let ids: Vec<u32> = numbered.sorted_live_ids().collect();
            ids.iter().map(|&id| numbered.key(id).to_string()).collect()
        };
        assert_eq!(sorted(&mut numbered), ["a", "b", "c", "d", "e", "f"]);
        // Every series had a value; then deleted: not live, not yet stale.
        assert_eq!(numbered.age(true, None, STALE, |_| true, |_| false), (0, false));
        assert_eq!((numbered.len(), numbered.live_ids().count()), (6, 0));
        // "e" and "b" come back; the four others idle for a flush: stale, and a majority.
        for key in ["e", "b"] {
            let id = numbered.find(key).unwrap();
            numbered.set_live(id, true);
        }
        let back = [numbered.find("e").unwrap() as usize, numbered.find("b").unwrap() as usize];
        assert_eq!(numbered.age(false, None, STALE, |id| back.contains(&id), |_| false), (0, true));
        assert_eq!((numbered.len(), numbered.generation()), (2, 1));
        assert_eq!(sorted(&mut numbered), ["b", "e"]);
        assert_eq!((numbered.find("b"), numbered.find("e"), numbered.find("a")), (Some(0), Some(1), None));
    }

    #[test]
    fn the_idle_ttl_ends_series_except_those_kept() {
        // (flushes without a value, ttl, kept by name, live after)
        let cases =
            [(1, Some(2), false, true), (2, Some(2), false, false), (2, Some(2), true, true), (5, None, false, true)];
        for (idle, ttl, kept, live) in cases {
            let mut numbered = Numbered::default();
            let id = numbered.id("x");
            numbered.set_live(id, true);
            let mut expired = 0;
            for _ in 0..idle {
                expired += numbered.age(false, ttl, STALE, |_| false, |_| kept).0;
            }
            assert_eq!((numbered.is_live(id), expired), (live, usize::from(!live)), "{idle} {ttl:?} {kept}");
        }
    }

    #[test]
    fn a_renumbering_keeps_referring_to_chunks_mostly_kept_and_copies_the_others() {
        let mut reader = crate::key_index::KeyIndex::default();
        let keys: Vec<String> = (0..2 * 4096).map(|i| format!("k{i:05}")).collect();
        keys.iter().for_each(|key| _ = reader.id_or_insert(hash_key(key), key, None));
        let mut numbered = Numbered::default();
        for at in 0..keys.len() {
            let id = numbered.id_from(reader.keys(), at);
            numbered.set_live(id, true);
        }
        assert_eq!(numbered.keys().copies(), 0);
        // Kept: 600 keys of the first chunk, 10 of the second; the rest deleted and stale.
        let kept: Vec<usize> = (0..600).chain(4096..4106).collect();
        numbered.age(true, None, STALE, |_| true, |_| false);
        for &at in &kept {
            numbered.set_live(numbered.find(&keys[at]).unwrap(), true);
        }
        let (_, renumbered) = numbered.age(false, None, STALE, |id| kept.contains(&id), |_| false);
        assert!(renumbered);
        assert_eq!(numbered.len(), kept.len());
        assert!(kept.iter().all(|&at| numbered.key(numbered.find(&keys[at]).unwrap()) == keys[at]));
        assert_eq!(numbered.keys().copies(), 10, "the second chunk's 10 keys are copied; the first's 600 still refer");
    }
}
