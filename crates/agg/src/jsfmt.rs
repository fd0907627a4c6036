//! Numbers written as JavaScript's `Number.prototype.toString()` writes them, so that Graphite
//! lines are byte-identical to Etsy statsd's: `5.5`, `100`, `1e+21`, `1.5e-7`, `NaN`,
//! `Infinity`.

use std::fmt::Write;

/// Appends `number` to `out` as JavaScript would print it.
pub fn write_js_number(out: &mut String, number: f64) {
    if number.is_nan() {
        out.push_str("NaN");
    } else if number.is_infinite() {
        out.push_str(if number > 0.0 { "Infinity" } else { "-Infinity" });
    } else if number == 0.0 {
        out.push('0');
    } else {
        write_finite(out, number);
    }
}

/// `number` as JavaScript would print it.
pub fn js_number(number: f64) -> String {
    let mut out = String::new();
    write_js_number(&mut out, number);
    out
}

/// ECMAScript Number::toString for a finite non-zero number: the shortest round-trip digits
/// `d1..dk` with decimal exponent `n` (value = 0.d1..dk × 10^n), laid out by the spec's rules.
fn write_finite(out: &mut String, number: f64) {
    if number < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddde<exp>`.
    let mut scientific = String::with_capacity(32);
    let _ = write!(scientific, "{:e}", number.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i32;
    let n = exponent.parse::<i32>().unwrap_or(0) + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if n > 0 { "+" } else { "-" }, (n - 1).abs());
    }
}

#[cfg(test)]
mod tests {
    use super::js_number;

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
        ];
        for (number, want) in cases {
            assert_eq!(js_number(*number), *want, "number {number:e}");
        }
    }
}
