//! Prometheus native histograms from circllhist bins.
//!
//! A native histogram at schema `s` has buckets whose edges are powers of `2^(2^-s)`; bucket
//! `i` holds `(2^((i-1)·2^-s), 2^(i·2^-s)]` (upper-inclusive), negatives mirror, exact zeros
//! go to the zero bucket. circllhist's decimal edges never line up with those, so each bin is
//! re-binned: its `n` samples are taken to sit at the bin's fair positions
//! `lo + w·(k + ½)/n` (as circllhist's own quantiles assume, evenly spread) and counted
//! where those fall. A whole bin is never moved to one point. Each flush's interval is
//! converted on its own and added, so bucket counts only grow (a decrease would read as a
//! counter reset).
//!
//! The error: a native bucket at schema 5 is 2.2% wide and a circllhist bin 1% to 10%; a
//! quantile of the native histogram stays within the circllhist bin that holds the exact
//! quantile, widened by one native bucket at each end (measured in the tests below).

use std::collections::BTreeMap;

use circllhist::Histogram;

/// The schemas Prometheus accepts.
pub const SCHEMAS: std::ops::RangeInclusive<i32> = -4..=8;

/// A native histogram with integer counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Native {
    /// The resolution: bucket edges are powers of `2^(2^-schema)`.
    pub schema: i32,
    /// Exact zeros (and |x| < 1e-128, circllhist's zero bin).
    pub zero_count: u64,
    /// Counts by bucket index for positive values.
    pub positive: BTreeMap<i32, u64>,
    /// Counts by bucket index of |x| for negative values.
    pub negative: BTreeMap<i32, u64>,
    /// NaN, ±∞ and |x| ≥ 1e128 (circllhist's NaN bin): in the count only.
    pub nan_count: u64,
}

impl Native {
    /// An empty histogram at `schema` (in [`SCHEMAS`]).
    pub fn new(schema: i32) -> Native {
        Native { schema, ..Native::default() }
    }

    /// Every observation.
    pub fn count(&self) -> u64 {
        self.zero_count + self.nan_count + self.positive.values().sum::<u64>() + self.negative.values().sum::<u64>()
    }

    /// Adds every bin of `histogram`, spread as the module says.
    pub fn add(&mut self, histogram: &Histogram) {
        for (bucket, count) in histogram.bins() {
            if bucket.is_nan() {
                self.nan_count += count;
            } else if bucket.is_zero() {
                self.zero_count += count;
            } else {
                let low = bucket.edge().abs();
                let side = if bucket.val() > 0 { &mut self.positive } else { &mut self.negative };
                let schema = self.schema;
                with_edges(schema, bucket, |edges| spread(side, edges, low, bucket.width(), count));
            }
        }
    }

    /// Adds the counts of `other` (at the same schema) bucket by bucket: what a later
    /// interval re-binned on its own adds to running counts.
    pub fn merge(&mut self, other: &Native) {
        debug_assert_eq!(self.schema, other.schema);
        self.zero_count += other.zero_count;
        self.nan_count += other.nan_count;
        for (side, more) in [(&mut self.positive, &other.positive), (&mut self.negative, &other.negative)] {
            for (&index, &count) in more {
                *side.entry(index).or_insert(0) += count;
            }
        }
    }

    /// The upper edge of bucket `index`.
    pub fn upper_edge(schema: i32, index: i32) -> f64 {
        (f64::from(index) * (-f64::from(schema)).exp2()).exp2()
    }

    /// The bucket that holds the magnitude `value` (> 0).
    pub fn index_of(schema: i32, value: f64) -> i32 {
        let guess = (value.log2() * f64::from(schema).exp2()).ceil() as i32;
        if Native::upper_edge(schema, guess - 1) >= value {
            guess - 1
        } else if Native::upper_edge(schema, guess) < value {
            guess + 1
        } else {
            guess
        }
    }
}

/// The buckets that overlap a bin `[low, low + width]` (magnitudes): each index with its upper
/// edge, from the bucket of `low` to the bucket of `low + width`.
type Edges = [(i32, f64)];

/// Bins' overlapping buckets, computed once per schema and bin on each thread: spreading a bin
/// then needs no logarithm or power (a flush of 10k timers re-bins about a million bins).
/// Bounded: past [`EDGE_CACHE_BINS`] entries the cache starts over.
fn with_edges<T>(schema: i32, bucket: circllhist::Bucket, use_edges: impl FnOnce(&Edges) -> T) -> T {
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<(i32, u16), Box<Edges>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= EDGE_CACHE_BINS {
            cache.clear();
        }
        let edges = cache.entry((schema, bucket.key())).or_insert_with(|| {
            let low = bucket.edge().abs();
            let (first, last) = (Native::index_of(schema, low), Native::index_of(schema, low + bucket.width()));
            (first..=last).map(|index| (index, Native::upper_edge(schema, index))).collect()
        });
        use_edges(edges)
    })
}

/// The most (schema, bin) pairs [`with_edges`] keeps per thread (~2 MB).
const EDGE_CACHE_BINS: usize = 65_536;

/// Counts `n` samples at `low + width·(k + ½)/n` into the buckets they fall in; `edges` are the
/// buckets overlapping the bin ([`with_edges`]).
fn spread(side: &mut BTreeMap<i32, u64>, edges: &Edges, low: f64, width: f64, n: u64) {
    // Samples at or below `edge`.
    let at_or_below = |edge: f64| -> u64 {
        let k = ((edge - low) * n as f64 / width - 0.5).floor();
        (k + 1.0).clamp(0.0, n as f64) as u64
    };
    // The bucket of a position in the bin: the first whose upper edge is at or above it.
    let bucket_of = |x: f64| edges.iter().position(|&(_, edge)| edge >= x).unwrap_or(edges.len() - 1);
    let first = bucket_of(low + width * 0.5 / n as f64);
    let last = bucket_of(low + width * (n as f64 - 0.5) / n as f64);
    let mut below = 0;
    for &(index, edge) in &edges[first..=last] {
        let upto = if index == edges[last].0 { n } else { at_or_below(edge) };
        if upto > below {
            *side.entry(index).or_insert(0) += upto - below;
            below = upto;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram_of as histogram;
    use super::*;
    use circllhist::Bucket;

    /// `histogram` (as circllhist counts) is converted whole; for tests and measurements.
    fn of(histogram: &Histogram, schema: i32) -> Native {
        let mut native = Native::new(schema);
        native.add(histogram);
        native
    }

    /// The quantile `q` of a native histogram as Prometheus 2.x estimates it: the bucket where the
    /// rank falls, interpolated linearly within it (zero bucket: 0; negatives mirrored).
    fn quantile(native: &Native, q: f64) -> f64 {
        let mut buckets: Vec<(f64, f64, u64)> = Vec::new();
        for (&index, &count) in native.negative.iter().rev() {
            let (low, high) = (Native::upper_edge(native.schema, index - 1), Native::upper_edge(native.schema, index));
            buckets.push((-high, -low, count));
        }
        buckets.push((0.0, 0.0, native.zero_count));
        for (&index, &count) in &native.positive {
            buckets.push((
                Native::upper_edge(native.schema, index - 1),
                Native::upper_edge(native.schema, index),
                count,
            ));
        }
        let total: u64 = buckets.iter().map(|b| b.2).sum();
        let rank = q * total as f64;
        let mut seen = 0.0;
        for (low, high, count) in buckets {
            if count > 0 && seen + count as f64 >= rank {
                return low + (high - low) * (rank - seen) / count as f64;
            }
            seen += count as f64;
        }
        f64::NAN
    }

    /// The bin of circllhist that holds `value`, as `[low, high]`.
    fn bin_range(value: f64) -> (f64, f64) {
        let bucket = Bucket::of_f64(value);
        (bucket.left(), bucket.left() + bucket.width())
    }

    /// The spread of the module's definition, with the index of every position computed
    /// (what the cache of edges must give).
    fn spread_uncached(side: &mut BTreeMap<i32, u64>, schema: i32, low: f64, width: f64, n: u64) {
        let at_or_below = |edge: f64| -> u64 {
            let k = ((edge - low) * n as f64 / width - 0.5).floor();
            (k + 1.0).clamp(0.0, n as f64) as u64
        };
        let first = Native::index_of(schema, low + width * 0.5 / n as f64);
        let last = Native::index_of(schema, low + width * (n as f64 - 0.5) / n as f64);
        let mut below = 0;
        for index in first..=last {
            let upto = if index == last { n } else { at_or_below(Native::upper_edge(schema, index)) };
            if upto > below {
                *side.entry(index).or_insert(0) += upto - below;
                below = upto;
            }
        }
    }

    #[test]
    fn cached_edges_spread_as_the_definition_does() {
        for schema in [-4, 0, 3, 5, 8] {
            let bins = (-128i16..=127)
                .step_by(5)
                .flat_map(|exp| [10i8, 11, 37, 99, -10, -42, -99].map(move |val| (val, exp as i8)));
            for (val, exp) in bins {
                let bucket = Bucket::new(val, exp).unwrap();
                let (low, width) = (bucket.edge().abs(), bucket.width());
                for n in [1, 2, 7, 100, 12_345] {
                    let (mut cached, mut direct) = (BTreeMap::new(), BTreeMap::new());
                    with_edges(schema, bucket, |edges| spread(&mut cached, edges, low, width, n));
                    spread_uncached(&mut direct, schema, low, width, n);
                    assert_eq!(cached, direct, "schema {schema} bin {:?} n {n}", (bucket.val(), bucket.exp()));
                }
            }
        }
    }

    #[test]
    fn bucket_edges_are_upper_inclusive() {
        for schema in [0, 3, 5, 8] {
            for index in [-40, -1, 0, 1, 17, 100] {
                let edge = Native::upper_edge(schema, index);
                assert_eq!(Native::index_of(schema, edge), index, "schema {schema} edge {edge}");
                assert_eq!(Native::index_of(schema, edge * (1.0 + 1e-12)), index + 1);
            }
        }
        assert_eq!(Native::index_of(0, 1.0), 0);
        assert_eq!(Native::index_of(0, 1.5), 1);
        assert_eq!(Native::index_of(0, 2.0), 1);
    }

    #[test]
    fn each_bin_is_spread_never_moved_whole() {
        // 100 samples in [1.0, 1.1) at schema 5: edges 2^(k/32) are 1, 1.0219, 1.0443,
        // 1.0671, 1.0905, 1.1144: five buckets share them (samples at 1.0005 + 0.001·k).
        let mut bin = Histogram::new();
        bin.insert(1.05, 100);
        let native = of(&bin, 5);
        let counts: Vec<(i32, u64)> = native.positive.iter().map(|(&i, &c)| (i, c)).collect();
        assert_eq!(counts, vec![(1, 22), (2, 22), (3, 23), (4, 24), (5, 9)]);
        assert_eq!(native.count(), 100);
        // Zero, negative and NaN bins.
        let native = of(&histogram(&[0.0, 0.0, -1.05, f64::NAN]), 5);
        assert_eq!((native.zero_count, native.nan_count, native.count()), (2, 1, 4));
        assert_eq!(native.negative.keys().copied().collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn integer_milliseconds_on_edges() {
        // 100 ms sits on circllhist's edge [100, 110) and is spread inside it: none of it
        // goes below 100, whatever the power of two nearest.
        let native = of(&histogram(&[100.0; 7]), 5);
        let below_100: u64 =
            native.positive.iter().filter(|(&i, _)| Native::upper_edge(5, i) <= 100.0).map(|(_, c)| c).sum();
        assert_eq!(below_100, 0);
        assert_eq!(native.count(), 7);
    }

    #[test]
    fn quantiles_stay_within_the_circllhist_bin_widened_by_a_native_bucket() {
        // A log-spread load over four decades; the measured worst case is the documented bound.
        let values: Vec<f64> = (0..5000).map(|i| 0.5 * 1.0021f64.powi(i)).collect();
        let circllhist = histogram(&values);
        for schema in [3, 5, 8] {
            let native = of(&circllhist, schema);
            let growth = (-f64::from(schema)).exp2().exp2();
            for q in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999] {
                let (low, high) = bin_range(circllhist.quantile(q));
                let estimate = quantile(&native, q);
                assert!(
                    estimate >= low / growth && estimate <= high * growth,
                    "schema {schema} q={q}: {estimate} outside [{low}, {high}] widened by {growth}"
                );
            }
        }
    }
}
