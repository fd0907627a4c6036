//! The histogram: sorted, unique bins with counts; insert, merge, subtract, clamp.

use crate::Bucket;

/// A log-linear histogram. Bins are kept sorted in the C library's order, each once, with a
/// non-zero count; counts saturate at `u64::MAX`.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Bucket sort keys ([`Bucket::key`]), ascending.
    keys: Vec<u16>,
    /// The count of each key.
    counts: Vec<u64>,
    /// Where each block of keys starts, once there are enough bins for it to pay.
    directory: Option<Box<Directory>>,
}

impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys && self.counts == other.counts
    }
}

impl Eq for Histogram {}

/// Bins a histogram holds before it keeps a [`Directory`].
const DIRECTORY_FROM_BINS: usize = 16;
/// Blocks of keys: NaN, 256 negative decades, zero, 256 positive decades.
pub(crate) const BLOCKS: usize = 514;

/// The index in `keys` where each block (one sign and decade, 90 buckets) starts, so a lookup
/// searches at most one decade's bins: C's "fast" histograms do the same job with a bigger
/// table. 1 KiB.
#[derive(Debug, Clone)]
struct Directory {
    starts: [u16; BLOCKS + 1],
}

impl Directory {
    fn build(keys: &[u16]) -> Box<Directory> {
        let mut directory = Box::new(Directory { starts: [0; BLOCKS + 1] });
        for &key in keys {
            directory.starts[block_of(key).0 + 1] += 1;
        }
        for block in 1..=BLOCKS {
            directory.starts[block] += directory.starts[block - 1];
        }
        directory
    }

    fn find(&self, keys: &[u16], key: u16) -> Result<usize, usize> {
        let (block, first_key) = block_of(key);
        let (start, end) = (usize::from(self.starts[block]), usize::from(self.starts[block + 1]));
        if end - start == 90 {
            return Ok(start + usize::from(key - first_key)); // every bucket of the decade is there
        }
        find(&keys[start..end], key).map(|i| start + i).map_err(|i| start + i)
    }

    fn inserted(&mut self, key: u16) {
        self.starts[block_of(key).0 + 1..].iter_mut().for_each(|start| *start += 1);
    }
}

/// The block of a key (one per sign and decade, plus NaN and zero) and the block's first key.
#[inline]
pub(crate) fn block_of(key: u16) -> (usize, u16) {
    const ZERO: u16 = 1 + 256 * 90;
    match key {
        0 => (0, 0),
        ZERO => (257, ZERO),
        k if k < ZERO => {
            let decade = (k - 1) / 90;
            (1 + usize::from(decade), 1 + decade * 90)
        }
        k => {
            let decade = (k - ZERO - 1) / 90;
            (258 + usize::from(decade), ZERO + 1 + decade * 90)
        }
    }
}

/// Returned by [`Histogram::subtract`] when a bin would go below zero (it is clamped at zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Underflow;

impl std::fmt::Display for Underflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("subtraction underflow: a bin was clamped at zero")
    }
}

impl std::error::Error for Underflow {}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram::default()
    }

    /// An empty histogram, in a constant (a `static` one to lend out where none was made).
    pub const fn empty() -> Self {
        Histogram { keys: Vec::new(), counts: Vec::new(), directory: None }
    }

    /// Adds `count` samples of `value` (NaN, ±∞ and |x| ≥ 1e128 go to the NaN bin); returns
    /// how many were added (less than `count` only when the bin saturates).
    pub fn insert(&mut self, value: f64, count: u64) -> u64 {
        self.insert_bucket(Bucket::of_f64(value), count)
    }

    /// Adds `count` samples of `value × 10^scale`, binned exactly with integers.
    pub fn insert_int_scale(&mut self, value: i64, scale: i32, count: u64) -> u64 {
        self.insert_bucket(Bucket::of_int_scale(value, scale), count)
    }

    /// Adds `count` samples to `bucket`; returns how many were added.
    pub fn insert_bucket(&mut self, bucket: Bucket, count: u64) -> u64 {
        self.insert_key(bucket.key(), count)
    }

    /// Adds `count` samples to the bucket whose key ([`Bucket::key`]) is `key`; returns how
    /// many were added.
    pub(crate) fn insert_key(&mut self, key: u16, count: u64) -> u64 {
        if count == 0 {
            return 0;
        }
        match self.keys.last() {
            // Bins arriving in order (a sorted run of values) are appended: no search, and no
            // directory built for a histogram that never needs one.
            Some(&last) if last == key => {
                let last = self.counts.last_mut().expect("a count per key");
                let before = *last;
                *last = before.saturating_add(count);
                return *last - before;
            }
            None => {
                self.keys.push(key);
                self.counts.push(count);
                return count;
            }
            Some(&last) if last < key => {
                self.keys.push(key);
                self.counts.push(count);
                if let Some(directory) = &mut self.directory {
                    directory.inserted(key);
                }
                return count;
            }
            Some(_) => {}
        }
        if self.directory.is_none() && self.keys.len() >= DIRECTORY_FROM_BINS {
            self.directory = Some(Directory::build(&self.keys));
        }
        match self.position(key) {
            Ok(index) => {
                let before = self.counts[index];
                self.counts[index] = before.saturating_add(count);
                self.counts[index] - before
            }
            Err(index) => {
                self.keys.insert(index, key);
                self.counts.insert(index, count);
                if let Some(directory) = &mut self.directory {
                    directory.inserted(key);
                }
                count
            }
        }
    }

    /// Where `key` is in `keys` (`Ok`), or would be inserted (`Err`).
    pub(crate) fn position(&self, key: u16) -> Result<usize, usize> {
        match &self.directory {
            Some(directory) => directory.find(&self.keys, key),
            None => find(&self.keys, key),
        }
    }

    /// The keys from index `at` on.
    pub(crate) fn keys_from(&self, at: usize) -> &[u16] {
        &self.keys[at..]
    }

    /// The key at index `at`.
    pub(crate) fn key_at(&self, at: usize) -> u16 {
        self.keys[at]
    }

    /// Adds `count` to the bin at index `at` (saturating).
    pub(crate) fn add_at(&mut self, at: usize, count: u64) {
        self.counts[at] = self.counts[at].saturating_add(count);
    }

    /// Drops the directory after the keys changed wholesale; the next insert rebuilds it.
    fn reindex(&mut self) {
        self.directory = None;
    }

    /// Every value multiplied by `10^decades`: each bin moves `decades` decades, exactly (a
    /// change of unit such as milliseconds to seconds). Bins that leave the range go to the
    /// zero bin (below 1e-128) or the NaN bin (past 1e127). One pass over the bins.
    pub fn shift_decades(&self, decades: i8) -> Histogram {
        let moved = |bucket: Bucket| -> Bucket {
            if bucket.is_nan() || bucket.is_zero() || decades == 0 {
                return bucket;
            }
            match bucket.exp().checked_add(decades) {
                Some(exp) => Bucket::new(bucket.val(), exp).unwrap_or(Bucket::NAN),
                None if decades < 0 => Bucket::ZERO,
                None => Bucket::NAN,
            }
        };
        let mut pairs: Vec<(u16, u64)> = self.bins().map(|(bucket, count)| (moved(bucket).key(), count)).collect();
        if !pairs.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            // Bins pushed past the range met others: sort and add them up.
            pairs.sort_unstable_by_key(|&(key, _)| key);
            pairs.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    earlier.1 = earlier.1.saturating_add(later.1);
                }
                same
            });
        }
        let (keys, counts) = pairs.into_iter().unzip();
        let directory = None;
        Histogram { keys, counts, directory }
    }

    /// The bins, in order, with their counts (all non-zero).
    pub fn bins(&self) -> impl ExactSizeIterator<Item = (Bucket, u64)> + '_ {
        self.keys.iter().zip(&self.counts).map(|(&key, &count)| (Bucket::from_key(key), count))
    }

    /// How many bins hold samples.
    pub fn bin_count(&self) -> usize {
        self.keys.len()
    }

    /// True when no sample was inserted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every sample, the NaN bin included (saturating).
    pub fn count(&self) -> u64 {
        self.counts.iter().fold(0u64, |total, &c| total.saturating_add(c))
    }

    /// The samples in the NaN bin.
    pub fn nan_count(&self) -> u64 {
        match self.keys.first() {
            Some(0) => self.counts[0],
            _ => 0,
        }
    }

    /// Adds every sample of `other` (bins add, saturating).
    pub fn merge(&mut self, other: &Histogram) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            self.clone_from(other);
            return;
        }
        if self.add_where_held(other) {
            return;
        }
        let (keys, counts) = merge_sorted(&self.keys, &self.counts, &other.keys, &other.counts, u64::saturating_add);
        self.keys = keys;
        self.counts = counts;
        self.reindex();
    }

    /// Adds `other` bin by bin in place when every bin of it is one of these (no bin is
    /// made, so nothing moves); false, nothing added, otherwise.
    fn add_where_held(&mut self, other: &Histogram) -> bool {
        if other.keys.len() > self.keys.len() {
            return false;
        }
        let mut at = 0;
        let mut places = other.keys.iter().map(|&key| {
            at += self.keys[at..].iter().take_while(|&&held| held < key).count();
            (at < self.keys.len() && self.keys[at] == key).then_some(at)
        });
        if !places.all(|place| place.is_some()) {
            return false;
        }
        let mut at = 0;
        for (&key, &count) in other.keys.iter().zip(&other.counts) {
            at += self.keys[at..].iter().take_while(|&&held| held < key).count();
            self.counts[at] = self.counts[at].saturating_add(count);
        }
        true
    }

    /// The sum of many histograms: a dense accumulation over every bucket when there are
    /// many inputs, pairwise merges otherwise.
    pub fn merge_all<'a>(histograms: impl IntoIterator<Item = &'a Histogram>) -> Histogram {
        let inputs: Vec<&Histogram> = histograms.into_iter().filter(|h| !h.is_empty()).collect();
        let total_bins: usize = inputs.iter().map(|h| h.bin_count()).sum();
        if inputs.len() <= 4 || total_bins < Bucket::COUNT / 8 {
            let mut sum = Histogram::new();
            inputs.iter().for_each(|h| sum.merge(h));
            return sum;
        }
        let mut dense = vec![0u64; Bucket::COUNT];
        for histogram in inputs {
            for (&key, &count) in histogram.keys.iter().zip(&histogram.counts) {
                let slot = &mut dense[usize::from(key)];
                *slot = slot.saturating_add(count);
            }
        }
        let mut sum = Histogram::new();
        for (key, &count) in dense.iter().enumerate().filter(|(_, &c)| c > 0) {
            sum.keys.push(key as u16);
            sum.counts.push(count);
        }
        sum.reindex();
        sum
    }

    /// Removes the samples of `other`, bin by bin. A bin that would go below zero is clamped
    /// at zero and the result is `Err(Underflow)`; the rest is still subtracted.
    pub fn subtract(&mut self, other: &Histogram) -> Result<(), Underflow> {
        let mut underflow = false;
        let subtract = |a: u64, b: u64| {
            underflow |= b > a;
            a.saturating_sub(b)
        };
        let (keys, counts) = merge_sorted(&self.keys, &self.counts, &other.keys, &other.counts, subtract);
        self.keys = keys;
        self.counts = counts;
        self.remove_empty_bins();
        if underflow {
            Err(Underflow)
        } else {
            Ok(())
        }
    }

    /// Drops every bin that lies entirely outside `[low, high]` (the NaN bin too).
    pub fn clamp(&mut self, low: f64, high: f64) {
        let keep: Vec<bool> = self
            .keys
            .iter()
            .map(|&key| {
                let bucket = Bucket::from_key(key);
                let left = bucket.left();
                !bucket.is_nan() && left + bucket.width() >= low && left <= high
            })
            .collect();
        let mut flags = keep.iter();
        self.keys.retain(|_| *flags.next().unwrap_or(&false));
        let mut flags = keep.iter();
        self.counts.retain(|_| *flags.next().unwrap_or(&false));
        self.reindex();
    }

    fn remove_empty_bins(&mut self) {
        let mut write = 0;
        for read in 0..self.keys.len() {
            if self.counts[read] > 0 {
                self.keys[write] = self.keys[read];
                self.counts[write] = self.counts[read];
                write += 1;
            }
        }
        self.keys.truncate(write);
        self.counts.truncate(write);
        self.reindex();
    }

    /// Builds from bins in any order, merging duplicates and dropping zero counts.
    pub(crate) fn from_unsorted(mut bins: Vec<(u16, u64)>) -> Histogram {
        bins.sort_unstable_by_key(|&(key, _)| key);
        let mut histogram = Histogram::new();
        for (key, count) in bins.into_iter().filter(|&(_, c)| c > 0) {
            match histogram.keys.last() {
                Some(&last) if last == key => {
                    let slot = histogram.counts.last_mut().unwrap_or_else(|| unreachable!("keys and counts pair up"));
                    *slot = slot.saturating_add(count);
                }
                _ => {
                    histogram.keys.push(key);
                    histogram.counts.push(count);
                }
            }
        }
        histogram.reindex();
        histogram
    }

    /// The raw keys and counts, for the statistics and the codec.
    pub(crate) fn raw(&self) -> (&[u16], &[u64]) {
        (&self.keys, &self.counts)
    }

    /// The bins as dense keys ([`Bucket::key`]: ascending in the C library's order) and their
    /// counts, side by side: what a storage codec writes.
    pub fn keyed_bins(&self) -> (&[u16], &[u64]) {
        self.raw()
    }

    /// The histogram of bins given as ascending keys ([`Bucket::key`]) and their counts, all
    /// non-zero: `None` when they are not (then [`Histogram::from_keyed_bins`] sorts them out).
    pub fn from_sorted_bins(keys: Vec<u16>, counts: Vec<u64>) -> Option<Histogram> {
        let sorted = keys.windows(2).all(|w| w[0] < w[1]);
        let valid = keys.len() == counts.len()
            && sorted
            && keys.last().is_none_or(|&k| usize::from(k) < Bucket::COUNT)
            && counts.iter().all(|&c| c > 0);
        valid.then(|| {
            let mut histogram = Histogram { keys, counts, directory: None };
            histogram.reindex();
            histogram
        })
    }

    /// The histogram of `(key, count)` bins in any order (duplicates add, zero counts are
    /// dropped); `None` when a key is not below [`Bucket::COUNT`]. The inverse of
    /// [`Histogram::keyed_bins`].
    pub fn from_keyed_bins(bins: Vec<(u16, u64)>) -> Option<Histogram> {
        let valid = bins.iter().all(|&(key, _)| usize::from(key) < Bucket::COUNT);
        valid.then(|| Histogram::from_unsorted(bins))
    }
}

/// Binary search without data-dependent branches (the loop runs log2(n) times whatever the
/// keys): `Ok(index)` of `key`, or `Err(index)` where it would be inserted.
#[inline]
fn find(keys: &[u16], key: u16) -> Result<usize, usize> {
    let mut size = keys.len();
    if size == 0 {
        return Err(0);
    }
    let mut base = 0;
    while size > 1 {
        let half = size / 2;
        let middle = base + half;
        base = if keys[middle] <= key { middle } else { base };
        size -= half;
    }
    match keys[base].cmp(&key) {
        std::cmp::Ordering::Equal => Ok(base),
        std::cmp::Ordering::Less => Err(base + 1),
        std::cmp::Ordering::Greater => Err(base),
    }
}

/// Merges two sorted key lists, combining the counts of equal keys with `combine` (a key in
/// only one list keeps its count, or `combine(0, count)` when only on the right).
fn merge_sorted(
    left_keys: &[u16],
    left_counts: &[u64],
    right_keys: &[u16],
    right_counts: &[u64],
    mut combine: impl FnMut(u64, u64) -> u64,
) -> (Vec<u16>, Vec<u64>) {
    let capacity = left_keys.len() + right_keys.len();
    let (mut keys, mut counts) = (Vec::with_capacity(capacity), Vec::with_capacity(capacity));
    let (mut i, mut j) = (0, 0);
    while i < left_keys.len() || j < right_keys.len() {
        let take_left = j == right_keys.len() || (i < left_keys.len() && left_keys[i] < right_keys[j]);
        let take_right = i == left_keys.len() || (j < right_keys.len() && right_keys[j] < left_keys[i]);
        if take_left {
            keys.push(left_keys[i]);
            counts.push(left_counts[i]);
            i += 1;
        } else if take_right {
            keys.push(right_keys[j]);
            counts.push(combine(0, right_counts[j]));
            j += 1;
        } else {
            keys.push(left_keys[i]);
            counts.push(combine(left_counts[i], right_counts[j]));
            i += 1;
            j += 1;
        }
    }
    (keys, counts)
}
