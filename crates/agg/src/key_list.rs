//! A reader's series keys by id, 16 bytes a key: a key of up to 15 bytes is kept in its entry
//! (most statsd names are short, and a lookup then loads one cache line, never two), a longer
//! one in its chunk's bytes, the entry holding where. A `CompactString` took 24 bytes a key
//! and, past 24 bytes, an allocation of its own besides.
//!
//! Keys come in chunks of [`CHUNK`]: a full chunk never changes and is shared (`Arc`) with the
//! flusher, which refers to its keys instead of copying them; the last, partial chunk is copied
//! when the list is cloned.

use std::sync::Arc;

/// Keys per chunk.
pub(crate) const CHUNK: usize = 4096;

/// The longest key kept in its entry.
const INLINE: usize = 15;

/// The last byte of an entry whose key is in the chunk's bytes (else it is the key's length).
const LONG: u8 = 0xFF;

/// One key: its bytes and length (in the last byte), or for a longer key its length (bytes
/// 0-3) and its offset in the chunk's bytes (bytes 4-11), with [`LONG`] last. Aligned to 16
/// so that an entry never spans two cache lines.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
struct KeyEntry([u8; 16]);

impl KeyEntry {
    /// The entry of `key`, whose bytes go at the end of `bytes` when they do not fit in it.
    fn new(key: &str, bytes: &mut Vec<u8>) -> KeyEntry {
        let mut entry = [0u8; 16];
        if key.len() <= INLINE {
            entry[..key.len()].copy_from_slice(key.as_bytes());
            entry[15] = key.len() as u8;
        } else {
            let length = u32::try_from(key.len()).expect("a key is shorter than 4 GiB");
            entry[..4].copy_from_slice(&length.to_le_bytes());
            entry[4..12].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
            entry[15] = LONG;
            bytes.extend_from_slice(key.as_bytes());
        }
        KeyEntry(entry)
    }

    /// The key's bytes (`bytes`: its chunk's).
    #[inline(always)]
    fn key<'a>(&'a self, bytes: &'a [u8]) -> &'a [u8] {
        match self.0[15] {
            LONG => {
                let length = u32::from_le_bytes(self.0[..4].try_into().expect("4 bytes")) as usize;
                let offset = u64::from_le_bytes(self.0[4..12].try_into().expect("8 bytes")) as usize;
                &bytes[offset..offset + length]
            }
            length => &self.0[..length as usize],
        }
    }
}

/// Up to [`CHUNK`] keys: their entries, and the bytes of those too long for an entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyChunk {
    entries: Vec<KeyEntry>,
    bytes: Vec<u8>,
}

impl KeyChunk {
    /// The key at `place`.
    #[inline(always)]
    pub(crate) fn key(&self, place: usize) -> &str {
        let bytes = self.entries[place].key(&self.bytes);
        // SAFETY: every entry and byte was made from a `&str` (KeyEntry::new), whole: a key's
        // bytes are valid UTF-8 from its first byte to its last.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// True when the key at `place` is `short` (one 16-byte comparison: a short key's entry is
    /// its short form).
    #[inline(always)]
    pub(crate) fn holds_short(&self, place: usize, short: proto::ShortKey) -> bool {
        short.is(&self.entries[place].0)
    }

    /// Starts loading the entry at `place` (which is the key itself when it is short).
    #[inline(always)]
    pub(crate) fn prefetch(&self, place: usize) {
        crate::series::prefetch_read(&self.entries[place]);
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn push(&mut self, key: &str) {
        let entry = KeyEntry::new(key, &mut self.bytes);
        self.entries.push(entry);
    }
}

/// Keys by id, in chunks of [`CHUNK`]: full chunks are shared and never change; the last,
/// partial one is copied when the list is cloned (its entries grow by doubling, to exactly
/// [`CHUNK`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyList {
    full: Vec<Arc<KeyChunk>>,
    tail: KeyChunk,
}

impl KeyList {
    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    /// Keeps a copy of `key` as the next id's.
    pub(crate) fn push(&mut self, key: &str) {
        self.tail.push(key);
        if self.tail.len() == CHUNK {
            let mut full = std::mem::take(&mut self.tail);
            full.bytes.shrink_to_fit();
            self.full.push(Arc::new(full));
        }
    }

    /// Starts loading key `id`'s entry.
    #[inline(always)]
    pub(crate) fn prefetch(&self, id: usize) {
        match self.full.get(id / CHUNK) {
            Some(chunk) => chunk.prefetch(id % CHUNK),
            None => self.tail.prefetch(id - self.full.len() * CHUNK),
        }
    }

    /// The full chunk key `id` is in, and its place there; `None` while it is in the last,
    /// partial chunk (which a clone copies).
    pub(crate) fn full_chunk(&self, id: usize) -> Option<(&Arc<KeyChunk>, u32)> {
        Some((self.full.get(id / CHUNK)?, (id % CHUNK) as u32))
    }
}

impl KeyList {
    /// True when key `id` is `short`.
    #[inline(always)]
    pub(crate) fn holds_short(&self, id: usize, short: proto::ShortKey) -> bool {
        match self.full.get(id / CHUNK) {
            Some(chunk) => chunk.holds_short(id % CHUNK, short),
            None => self.tail.holds_short(id - self.full.len() * CHUNK, short),
        }
    }
}

impl std::ops::Index<usize> for KeyList {
    type Output = str;

    /// The key numbered `id`.
    #[inline(always)]
    fn index(&self, id: usize) -> &str {
        match self.full.get(id / CHUNK) {
            Some(chunk) => chunk.key(id % CHUNK),
            None => self.tail.key(id - self.full.len() * CHUNK),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_every_length_read_back_across_chunks() {
        // Lengths around the inline limit, empty, multi-byte characters, and long ones.
        let shapes = ["", "a", "bench.12345", "fifteen.bytes.x", "sixteen.bytes.xy", "é.ü.中.日本語.x", "k;tag=v"];
        let mut list = KeyList::default();
        let mut wanted = Vec::new();
        for i in 0..(2 * CHUNK + 7) {
            let key = match i % 9 {
                7 => format!("a.long.series.name.{i}.{}", "x".repeat(i % 300)),
                8 => format!("{i}"),
                n => shapes[n % shapes.len()].to_string(),
            };
            list.push(&key);
            wanted.push(key);
        }
        assert_eq!(list.len(), wanted.len());
        assert_eq!((list.full.len(), list.tail.len()), (2, 7));
        for (id, key) in wanted.iter().enumerate() {
            assert_eq!(&list[id], key, "id {id}");
        }
        // A clone shares the full chunks and copies the partial one.
        let mut clone = list.clone();
        assert!(Arc::ptr_eq(&clone.full[1], &list.full[1]));
        clone.push("only.in.the.clone");
        assert_eq!((&clone[wanted.len()], list.len()), ("only.in.the.clone", wanted.len()));
        assert_eq!(
            list.full_chunk(CHUNK + 3).map(|(chunk, place)| chunk.key(place as usize)),
            Some(wanted[CHUNK + 3].as_str())
        );
        assert!(list.full_chunk(2 * CHUNK).is_none());
    }

    #[test]
    fn a_short_key_entry_is_its_short_form() {
        let mut chunk = KeyChunk::default();
        let keys = ["a", "bench.1", "bench.12", "fifteen.bytes.x"];
        keys.iter().for_each(|key| chunk.push(key));
        for (place, key) in keys.iter().enumerate() {
            for (other_place, other) in keys.iter().enumerate() {
                let short = proto::ShortKey::new(other.as_bytes()).expect("short");
                assert_eq!(chunk.holds_short(place, short), place == other_place, "{key} against {other}");
            }
        }
    }

    #[test]
    fn an_entry_is_sixteen_bytes() {
        assert_eq!((std::mem::size_of::<KeyEntry>(), std::mem::align_of::<KeyEntry>()), (16, 16));
    }
}
