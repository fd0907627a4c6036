//! Series keys numbered densely from 0 in order of first sight: the ids that let a reader hand
//! over an interval of counter values as one array, and the flusher find its own entry for each
//! with an array lookup instead of a hash lookup.
//!
//! A reader's [`KeyIndex`]: open addressing over `u32` slots (0 empty, else id + 1), at most
//! half full, each lookup split into stages a run of lines prefetches. The flusher's
//! [`SharedIndex`]: hashbrown's table of ids, up to 7/8 full (it is not on the readers' path,
//! and it holds every reader's keys). A reader's keys
//! live in a [`KeyList`] of fixed-size chunks that never change once full, so a reader can hand
//! its new keys to the flusher by sharing chunks, not copying. The flusher's keys are a
//! [`SharedKeys`]: each id refers, in 4 bytes, to a key in a reader's full chunk (the flusher
//! holds the chunk), or to a copy of its own (keys from a reader's partial last chunk, and keys
//! that come from elsewhere); a flush's snapshot shares those chunks and references in turn.

use std::collections::HashMap;
use std::sync::Arc;

pub(crate) use crate::key_list::KeyList;
use crate::key_list::{KeyChunk, CHUNK};
use crate::series::{hash_key, prefetch_read, same_key, Slots};

/// A list by index in chunks of [`CHUNK`]: full chunks are shared and never change; the last,
/// partial one is copied when the list is cloned.
#[derive(Debug, Clone)]
pub(crate) struct Chunked<T> {
    full: Vec<Arc<[T]>>,
    tail: Vec<T>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { full: Vec::new(), tail: Vec::new() }
    }
}

impl<T> Chunked<T> {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    fn push(&mut self, entry: T) {
        self.tail.push(entry);
        if self.tail.len() == CHUNK {
            self.full.push(std::mem::take(&mut self.tail).into());
        }
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;

    /// The entry numbered `id`.
    #[inline(always)]
    fn index(&self, id: usize) -> &T {
        match self.full.get(id / CHUNK) {
            Some(chunk) => &chunk[id % CHUNK],
            None => &self.tail[id - self.full.len() * CHUNK],
        }
    }
}

/// The mark of a reference to a copy (the rest is the copy's number); without it, a reference
/// is a reader's chunk's number << [`PLACE_BITS`] | the key's place in it.
const COPY: u32 = 1 << 31;

/// The bits of a reference that give a key's place in its chunk.
const PLACE_BITS: u32 = CHUNK.trailing_zeros();

/// Readers' chunks a [`SharedKeys`] can refer to: past them, keys are copied.
const MOST_CHUNKS: usize = 1 << (31 - PLACE_BITS);

const _: () = assert!(CHUNK.is_power_of_two(), "a reference splits into chunk and place by bits");

/// The flusher's keys by id, each a 4-byte reference: to a key in a reader's full chunk (held
/// here, never changed), or to a copy of its own.
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedKeys {
    /// Readers' full key chunks referred to.
    chunks: Vec<Arc<KeyChunk>>,
    /// Their numbers in `chunks`, by the chunk's address.
    registered: HashMap<usize, u32>,
    /// Keys copied here, in order.
    copies: KeyList,
    /// By id.
    refs: Chunked<u32>,
}

impl SharedKeys {
    /// Refers the next id to the key at `place` in a reader's full `chunk` (or copies the key
    /// when [`MOST_CHUNKS`] chunks are referred to already).
    pub(crate) fn push_shared(&mut self, chunk: &Arc<KeyChunk>, place: u32) {
        let address = Arc::as_ptr(chunk) as usize;
        let number = match self.registered.get(&address) {
            Some(&number) => number,
            None if self.chunks.len() < MOST_CHUNKS => {
                self.chunks.push(chunk.clone());
                let number = self.chunks.len() as u32 - 1;
                self.registered.insert(address, number);
                number
            }
            None => return self.push_copy(chunk.key(place as usize)),
        };
        self.refs.push(number << PLACE_BITS | place);
    }

    /// The number of the reader's chunk key `id` refers to and its place there; `None` for a
    /// copy.
    pub(crate) fn reference(&self, id: usize) -> Option<(usize, u32)> {
        let reference = self.refs[id];
        (reference & COPY == 0).then_some(((reference >> PLACE_BITS) as usize, reference & (CHUNK as u32 - 1)))
    }

    /// The readers' chunks referred to, by number.
    pub(crate) fn chunks(&self) -> &[Arc<KeyChunk>] {
        &self.chunks
    }

    /// Starts loading the reference of key `id` (first of two stages, for a walk in an order
    /// of its own: a flush's key order).
    #[inline]
    pub(crate) fn prefetch_reference(&self, id: usize) {
        prefetch_read(&self.refs[id]);
    }

    /// How many keys are copies.
    #[cfg(test)]
    pub(crate) fn copies(&self) -> usize {
        self.copies.len()
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.refs.len()
    }

    /// Keeps a copy of `key` as the next id's.
    pub(crate) fn push_copy(&mut self, key: &str) {
        debug_assert!(self.copies.len() < COPY as usize, "a copy's number fits beside the mark");
        self.refs.push(COPY | self.copies.len() as u32);
        self.copies.push(key);
    }

    /// Starts loading key `id`'s entry (second stage, once its reference has likely arrived).
    #[inline]
    pub(crate) fn prefetch_key(&self, id: usize) {
        match self.reference(id) {
            Some((chunk, place)) => self.chunks[chunk].prefetch(place as usize),
            None => self.copies.prefetch((self.refs[id] & !COPY) as usize),
        }
    }
}

impl std::ops::Index<usize> for SharedKeys {
    type Output = str;

    /// The key numbered `id`.
    #[inline]
    fn index(&self, id: usize) -> &str {
        match self.reference(id) {
            Some((chunk, place)) => self.chunks[chunk].key(place as usize),
            None => &self.copies[(self.refs[id] & !COPY) as usize],
        }
    }
}

/// A reader's keys and their ids.
#[derive(Debug, Clone)]
pub(crate) struct KeyIndex {
    slots: Slots<u32>,
    keys: KeyList,
}

impl Default for KeyIndex {
    fn default() -> Self {
        KeyIndex { slots: Slots::empty(), keys: KeyList::default() }
    }
}

impl KeyIndex {
    /// The number of keys (the next id).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Starts loading the slot where the key with `hash` is looked for first.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.slots.prefetch(hash);
    }

    /// True when the slots are too many to stay in the nearest caches (see [`Slots::is_large`]).
    #[inline]
    pub fn is_large(&self) -> bool {
        self.slots.is_large()
    }

    /// The id found in the first slot probed for `hash`, if any: the likely id of its key (read
    /// after [`KeyIndex::prefetch`], to prefetch what the id points at).
    #[inline]
    pub fn likely_id(&self, hash: u64) -> Option<u32> {
        self.slots.home_if_large(hash)?.checked_sub(1)
    }

    /// Starts loading the key numbered `id`.
    #[inline]
    pub fn prefetch_key(&self, id: u32) {
        self.keys.prefetch(id as usize);
    }

    /// The id of `key` (whose hash is `hash`; `short` its short form, when the caller has it),
    /// numbering it next if it is new.
    #[inline(always)]
    pub fn id_or_insert(&mut self, hash: u64, key: &str, short: Option<proto::ShortKey>) -> u32 {
        if self.slots.is_empty() {
            return self.insert(hash, key);
        }
        let found = match short {
            Some(short) => self.find_by(hash, |keys, id| keys.holds_short(id, short)),
            None => self.find(hash, key),
        };
        found.unwrap_or_else(|_| self.insert(hash, key))
    }

    /// Numbers a key not seen yet (growing the slots first when half full), keeping a copy.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, hash: u64, key: &str) -> u32 {
        if (self.keys.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let Err(empty) = self.find(hash, key) else { unreachable!("the key was not found") };
        let id = self.keys.len() as u32;
        self.keys.push(key);
        self.slots[empty] = id + 1;
        id
    }

    /// The id of `key`, if it has one.
    #[cfg(test)]
    pub fn id(&self, key: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(hash_key(key), key).ok()
    }

    /// The key numbered `id`.
    #[cfg(test)]
    pub fn key(&self, id: u32) -> &str {
        &self.keys[id as usize]
    }

    /// Every key, by id (a clone shares every full chunk).
    pub(crate) fn keys(&self) -> &KeyList {
        &self.keys
    }

    /// `Ok(id)` of `key`, or `Err(slot)` of the empty slot where it goes.
    #[inline(always)]
    fn find(&self, hash: u64, key: &str) -> Result<u32, usize> {
        self.find_by(hash, |keys, id| same_key(&keys[id], key))
    }

    /// `Ok(id)` of the key whose hash is `hash` and for which `is_it` holds, or `Err(slot)` of
    /// the empty slot where it goes.
    #[inline(always)]
    fn find_by(&self, hash: u64, is_it: impl Fn(&KeyList, usize) -> bool) -> Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let mut index = self.slots.home(hash);
        loop {
            match self.slots[index] {
                0 => return Err(index),
                stored if is_it(&self.keys, stored as usize - 1) => return Ok(stored - 1),
                _ => index = (index + 1) & mask,
            }
        }
    }

    /// Doubles the slots (16 at first) and places every id again.
    #[cold]
    fn grow(&mut self) {
        let capacity = (self.slots.len() * 2).max(16);
        self.slots.replace_with(capacity, || 0);
        for id in 0..self.keys.len() {
            let key = &self.keys[id];
            let Err(empty) = self.find(hash_key(key), key) else { unreachable!("keys are unique") };
            self.slots[empty] = id as u32 + 1;
        }
    }
}

/// The flusher's keys and their ids: hashbrown's table of ids (a control byte holding 7 bits
/// of the hash and 4 bytes a slot, up to 7/8 full) over a [`SharedKeys`]. The flusher looks
/// keys up off the readers' path, once for each key new to it: a table a third the size of a
/// reader's (no prefetching, and a probe compares a key only when its control byte matches).
#[derive(Debug, Default)]
pub(crate) struct SharedIndex {
    table: hashbrown::HashTable<u32>,
    keys: SharedKeys,
}

impl SharedIndex {
    /// The id of `key`, if it has one.
    pub(crate) fn id(&self, key: &str) -> Option<u32> {
        self.table.find(hash_key(key), |&id| same_key(&self.keys[id as usize], key)).copied()
    }

    /// The id of `key` (whose hash is `hash`), numbering it next, as a copy, if it is new.
    pub(crate) fn id_or_insert(&mut self, hash: u64, key: &str) -> u32 {
        self.id_or_keep(hash, key, |keys| keys.push_copy(key))
    }

    /// The id of the key at `place` in a reader's full `chunk` (whose hash is `hash`), numbered
    /// next, as a reference to it, if it is new.
    pub(crate) fn id_or_refer(&mut self, hash: u64, chunk: &Arc<KeyChunk>, place: u32) -> u32 {
        self.id_or_keep(hash, chunk.key(place as usize), |keys| keys.push_shared(chunk, place))
    }

    /// The id of `key`, or the next one, its key kept by `keep`.
    fn id_or_keep(&mut self, hash: u64, key: &str, keep: impl FnOnce(&mut SharedKeys)) -> u32 {
        let (id, keys) = (self.keys.len() as u32, &self.keys);
        let same = |stored: &u32| same_key(&keys[*stored as usize], key);
        match self.table.entry(hash, same, |stored| hash_key(&keys[*stored as usize])) {
            hashbrown::hash_table::Entry::Occupied(found) => return *found.get(),
            hashbrown::hash_table::Entry::Vacant(empty) => _ = empty.insert(id),
        }
        keep(&mut self.keys);
        debug_assert_eq!(self.keys.len(), id as usize + 1, "one key kept");
        id
    }

    /// Makes room for `additional` keys at once.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let keys = &self.keys;
        self.table.reserve(additional, |stored| hash_key(&keys[*stored as usize]));
    }

    /// The key numbered `id`.
    pub(crate) fn key(&self, id: u32) -> &str {
        &self.keys[id as usize]
    }

    /// Every key, by id (a clone shares every chunk referred to).
    pub(crate) fn keys(&self) -> &SharedKeys {
        &self.keys
    }
}

/// Places the ids numbered since `order` was last brought up to date (those from
/// `order.len()` to `count`) into it, keeping it sorted by key: the new ids sorted, then one
/// merge. A store that numbers keys in order of first sight reports them in key order
/// without sorting all of them at every flush.
pub(crate) fn place_new_ids<K: std::ops::Index<usize, Output = str>>(order: &mut Vec<u32>, keys: &K, count: usize) {
    let placed = order.len();
    if placed == count {
        return;
    }
    if placed == 0 {
        order.extend(0..count as u32);
        order.sort_unstable_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
        return;
    }
    let mut new: Vec<u32> = (placed as u32..count as u32).collect();
    new.sort_unstable_by(|&a, &b| keys[a as usize].cmp(&keys[b as usize]));
    let old = std::mem::take(order);
    order.reserve(old.len() + new.len());
    let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
    while let (Some(&x), Some(&y)) = (a.peek(), b.peek()) {
        if keys[x as usize] <= keys[y as usize] {
            order.push(x);
            a.next();
        } else {
            order.push(y);
            b.next();
        }
    }
    order.extend(a.chain(b));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keys_in_order_of_first_sight() {
        let mut index = KeyIndex::default();
        let keys: Vec<String> = (0..3000).map(|i| format!("series.number.{i}")).collect();
        for round in 0..2 {
            for (i, key) in keys.iter().enumerate() {
                let hash = hash_key(key);
                index.prefetch(hash);
                assert_eq!(index.id_or_insert(hash, key, None), i as u32, "{key} in round {round}");
                let short = proto::ShortKey::new(key.as_bytes());
                assert_eq!(index.id_or_insert(hash, key, short), i as u32, "{key} in round {round}, short");
            }
        }
        assert_eq!(index.len(), keys.len());
        assert_eq!((index.id("series.number.17"), index.id("nope")), (Some(17), None));
        assert_eq!(index.key(2999), "series.number.2999");
    }

    #[test]
    fn the_flusher_numbers_keys_past_a_reserve_and_after_growing() {
        let mut flusher = SharedIndex::default();
        let keys: Vec<String> = (0..3000).map(|i| format!("series.{i}")).collect();
        flusher.reserve(1000);
        for round in 0..2 {
            for (id, key) in keys.iter().enumerate() {
                assert_eq!(flusher.id_or_insert(hash_key(key), key), id as u32, "{key} in round {round}");
            }
        }
        assert_eq!((flusher.keys().len(), flusher.id("series.2999"), flusher.id("nope")), (3000, Some(2999), None));
    }

    #[test]
    fn new_ids_are_merged_into_key_order() {
        let mut index = KeyIndex::default();
        let mut order = Vec::new();
        // (keys numbered next, all keys in key order after placing them)
        let steps: [(&[&str], &[&str]); 3] = [
            (&["m", "c", "x"], &["c", "m", "x"]),
            (&[], &["c", "m", "x"]),
            (&["a", "n", "z", "d"], &["a", "c", "d", "m", "n", "x", "z"]),
        ];
        for (new, sorted) in steps {
            for key in new {
                index.id_or_insert(hash_key(key), key, None);
            }
            place_new_ids(&mut order, index.keys(), index.len());
            let keys: Vec<&str> = order.iter().map(|&id| index.key(id)).collect();
            assert_eq!(keys, sorted);
        }
    }

    #[test]
    fn a_cloned_key_list_shares_full_chunks_and_stays_as_it_was() {
        let mut index = KeyIndex::default();
        let keys: Vec<String> = (0..CHUNK + 10).map(|i| format!("k{i}")).collect();
        for key in &keys[..CHUNK + 5] {
            index.id_or_insert(hash_key(key), key, None);
        }
        let held = index.keys().clone();
        for key in &keys[CHUNK + 5..] {
            index.id_or_insert(hash_key(key), key, None);
        }
        assert_eq!((held.len(), index.keys().len()), (CHUNK + 5, CHUNK + 10));
        assert!(Arc::ptr_eq(held.full_chunk(0).unwrap().0, index.keys().full_chunk(0).unwrap().0));
        assert_eq!((&held[CHUNK + 4], &index.keys()[CHUNK + 9]), (keys[CHUNK + 4].as_str(), keys[CHUNK + 9].as_str()));
    }

    fn reader_keys(count: usize) -> KeyList {
        let mut index = KeyIndex::default();
        for i in 0..count {
            let key = format!("reader.key.{i}");
            index.id_or_insert(hash_key(&key), &key, None);
        }
        index.keys().clone()
    }

    #[test]
    fn the_flusher_refers_to_a_readers_full_chunks_and_copies_its_last_keys() {
        let reader = reader_keys(2 * CHUNK + 10);
        let mut flusher = SharedIndex::default();
        flusher.id_or_insert(hash_key("own.first"), "own.first");
        for at in 0..reader.len() {
            let id = match reader.full_chunk(at) {
                Some((chunk, place)) => flusher.id_or_refer(hash_key(&reader[at]), chunk, place),
                None => flusher.id_or_insert(hash_key(&reader[at]), &reader[at]),
            };
            assert_eq!(id as usize, at + 1);
        }
        assert_eq!(flusher.keys().copies(), 1 + 10, "the own key and the reader's partial chunk");
        assert_eq!(flusher.keys().chunks().len(), 2, "the reader's two full chunks");
        let snapshot = flusher.keys().clone();
        for at in 0..reader.len() {
            assert_eq!(flusher.id(&reader[at]), Some(at as u32 + 1), "{}", &reader[at]);
            assert_eq!(&snapshot[at + 1], &reader[at]);
        }
        assert_eq!(&snapshot[0], "own.first");
        let again = flusher.id_or_refer(hash_key(&reader[5]), reader.full_chunk(5).unwrap().0, 5);
        assert_eq!(again, 6, "a key known already keeps its id");
    }

    #[test]
    fn copies_past_a_chunk_stay_readable_from_every_clone() {
        let mut flusher = SharedIndex::default();
        let keys: Vec<String> = (0..CHUNK * 2 + 3).map(|i| format!("copied.{i}")).collect();
        let mut clones = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(flusher.id_or_insert(hash_key(key), key), i as u32);
            if i % 1000 == 0 {
                clones.push((i, flusher.keys().clone()));
            }
        }
        for (count, clone) in &clones {
            assert_eq!(clone.len(), count + 1);
            assert!((0..=*count).all(|id| clone[id] == keys[id]), "a clone of {count} keys");
        }
        assert!((0..keys.len()).all(|id| flusher.keys()[id] == keys[id]));
        assert_eq!(flusher.keys().copies(), keys.len());
    }
}
