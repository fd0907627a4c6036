//! Reading a config file's text, the bottom of the config layer: the JavaScript object literal
//! (Etsy's configs), a [`Reader`] per section that records the keys it reads and names the key
//! of every error, and the units config values are written in (durations, byte sizes). Each
//! module that owns a section reads it with these; `config` assembles the sections.

pub mod keys;
mod section;

use std::path::Path;

use serde_json::{Map, Value};

pub use section::{number_of, string_object, ConfigError, KeysRead, Reader};

/// Reads the file at `path` and makes something of its text; errors name the file.
pub fn read_file<T>(path: &Path, from_text: impl FnOnce(&str) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read config file {}: {e}", path.display()))?;
    from_text(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A config's text as an object: a JavaScript object literal (Etsy's configs), JSON5 or JSON.
pub fn object_literal(text: &str) -> anyhow::Result<Map<String, Value>> {
    let value: Value = json5::from_str(text).map_err(|error| syntax_error(text, error))?;
    match value {
        Value::Object(raw) => Ok(raw),
        other => anyhow::bail!("the config must be an object {{ ... }}, got {other}"),
    }
}

/// A syntax error said where it is: the line and column, the line itself with a caret, and
/// the usual causes (the parser's own expectation, "expected boolean, null, or string" for a
/// missing comma, misleads more than it helps).
fn syntax_error(text: &str, error: json5::Error) -> anyhow::Error {
    let json5::Error::Message { msg, location } = error;
    let Some(json5::Location { line, column }) = location else {
        return anyhow::anyhow!("not a JavaScript object literal: {msg}");
    };
    let source = text.lines().nth(line.saturating_sub(1)).unwrap_or_default();
    let caret = " ".repeat(column.saturating_sub(1));
    anyhow::anyhow!(
        "not a JavaScript object literal: syntax error at line {line}, column {column}:\n  {line:>4} | {source}\n       | {caret}^\n  \
         (usually a missing comma between two entries, a missing colon, an unquoted string value or an unclosed brace, near the caret)"
    )
}

/// `2GiB`, `500MB`, `512MiB`, `10G`, `1T` (binary or decimal units, `B` optional), or plain
/// bytes; `None` if it is not one.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().trim_end_matches('b') {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = number * scale;
    (bytes.is_finite() && bytes < 1.8e19).then_some(bytes.round() as u64)
}

/// `10s`, `5m`, `24h`, `30d`, `2w`, or plain seconds; `None` if it is not one, or not positive.
pub fn parse_duration(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().ok()?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return None,
    };
    number.checked_mul(scale).filter(|&s| s > 0)
}

/// Levenshtein distance (insertions, deletions, substitutions; a swap of neighbours counts 2).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_sizes() {
        for (text, want) in [
            ("2GiB", Some(2u64 << 30)),
            ("500MB", Some(500_000_000)),
            ("512MiB", Some(512 << 20)),
            ("10G", Some(10_000_000_000)),
            ("1.5GiB", Some(3 << 29)),
            ("1048576", Some(1 << 20)),
            ("2 GiB", Some(2 << 30)),
            ("lots", None),
            ("5XB", None),
        ] {
            assert_eq!(super::parse_bytes(text), want, "{text}");
        }
    }

    #[test]
    fn reads_durations() {
        for (text, want) in [
            ("10s", Some(10)),
            ("5m", Some(300)),
            ("24h", Some(86_400)),
            ("30d", Some(2_592_000)),
            ("90", Some(90)),
            ("0s", None),
            ("1y", None),
            ("h", None),
            ("-5m", None),
        ] {
            assert_eq!(super::parse_duration(text), want, "{text}");
        }
    }
}
