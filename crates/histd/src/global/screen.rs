//! A forwarded batch screened as a statsd line would be: a global trusts no local with more
//! than a line could carry. Keys are cleaned by Etsy's `keyNameSanitize` rules (a key can no
//! longer hold a space, a newline or a terminal escape, so it cannot write a Graphite line of
//! its own or repaint `histd top`); values that are not finite, gauges stamped far in the future
//! and intervals outside any sensible time are refused and counted by reason, the rest of the
//! batch kept.

use agg::Mergeable;
use compact_str::CompactString;

use fleet::format::BatchId;

/// How far ahead of this histd's clock a gauge's update time may be (a local's
/// clock a little ahead is fine; a gauge stamped years ahead would win every later update).
pub const MAX_AHEAD_S: u64 = 600;

/// How far ahead of this histd's clock a batch's interval may start: a local's interval
/// starts before its flush, so only clock skew puts one ahead, and a minute is ample. Ten
/// minutes let anyone who can produce to the topic claim a local's next identities ahead of
/// it (issue 48, P4).
pub const MAX_INTERVAL_AHEAD_S: u64 = 60;

/// How old a forwarded interval may be: a local's spool replays intervals up to its size in
/// bytes, so days are normal; decades are a broken clock or a forgery.
pub const MAX_AGE_S: u64 = 30 * 86_400;
/// The longest interval a batch may claim (`flushInterval` is at most a day).
pub const MAX_INTERVAL_MS: u64 = 86_400_000;

/// What screening took out or changed, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Screened {
    /// Keys that needed cleaning (kept under their cleaned key).
    pub keys_sanitized: u64,
    /// Series dropped: their key was nothing once cleaned.
    pub empty_keys: u64,
    /// Series dropped: a value, a total or a gauge that is NaN or infinite.
    pub non_finite: u64,
    /// Gauges dropped: stamped more than [`MAX_AHEAD_S`] ahead of now.
    pub future_gauges: u64,
}

/// Why a whole batch is refused: its interval is not a time this histd can believe.
pub fn check_interval(id: &BatchId, now_unix_s: u64) -> Result<(), String> {
    let start_s = id.interval_start_ms / 1000;
    if id.interval_ms == 0 || id.interval_ms > MAX_INTERVAL_MS {
        return Err(format!("interval length {} ms: a flush interval is 1 ms to a day", id.interval_ms));
    }
    if start_s > now_unix_s + MAX_INTERVAL_AHEAD_S || start_s + MAX_AGE_S < now_unix_s {
        return Err(format!(
            "interval start {start_s} (unix s) is more than {MAX_INTERVAL_AHEAD_S} s ahead of this histd's clock ({now_unix_s}) or \
             more than {} days behind it",
            MAX_AGE_S / 86_400
        ));
    }
    Ok(())
}

/// Cleans keys and drops what a statsd line could not carry, in place.
pub fn screen(interval: &mut Mergeable, now_unix_s: u64) -> Screened {
    let mut screened = Screened::default();
    let keep = |key: &mut CompactString, finite: bool, screened: &mut Screened| -> bool {
        if !finite {
            screened.non_finite += 1;
            return false;
        }
        clean_key(key, screened)
    };
    interval.counters.retain_mut(|(key, value)| keep(key, value.is_finite(), &mut screened));
    interval.timers.retain_mut(|(key, samples)| {
        let values_received = samples.received > 0;
        let totals_finite = [samples.count, samples.sum, samples.sum_squares].iter().all(|v| v.is_finite())
            && (!values_received || (samples.min.is_finite() && samples.max.is_finite()));
        keep(key, totals_finite, &mut screened)
    });
    interval.gauges.retain_mut(|(key, gauge)| {
        if gauge.value.is_finite() && gauge.updated_unix_s > now_unix_s + MAX_AHEAD_S {
            screened.future_gauges += 1;
            return false;
        }
        keep(key, gauge.value.is_finite(), &mut screened)
    });
    interval.sets.retain_mut(|(key, _)| keep(key, true, &mut screened));
    screened
}

/// Cleans `key` as `keyNameSanitize` cleans a statsd key; false when nothing is left of it.
fn clean_key(key: &mut CompactString, screened: &mut Screened) -> bool {
    if proto::key::already_clean(key.as_bytes()).is_some() {
        return !key.is_empty();
    }
    let mut clean = String::with_capacity(key.len());
    proto::key::push_sanitized(&mut clean, key.as_bytes());
    if clean.is_empty() {
        screened.empty_keys += 1;
        return false;
    }
    screened.keys_sanitized += 1;
    *key = CompactString::from(clean);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use agg::{ForwardedGauge, TimerSamples, TimerTotals};

    const NOW: u64 = 1_800_000_000;

    fn id(start_ms: u64, interval_ms: u64) -> BatchId {
        BatchId { source: "a".into(), interval_start_ms: start_ms, interval_ms, part: "p".into(), chunk: 0 }
    }

    #[test]
    fn intervals_must_be_believable() {
        let cases = [
            (id(NOW * 1000, 10_000), true),
            (id((NOW - 86_400) * 1000, 10_000), true),
            (id((NOW + 60) * 1000, 10_000), true),
            (id(0, 10_000), false),
            (id(u64::MAX, 10_000), false),
            (id((NOW + 3600) * 1000, 10_000), false),
            (id((NOW + 300) * 1000, 10_000), false),
            (id((NOW + 50) * 1000, 10_000), true),
            (id(NOW * 1000, 0), false),
            (id(NOW * 1000, MAX_INTERVAL_MS + 1), false),
        ];
        for (id, ok) in cases {
            assert_eq!(check_interval(&id, NOW).is_ok(), ok, "{id:?}");
        }
    }

    #[test]
    fn keys_are_cleaned_as_statsd_keys_and_bad_values_dropped() {
        let mut interval = Mergeable::default();
        for (key, value) in [
            ("ok.c", 1.0),
            ("fw.inj 1 1\ninjected.evil.metric 666 1600000000\nfw.x", 2.0),
            ("\u{1b}]0;pwned\u{7}title", 3.0),
            ("sp/ace#\0nul", 4.0),
            ("nan.c", f64::NAN),
            ("inf.c", f64::INFINITY),
            ("\u{1b}\u{7}#", 5.0),
        ] {
            interval.counters.push((key.into(), value));
        }
        interval.gauges.push(("g.ok".into(), ForwardedGauge { value: 1.0, updated_unix_s: NOW }));
        interval.gauges.push(("g.pinned".into(), ForwardedGauge { value: 1.0, updated_unix_s: 1 << 63 }));
        interval.gauges.push(("g.nan".into(), ForwardedGauge { value: f64::NAN, updated_unix_s: NOW }));
        let timer = |sum: f64| {
            let totals = TimerTotals { count: 1e300, received: 2, sum, sum_squares: 5.0, min: 1.0, max: 2.0 };
            TimerSamples::from_parts(&totals, Vec::new(), circllhist::Histogram::new(), true).unwrap()
        };
        interval.timers.push(("t.ok".into(), timer(3.0)));
        interval.timers.push(("t.inf".into(), timer(f64::INFINITY)));
        let screened = screen(&mut interval, NOW);
        let counters: Vec<&str> = interval.counters.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            counters,
            ["ok.c", "fw.inj_1_1_injected.evil.metric_666_1600000000_fw.x", "0;pwnedtitle", "sp-acenul"]
        );
        let gauges: Vec<&str> = interval.gauges.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(gauges, ["g.ok"]);
        let timers: Vec<&str> = interval.timers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(timers, ["t.ok"]);
        assert_eq!(screened, Screened { keys_sanitized: 3, empty_keys: 1, non_finite: 4, future_gauges: 1 });
    }
}
