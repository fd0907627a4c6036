//! A circllhist as Prometheus buckets: VictoriaMetrics `vmrange` labels bin for bin (exact),
//! or cumulative classic `le` buckets at fixed boundaries.
//!
//! circllhist bins are lower-inclusive (`[1.2, 1.3)` for positive values) where Prometheus'
//! `le` is upper-inclusive: a classic bucket `le="0.1"` here counts the values **below** 0.1,
//! and a value exactly on a boundary (`100|ms` with `le="0.1"`) counts in the next bucket.
//! With vmrange, VictoriaMetrics reads `1.2e+00...1.3e+00` as `le="1.3e+00"`, so
//! `histogram_share(1.3, …)` is the share below 1.3: the same as histd's inverse quantile.

use circllhist::{Bucket, Histogram};

/// The `vmrange` label of a bin: `<lo>...<hi>` with both edges as `d.de±XX`, so the same bin
/// has the same label on every host and adjacent bins share an edge string (VictoriaMetrics
/// joins ranges by those strings). `0...0` for the zero bin; `None` for NaN (±∞, |x| ≥ 1e128),
/// which only `_count` holds.
pub fn vmrange(bucket: Bucket) -> Option<String> {
    if bucket.is_nan() {
        return None;
    }
    if bucket.is_zero() {
        return Some("0...0".to_string());
    }
    let (val, exp) = (i32::from(bucket.val()), i32::from(bucket.exp()));
    let (near, far) = (edge(val.abs(), exp), edge(val.abs() + 1, exp));
    Some(match val > 0 {
        true => format!("{near}...{far}"),
        false => format!("-{far}...-{near}"),
    })
}

/// `digits/10 × 10^exp` (`digits` in 10..=100) as Go's `%.1e` prints it.
fn edge(digits: i32, exp: i32) -> String {
    let (digits, exp) = if digits == 100 { (10, exp + 1) } else { (digits, exp) };
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{}.{}e{sign}{:02}", digits / 10, digits % 10, exp.abs())
}

/// Cumulative counts below each of `bounds` (sorted), then the total (`le="+Inf"`). Exact
/// for boundaries with two significant digits (they are bin edges); a boundary inside a bin
/// counts that whole bin above it.
pub fn classic(histogram: &Histogram, bounds: &[f64]) -> Vec<u64> {
    let mut counts: Vec<u64> = bounds.iter().map(|&bound| histogram.count_below(bound, false)).collect();
    counts.push(histogram.count());
    counts
}

/// A bucket boundary as `le` shows it (Go's shortest form: `0.005`, `1`, `2.5`, `+Inf`).
pub fn le_label(bound: f64) -> String {
    match bound {
        f64::INFINITY => "+Inf".to_string(),
        f64::NEG_INFINITY => "-Inf".to_string(),
        _ => format!("{bound}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram_of as of;
    use super::*;

    #[test]
    fn vmrange_labels_are_canonical_and_adjacent_bins_share_edges() {
        let cases: &[(f64, Option<&str>)] = &[
            (1.25, Some("1.2e+00...1.3e+00")),
            (120.0, Some("1.2e+02...1.3e+02")),
            (99.0, Some("9.9e+01...1.0e+02")),
            (100.0, Some("1.0e+02...1.1e+02")),
            (0.00123, Some("1.2e-03...1.3e-03")),
            (-120.0, Some("-1.3e+02...-1.2e+02")),
            (-99.5, Some("-1.0e+02...-9.9e+01")),
            (0.0, Some("0...0")),
            (f64::NAN, None),
            (f64::INFINITY, None),
            (1e-120, Some("1.0e-120...1.1e-120")),
        ];
        for (value, want) in cases {
            let (bucket, _) = of(&[*value]).bins().next().unwrap();
            assert_eq!(vmrange(bucket).as_deref(), *want, "{value}");
        }
        // Each label's edges parse to the bin's own edges.
        for value in [1.25, 120.0, 99.0, 0.00123, -120.0] {
            let (bucket, _) = of(&[value]).bins().next().unwrap();
            let label = vmrange(bucket).unwrap();
            let (lo, hi) = label.split_once("...").unwrap();
            let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
            assert_eq!(lo, bucket.left(), "{label}");
            assert!((hi - (bucket.left() + bucket.width())).abs() <= hi.abs() * 1e-15, "{label}");
        }
    }

    #[test]
    fn classic_buckets_count_below_each_boundary() {
        // Integer milliseconds sit on edges: 100 ms is not below 0.1 s (lower-inclusive bins).
        let seconds = of(&[4.0, 5.0, 99.0, 100.0, 101.0, 2500.0, 20000.0, -1.0, 0.0]).shift_decades(-3);
        let bounds = [0.005, 0.1, 0.11, 2.5, 10.0];
        assert_eq!(classic(&seconds, &bounds), vec![3, 5, 7, 7, 8, 9]);
        assert_eq!(bounds.iter().map(|&b| le_label(b)).collect::<Vec<_>>(), ["0.005", "0.1", "0.11", "2.5", "10"]);
        assert_eq!(le_label(f64::INFINITY), "+Inf");
    }
}
