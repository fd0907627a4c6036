//! Flushed values as numbers every output can carry.

/// A flushed value as a number every output can carry: an infinite one (a counter's or a
/// timer's sum past the largest double: `c:1.7e308|c` twice) at the largest double with its
/// sign, as a gauge stays; NaN (only an infinite sum of each sign added together) at 0. Etsy
/// sends `Infinity` and `NaN`, which carbon stores and no later value brings back (issue 48, P8).
pub fn saturated(value: f64) -> f64 {
    match value {
        v if v.is_nan() => 0.0,
        v if v.is_infinite() => f64::MAX.copysign(v),
        v => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushed_values_are_numbers_every_output_carries() {
        let cases =
            [(1.5, 1.5), (f64::INFINITY, f64::MAX), (f64::NEG_INFINITY, -f64::MAX), (f64::NAN, 0.0), (-0.0, -0.0)];
        for (value, want) in cases {
            assert_eq!(saturated(value).to_bits(), want.to_bits(), "{value}");
        }
    }
}
