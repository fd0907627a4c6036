//! Query parameters: times (`now`, `-1h`, `now-15m`, unix seconds) and steps (`10s`, `1m`).

use crate::config_reader::parse_duration;

/// A parameter that does not parse: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParameter {
    /// The parameter's name.
    pub name: &'static str,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for BadParameter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "parameter `{}`: {}", self.name, self.message)
    }
}

/// The longest pattern or text a filter parameter may hold (`match`, `contains`): SQLite
/// refuses long GLOB patterns as "too complex", which was a 500 for what is bad input.
pub const MAX_PATTERN_BYTES: usize = 1024;

/// The latest time a parameter may name (unix seconds, the year 5138): every sum and
/// difference of times and steps then fits an `i64`.
pub const LATEST: i64 = 100_000_000_000;

/// The widest step (10 years).
pub const WIDEST_STEP: i64 = 10 * 366 * 86_400;

/// A time: `now`, `-1h` or `now-1h` (before now), or unix seconds. `now` is the end of the
/// current second: flush times are rounded to the nearest second (as Etsy does), so the newest
/// row may carry the next second, and a range ending `now` must include it.
pub fn time(name: &'static str, text: Option<&str>, default: &str, now: i64) -> Result<i64, BadParameter> {
    let text = text.unwrap_or(default).trim();
    let bad = || BadParameter { name, message: format!("'{text}' is not a time (unix seconds, now, -1h, now-15m)") };
    if text == "now" {
        return Ok(now + 1);
    }
    if let Some(ago) = text.strip_prefix("now-").or_else(|| text.strip_prefix('-')) {
        return parse_duration(ago).filter(|&s| s <= LATEST).map(|seconds| (now - seconds).max(0)).ok_or_else(bad);
    }
    text.parse::<f64>().ok().filter(|t| (0.0..=LATEST as f64).contains(t)).map(|t| t as i64).ok_or_else(bad)
}

/// A yes/no parameter: `1`, `true`, `yes` or `0`, `false`, `no`; absent is no.
pub fn flag(name: &'static str, text: Option<&str>) -> Result<bool, BadParameter> {
    match text.map(str::trim) {
        None | Some("" | "0" | "false" | "no") => Ok(false),
        Some("1" | "true" | "yes") => Ok(true),
        Some(other) => {
            Err(BadParameter { name, message: format!("'{other}' is not yes or no (1, true, yes; 0, false, no)") })
        }
    }
}

/// A step: a duration, or (when absent) one that gives about 240 steps over the range, rounded
/// to a familiar width.
pub fn step(text: Option<&str>, from: i64, to: i64) -> Result<i64, BadParameter> {
    match text {
        Some(text) => parse_duration(text).filter(|&s| s <= WIDEST_STEP).ok_or_else(|| BadParameter {
            name: "step",
            message: format!("'{text}' is not a duration like 10s, 1m, 1h of at most 10 years"),
        }),
        None => {
            let wanted = ((to - from) / 240).max(1);
            Ok([10, 30, 60, 300, 900, 3600, 6 * 3600, 86_400].into_iter().find(|&s| s >= wanted).unwrap_or(86_400))
        }
    }
}

/// A whole number from 1 to `most` (`default` when absent).
pub fn count(name: &'static str, text: Option<&str>, default: usize, most: usize) -> Result<usize, BadParameter> {
    let Some(text) = text else { return Ok(default) };
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=most).contains(n))
        .ok_or_else(|| BadParameter { name, message: format!("'{text}' is not a whole number from 1 to {most}") })
}

/// Checks a range: from before to, and not absurdly many steps.
pub fn range(from: i64, to: i64, step: i64, max_steps: usize) -> Result<(), BadParameter> {
    if from >= to {
        return Err(BadParameter { name: "from", message: format!("must be before `to` ({from} is not before {to})") });
    }
    if (to - from) / step > max_steps as i64 {
        return Err(BadParameter {
            name: "step",
            message: format!(
                "{step}s gives more than {max_steps} steps over the range (queryMaxSteps): use a larger step"
            ),
        });
    }
    Ok(())
}

/// What one query of the HTTP API may ask for (`queryMaxSteps`, `queryMaxSeries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// The most steps a query or heatmap answers (11,000).
    pub max_steps: usize,
    /// The most series one listing gives (`limit` at most this; 100,000).
    pub max_series: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits { max_steps: 11_000, max_series: 100_000 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_times_and_steps() {
        let now = 1_000_000;
        for (text, want) in
            [("now", now + 1), ("-1h", now - 3600), ("now-15m", now - 900), ("123456", 123_456), ("123456.7", 123_456)]
        {
            assert_eq!(time("from", Some(text), "now", now), Ok(want), "{text}");
        }
        assert_eq!(time("from", None, "-1h", now), Ok(now - 3600));
        assert!(time("to", Some("yesterday"), "now", now).unwrap_err().to_string().contains("parameter `to`"));
        assert_eq!(step(Some("1m"), 0, 3600), Ok(60));
        assert_eq!(step(None, 0, 3600), Ok(30));
        assert_eq!(step(None, 0, 7 * 86_400), Ok(3600));
        assert!(step(Some("fast"), 0, 10).is_err());
        assert!(range(10, 5, 1, 11_000).is_err());
        assert!(range(0, 86_400 * 7, 10, 11_000).is_err());
        assert!(range(0, 86_400 * 7, 10, 100_000).is_ok());
        // Far ends are refused, not wrapped into nonsense (or a debug-build overflow panic).
        for text in ["1e300", "-9999999999999999999s", "now-106751991167300d", "100000000001"] {
            assert!(time("from", Some(text), "now", now).is_err(), "{text}");
        }
        assert_eq!(time("from", Some("-100000d"), "now", now), Ok(0));
        assert!(step(Some("106751991167300d"), 0, 10).is_err());
        assert!(step(Some("3660d"), 0, 10).is_ok());
        for (text, want) in [
            (None, Ok(50)),
            (Some("7"), Ok(7)),
            (Some("100"), Ok(100)),
            (Some("0"), Err(())),
            (Some("101"), Err(())),
            (Some("x"), Err(())),
        ] {
            assert_eq!(count("limit", text, 50, 100).map_err(drop), want, "{text:?}");
        }
    }
}
