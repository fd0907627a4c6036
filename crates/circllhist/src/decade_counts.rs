//! Counts by bin for values that arrive in no order, kept a decade at a time.

use crate::histogram::{block_of, Histogram, BLOCKS};
use crate::Bucket;

/// Bins in a block: the buckets of one sign and decade (the NaN and zero blocks use one).
const BLOCK_BINS: usize = 90;
/// Blocks found by a scan of their first keys; past this many, through an index by block.
const SCANNED_BLOCKS: usize = 8;

/// Counts of buckets added in any order, each decade's 90 counts side by side: an add finds
/// its decade among the few a series spans and adds to its count, where a [`Histogram`] fed
/// values in arrival order searches its sorted bins and moves them to make room for a new one.
/// What a histogram of many values in no order is best filled through; it becomes one with
/// [`DecadeCounts::into_histogram`] (the same histogram as inserting the same counts).
///
/// Memory: 720 bytes a decade touched, so it suits a series receiving many values (a timer
/// past its sample limit), not one holding a few scattered ones.
///
/// ```
/// use circllhist::{Bucket, DecadeCounts, Histogram};
/// let (mut counts, mut histogram) = (DecadeCounts::default(), Histogram::new());
/// for ms in [230, 12, 15, 15, 9000] {
///     counts.insert_bucket(Bucket::of_int_scale(ms, -3), 1);
///     histogram.insert_int_scale(ms, -3, 1);
/// }
/// assert_eq!(counts.into_histogram(), histogram);
/// ```
#[derive(Debug, Clone, Default)]
pub struct DecadeCounts {
    /// The first key of each block held, in the order they were first added to.
    firsts: Vec<u16>,
    /// [`BLOCK_BINS`] counts for each of `firsts`, in the same order.
    counts: Vec<u64>,
    /// Once more than [`SCANNED_BLOCKS`] blocks are held: each block's place in `firsts`, plus
    /// one (0: not held), so a series spanning many decades is not scanned at every add.
    places: Option<Box<[u16; BLOCKS]>>,
}

impl DecadeCounts {
    /// Adds `count` samples to `bucket`; a bin's count saturates at `u64::MAX`, as a
    /// histogram's does.
    #[inline]
    pub fn insert_bucket(&mut self, bucket: Bucket, count: u64) {
        let key = bucket.key();
        let (block, first) = block_of(key);
        let place = self.place_of(block, first);
        let slot = &mut self.counts[place * BLOCK_BINS + usize::from(key - first)];
        *slot = slot.saturating_add(count);
    }

    /// The place of `block` (whose first key is `first`) in `firsts`, given one at its first add.
    #[inline]
    fn place_of(&mut self, block: usize, first: u16) -> usize {
        let found = match &self.places {
            None => self.firsts.iter().position(|&held| held == first),
            Some(places) => usize::from(places[block]).checked_sub(1),
        };
        found.unwrap_or_else(|| self.add_block(block, first))
    }

    /// Holds `block` from now on, with every count zero; returns its place.
    #[cold]
    fn add_block(&mut self, block: usize, first: u16) -> usize {
        let place = self.firsts.len();
        self.firsts.push(first);
        self.counts.resize(self.counts.len() + BLOCK_BINS, 0);
        if self.places.is_none() && self.firsts.len() > SCANNED_BLOCKS {
            let mut places = Box::new([0u16; BLOCKS]);
            for (held, &held_first) in self.firsts.iter().enumerate() {
                places[block_of(held_first).0] = held as u16 + 1;
            }
            self.places = Some(places);
        }
        if let Some(places) = &mut self.places {
            places[block] = place as u16 + 1;
        }
        place
    }

    /// True when nothing was added (or only zero counts).
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&count| count == 0)
    }

    /// The histogram of every count added: what inserting them into a [`Histogram`] gives.
    pub fn into_histogram(self) -> Histogram {
        let mut order: Vec<usize> = (0..self.firsts.len()).collect();
        order.sort_unstable_by_key(|&place| self.firsts[place]);
        let held = self.counts.iter().filter(|&&count| count > 0).count();
        let (mut keys, mut counts) = (Vec::with_capacity(held), Vec::with_capacity(held));
        for place in order {
            let block = &self.counts[place * BLOCK_BINS..][..BLOCK_BINS];
            for (offset, &count) in block.iter().enumerate().filter(|&(_, &count)| count > 0) {
                keys.push(self.firsts[place] + offset as u16);
                counts.push(count);
            }
        }
        Histogram::from_sorted_bins(keys, counts).expect("blocks' keys are ascending, within range and counted")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What inserting `(value, count)` pairs one by one gives, both ways.
    fn both(inserts: &[(f64, u64)]) -> (Histogram, Histogram) {
        let (mut counts, mut histogram) = (DecadeCounts::default(), Histogram::new());
        for &(value, count) in inserts {
            counts.insert_bucket(Bucket::of_f64(value), count);
            histogram.insert(value, count);
        }
        (counts.into_histogram(), histogram)
    }

    #[test]
    fn counts_make_the_histogram_inserts_make() {
        let every_decade: Vec<(f64, u64)> = (-130..130).map(|e| (1.5 * 10f64.powi(e), 1)).collect();
        let both_signs: Vec<(f64, u64)> =
            (1..2000).map(|i| (f64::from(i % 997) * if i % 3 == 0 { -1.0 } else { 1.0 }, 1)).collect();
        let cases: &[(&str, &[(f64, u64)])] = &[
            ("nothing", &[]),
            ("one value", &[(42.0, 1)]),
            ("zero, NaN and infinities", &[(0.0, 2), (f64::NAN, 1), (f64::INFINITY, 1), (-0.0, 1), (1e200, 3)]),
            ("zero counts add nothing", &[(1.0, 0), (5.0, 2), (5.0, 0)]),
            ("values out of order, repeated", &[(990.0, 1), (1.0, 1), (55.0, 4), (1.0, 2), (990.0, 1)]),
            ("a saturated bin", &[(7.0, u64::MAX - 1), (7.0, 5), (8.0, 1)]),
            ("every decade (the index by block)", &every_decade),
            ("both signs, three decades", &both_signs),
        ];
        for (name, inserts) in cases {
            let (counted, inserted) = both(inserts);
            assert_eq!(counted, inserted, "{name}");
            assert_eq!(counted.bins().collect::<Vec<_>>(), inserted.bins().collect::<Vec<_>>(), "{name}");
        }
    }

    #[test]
    fn empty_until_a_count_is_added() {
        let mut counts = DecadeCounts::default();
        assert!(counts.is_empty());
        counts.insert_bucket(Bucket::of_f64(3.0), 0);
        assert!(counts.is_empty());
        counts.insert_bucket(Bucket::of_f64(3.0), 1);
        assert!(!counts.is_empty());
    }
}
