//! What the flusher gets of one timer's interval: its samples' exact count, sum, extremes, raw
//! values up to the sample limit, and a circllhist of every value. The reader fills it (through
//! [`crate::timers`]); the flusher sorts, bins and reads it.

use crate::values::Values;

/// A timer's (or `h`/`d` histogram's) samples in one interval: exact count, sum, sum of
/// squares, min and max of everything received; the raw values while there are at most the
/// sample limit of them (for Etsy's exact percentiles); and a circllhist of every value,
/// weighted by its sample rate, so memory stays bounded however many samples arrive.
///
/// The reader does not bin a value it keeps at rate 1: the first `waiting` kept values wait for
/// the flush, which sorts the values anyway for Etsy's statistics and then bins them in runs,
/// one histogram insert per bin instead of one per sample (and no histogram cache misses on the
/// reader's hot path). Values past the limit or at a sample rate are binned on arrival, so the
/// reader never bins a backlog at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimerSamples {
    /// Values received, unweighted.
    pub received: u64,
    /// The values, unweighted, in arrival order, at most the sample limit of them; all of them
    /// while [`TimerSamples::is_complete`], emptied at the flush (or a merge) otherwise. Four
    /// bytes a value while they are whole thousandths ([`Values`]).
    pub values: Values,
    /// How many of the first `values` are not in `histogram` yet (each weighs 1).
    waiting: usize,
    /// The sample-rate-weighted count: the sum of `1 / rate`.
    pub count: f64,
    /// The sum of every value received, unweighted.
    pub sum: f64,
    /// The sum of squares of every value received, unweighted.
    pub sum_squares: f64,
    /// The smallest value received (meaningless when `received` is 0).
    pub min: f64,
    /// The largest value received (meaningless when `received` is 0).
    pub max: f64,
    weight_carry: f64,
    /// True once a value came as a statsd timer (`ms`) rather than an `h`/`d` histogram:
    /// exporters that convert units (Prometheus: seconds) convert this series.
    pub milliseconds: bool,
    /// Every value, each counted `1 / rate` times (fractions carried to the next sample),
    /// except the first `waiting` of `values` (see [`TimerSamples::settle`]). Allocated at its
    /// first bin.
    pub histogram: LazyHistogram,
}

/// A circllhist allocated when its first bin is added: most timers at rate 1 bin nothing in
/// the reader (their values wait for the flush), and a timer that received nothing in an
/// interval keeps no empty histogram (56 bytes) in the flusher.
#[derive(Debug, Clone, Default)]
pub struct LazyHistogram(Option<Box<circllhist::Histogram>>);

/// What an unallocated [`LazyHistogram`] reads as.
static EMPTY_HISTOGRAM: circllhist::Histogram = circllhist::Histogram::empty();

impl LazyHistogram {
    /// The histogram, moved out (empty when none was allocated).
    pub fn into_histogram(self) -> circllhist::Histogram {
        self.0.map_or_else(circllhist::Histogram::new, |boxed| *boxed)
    }
}

impl From<circllhist::Histogram> for LazyHistogram {
    fn from(histogram: circllhist::Histogram) -> Self {
        LazyHistogram((!histogram.is_empty()).then(|| Box::new(histogram)))
    }
}

impl std::ops::Deref for LazyHistogram {
    type Target = circllhist::Histogram;

    fn deref(&self) -> &circllhist::Histogram {
        self.0.as_deref().unwrap_or(&EMPTY_HISTOGRAM)
    }
}

impl std::ops::DerefMut for LazyHistogram {
    /// Allocates the histogram if it was not yet.
    fn deref_mut(&mut self) -> &mut circllhist::Histogram {
        self.0.get_or_insert_with(Box::default)
    }
}

impl LazyHistogram {
    /// Adds a part's histogram (allocating this one only when it has a bin).
    fn merge_part(&mut self, part: &TimerPart<'_>) {
        if part.histogram.len() > 2 && part.histogram[..2] != [0, 0] {
            (**self).merge_checked_bytes(part.histogram); // TimerPart::new accepted it
        }
    }
}

/// One timer's interval as another histd forwarded it, read where it lies in the batch:
/// exact totals, its raw values (8-byte little-endian IEEE 754 each) when all of them were
/// kept, and its circllhist in libcircllhist's binary form. Made by [`TimerPart::new`], which
/// checks that the parts agree (or [`TimerPart::accepted_before`] of pieces it accepted).
#[derive(Debug, Clone, Copy)]
pub struct TimerPart<'a> {
    /// Exact count, sum, sum of squares and extremes.
    pub totals: crate::TimerTotals,
    /// True when the values came as a statsd timer (`ms`).
    pub milliseconds: bool,
    values: &'a [u8],
    histogram: &'a [u8],
}

impl<'a> TimerPart<'a> {
    /// The part, or `None` when its pieces disagree: values present but not one per value
    /// received, a value that is not finite, a count below zero, min above max, or a histogram
    /// that is not exactly one circllhist.
    pub fn new(
        totals: crate::TimerTotals,
        milliseconds: bool,
        values: &'a [u8],
        histogram: &'a [u8],
    ) -> Option<TimerPart<'a>> {
        let part = TimerPart { totals, milliseconds, values, histogram };
        let value_count = values.len() / 8;
        let consistent = values.len().is_multiple_of(8)
            && (value_count == 0 || value_count as u64 == totals.received)
            && totals.count >= 0.0
            && (totals.received == 0 || totals.min <= totals.max)
            && part.values().all(f64::is_finite)
            && circllhist::Histogram::check_bytes(histogram).is_ok();
        consistent.then_some(part)
    }

    /// A part whose pieces [`TimerPart::new`] accepted before, not checked again: a batch read
    /// a second time after a first reading checked it whole. (Given pieces `new` refuses, a
    /// merge adds what its histogram holds before the fault and the values there are.)
    pub fn accepted_before(
        totals: crate::TimerTotals,
        milliseconds: bool,
        values: &'a [u8],
        histogram: &'a [u8],
    ) -> TimerPart<'a> {
        debug_assert!(TimerPart::new(totals, milliseconds, values, histogram).is_some());
        TimerPart { totals, milliseconds, values, histogram }
    }

    /// How many raw values it carries (none when not all were kept).
    pub fn value_count(&self) -> usize {
        self.values.len() / 8
    }

    /// Its raw values, in arrival order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = f64> + 'a {
        self.values
            .chunks_exact(8)
            .map(|bytes| f64::from_le_bytes(bytes.try_into().unwrap_or_else(|_| unreachable!("chunks of 8 bytes"))))
    }
}

impl PartialEq for LazyHistogram {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl TimerSamples {
    /// Adds one value sampled at `rate`, keeping raw values while at most `limit` arrived.
    #[inline]
    pub fn add(&mut self, value: f64, rate: f64, limit: usize) {
        let complete = self.is_complete();
        let whole = self.tally(value, rate);
        if complete && self.values.len() < limit {
            // A value of weight 1 can wait for the flush, which bins it at weight 1.
            let waits = whole == 1.0 && self.waiting == self.values.len();
            self.values.push(value);
            if waits {
                self.waiting += 1;
                return;
            }
        }
        if whole >= 1.0 {
            insert_exactly(&mut self.histogram, value, whole as u64);
        }
    }

    /// Counts `value`, sampled at `rate`, in the totals (received, weighted count, extremes,
    /// sums); returns the weight it is binned with ([`TimerSamples::carry_weight`]).
    #[inline]
    fn tally(&mut self, value: f64, rate: f64) -> f64 {
        self.received += 1;
        self.count += 1.0 / rate;
        (self.min, self.max) =
            if self.received == 1 { (value, value) } else { (self.min.min(value), self.max.max(value)) };
        self.sum += value;
        self.sum_squares += value * value;
        self.carry_weight(rate)
    }

    /// Adds `1 / rate` to the carried weight and takes its whole part: the weight this value
    /// is binned with (at rate 1, 1: the carry stays below 1).
    #[inline]
    fn carry_weight(&mut self, rate: f64) -> f64 {
        if rate == 1.0 && self.weight_carry == 0.0 {
            return 1.0; // nothing carried: what the sum below gives, without a conversion
        }
        let next = self.weight_carry + 1.0 / rate;
        let whole = floor_of_non_negative(next);
        self.weight_carry = next - whole;
        whole
    }

    /// The samples of `values` received at rate 1, in this order, all of them waiting for the
    /// flush to bin them: what adding them one by one gives.
    pub(crate) fn waiting(values: Values) -> TimerSamples {
        let (received, waiting, count) = (values.len() as u64, values.len(), values.len() as f64);
        let mut samples = TimerSamples { received, waiting, count, ..Default::default() };
        if let Some(first) = values.iter().next() {
            (samples.min, samples.max) = (first, first);
        }
        for value in values.iter() {
            (samples.min, samples.max) = (samples.min.min(value), samples.max.max(value));
            samples.sum += value;
            samples.sum_squares += value * value;
        }
        samples.values = values;
        samples
    }

    /// True while every value received is still kept.
    pub fn is_complete(&self) -> bool {
        self.values.len() as u64 == self.received
    }

    /// Readies the interval for its statistics: the kept values sorted as Etsy sorts them
    /// (ascending, equal values in arrival order), every value in `histogram`, and the values
    /// dropped when they are not all of them.
    pub fn settle(&mut self) {
        if !self.is_complete() {
            self.bin_waiting_sorted();
            self.values = Values::default();
            return;
        }
        if self.waiting < self.values.len() {
            self.bin_waiting_in_order();
        }
        self.values.sort_prefix_like_etsy(self.values.len());
        bin_sorted(&mut self.histogram, self.values.prefix(self.waiting)); // all of them, or none
        self.waiting = 0;
    }

    /// Bins the waiting values after sorting them (their order is lost).
    fn bin_waiting_sorted(&mut self) {
        self.values.sort_prefix_like_etsy(self.waiting);
        bin_sorted(&mut self.histogram, self.values.prefix(self.waiting));
        self.waiting = 0;
    }

    /// Bins the waiting values one by one, keeping their order.
    fn bin_waiting_in_order(&mut self) {
        for value in self.values.prefix(self.waiting) {
            insert_exactly(&mut self.histogram, value, 1);
        }
        self.waiting = 0;
    }

    /// Adds `other` after `self`; raw values stay only if both kept theirs and together they
    /// fit in `limit`.
    pub fn merge(&mut self, mut other: TimerSamples, limit: usize) {
        if other.received == 0 {
            return;
        }
        if self.received == 0 {
            *self = other;
            self.keep_values_within(limit);
            return;
        }
        let totals = other.totals();
        let keep = self.is_complete() && other.is_complete() && self.values.len() + other.values.len() <= limit;
        if keep {
            if self.waiting < self.values.len() {
                // Waiting values must stay a prefix of the values.
                other.bin_waiting_in_order();
            }
            self.waiting += other.waiting;
            self.values.extend(other.values);
        } else {
            self.bin_waiting_sorted();
            other.bin_waiting_sorted();
            self.values = Values::default();
        }
        self.add_totals(&totals);
        if !other.histogram.is_empty() {
            self.histogram.merge(&other.histogram); // allocates ours only when there is something to add
        }
        self.milliseconds |= other.milliseconds;
        self.weight_carry += other.weight_carry;
    }

    /// A timer interval from its part as another histd forwarded it.
    pub fn from_part(part: &TimerPart<'_>) -> TimerSamples {
        let totals = &part.totals;
        let mut values = Values::with_capacity(part.value_count());
        part.values().for_each(|value| values.push(value));
        let mut histogram = LazyHistogram::default();
        histogram.merge_part(part);
        TimerSamples {
            received: totals.received,
            values,
            count: totals.count,
            sum: totals.sum,
            sum_squares: totals.sum_squares,
            min: totals.min,
            max: totals.max,
            milliseconds: part.milliseconds,
            histogram,
            ..TimerSamples::default()
        }
    }

    /// Adds another histd's forwarded `part` after `self`, as [`TimerSamples::merge`] adds
    /// [`TimerSamples::from_part`] of it, reading its values and bins where they lie.
    pub fn merge_part(&mut self, part: &TimerPart<'_>, limit: usize) {
        let totals = &part.totals;
        if totals.received == 0 {
            return;
        }
        if self.received == 0 {
            *self = TimerSamples::from_part(part);
            self.keep_values_within(limit);
            return;
        }
        // A part's histogram holds every one of its values: none of them waits.
        let complete = part.value_count() as u64 == totals.received;
        if self.is_complete() && complete && self.values.len() + part.value_count() <= limit {
            self.values.reserve(part.value_count());
            part.values().for_each(|value| self.values.push(value));
        } else {
            self.bin_waiting_sorted();
            self.values = Values::default();
        }
        self.add_totals(totals);
        self.histogram.merge_part(part);
        self.milliseconds |= part.milliseconds;
    }

    /// Its exact totals (min and max NaN when nothing arrived).
    pub fn totals(&self) -> crate::TimerTotals {
        let empty = self.received == 0;
        crate::TimerTotals {
            count: self.count,
            received: self.received,
            sum: self.sum,
            sum_squares: self.sum_squares,
            min: if empty { f64::NAN } else { self.min },
            max: if empty { f64::NAN } else { self.max },
        }
    }

    /// Adds another interval's totals of at least one value after these.
    fn add_totals(&mut self, totals: &crate::TimerTotals) {
        self.received += totals.received;
        self.count += totals.count;
        self.sum += totals.sum;
        self.sum_squares += totals.sum_squares;
        self.min = self.min.min(totals.min);
        self.max = self.max.max(totals.max);
    }

    fn keep_values_within(&mut self, limit: usize) {
        if self.values.len() > limit || !self.is_complete() {
            self.bin_waiting_sorted();
            self.values = Values::default();
        }
    }
}

/// Bins a timer's values past the limit fill in a plain histogram before any is counted by
/// decade: below the histogram's directory (16 bins), so a timer a few values past its limit
/// holds a few bytes, not a decade's 720.
const FEW_BINS: usize = 16;

/// Bins a decade must hold in the histogram to be counted by decade from then on: a decade's
/// counts take 720 bytes, its bins in a histogram 10 each, so one value in each of many
/// decades stays in the histogram (probe P16: 702 bytes a timer-decade, 170 MB for 1,000
/// timers given one value in each of 254 decades).
const BUSY_DECADE_BINS: usize = 8;

/// A timer's values past the sample limit of an interval, none of them kept: their totals, and
/// their bins: in a histogram, and, once a decade holds [`BUSY_DECADE_BINS`] bins, that
/// decade's values counted by decade ([`circllhist::DecadeCounts`]), which values arriving in
/// no order fill without the searches and moves a histogram's sorted bins take.
#[derive(Debug, Default)]
pub(crate) struct PastLimit {
    totals: TimerSamples,
    few: circllhist::Histogram,
    many: circllhist::DecadeCounts,
    /// The histogram's bins at which its busy decades are moved next (0: at its first bin).
    few_limit: usize,
}

impl PastLimit {
    /// Adds one value sampled at `rate`: what [`TimerSamples::add`] with a limit of 0 does.
    #[inline]
    pub(crate) fn add(&mut self, value: f64, rate: f64) {
        let whole = self.totals.tally(value, rate);
        if whole >= 1.0 {
            let bucket = bucket_exactly(value);
            if !self.many.insert_if_held(bucket, whole as u64) {
                self.few.insert_bucket(bucket, whole as u64);
                if self.few.bin_count() > self.few_limit {
                    self.move_busy_decades();
                }
            }
        }
    }

    /// Moves the histogram's busy decades into the decade counts; the scattered bins left are
    /// looked at again once they doubled.
    #[cold]
    fn move_busy_decades(&mut self) {
        if self.few.bin_count() >= FEW_BINS {
            self.many.take_busy_decades(&mut self.few, BUSY_DECADE_BINS);
        }
        self.few_limit = (self.few.bin_count() * 2).max(FEW_BINS);
    }

    /// The samples of every value added (none kept raw).
    pub(crate) fn into_samples(self) -> TimerSamples {
        let PastLimit { mut totals, mut few, many, .. } = self;
        few.merge(&many.into_histogram()); // nothing to do when none spilled
        totals.histogram = few.into();
        totals
    }
}

/// `value.floor()` for a non-negative `value`, without the library call LLVM would otherwise
/// make on every line (it computes `floor` speculatively, and without SSE4.1 that is a call):
/// below 2^52 truncation is the floor; from 2^52 on every double is an integer.
#[inline]
fn floor_of_non_negative(value: f64) -> f64 {
    if value < 4_503_599_627_370_496.0 {
        (value as u64) as f64
    } else {
        value
    }
}

/// Bins sorted values at weight 1: a value equal to the one before reuses its bin, and the
/// histogram appends bins that arrive in order without a search.
fn bin_sorted(histogram: &mut circllhist::Histogram, sorted: impl Iterator<Item = f64>) {
    let mut previous: Option<(u64, circllhist::Bucket)> = None;
    for value in sorted {
        let bucket = match previous {
            Some((bits, bucket)) if bits == value.to_bits() => bucket,
            _ => bucket_exactly(value),
        };
        previous = Some((value.to_bits(), bucket));
        histogram.insert_bucket(bucket, 1);
    }
}

/// Integral values take the histogram's exact integer path; others the f64 path.
fn insert_exactly(histogram: &mut circllhist::Histogram, value: f64, count: u64) {
    histogram.insert_bucket(bucket_exactly(value), count);
}

/// The bin of `value`: by the exact integer path when it is integral, else the f64 path.
fn bucket_exactly(value: f64) -> circllhist::Bucket {
    if value.fract() == 0.0 && value.abs() < 9.0e18 {
        circllhist::Bucket::of_int_scale(value as i64, 0)
    } else {
        circllhist::Bucket::of_f64(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::sort_doubles_like_etsy;

    /// A case: its name, its (value, rate) pairs, whether they spill into the decade counts.
    type Case<'a> = (&'a str, &'a [(f64, f64)], bool);

    /// Values past the limit give the samples adding them with a limit of 0 gives, whether they
    /// stay within a few bins or spill into the decades; a timer a few bins past its limit
    /// counts nothing by decade.
    #[test]
    fn past_the_limit_is_adding_with_no_room() {
        let spread: Vec<(f64, f64)> = (0..3000u32).map(|i| (f64::from(1 + i * 7 % 997), 1.0)).collect();
        let every_decade: Vec<(f64, f64)> = (-127..127).map(|e| (1.5 * 10f64.powi(e), 1.0)).collect();
        let busy_and_scattered: Vec<(f64, f64)> =
            every_decade.iter().copied().chain((100..400).map(|v| (f64::from(v), 1.0))).collect();
        let scattered_after_busy: Vec<(f64, f64)> =
            (100..400).map(|v| (f64::from(v), 1.0)).chain(every_decade.iter().copied()).collect();
        let cases: &[Case] = &[
            ("nothing", &[], false),
            ("a few values, a few bins", &[(3.0, 1.0), (5.5, 1.0), (3.0, 1.0), (1e6, 1.0)], false),
            ("at a rate", &[(3.0, 0.1), (5.0, 0.3), (5.0, 0.3), (5.0, 0.3), (-2.0, 1.0)], false),
            ("many bins", &spread, true),
            ("one value in each of 254 decades (probe P16)", &every_decade, false),
            // Looked at again only once the bins doubled: the busy decade (30 bins) stays.
            ("scattered decades, then a busy one", &busy_and_scattered, false),
            ("a busy decade, then scattered ones", &scattered_after_busy, true),
        ];
        for &(case, values, spills) in cases {
            let (mut past, mut added) = (PastLimit::default(), TimerSamples::default());
            for &(value, rate) in values {
                past.add(value, rate);
                added.add(value, rate, 0);
            }
            assert_eq!(!past.many.is_empty(), spills, "{case}");
            assert_eq!(past.into_samples(), added, "{case}");
        }
    }

    #[test]
    fn values_sort_as_etsys_stable_sort_does() {
        let spread: Vec<f64> = (0..500u64).map(|i| (i.wrapping_mul(2_654_435_761) % 997) as f64 / 4.0).collect();
        let cases: &[&[f64]] = &[
            &[3.0, 1.0, 2.0, 1.0],
            &[0.5, 1e-310, 0.0, 5e-324, 1e300, 7.25],
            &[2.0, -0.0, 0.0, -0.0, -1.0, 0.0],
            &[0.0, -0.0, 1.0],
            &[-5.5, 3.0, -5.5, 0.0],
            &spread,
        ];
        for case in cases {
            let mut got = case.to_vec();
            sort_doubles_like_etsy(&mut got);
            let mut want = case.to_vec();
            want.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let bits = |values: &[f64]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{case:?}");
        }
    }

    #[test]
    fn sorted_values_bin_as_one_insert_per_value_does() {
        let many: Vec<f64> = (0..3000u64).map(|i| (i.wrapping_mul(2_654_435_761) % 1300) as f64 / 7.0).collect();
        let cases: &[&[f64]] = &[&[], &[5.0], &[1.0, 1.0, 1.0], &[-3.5, -0.0, 0.0, 0.0, 0.01, 1.0, 1.04, 1.05], &many];
        for case in cases {
            let mut sorted = case.to_vec();
            sort_doubles_like_etsy(&mut sorted);
            let mut want = circllhist::Histogram::new();
            sorted.iter().for_each(|&value| insert_exactly(&mut want, value, 1));
            let mut got = circllhist::Histogram::new();
            bin_sorted(&mut got, sorted.iter().copied());
            assert_eq!(got, want, "{case:?}");
        }
    }

    #[test]
    fn floors_non_negative_numbers_like_floor() {
        for value in [0.0, 0.3, 1.0, 1.9999999999999998, 2.5, 1e15 + 0.5, 4503599627370495.5, 4503599627370496.0, 1e300]
        {
            assert_eq!(floor_of_non_negative(value), value.floor(), "{value:e}");
        }
    }

    #[test]
    fn binning_late_gives_the_histogram_binning_on_arrival_gives() {
        let values = |seed: u64, n: usize| -> Vec<f64> {
            (0..n as u64).map(|i| ((seed + i) * 7919 % 5003) as f64 / if i % 3 == 0 { 10.0 } else { 1.0 }).collect()
        };
        // (first reader's values, second's, limit, rate of one value of each: (index, rate))
        let cases = [
            (values(1, 50), values(2, 40), 100, None),
            (values(3, 50), values(4, 60), 100, None),
            (values(5, 150), values(6, 10), 100, None),
            (values(7, 30), values(8, 30), 100, Some((29, 0.5))),
            (values(7, 30), values(8, 30), 100, Some((0, 0.25))),
            (values(13, 30), values(14, 30), 100, Some((10, 0.5))),
            (values(9, 0), values(10, 30), 100, None),
            (values(11, 30), values(12, 0), 10, None),
            (values(15, 8), values(16, 8), 12, Some((3, 0.5))),
        ];
        for (index, (first, second, limit, rated)) in cases.into_iter().enumerate() {
            let mut want = circllhist::Histogram::new();
            let mut fed = |samples: &mut TimerSamples, values: &[f64]| {
                for (i, &value) in values.iter().enumerate() {
                    let rate = rated.filter(|(at, _)| *at == i).map_or(1.0, |(_, rate)| rate);
                    samples.add(value, rate, limit);
                    insert_exactly(&mut want, value, (1.0 / rate) as u64);
                }
            };
            let (mut a, mut b) = (TimerSamples::default(), TimerSamples::default());
            fed(&mut a, &first);
            fed(&mut b, &second);
            let arrival: Vec<f64> = first.iter().chain(&second).copied().collect();
            a.merge(b, limit);
            assert_eq!(a.received as usize, arrival.len(), "case {index}");
            if a.is_complete() {
                assert_eq!(a.values.iter().collect::<Vec<_>>(), arrival, "case {index}: arrival order until the flush");
            }
            a.settle();
            assert_eq!(*a.histogram, want, "case {index}");
            if a.is_complete() {
                let mut sorted = arrival.clone();
                sorted.sort_by(f64::total_cmp);
                assert_eq!(a.values.iter().collect::<Vec<_>>(), sorted, "case {index}");
            } else {
                assert!(a.values.is_empty(), "case {index}");
            }
        }
    }

    /// The bytes of a forwarded timer: its values little-endian, its histogram serialised.
    fn forwarded(samples: &TimerSamples) -> (crate::TimerTotals, Vec<u8>, Vec<u8>) {
        let totals = crate::TimerTotals {
            count: samples.count,
            received: samples.received,
            sum: samples.sum,
            sum_squares: samples.sum_squares,
            min: samples.min,
            max: samples.max,
        };
        let values = samples.values.iter().flat_map(f64::to_le_bytes).collect();
        (totals, values, samples.histogram.to_bytes())
    }

    /// A part merged where it lies gives what merging its samples gives: onto nothing, onto
    /// values that wait, past the limit, with values and without, compact values and not.
    #[test]
    fn a_part_merges_as_its_samples_do() {
        let fed = |values: &[f64], rate: f64, limit: usize| {
            let mut samples = TimerSamples::default();
            values.iter().for_each(|&value| samples.add(value, rate, limit));
            samples
        };
        let settled = |mut samples: TimerSamples| {
            samples.settle();
            samples
        };
        let many: Vec<f64> = (0..300u32).map(|i| f64::from(i * 37 % 101) / 4.0).collect();
        // (held, the sender's settled samples, limit)
        let cases = [
            (TimerSamples::default(), settled(fed(&[3.0, 1.0, 2.0], 1.0, 100)), 100),
            (fed(&[5.0, 7.0], 1.0, 100), settled(fed(&[3.0, 1.0, 2.0], 1.0, 100)), 100),
            (fed(&[5.5, 70000.25], 1.0, 100), settled(fed(&[1e9, -2.0], 1.0, 100)), 100),
            (fed(&many, 1.0, 1000), settled(fed(&many, 1.0, 1000)), 400),
            (fed(&many, 1.0, 100), settled(fed(&[1.0], 1.0, 100)), 100),
            (fed(&[5.0], 1.0, 100), settled(fed(&many, 0.5, 100)), 100),
            (TimerSamples::default(), settled(fed(&many, 1.0, 100)), 100),
            (fed(&[5.0, 6.0], 0.1, 100), settled(fed(&[1.0, 2.0], 1.0, 100)), 1),
            (fed(&[5.0], 1.0, 100), TimerSamples::default(), 100),
        ];
        for (index, (held, sent, limit)) in cases.into_iter().enumerate() {
            let (totals, values, histogram) = forwarded(&sent);
            let part = TimerPart::new(totals, true, &values, &histogram).expect("agrees");
            let made = TimerSamples::from_part(&part);
            assert_eq!(
                (made.received, made.count, made.min, made.max),
                (sent.received, sent.count, sent.min, sent.max)
            );
            assert_eq!(made.values.iter().collect::<Vec<_>>(), sent.values.iter().collect::<Vec<_>>(), "case {index}");
            assert_eq!(*made.histogram, *sent.histogram, "case {index}");
            let (mut in_place, mut whole) = (held.clone(), held);
            in_place.merge_part(&part, limit);
            whole.merge(made, limit);
            assert_eq!(in_place, whole, "case {index}");
            in_place.settle();
            whole.settle();
            assert_eq!(in_place, whole, "case {index}, settled");
        }
    }

    /// A part whose pieces disagree is refused.
    #[test]
    fn a_part_must_agree_with_itself() {
        let totals = crate::TimerTotals { count: 2.0, received: 2, sum: 3.0, sum_squares: 5.0, min: 1.0, max: 2.0 };
        let mut histogram = circllhist::Histogram::new();
        histogram.insert(1.0, 1);
        histogram.insert(2.0, 1);
        let histogram = histogram.to_bytes();
        let two: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        /// (name, totals, values, histogram, accepted)
        type Case<'a> = (&'a str, crate::TimerTotals, &'a [u8], &'a [u8], bool);
        let cases: [Case; 8] = [
            ("whole", totals, &two, &histogram, true),
            ("histogram only", totals, &[], &histogram, true),
            ("one value of two", totals, &two[..8], &histogram, false),
            ("a value cut", totals, &two[..12], &histogram, false),
            ("not finite", totals, &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f], &histogram, false),
            ("count below zero", crate::TimerTotals { count: -1.0, ..totals }, &two, &histogram, false),
            ("min above max", crate::TimerTotals { min: 3.0, ..totals }, &two, &histogram, false),
            ("histogram cut", totals, &two, &histogram[..histogram.len() - 1], false),
        ];
        for (name, totals, values, histogram, ok) in cases {
            assert_eq!(TimerPart::new(totals, false, values, histogram).is_some(), ok, "{name}");
        }
    }
}
