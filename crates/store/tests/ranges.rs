//! The rule of a range (`store::range`), as properties: over random flush times, compaction
//! states (head, raw and minute blocks, hour rollups) and ranges, every reader's total is the
//! sum of the flushes stored inside the range, and a later `from` never adds samples.

use agg::{AggConfig, Aggregator, Table};
use circllhist::Histogram;
use proptest::prelude::*;
use store::{parse, Options, Resolution, Retention, Selector, Store};

/// A store of random flushes and what each flush held.
struct Flushed {
    store: Store,
    /// (stored time, timer samples, counter increments) per flush.
    flushes: Vec<(i64, Vec<f64>, f64)>,
    dir: std::path::PathBuf,
}

impl Drop for Flushed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const START: i64 = 1_700_000_000 - 1_700_000_000 % 86_400;

/// Writes one flush per gap (seconds after the previous one), each with `values[i % len]`
/// samples of `t` and as many increments of `hits`.
fn flushed(case: &str, gaps: &[i64], values: &[u16], retention: Retention) -> Flushed {
    let dir = std::env::temp_dir().join(format!("histd-ranges-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut store = Store::open(&dir.join("histd.db"), Options { retention, ..Options::default() }).unwrap();
    let mut aggregator = Aggregator::new(AggConfig::default());
    let mut flushes = Vec::new();
    let mut ts = START;
    for (i, gap) in gaps.iter().enumerate() {
        ts += gap;
        let samples: Vec<f64> = (0..=(i % 3)).map(|k| f64::from(values[(i + k) % values.len()]) / 10.0).collect();
        let lines: String = samples.iter().map(|v| format!("t:{v}|ms\nhits:1|c\n")).collect();
        let mut table = Table::new(true, 8192);
        table.insert_packet(ts as u64, lines.as_bytes());
        aggregator.absorb(table);
        store.write(ts, &aggregator.flush(ts as u64 * 1000)).unwrap();
        store.load_series().unwrap();
        flushes.push((ts, samples.clone(), samples.len() as f64));
    }
    Flushed { store, flushes, dir }
}

impl Flushed {
    /// The samples of the flushes stored in `[from, to)`, merged.
    fn truth(&self, from: i64, to: i64) -> (f64, Histogram) {
        let mut histogram = Histogram::new();
        let mut count = 0.0;
        for (_, samples, _) in self.flushes.iter().filter(|(ts, ..)| (from..to).contains(ts)) {
            for &value in samples {
                histogram.insert(value, 1);
            }
            count += samples.len() as f64;
        }
        (count, histogram)
    }

    /// The merged histogram's count and bins over `[from, to)`.
    fn merged(&self, from: i64, to: i64) -> (f64, Histogram) {
        let selector = Selector { name: "t".into(), tags: vec![] };
        match self.store.merged(&selector, from, to).unwrap() {
            Some(row) => (row.count, row.histogram.unwrap_or_default()),
            None => (0.0, Histogram::new()),
        }
    }

    /// The sum over the steps of `expr`.
    fn summed(&self, expr: &str, from: i64, to: i64, step: i64) -> f64 {
        let points = self.store.query(&parse(expr).unwrap(), from, to, step).unwrap();
        assert!(points.windows(2).all(|w| w[0].0 + step == w[1].0 || w[0].0 < w[1].0), "steps in order");
        points.iter().map(|(_, v)| v).sum()
    }

    /// The heatmap's total over `[from, to)`.
    fn heatmap_total(&self, from: i64, to: i64, step: i64) -> f64 {
        let selector = Selector { name: "t".into(), tags: vec![] };
        let steps = self.store.timer_steps(&selector, from, to, step).unwrap();
        steps.iter().filter_map(|(_, row)| row.as_ref()).map(|row| row.count).sum()
    }
}

/// Steps a reader asks for: the web page's familiar widths and odd ones.
const STEPS: [i64; 9] = [1, 10, 30, 60, 90, 300, 900, 3600, 21_600];

/// A range inside (or around) the flushes: `a` and `b` pick its ends in the span covered.
fn range(flushed: &Flushed, a: u32, b: u32) -> (i64, i64) {
    let last = flushed.flushes.last().map_or(START, |f| f.0);
    let span = (last - START + 120) as u64;
    let at = |pick: u32| START - 60 + (u64::from(pick) % span) as i64;
    let (from, to) = (at(a), at(b));
    if from < to {
        (from, to)
    } else {
        (to, from + 1)
    }
}

fn check_ranges(flushed: &Flushed, ranges: &[(u32, u32, u8, u16)]) -> Result<(), TestCaseError> {
    for &(a, b, step, later) in ranges {
        let (from, to) = range(flushed, a, b);
        let step = STEPS[step as usize % STEPS.len()];
        let (count, histogram) = flushed.truth(from, to);
        let (merged_count, merged_histogram) = flushed.merged(from, to);
        prop_assert_eq!(merged_count, count, "merged count over [{}, {})", from, to);
        prop_assert!(merged_histogram == histogram, "merged bins over [{}, {})", from, to);
        prop_assert_eq!(
            flushed.summed("count(t)", from, to, step),
            count,
            "count(t) by {} over [{}, {})",
            step,
            from,
            to
        );
        prop_assert_eq!(flushed.summed("count(hits)", from, to, step), count, "count(hits) by {}", step);
        prop_assert_eq!(flushed.heatmap_total(from, to, step), count, "heatmap by {} over [{}, {})", step, from, to);
        let later_from = (from + i64::from(later)).min(to - 1);
        prop_assert!(flushed.merged(later_from, to).0 <= merged_count, "a later from added samples");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, failure_persistence: None, ..ProptestConfig::default() })]

    /// Flushes over two hours and a half (so head, compacted periods and a complete hour
    /// exist), at random times; ranges and steps at random.
    #[test]
    fn every_reader_totals_the_flushes_inside_the_range(
        gaps in prop::collection::vec(1i64..=25, 600..900),
        values in prop::collection::vec(1u16..5000, 1..40),
        ranges in prop::collection::vec((any::<u32>(), any::<u32>(), any::<u8>(), 0u16..900), 60),
    ) {
        let flushed = flushed("random", &gaps, &values, Retention::default());
        check_ranges(&flushed, &ranges)?;
    }
}

/// The example of issue 32: five 10 s flushes; the merged histogram's count never depends on
/// where inside the first interval a range starts, and never grows as `from` moves later.
#[test]
fn five_flushes_give_one_count_for_every_start_inside_the_first() {
    let flushed = flushed("five", &[10, 10, 10, 10, 10], &[10, 20, 30], Retention::default());
    let (first, last) = (flushed.flushes[0].0, flushed.flushes[4].0);
    let everything = flushed.truth(first, last + 1).0;
    let mut previous = f64::INFINITY;
    for from in first - 60..=last + 1 {
        let (count, _) = flushed.merged(from, last + 1);
        assert_eq!(count, flushed.truth(from, last + 1).0, "from {from}");
        assert!(count <= previous, "from {from}: {count} after {previous}");
        previous = count;
        if from <= first {
            assert_eq!(count, everything, "from {from}");
        }
    }
}

/// Past the raw retention only rollups remain: a range's ends are rounded inward to whole
/// minutes (or hours), never outward.
#[test]
fn past_the_raw_retention_ends_round_inward() {
    let retention = Retention { raw: 600, minute: 30 * 86_400, hour: 400 * 86_400 };
    let flushed = flushed("retention", &[10; 1000], &[10, 20, 30, 4000], retention);
    let series = flushed.store.select(&Selector { name: "t".into(), tags: vec![] })[0].id;
    let raw_from = flushed.store.rows(series, Resolution::Raw, 0, i64::MAX).unwrap()[0].ts;
    assert!(raw_from > START + 3600, "old flushes are gone from the raw resolution ({raw_from})");
    for (from, to) in [(START + 25, START + 3595), (START + 61, START + 3541), (START + 600, START + 3000)] {
        assert!(to <= raw_from);
        let inward = (from.div_euclid(60) * 60 + if from % 60 == 0 { 0 } else { 60 }, to.div_euclid(60) * 60);
        let (count, histogram) = flushed.merged(from, to);
        let (want_count, want_histogram) = flushed.truth(inward.0, inward.1);
        assert_eq!(count, want_count, "[{from}, {to}) holds the whole minutes inside it");
        assert_eq!(histogram, want_histogram);
        assert!(count <= flushed.truth(from, to).0);
        for step in STEPS {
            let summed = flushed.summed("count(t)", from, to, step);
            assert!(summed <= flushed.truth(from, to).0, "[{from}, {to}) by {step}: {summed}");
        }
    }
}
