//! Numbers as Etsy statsd reads them: JavaScript's `Number(string)`, except that `NaN` is
//! never a number (Etsy's validity check is `!isNaN(str)`).

/// Reads `text` as JavaScript's `Number()` would, returning `None` where it gives `NaN` or the
/// text is empty.
///
/// Accepted, after trimming ASCII whitespace: decimal literals with an optional sign, leading or
/// trailing dot and exponent (`-1.5e3`, `.5`, `5.`), `Infinity` with an optional sign, and
/// unsigned `0x`/`0o`/`0b` integers. Rejected: `NaN`, `inf`, `1_000`, `0x` with a sign, empty.
pub fn js_number(text: &[u8]) -> Option<f64> {
    if let Some(value) = plain_decimal(text) {
        return Some(value);
    }
    let text = text.trim_ascii();
    if text.is_empty() {
        return None;
    }
    if let Some(value) = infinity(text) {
        return Some(value);
    }
    if let Some(value) = radix_integer(text) {
        return value;
    }
    if !is_decimal_literal(text) {
        return None;
    }
    // The grammar check above leaves only forms Rust's parser reads the same way.
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// The common case, `123` or `12.5` (at most 15 digits, optional leading `-`): the digits as an
/// integer are exact in an f64, and so is 10^fraction_digits, so one IEEE division gives the
/// correctly rounded value, the same bits as the full parser (Clinger's fast path).
#[inline]
pub(crate) fn plain_decimal(text: &[u8]) -> Option<f64> {
    const POWERS: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let (negative, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mut mantissa, mut digits, mut fraction) = (0u64, 0usize, None::<usize>);
    for &byte in body {
        match byte {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(byte - b'0');
                digits += 1;
                if let Some(places) = fraction.as_mut() {
                    *places += 1;
                }
            }
            b'.' if fraction.is_none() => fraction = Some(0),
            _ => return None,
        }
        if digits > 15 {
            return None;
        }
    }
    if digits == 0 {
        return None;
    }
    let value = mantissa as f64 / POWERS[fraction.unwrap_or(0)];
    Some(if negative { -value } else { value })
}

fn infinity(text: &[u8]) -> Option<f64> {
    match text {
        b"Infinity" | b"+Infinity" => Some(f64::INFINITY),
        b"-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// `0x1F`, `0o17`, `0b101`: `Some(result)` when the prefix is there, `None` when it is not.
fn radix_integer(text: &[u8]) -> Option<Option<f64>> {
    if text.len() < 2 || text[0] != b'0' {
        return None;
    }
    let radix = match text[1] {
        b'x' | b'X' => 16,
        b'o' | b'O' => 8,
        b'b' | b'B' => 2,
        _ => return None,
    };
    let digits = &text[2..];
    if digits.is_empty() {
        return Some(None);
    }
    let mut value = 0f64;
    for &byte in digits {
        match (byte as char).to_digit(radix) {
            Some(digit) => value = value * f64::from(radix) + f64::from(digit),
            None => return Some(None),
        }
    }
    Some(Some(value))
}

/// `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
fn is_decimal_literal(text: &[u8]) -> bool {
    let mut rest = text.strip_prefix(b"+").or_else(|| text.strip_prefix(b"-")).unwrap_or(text);
    let int_digits = leading_digits(rest);
    rest = &rest[int_digits..];
    let mut frac_digits = 0;
    if let Some(after_dot) = rest.strip_prefix(b".") {
        frac_digits = leading_digits(after_dot);
        rest = &after_dot[frac_digits..];
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if let Some(exponent) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let exponent = exponent.strip_prefix(b"+").or_else(|| exponent.strip_prefix(b"-")).unwrap_or(exponent);
        return !exponent.is_empty() && leading_digits(exponent) == exponent.len();
    }
    rest.is_empty()
}

fn leading_digits(text: &[u8]) -> usize {
    text.iter().take_while(|b| b.is_ascii_digit()).count()
}

#[cfg(test)]
mod tests {
    use super::js_number;

    #[test]
    fn reads_what_javascript_reads() {
        let cases: &[(&str, Option<f64>)] = &[
            ("0", Some(0.0)),
            ("1", Some(1.0)),
            ("+10", Some(10.0)),
            ("-10", Some(-10.0)),
            ("1e3", Some(1000.0)),
            ("2e-1", Some(0.2)),
            ("1E+2", Some(100.0)),
            (".5", Some(0.5)),
            ("5.", Some(5.0)),
            (" 5", Some(5.0)),
            ("5\t", Some(5.0)),
            ("0x10", Some(16.0)),
            ("0X1f", Some(31.0)),
            ("0o17", Some(15.0)),
            ("0b101", Some(5.0)),
            ("Infinity", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("+Infinity", Some(f64::INFINITY)),
            ("-0.0", Some(-0.0)),
            ("", None),
            ("   ", None),
            ("NaN", None),
            ("nan", None),
            ("inf", None),
            ("infinity", None),
            ("abc", None),
            ("1x", None),
            ("-0x10", None),
            ("0x", None),
            ("0xg", None),
            ("1_000", None),
            (".", None),
            ("-", None),
            ("1e", None),
            ("1e+", None),
            ("e5", None),
            ("1.2.3", None),
            ("--1", None),
        ];
        for (text, want) in cases {
            let got = js_number(text.as_bytes());
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "input {text:?}");
        }
    }
}
