//! Numbers as Etsy statsd reads them: JavaScript's `Number(string)`, except that `NaN` is
//! never a number (Etsy's validity check is `!isNaN(str)`).

/// Reads `text` as JavaScript's `Number()` would, returning `None` where it gives `NaN` or the
/// text is empty.
///
/// Accepted, after trimming ASCII whitespace: decimal literals with an optional sign, leading or
/// trailing dot and exponent (`-1.5e3`, `.5`, `5.`), `Infinity` with an optional sign, and
/// unsigned `0x`/`0o`/`0b` integers. Rejected: `NaN`, `inf`, `1_000`, `0x` with a sign, empty.
pub fn js_number(text: &[u8]) -> Option<f64> {
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
