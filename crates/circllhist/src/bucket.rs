//! Buckets (bins): two significant decimal digits and a decimal exponent.
//!
//! A positive bucket `(val, exp)`, val in 10..=99, covers `[val/10·10^exp, (val+1)/10·10^exp)`;
//! a negative one mirrors it, `((val-1)/10·10^exp, val/10·10^exp]`. `(0, 0)` holds everything
//! with |x| < 1e-128, `(-1, 0)` NaN, ±∞ and |x| ≥ 1e128.

use std::cmp::Ordering;
use std::fmt;

use crate::pow10::pow10;

/// One bin of the log-linear scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bucket {
    val: i8,
    exp: i8,
}

/// Buckets per sign and decade.
const PER_DECADE: u16 = 90;
/// The sort key of the zero bucket: after NaN (0) and every negative bucket.
const ZERO_KEY: u16 = 1 + 256 * PER_DECADE;
/// 10^0 … 10^19 as integers.
const U64_POW10: [u64; 20] = {
    let mut table = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// `dividend / divisor`, with a 32-bit division when both fit (several times cheaper).
#[inline]
fn divide(dividend: u64, divisor: u64) -> u64 {
    match (u32::try_from(dividend), u32::try_from(divisor)) {
        (Ok(dividend), Ok(divisor)) => u64::from(dividend / divisor),
        _ => dividend / divisor,
    }
}

/// `floor(log10(magnitude))` for a positive finite number, from its binary exponent and one
/// comparison with a power of ten. Where this and the C library's `floor(log10(x))` differ (a
/// value within an ulp below a power of ten), both end in the same bucket: the `1e-13`
/// allowance rolls the lower decade's 99.99… over to 10 of the next (tested exhaustively
/// around every power of ten).
fn decimal_exponent(magnitude: f64) -> i32 {
    let biased = ((magnitude.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 {
        return magnitude.log10().floor() as i32; // subnormal: far below the zero bucket anyway
    }
    // floor((biased - 1023) × log10(2)), exact for every double exponent.
    let estimate = ((biased - 1023) * 78_913) >> 18;
    let next = estimate + 1;
    let reaches_next = match next {
        n if n < -128 => false,
        n if n > 127 => magnitude >= 1e128,
        n => magnitude >= pow10(n as i8),
    };
    if reaches_next {
        next
    } else {
        estimate
    }
}

impl Bucket {
    /// The bucket of zero (and of every |x| < 1e-128).
    pub const ZERO: Bucket = Bucket { val: 0, exp: 0 };
    /// The bucket of NaN, ±∞ and |x| ≥ 1e128.
    pub const NAN: Bucket = Bucket { val: -1, exp: 0 };
    /// The number of distinct buckets, NaN and zero included.
    pub const COUNT: usize = 2 + 2 * 90 * 256;

    /// The bucket `(val, exp)` if it is valid (|val| in 10..=99, or zero, or the canonical NaN).
    pub fn new(val: i8, exp: i8) -> Option<Bucket> {
        let bucket = Bucket { val, exp };
        let valid = (10..=99).contains(&val.unsigned_abs()) || bucket == Bucket::ZERO || bucket == Bucket::NAN;
        valid.then_some(bucket)
    }

    /// The two significant digits, signed (0 for the zero bucket, -1 for NaN).
    pub fn val(self) -> i8 {
        self.val
    }

    /// The decimal exponent.
    pub fn exp(self) -> i8 {
        self.exp
    }

    /// True for the NaN bucket.
    pub fn is_nan(self) -> bool {
        self == Bucket::NAN
    }

    /// True for the zero bucket.
    pub fn is_zero(self) -> bool {
        self.val == 0
    }

    /// The bucket of `value`, as the C library's `double_to_hist_bucket` computes it
    /// (including its `1e-13` allowance below bin edges), without calling `log10`.
    pub fn of_f64(value: f64) -> Bucket {
        if !value.is_finite() {
            return Bucket::NAN;
        }
        if value == 0.0 {
            return Bucket::ZERO;
        }
        match decimal_exponent(value.abs()) {
            // Just below 1e-128, C's log10 may round up into the smallest bin: ask it.
            exp if exp < -128 => Bucket::of_f64_log10(value),
            exp if exp > 127 => Bucket::NAN,
            exp => Bucket::with_exponent(value, exp as i8),
        }
    }

    /// The C library's computation, `floor(log10(|value|))` and all: the reference that
    /// [`Bucket::of_f64`] is tested against, and its path below 1e-128.
    fn of_f64_log10(value: f64) -> Bucket {
        if !value.is_finite() {
            return Bucket::NAN;
        }
        if value == 0.0 {
            return Bucket::ZERO;
        }
        let exp = value.abs().log10().floor() as i32;
        match i8::try_from(exp) {
            Ok(exp) => Bucket::with_exponent(value, exp),
            Err(_) if exp < 0 => Bucket::ZERO,
            Err(_) => Bucket::NAN,
        }
    }

    /// The bucket of `value` given its decimal exponent: two digits, rolling 100 over to the
    /// next decade.
    fn with_exponent(value: f64, exp: i8) -> Bucket {
        let digits = (value.abs() / pow10(exp) * 10.0 + 1e-13).floor() as i32;
        let (digits, exp) = match digits {
            100 => match exp.checked_add(1) {
                Some(next) => (10, next),
                None => return Bucket::NAN,
            },
            10..=99 => (digits, exp),
            _ => return Bucket::NAN,
        };
        Bucket { val: if value < 0.0 { -digits as i8 } else { digits as i8 }, exp }
    }

    /// The bucket of `value × 10^scale`, exactly, with integer arithmetic only.
    pub fn of_int_scale(value: i64, scale: i32) -> Bucket {
        if value == 0 {
            return Bucket::ZERO;
        }
        let magnitude = if value == i64::MIN { i64::MAX as u64 } else { value.unsigned_abs() };
        // Two significant digits: one division by the right power of ten.
        let places = magnitude.ilog10();
        let (digits, exp) = match places {
            0 => (magnitude * 10, i64::from(scale)),
            _ => (divide(magnitude, U64_POW10[places as usize - 1]), i64::from(scale) + i64::from(places)),
        };
        match i8::try_from(exp) {
            Ok(exp) => Bucket { val: if value < 0 { -(digits as i8) } else { digits as i8 }, exp },
            Err(_) if exp < 0 => Bucket::ZERO,
            Err(_) => Bucket::NAN,
        }
    }

    /// The edge closest to zero (`hist_bucket_to_double`): `(val / 10) × 10^exp`; NaN for NaN.
    pub fn edge(self) -> f64 {
        match self {
            Bucket::NAN => f64::NAN,
            Bucket { val: 0, .. } => 0.0,
            Bucket { val, exp } => (f64::from(val) / 10.0) * pow10(exp),
        }
    }

    /// The width, unsigned: `10^exp / 10` (0 for the zero bucket, NaN for NaN).
    pub fn width(self) -> f64 {
        match self {
            Bucket::NAN => f64::NAN,
            Bucket { val: 0, .. } => 0.0,
            Bucket { exp, .. } => pow10(exp) / 10.0,
        }
    }

    /// The edge toward -∞.
    pub fn left(self) -> f64 {
        let edge = self.edge();
        if edge < 0.0 {
            edge - self.width()
        } else {
            edge
        }
    }

    /// The harmonic midpoint `2·a·b / (a + b)` of the bin's edges `a`, `b` (signed): the value
    /// that minimises the largest relative error of any sample in the bin. Computed as
    /// `a + w·a / (a + b)`, the reference's expression, so the bits match.
    pub fn midpoint(self) -> f64 {
        match self {
            Bucket::NAN => f64::NAN,
            Bucket { val: 0, .. } => 0.0,
            _ => {
                let near = self.edge().abs();
                let width = self.width();
                let mid = near + width * near / (near + (near + width));
                if self.val < 0 {
                    -mid
                } else {
                    mid
                }
            }
        }
    }

    /// The position in the C library's order (NaN, negatives from -∞, zero, positives), as a
    /// dense integer in `0..COUNT`: neighbouring buckets have neighbouring keys.
    pub fn key(self) -> u16 {
        let exp_index = (i16::from(self.exp) + 128) as u16;
        match self.val {
            0 => ZERO_KEY,
            -1 => 0,
            val if val < 0 => 1 + (255 - exp_index) * PER_DECADE + (99 - val.unsigned_abs() as u16),
            val => ZERO_KEY + 1 + exp_index * PER_DECADE + (val as u16 - 10),
        }
    }

    /// The bucket at position `key` (the inverse of [`Bucket::key`]).
    pub(crate) fn from_key(key: u16) -> Bucket {
        match key {
            0 => Bucket::NAN,
            ZERO_KEY => Bucket::ZERO,
            key if key < ZERO_KEY => {
                let offset = key - 1;
                let exp = 255 - offset / PER_DECADE;
                Bucket { val: -((99 - offset % PER_DECADE) as i8), exp: (exp as i16 - 128) as i8 }
            }
            key => {
                let offset = key - ZERO_KEY - 1;
                Bucket { val: (10 + offset % PER_DECADE) as i8, exp: ((offset / PER_DECADE) as i16 - 128) as i8 }
            }
        }
    }
}

impl Ord for Bucket {
    /// NaN first, then negative buckets from -∞ toward zero, zero, positive buckets ascending.
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Bucket {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Bucket {
    /// The C library's form: `+10e-001` (= 10 × 10^(exp-1)), `0`, `NaN`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Bucket::NAN => f.write_str("NaN"),
            Bucket { val: 0, .. } => f.write_str("0"),
            Bucket { val, exp } => {
                let shown = i16::from(exp) - 1;
                let sign = if val < 0 { '-' } else { '+' };
                let exp_sign = if shown < 0 { '-' } else { '+' };
                write!(f, "{sign}{:02}e{exp_sign}{:03}", val.unsigned_abs(), shown.unsigned_abs())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_dense_and_ordered() {
        let mut previous = None;
        for key in 0..Bucket::COUNT as u16 {
            let bucket = Bucket::from_key(key);
            assert_eq!(bucket.key(), key, "{bucket:?}");
            assert!(Bucket::new(bucket.val, bucket.exp).is_some(), "{bucket:?}");
            if let Some(previous) = previous {
                let below: Bucket = previous;
                if !below.is_nan() {
                    assert!(
                        below.left() < bucket.left() || bucket.is_zero() || below.is_zero(),
                        "{below:?} < {bucket:?}"
                    );
                }
            }
            previous = Some(bucket);
        }
    }

    /// Around every power of ten (a few ulps each way) and over a spread of values, the fast
    /// path gives the C library's bucket.
    #[test]
    fn fast_path_agrees_with_the_reference() {
        let mut values = Vec::new();
        for exp in -130..=130 {
            let power: f64 = format!("1e{exp}").parse().unwrap();
            let mut below = power;
            let mut above = power;
            for _ in 0..4 {
                values.extend([below, above, -below, -above]);
                below = f64::from_bits(below.to_bits() - 1);
                above = f64::from_bits(above.to_bits() + 1);
            }
            for digits in 10..100 {
                let edge = f64::from(digits) / 10.0 * power;
                values.extend([edge, f64::from_bits(edge.to_bits() - 1), f64::from_bits(edge.to_bits() + 1)]);
            }
        }
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            values.push(f64::from_bits(state));
        }
        values.extend([f64::MIN_POSITIVE, 5e-324, f64::MAX, 1e-129, 9.9e127, 1e128]);
        for value in values {
            assert_eq!(Bucket::of_f64(value), Bucket::of_f64_log10(value), "{value:e}");
        }
    }

    #[test]
    fn maps_values_to_buckets() {
        let cases: &[(f64, i8, i8)] = &[
            (1.0, 10, 0),
            (0.123, 12, -1),
            (-1.0, -10, 0),
            (0.11, 11, -1),
            (0.9999999999999999, 10, 0),
            (99.9, 99, 1),
            (1e-129, 0, 0),
            (1e128, -1, 0),
            (f64::INFINITY, -1, 0),
            (-0.0, 0, 0),
        ];
        for &(value, val, exp) in cases {
            assert_eq!(Bucket::of_f64(value), Bucket { val, exp }, "{value}");
        }
    }
}
