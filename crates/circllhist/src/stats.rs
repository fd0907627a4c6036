//! Statistics, computed as the C library computes them (same expressions, same order), so
//! results are bit-identical. Everything but [`Histogram::count`] leaves out the NaN bin.

use crate::{Bucket, Histogram};

/// Which quantile definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantileType {
    /// Type 1: rank `N·q`, the sample at or after it.
    Type1,
    /// Discretised type 7 (DDSketch's): rank `floor((N−1)·q + 1)`, no interpolation between ranks.
    Type7,
}

/// Why a quantile query was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryError {
    /// The probes were not in ascending order.
    NotAscending,
    /// A quantile was outside [0, 1].
    OutOfRange,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            QueryError::NotAscending => "probes must be in ascending order",
            QueryError::OutOfRange => "quantiles must be within [0, 1]",
        })
    }
}

impl std::error::Error for QueryError {}

impl Histogram {
    /// The bins without the NaN bin.
    fn numeric_bins(&self) -> impl Iterator<Item = (Bucket, u64)> + '_ {
        let (keys, counts) = self.numeric_raw();
        keys.iter().zip(counts).map(|(&key, &count)| (Bucket::from_key(key), count))
    }

    /// Keys and counts without the NaN bin (always first when present; every count non-zero).
    fn numeric_raw(&self) -> (&[u16], &[u64]) {
        let (keys, counts) = self.raw();
        let skip = usize::from(keys.first() == Some(&Bucket::NAN.key()));
        (&keys[skip..], &counts[skip..])
    }

    /// Σ count × midpoint (0 when empty).
    pub fn sum(&self) -> f64 {
        self.numeric_bins().fold(0.0, |sum, (bucket, count)| sum + bucket.midpoint() * count as f64)
    }

    /// The mean of the bins' midpoints weighted by count; NaN when empty.
    pub fn mean(&self) -> f64 {
        let (mut divisor, mut sum) = (0.0, 0.0);
        for (bucket, count) in self.numeric_bins() {
            let cardinality = count as f64;
            divisor += cardinality;
            sum += bucket.midpoint() * cardinality;
        }
        if divisor == 0.0 {
            f64::NAN
        } else {
            sum / divisor
        }
    }

    /// The population standard deviation of the midpoints; NaN when empty.
    pub fn stddev(&self) -> f64 {
        let (mut total, mut s1, mut s2) = (0.0, 0.0, 0.0);
        for (bucket, count) in self.numeric_bins() {
            let midpoint = bucket.midpoint();
            let count = count as f64;
            total += count;
            s1 += midpoint * count;
            s2 += midpoint.powi(2) * count;
        }
        if total == 0.0 {
            return f64::NAN;
        }
        (s2 / total - (s1 / total).powi(2)).sqrt()
    }

    /// The quantiles `probes` (ascending, each in [0, 1]); all NaN when empty. Samples in a
    /// bin are taken as spread evenly inside it ("fair resampling"): the k-th of n sits at
    /// `left + k/(n+1) × width`.
    pub fn quantiles(&self, probes: &[f64], kind: QuantileType) -> Result<Vec<f64>, QueryError> {
        if probes.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(QueryError::NotAscending);
        }
        let (keys, counts) = self.numeric_raw();
        let total = counts.iter().fold(0.0, |total, &count| total + count as f64);
        if total == 0.0 {
            return Ok(vec![f64::NAN; probes.len()]);
        }
        if probes.iter().any(|q| !(0.0..=1.0).contains(q)) {
            return Err(QueryError::OutOfRange);
        }
        let mut index = 0;
        let mut below = 0.0;
        let mut upto = counts[0] as f64;
        let mut results = Vec::with_capacity(probes.len());
        for &q in probes {
            let rank = match kind {
                QuantileType::Type1 => total * q,
                QuantileType::Type7 => ((total - 1.0) * q + 1.0).floor(),
            };
            while index + 1 < keys.len() && upto < rank {
                index += 1;
                below = upto;
                upto = below + counts[index] as f64;
            }
            results.push(resampled(Bucket::from_key(keys[index]), counts[index], rank - below, kind));
        }
        Ok(results)
    }

    /// One quantile (type 1); NaN when empty or when `q` is outside [0, 1].
    pub fn quantile(&self, q: f64) -> f64 {
        self.quantiles(&[q], QuantileType::Type1).map_or(f64::NAN, |v| v[0])
    }

    /// For each threshold (ascending), the share of samples below it, interpolating linearly
    /// inside the bin that holds it; all NaN when empty.
    pub fn inverse_quantiles(&self, thresholds: &[f64]) -> Result<Vec<f64>, QueryError> {
        if thresholds.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(QueryError::NotAscending);
        }
        let total = self.numeric_bins().fold(0.0, |total, (_, count)| total + count as f64);
        if total == 0.0 {
            return Ok(vec![f64::NAN; thresholds.len()]);
        }
        let bins: Vec<Interval> = self.numeric_bins().map(|(bucket, count)| Interval::of(bucket, count)).collect();
        let mut index = 0;
        let mut below = 0.0;
        let mut results = Vec::with_capacity(thresholds.len());
        for &threshold in thresholds {
            while index < bins.len() && threshold >= bins[index].upper {
                below += bins[index].count;
                index += 1;
            }
            let share = match bins.get(index) {
                None => 1.0,
                Some(bin) if threshold < bin.lower || bin.zero => below / total,
                Some(bin) => (below + (threshold - bin.lower) / (bin.upper - bin.lower) * bin.count) / total,
            };
            results.push(share);
        }
        Ok(results)
    }

    /// Samples in bins at or below the bin holding `threshold` (`inclusive`), or strictly below
    /// it. Exact for any threshold with two significant digits. Like the C library, the sum
    /// wraps past 2^64 − 1 (only reachable with saturated bins).
    pub fn count_below(&self, threshold: f64, inclusive: bool) -> u64 {
        let limit = Bucket::of_f64(threshold);
        self.numeric_bins()
            .take_while(|&(bucket, _)| bucket < limit || (inclusive && bucket == limit))
            .fold(0u64, |total, (_, count)| total.wrapping_add(count))
    }

    /// Samples in bins at or above the bin holding `threshold` (`inclusive`), or strictly above
    /// it, plus the NaN bin (which holds +∞ and values past 1e128), as the C library counts:
    /// the saturated total minus the bins below (wrapping, as in C).
    pub fn count_above(&self, threshold: f64, inclusive: bool) -> u64 {
        let limit = Bucket::of_f64(threshold);
        self.numeric_bins()
            .take_while(|&(bucket, _)| bucket < limit || (!inclusive && bucket == limit))
            .fold(self.count(), |total, (_, count)| total.wrapping_sub(count))
    }

    /// Samples in the bin that holds `value`.
    pub fn count_nearby(&self, value: f64) -> u64 {
        let bucket = Bucket::of_f64(value);
        self.bins().find(|&(b, _)| b == bucket).map_or(0, |(_, count)| count)
    }
}

/// A bin as the inverse quantile walks it: negative bins run from `edge − width` to `edge`;
/// the zero bin is `[−1e-128, 1e-128)` and takes no interpolation.
struct Interval {
    lower: f64,
    upper: f64,
    count: f64,
    zero: bool,
}

impl Interval {
    fn of(bucket: Bucket, count: u64) -> Interval {
        let count = count as f64;
        if bucket.is_zero() {
            return Interval { lower: -1e-128, upper: 1e-128, count, zero: true };
        }
        let (edge, width) = (bucket.edge(), bucket.width());
        let (lower, upper) = if edge < 0.0 { (edge - width, edge) } else { (edge, edge + width) };
        Interval { lower, upper, count, zero: false }
    }
}

/// The `offset`-th sample (rank minus the samples before the bin) of a bin, resampled fairly.
fn resampled(bucket: Bucket, count: u64, offset: f64, kind: QuantileType) -> f64 {
    if bucket.is_zero() {
        return 0.0;
    }
    let k = match kind {
        QuantileType::Type1 => match offset.ceil() {
            0.0 => 1.0,
            k => k,
        },
        QuantileType::Type7 => offset,
    };
    bucket.left() + k / (count as f64 + 1.0) * bucket.width()
}
