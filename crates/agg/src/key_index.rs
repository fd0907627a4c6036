//! Series keys numbered densely from 0 in order of first sight: the ids that let a reader hand
//! over an interval of counter values as one array, and the flusher find its own entry for each
//! with an array lookup instead of a hash lookup.
//!
//! Open addressing over `u32` slots (0 empty, else id + 1), at most half full. Keys live in a
//! [`KeyList`] of fixed-size chunks that never change once full, so a reader can hand its new
//! keys to the flusher, and the flusher its keys to a snapshot, by sharing chunks, not copying.

use std::sync::Arc;

use compact_str::CompactString;

use crate::series::{hash_key, prefetch_read, same_key, Slots};

/// Keys per chunk of a [`KeyList`].
const CHUNK: usize = 4096;

/// Keys by id, in chunks of [`CHUNK`]: full chunks are shared and never change; the last,
/// partial one is copied when the list is cloned.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyList {
    full: Vec<Arc<[CompactString]>>,
    tail: Vec<CompactString>,
}

impl KeyList {
    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    fn push(&mut self, key: CompactString) {
        self.tail.push(key);
        if self.tail.len() == CHUNK {
            self.full.push(std::mem::take(&mut self.tail).into());
        }
    }
}

impl std::ops::Index<usize> for KeyList {
    type Output = CompactString;

    /// The key numbered `id`.
    #[inline(always)]
    fn index(&self, id: usize) -> &CompactString {
        match self.full.get(id / CHUNK) {
            Some(chunk) => &chunk[id % CHUNK],
            None => &self.tail[id - self.full.len() * CHUNK],
        }
    }
}

/// Keys and their ids.
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

    /// The id found in the first slot probed for `hash`, if any: the likely id of its key (read
    /// after [`KeyIndex::prefetch`], to prefetch what the id points at).
    #[inline]
    pub fn likely_id(&self, hash: u64) -> Option<u32> {
        self.slots.home_if_large(hash)?.checked_sub(1)
    }

    /// Starts loading the key numbered `id`.
    #[inline]
    pub fn prefetch_key(&self, id: u32) {
        prefetch_read(&self.keys[id as usize]);
    }

    /// The id of `key` (whose hash is `hash`), numbering it next if it is new.
    #[inline(always)]
    pub fn id_or_insert(&mut self, hash: u64, key: &str) -> u32 {
        match self.slots.is_empty() {
            false => self.find(hash, key).unwrap_or_else(|_| self.insert(hash, key)),
            true => self.insert(hash, key),
        }
    }

    /// Numbers a key not seen yet (growing the slots first when half full).
    #[cold]
    #[inline(never)]
    fn insert(&mut self, hash: u64, key: &str) -> u32 {
        if (self.keys.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let Err(empty) = self.find(hash, key) else { unreachable!("the key was not found") };
        let id = self.keys.len() as u32;
        self.keys.push(CompactString::from(key));
        self.slots[empty] = id + 1;
        id
    }

    /// The id of `key`, if it has one.
    pub fn id(&self, key: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(hash_key(key), key).ok()
    }

    /// The key numbered `id`.
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
        let mask = self.slots.len() - 1;
        let mut index = self.slots.home(hash);
        loop {
            match self.slots[index] {
                0 => return Err(index),
                stored if same_key(&self.keys[stored as usize - 1], key) => return Ok(stored - 1),
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

/// Places the ids numbered since `order` was last brought up to date (those from
/// `order.len()` to `count`) into it, keeping it sorted by key: the new ids sorted, then one
/// merge. A store that numbers keys in order of first sight reports them in key order
/// without sorting all of them at every flush.
pub(crate) fn place_new_ids(order: &mut Vec<u32>, keys: &KeyList, count: usize) {
    let placed = order.len();
    if placed == count {
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
                assert_eq!(index.id_or_insert(hash, key), i as u32, "{key} in round {round}");
            }
        }
        assert_eq!(index.len(), keys.len());
        assert_eq!((index.id("series.number.17"), index.id("nope")), (Some(17), None));
        assert_eq!(index.key(2999), "series.number.2999");
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
                index.id_or_insert(hash_key(key), key);
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
            index.id_or_insert(hash_key(key), key);
        }
        let held = index.keys().clone();
        for key in &keys[CHUNK + 5..] {
            index.id_or_insert(hash_key(key), key);
        }
        assert_eq!((held.len(), index.keys().len()), (CHUNK + 5, CHUNK + 10));
        assert!(Arc::ptr_eq(&held.full[0], &index.keys().full[0]));
        assert_eq!(
            (&held[CHUNK + 4], &index.keys()[CHUNK + 9]),
            (&keys[CHUNK + 4].as_str().into(), &keys[CHUNK + 9].as_str().into())
        );
    }
}
