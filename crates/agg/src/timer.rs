//! Etsy's timer statistics (`lib/process_metrics.js`), with its arithmetic in its order so the
//! floating-point results are identical: sums are running sums over the sorted values, top-N
//! sums are differences of running sums.

use crate::config::{AggConfig, BinLimit};
use crate::snapshot::{BinCounts, PercentileStat, TimerStat};
use crate::timer_samples::TimerSamples;

/// The statistics of one timer's interval, before `calculatedTimerMetrics` filtering: Etsy's
/// exact arithmetic while every raw value is kept, the histogram's estimates past the limit.
/// Settles `samples` first ([`TimerSamples::settle`]: values sorted, every value binned).
pub(crate) fn timer_stats(samples: &mut TimerSamples, config: &AggConfig) -> Vec<(TimerStat, f64)> {
    samples.settle();
    if samples.received == 0 {
        return vec![(TimerStat::Count, 0.0), (TimerStat::CountPs, 0.0)];
    }
    let mut stats = match samples.is_complete() {
        true => exact_stats(samples, config),
        false => estimated_stats(samples, config),
    };
    // Sums past the largest double (values above ~1.3e154 squared, or many near 1e308).
    stats.iter_mut().for_each(|(_, value)| *value = crate::finite::saturated(*value));
    stats
}

fn exact_stats(samples: &TimerSamples, config: &AggConfig) -> Vec<(TimerStat, f64)> {
    let values = &*samples.values.doubles();
    let n = values.len();
    let (sum, sum_squares) = running_sums(values, n - 1);
    let mut stats = Vec::with_capacity(config.thresholds.len() * 5 + 9);
    for (index, threshold) in config.thresholds.iter().enumerate() {
        if let Some(inside) = threshold_inside(values, (sum, sum_squares), threshold.percent) {
            push_threshold(&mut stats, index, &inside);
        }
    }
    let mean = sum / n as f64;
    let median = median(values);
    let summary = Summary { std: population_std(values, mean), sum, sum_squares, mean, median };
    push_summary(&mut stats, samples, &summary, config);
    stats
}

/// Past the sample limit: count, sum, sum of squares, min and max stay exact; the median and
/// every threshold statistic come from the histogram, clamped to [min, max]. Sums inside a
/// threshold are the bins' midpoints times their counts, scaled from the histogram's weighted
/// count to the values received.
fn estimated_stats(samples: &TimerSamples, config: &AggConfig) -> Vec<(TimerStat, f64)> {
    let n = samples.received as f64;
    let clamp = |v: f64| v.clamp(samples.min, samples.max);
    let mut stats = Vec::with_capacity(config.thresholds.len() * 5 + 9);
    for (index, threshold) in config.thresholds.iter().enumerate() {
        let k = (threshold.percent.abs() / 100.0 * n).round();
        if k == 0.0 {
            continue;
        }
        let share = k / n;
        let (bound, (sum, sum_squares)) = if threshold.percent > 0.0 {
            (samples.histogram.quantile(share), lowest_sums(samples, share))
        } else {
            let (low_sum, low_squares) = lowest_sums(samples, 1.0 - share);
            let (all_sum, all_squares) = lowest_sums(samples, 1.0);
            (samples.histogram.quantile(1.0 - share), (all_sum - low_sum, all_squares - low_squares))
        };
        let inside = Inside { count: k as usize, mean: clamp(sum / k), bound: clamp(bound), sum, sum_squares };
        push_threshold(&mut stats, index, &inside);
    }
    let mean = samples.sum / n;
    let variance = (samples.sum_squares / n - mean * mean).max(0.0);
    let median = clamp(samples.histogram.quantile(0.5));
    let summary = Summary { std: variance.sqrt(), sum: samples.sum, sum_squares: samples.sum_squares, mean, median };
    push_summary(&mut stats, samples, &summary, config);
    stats
}

/// The sum and sum of squares of the lowest `share` of the histogram's samples (bin midpoints),
/// scaled to the unweighted number of values received.
fn lowest_sums(samples: &TimerSamples, share: f64) -> (f64, f64) {
    let histogram = &samples.histogram;
    let total = histogram.count().saturating_sub(histogram.nan_count()) as f64;
    if total == 0.0 {
        return (0.0, 0.0);
    }
    let mut wanted = share * total;
    let (mut sum, mut squares) = (0.0, 0.0);
    for (bucket, count) in histogram.bins().filter(|(b, _)| !b.is_nan()) {
        let taken = wanted.min(count as f64);
        let midpoint = bucket.midpoint();
        sum += taken * midpoint;
        squares += taken * midpoint * midpoint;
        wanted -= taken;
        if wanted <= 0.0 {
            break;
        }
    }
    let scale = samples.received as f64 / total;
    (sum * scale, squares * scale)
}

/// The statistics that follow the thresholds.
struct Summary {
    std: f64,
    sum: f64,
    sum_squares: f64,
    mean: f64,
    median: f64,
}

fn push_threshold(stats: &mut Vec<(TimerStat, f64)>, index: usize, inside: &Inside) {
    let Ok(index) = u8::try_from(index) else { return }; // past MAX_THRESHOLDS: the config refuses them
    let stat = |which| TimerStat::Percentile(which, index);
    stats.extend([
        (stat(PercentileStat::Count), inside.count as f64),
        (stat(PercentileStat::Mean), inside.mean),
        (stat(PercentileStat::Bound), inside.bound),
        (stat(PercentileStat::Sum), inside.sum),
        (stat(PercentileStat::SumSquares), inside.sum_squares),
    ]);
}

fn push_summary(stats: &mut Vec<(TimerStat, f64)>, samples: &TimerSamples, summary: &Summary, config: &AggConfig) {
    stats.extend([
        (TimerStat::Std, summary.std),
        (TimerStat::Upper, samples.max),
        (TimerStat::Lower, samples.min),
        (TimerStat::Count, samples.count),
        (TimerStat::CountPs, samples.count / config.interval_seconds()),
        (TimerStat::Sum, summary.sum),
        (TimerStat::SumSquares, summary.sum_squares),
        (TimerStat::Mean, summary.mean),
        (TimerStat::Median, summary.median),
    ]);
}

/// The values inside one threshold.
struct Inside {
    count: usize,
    mean: f64,
    bound: f64,
    sum: f64,
    sum_squares: f64,
}

/// Etsy's running sums of the sorted values and of their squares (its `cumulativeValues`
/// arrays) at index `through`: started at the first value, not at 0 + it (the same except
/// for -0, which it keeps), then added in order. Computed where a statistic needs one, with
/// no array of every running sum.
fn running_sums(sorted: &[f64], through: usize) -> (f64, f64) {
    let first = sorted[0];
    sorted[1..=through]
        .iter()
        .fold((first, first * first), |(sum, squares), &value| (sum + value, squares + value * value))
}

/// The values inside `percent` (0 < |percent| ≤ 100) of `sorted`, whose running sums to the
/// end are `all`: the lowest k for a positive one, the highest k for a negative one, with
/// k = round(|percent| / 100 × n); `None` when k is 0.
fn threshold_inside(sorted: &[f64], all: (f64, f64), percent: f64) -> Option<Inside> {
    let n = sorted.len();
    if n == 1 {
        let only = sorted[0];
        return Some(Inside { count: 1, mean: only, bound: only, sum: only, sum_squares: only * only });
    }
    let k = (percent.abs() / 100.0 * n as f64).round() as usize;
    if k == 0 {
        return None;
    }
    let (bound, sum, sum_squares) = if percent > 0.0 {
        let (sum, sum_squares) = running_sums(sorted, k - 1);
        (sorted[k - 1], sum, sum_squares)
    } else {
        let before = if k < n { running_sums(sorted, n - k - 1) } else { (0.0, 0.0) };
        (sorted[n - k], all.0 - before.0, all.1 - before.1)
    };
    Some(Inside { count: k, mean: sum / k as f64, bound, sum, sum_squares })
}

fn population_std(values: &[f64], mean: f64) -> f64 {
    let sum_of_diffs = values.iter().fold(0.0, |acc, v| acc + (v - mean) * (v - mean));
    (sum_of_diffs / values.len() as f64).sqrt()
}

fn median(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Counts per bin of the first `histogram` rule whose `metric` is in `key` (Etsy's `histogram`
/// config): bins are exclusive upper limits; values past the last finite limit with no `inf`
/// bin are not counted (Etsy's rule). From the sorted raw values while complete, else from the
/// circllhist (exact for limits with two significant digits, scaled to values received).
pub(crate) fn bin_counts(key: &str, samples: &TimerSamples, config: &AggConfig) -> Option<BinCounts> {
    let rule_index = config.histograms.iter().position(|rule| key.contains(rule.metric.as_str()))?;
    let rule = &config.histograms[rule_index];
    if rule.bins.is_empty() || samples.received == 0 {
        return None;
    }
    let counts = if samples.is_complete() {
        counts_of_sorted(&samples.values.doubles(), &rule.bins)
    } else {
        counts_of_histogram(samples, &rule.bins)
    };
    Some(BinCounts { rule: rule_index, counts })
}

fn counts_of_sorted(sorted: &[f64], bins: &[BinLimit]) -> Vec<u64> {
    let mut next = 0;
    bins.iter()
        .map(|limit| {
            let start = next;
            while next < sorted.len() && fits(sorted[next], *limit) {
                next += 1;
            }
            (next - start) as u64
        })
        .collect()
}

fn counts_of_histogram(samples: &TimerSamples, bins: &[BinLimit]) -> Vec<u64> {
    let histogram = &samples.histogram;
    let total = histogram.count().saturating_sub(histogram.nan_count());
    let scale = if total == 0 { 0.0 } else { samples.received as f64 / total as f64 };
    let mut counted = 0;
    bins.iter()
        .map(|limit| {
            let below = match limit {
                BinLimit::Below(upper) => histogram.count_below(*upper, false),
                BinLimit::Infinity => total,
            };
            let in_bin = below.saturating_sub(counted);
            counted = counted.max(below);
            (in_bin as f64 * scale).round() as u64
        })
        .collect()
}

fn fits(value: f64, limit: BinLimit) -> bool {
    match limit {
        BinLimit::Below(upper) => value < upper,
        BinLimit::Infinity => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HistogramRule, Threshold};

    fn config(thresholds: &[f64]) -> AggConfig {
        AggConfig { thresholds: thresholds.iter().map(|&p| Threshold::new(p)).collect(), ..AggConfig::default() }
    }

    fn named(stats: &[(TimerStat, f64)], config: &AggConfig) -> Vec<(String, f64)> {
        let snapshot_names = |stat: TimerStat| match stat {
            TimerStat::Percentile(..) => {
                let base = stat.filter_name(&config.thresholds).replace("_percent", "");
                let TimerStat::Percentile(_, i) = stat else { unreachable!() };
                format!("{base}_{}", config.thresholds[usize::from(i)].suffix)
            }
            other => other.filter_name(&config.thresholds),
        };
        stats.iter().map(|(stat, value)| (snapshot_names(*stat), *value)).collect()
    }

    fn stats_of(values: &[f64], thresholds: &[f64]) -> Vec<(String, f64)> {
        let config = config(thresholds);
        let mut samples = TimerSamples::default();
        values.iter().for_each(|&v| samples.add(v, 1.0, usize::MAX));
        named(&timer_stats(&mut samples, &config), &config)
    }

    fn get(stats: &[(String, f64)], name: &str) -> Option<f64> {
        stats.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    #[test]
    fn matches_etsys_worked_example() {
        let values: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let stats = stats_of(&values, &[90.0, 50.0, 99.9, -10.0]);
        let want: &[(&str, f64)] = &[
            ("count_90", 9.0),
            ("mean_90", 5.0),
            ("upper_90", 9.0),
            ("sum_90", 45.0),
            ("sum_squares_90", 285.0),
            ("count_50", 5.0),
            ("mean_50", 3.0),
            ("upper_50", 5.0),
            ("sum_50", 15.0),
            ("sum_squares_50", 55.0),
            ("count_99_9", 10.0),
            ("mean_99_9", 5.5),
            ("upper_99_9", 10.0),
            ("sum_99_9", 55.0),
            ("sum_squares_99_9", 385.0),
            ("count_top10", 1.0),
            ("mean_top10", 10.0),
            ("lower_top10", 10.0),
            ("sum_top10", 10.0),
            ("sum_squares_top10", 100.0),
            ("std", 2.8722813232690143),
            ("upper", 10.0),
            ("lower", 1.0),
            ("count", 10.0),
            ("count_ps", 1.0),
            ("sum", 55.0),
            ("sum_squares", 385.0),
            ("mean", 5.5),
            ("median", 5.5),
        ];
        let want: Vec<(String, f64)> = want.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        assert_eq!(stats, want);
    }

    #[test]
    fn rounds_k_half_up_and_skips_empty_thresholds() {
        let five = stats_of(&[1.0, 2.0, 3.0, 4.0, 5.0], &[50.0]);
        assert_eq!(get(&five, "count_50"), Some(3.0));
        assert_eq!(get(&five, "upper_50"), Some(3.0));
        assert_eq!(get(&five, "mean_50"), Some(2.0));
        let two = stats_of(&[1.0, 2.0], &[-10.0]);
        assert_eq!(get(&two, "count_top10"), None);
        let one = stats_of(&[7.0], &[1.0, -10.0]);
        assert_eq!(get(&one, "count_1"), Some(1.0));
        assert_eq!(get(&one, "lower_top10"), Some(7.0));
        assert_eq!(get(&one, "median"), Some(7.0));
    }

    #[test]
    fn top_hundred_is_all_values_not_nan() {
        let stats = stats_of(&[1.0, 2.0, 3.0], &[-100.0]);
        assert_eq!(get(&stats, "sum_top100"), Some(6.0));
        assert_eq!(get(&stats, "lower_top100"), Some(1.0));
    }

    #[test]
    fn past_the_limit_statistics_come_from_the_histogram() {
        let config = config(&[90.0, -10.0]);
        let mut samples = TimerSamples::default();
        (1..=10_000).for_each(|v| samples.add(f64::from(v), 1.0, 100));
        assert!(!samples.is_complete() && samples.values.len() == 100);
        let stats = named(&timer_stats(&mut samples, &config), &config);
        assert_eq!(get(&stats, "count"), Some(10_000.0));
        assert_eq!(get(&stats, "sum"), Some(50_005_000.0));
        assert_eq!((get(&stats, "lower"), get(&stats, "upper")), (Some(1.0), Some(10_000.0)));
        assert_eq!(get(&stats, "mean"), Some(5000.5));
        assert_eq!(get(&stats, "count_90"), Some(9000.0));
        let within = |name: &str, truth: f64, bound: f64| {
            let got = get(&stats, name).unwrap();
            assert!((got - truth).abs() / truth <= bound, "{name}: {got} vs {truth}");
        };
        within("upper_90", 9000.0, 0.1);
        within("median", 5000.5, 0.1);
        within("mean_90", 4500.5, 0.05);
        within("sum_90", 40_504_500.0, 0.05);
        within("lower_top10", 9001.0, 0.1);
        within("mean_top10", 9500.5, 0.05);
        within("std", 2886.75, 0.001);
        assert!(get(&stats, "upper_90").unwrap() <= 10_000.0, "clamped to max");
    }

    #[test]
    fn idle_timers_send_only_counts() {
        let config = config(&[90.0]);
        let mut samples = TimerSamples::default();
        assert_eq!(timer_stats(&mut samples, &config), [(TimerStat::Count, 0.0), (TimerStat::CountPs, 0.0)]);
    }

    #[test]
    fn bins_values_like_etsy() {
        let rule = |metric: &str, bins: Vec<BinLimit>| HistogramRule { metric: metric.to_string(), bins };
        let config = AggConfig {
            histograms: vec![
                rule("off", vec![]),
                rule("t", vec![BinLimit::Below(2.0), BinLimit::Below(5.0), BinLimit::Infinity]),
                rule("", vec![BinLimit::Below(2.0)]),
            ]
            .into(),
            ..AggConfig::default()
        };
        for limit in [usize::MAX, 0] {
            let mut samples = TimerSamples::default();
            [1.0, 2.0, 3.0, 5.0, 6.0].iter().for_each(|&v| samples.add(v, 1.0, limit));
            assert_eq!(
                bin_counts("a.t", &samples, &config),
                Some(BinCounts { rule: 1, counts: vec![1, 2, 2] }),
                "limit {limit}"
            );
            assert_eq!(
                bin_counts("xyz", &samples, &config),
                Some(BinCounts { rule: 2, counts: vec![1] }),
                "limit {limit}"
            );
            assert_eq!(bin_counts("off.t", &samples, &config), None);
        }
    }
}
