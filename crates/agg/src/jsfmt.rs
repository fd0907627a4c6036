//! Numbers written as JavaScript's `Number.prototype.toString()` writes them, so that Graphite
//! lines are byte-identical to Etsy statsd's: `5.5`, `100`, `1e+21`, `1.5e-7`, `NaN`,
//! `Infinity`.
//!
//! The digits are the `ryu-js` crate's: the shortest round-trip digits, and of two equally
//! close the even one, as the ECMAScript spec says (Rust's `{:e}` rounds such ties up:
//! `651550682099353.3` where JavaScript prints `651550682099353.2`, one value in ~2,000 of
//! random doubles near 2^50; checked against node on 620,000 values).

/// Appends `number` to `out` as JavaScript would print it.
pub fn write_js_number(out: &mut String, number: f64) {
    if number == 0.0 {
        out.push('0');
    } else if number.fract() == 0.0 && number.abs() < EXACT_INTEGERS {
        // A whole number below 2^53 (and so below 1e21) prints as its digits: a count, a
        // millisecond, most of a timer's statistics, without the shortest-digits search.
        if number < 0.0 {
            out.push('-');
        }
        write_integer(out, number.abs() as u64);
    } else {
        out.push_str(ryu_js::Buffer::new().format(number));
    }
}

/// 2^53: every whole number below it is a double.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// Appends the decimal digits of `value` (a timestamp, a count) without the formatting
/// machinery.
pub fn write_integer(out: &mut String, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[start..]).expect("ASCII digits"));
}

/// `number` as JavaScript would print it.
pub fn js_number(number: f64) -> String {
    let mut out = String::new();
    write_js_number(&mut out, number);
    out
}

#[cfg(test)]
mod tests {
    use super::{js_number, write_integer, write_js_number};

    #[test]
    fn writes_integers() {
        for value in [0, 7, 10, 1_732_470_000, u64::MAX] {
            let mut out = String::new();
            write_integer(&mut out, value);
            assert_eq!(out, value.to_string());
        }
    }

    #[test]
    fn whole_numbers_print_as_ryu_js_prints_them() {
        let mut cases: Vec<f64> = vec![1.0, -1.0, 9.0, 10.0, 1e15, 9_007_199_254_740_991.0, -9_007_199_254_740_991.0];
        cases.extend((0..2000u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (11 + i % 50)) as f64));
        cases.extend((1..60).map(|shift| -((1u64 << shift) as f64) + 1.0));
        for number in cases {
            let mut out = String::new();
            write_js_number(&mut out, number);
            assert_eq!(out, ryu_js::Buffer::new().format(number), "{number:e}");
        }
    }

    #[test]
    fn prints_like_javascript() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (5.5, "5.5"),
            (100.0, "100"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.8722813232690143, "2.8722813232690143"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123456789012345680000.0, "123456789012345680000"),
            (1.5e-7, "1.5e-7"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (0.0000015, "0.0000015"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (99.9, "99.9"),
            (1.0 / 3.0, "0.3333333333333333"),
            (12345.678, "12345.678"),
            (9007199254740992.0, "9007199254740992"),
            (-9007199254740991.0, "-9007199254740991"),
            (9007199254740994.0, "9007199254740994"),
            (1152921504606846976.0, "1152921504606847000"),
            (18446744073709551616.0, "18446744073709552000"),
            (-1234.0, "-1234"),
            (1e300, "1e+300"),
            (-2.5e-300, "-2.5e-300"),
            (0.5, "0.5"),
            // A tie between two shortest digit strings: JavaScript takes the even one.
            (f64::from_bits(0x430284a7b7ad74ca), "651550682099353.2"),
            (f64::from_bits(0xc31b36a4148e5719), "-1914975679649222.2"),
        ];
        for (number, want) in cases {
            assert_eq!(js_number(*number), *want, "number {number:e}");
        }
    }
}
