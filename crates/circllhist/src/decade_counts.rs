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
/// past its sample limit), not one holding a few scattered ones: a histogram keeps those
/// (10 bytes a bin) until [`DecadeCounts::take_busy_decades`] moves the busy decades here.
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

    /// Adds `count` samples to `bucket` when its decade is held already (an add that takes no
    /// new block); false, adding nothing, when it is not.
    #[inline]
    pub fn insert_if_held(&mut self, bucket: Bucket, count: u64) -> bool {
        let key = bucket.key();
        let (block, first) = block_of(key);
        let place = match &self.places {
            None => self.firsts.iter().position(|&held| held == first),
            Some(places) => usize::from(places[block]).checked_sub(1),
        };
        let Some(place) = place else { return false };
        let slot = &mut self.counts[place * BLOCK_BINS + usize::from(key - first)];
        *slot = slot.saturating_add(count);
        true
    }

    /// True when `bucket`'s decade (one sign's) is held: an add to it takes no new block.
    #[inline]
    pub fn holds(&self, bucket: Bucket) -> bool {
        let (block, first) = block_of(bucket.key());
        self.holds_block(block, first)
    }

    /// Moves into these counts every decade of `histogram` holding at least `min_bins` bins
    /// (with the decades already held), leaving `histogram` the rest: a decade is given its
    /// 720 bytes only once several values share it. The two together count what they did.
    pub fn take_busy_decades(&mut self, histogram: &mut Histogram, min_bins: usize) {
        let (keys, counts) = histogram.keyed_bins();
        let mut bins_in_block = [0u16; BLOCKS];
        keys.iter().for_each(|&key| bins_in_block[block_of(key).0] += 1);
        let (mut kept_keys, mut kept_counts) = (Vec::new(), Vec::new());
        let mut moved = Vec::new();
        for (&key, &count) in keys.iter().zip(counts) {
            let (block, first) = block_of(key);
            if usize::from(bins_in_block[block]) >= min_bins || self.holds_block(block, first) {
                moved.push((block, first, key, count));
            } else {
                kept_keys.push(key);
                kept_counts.push(count);
            }
        }
        if moved.is_empty() {
            return;
        }
        for (block, first, key, count) in moved {
            let place = self.place_of(block, first);
            let slot = &mut self.counts[place * BLOCK_BINS + usize::from(key - first)];
            *slot = slot.saturating_add(count);
        }
        *histogram = Histogram::from_sorted_bins(kept_keys, kept_counts)
            .expect("a histogram's bins, some left out, are still ascending and within range");
    }

    fn holds_block(&self, block: usize, first: u16) -> bool {
        match &self.places {
            None => self.firsts.contains(&first),
            Some(places) => places[block] != 0,
        }
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

    /// Busy decades move into the counts, the scattered ones stay in the histogram, and the
    /// two hold what they held: one value in each of 254 decades takes no block.
    #[test]
    fn only_busy_decades_move_into_the_counts() {
        let scattered: Vec<f64> = (-127..127).map(|e| 1.5 * 10f64.powi(e)).collect();
        let busy: Vec<f64> = (1..=40).map(f64::from).chain(scattered.iter().copied()).collect();
        // (values, bins a decade needs to move, blocks moved)
        let cases: &[(&[f64], usize, usize)] = &[(&scattered, 4, 0), (&busy, 4, 2), (&busy, 100, 0), (&[], 1, 0)];
        for &(values, min_bins, blocks) in cases {
            let mut histogram = Histogram::new();
            values.iter().for_each(|&v| {
                histogram.insert(v, 1);
            });
            let whole = histogram.clone();
            let mut counts = DecadeCounts::default();
            counts.take_busy_decades(&mut histogram, min_bins);
            assert_eq!(counts.firsts.len(), blocks, "{min_bins}");
            let mut merged = counts.clone().into_histogram();
            merged.merge(&histogram);
            assert_eq!(merged, whole, "nothing lost or added ({min_bins})");
            if blocks > 0 {
                assert!(counts.holds(Bucket::of_f64(7.0)) && !counts.holds(Bucket::of_f64(1.5e50)));
            }
        }
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
