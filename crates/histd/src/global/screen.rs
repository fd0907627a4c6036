//! A forwarded batch screened as a statsd line would be: a global trusts no local with more
//! than a line could carry. Keys are cleaned by Etsy's `keyNameSanitize` rules (a key can no
//! longer hold a space, a newline or a terminal escape, so it cannot write a Graphite line of
//! its own or repaint `histd top`); values that are not finite, gauges stamped far in the future
//! and intervals outside any sensible time are refused and counted by reason, the rest of the
//! batch kept.

use agg::{ForwardedGauge, TimerPart};
use fleet::format::{BatchId, Series, SetPart};

use crate::placement::Destination;

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

/// A forwarded batch's series screened on their way to where they go: keys cleaned (and
/// tagged with their source, with `global.tagSource`), what a statsd line could not carry
/// dropped and counted.
#[derive(Debug)]
pub struct Screening<'a, 't> {
    into: Destination<'a>,
    now_unix_s: u64,
    tag: Option<&'t SourceTag>,
    screened: Screened,
    kept: usize,
    /// A key being cleaned, and one being tagged: made once a batch.
    clean: String,
    tagged: String,
}

impl<'a, 't> Screening<'a, 't> {
    /// Screens series on their way `into` at `now_unix_s`, tagged with `tag` when given.
    pub fn new(into: Destination<'a>, now_unix_s: u64, tag: Option<&'t SourceTag>) -> Self {
        Screening {
            into,
            now_unix_s,
            tag,
            screened: Screened::default(),
            kept: 0,
            clean: String::new(),
            tagged: String::new(),
        }
    }

    /// What was taken out or changed, and the series passed on.
    pub fn finish(self) -> (Screened, usize) {
        (self.screened, self.kept)
    }

    /// Passes a series of `key` on with `pass` when its values are `finite`: its key cleaned
    /// and tagged; dropped and counted otherwise.
    fn pass(&mut self, key: &str, finite: bool, pass: impl FnOnce(&mut Destination<'a>, &str)) {
        if !finite {
            self.screened.non_finite += 1;
            return;
        }
        let Some(key) = clean_key(key, &mut self.clean, &mut self.screened) else { return };
        let key = match self.tag {
            Some(tag) => tag.tagged(key, &mut self.tagged),
            None => key,
        };
        self.kept += 1;
        pass(&mut self.into, key);
    }
}

impl Series for Screening<'_, '_> {
    fn counter(&mut self, key: &str, value: f64) {
        self.pass(key, value.is_finite(), |into, key| into.counter(key, value));
    }

    fn timer(&mut self, key: &str, part: &TimerPart<'_>) {
        let totals = &part.totals;
        let finite = [totals.count, totals.sum, totals.sum_squares].iter().all(|v| v.is_finite())
            && (totals.received == 0 || (totals.min.is_finite() && totals.max.is_finite()));
        self.pass(key, finite, |into, key| into.timer(key, part));
    }

    fn gauge(&mut self, key: &str, gauge: ForwardedGauge) {
        if gauge.value.is_finite() && gauge.updated_unix_s > self.now_unix_s + MAX_AHEAD_S {
            self.screened.future_gauges += 1;
            return;
        }
        self.pass(key, gauge.value.is_finite(), |into, key| into.gauge(key, gauge));
    }

    fn set(&mut self, key: &str, set: SetPart<'_>) {
        self.pass(key, true, |into, key| into.set(key, set.to_distinct()));
    }
}

/// `key` cleaned as `keyNameSanitize` cleans a statsd key (into `clean` when it must change);
/// `None` when nothing is left of it.
fn clean_key<'k>(key: &'k str, clean: &'k mut String, screened: &mut Screened) -> Option<&'k str> {
    if proto::key::already_clean(key.as_bytes()).is_some() {
        return (!key.is_empty()).then_some(key);
    }
    clean.clear();
    proto::key::push_sanitized(clean, key.as_bytes());
    if clean.is_empty() {
        screened.empty_keys += 1;
        return None;
    }
    screened.keys_sanitized += 1;
    Some(clean)
}

/// The tag `<tag>=<source>` that `global.tagSource` adds to every series of a source's
/// batches.
#[derive(Debug)]
pub struct SourceTag {
    /// `;<tag>=<source>`, the source cleaned as a key and without `;` or `=`.
    suffix: String,
}

impl SourceTag {
    /// The tag `tag` with `source` as its value.
    pub fn new(tag: &str, source: &str) -> SourceTag {
        let mut value = String::new();
        proto::key::push_sanitized(&mut value, source.as_bytes());
        SourceTag { suffix: format!(";{tag}={}", value.replace([';', '='], "_")) }
    }

    /// `key` with the tag, in sorted place as a client's tag would be (at the end of a key
    /// whose parts are not all `k=v` tags: a `;` in the name), written into `tagged`.
    pub fn tagged<'k>(&self, key: &str, tagged: &'k mut String) -> &'k str {
        tagged.clear();
        tagged.push_str(key);
        tagged.push_str(&self.suffix);
        if key.split(';').skip(1).all(|part| part.contains('=')) {
            proto::key::sort_tags(tagged);
        }
        tagged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agg::{AggConfig, Aggregator, TimerTotals};

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
        let mut aggregator = Aggregator::for_forwarded(AggConfig::default());
        let mut screening = Screening::new(Destination::Merge(aggregator.absorbing()), NOW, None);
        for (key, value) in [
            ("ok.c", 1.0),
            ("fw.inj 1 1\ninjected.evil.metric 666 1600000000\nfw.x", 2.0),
            ("\u{1b}]0;pwned\u{7}title", 3.0),
            ("sp/ace#\0nul", 4.0),
            ("nan.c", f64::NAN),
            ("inf.c", f64::INFINITY),
            ("\u{1b}\u{7}#", 5.0),
        ] {
            screening.counter(key, value);
        }
        screening.gauge("g.ok", ForwardedGauge { value: 1.0, updated_unix_s: NOW });
        screening.gauge("g.pinned", ForwardedGauge { value: 1.0, updated_unix_s: 1 << 63 });
        screening.gauge("g.nan", ForwardedGauge { value: f64::NAN, updated_unix_s: NOW });
        let histogram = circllhist::Histogram::new().to_bytes();
        let timer = |sum: f64| {
            let totals = TimerTotals { count: 1e300, received: 2, sum, sum_squares: 5.0, min: 1.0, max: 2.0 };
            TimerPart::new(totals, true, &[], &histogram).unwrap()
        };
        screening.timer("t.ok", &timer(3.0));
        screening.timer("t.inf", &timer(f64::INFINITY));
        let (screened, kept) = screening.finish();
        let interval = aggregator.into_mergeable();
        let mut counters: Vec<&str> = interval.counters.iter().map(|(k, _)| k.as_str()).collect();
        counters.sort_unstable();
        assert_eq!(
            counters,
            ["0;pwnedtitle", "fw.inj_1_1_injected.evil.metric_666_1600000000_fw.x", "ok.c", "sp-acenul"]
        );
        let gauges: Vec<&str> = interval.gauges.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(gauges, ["g.ok"]);
        let timers: Vec<&str> = interval.timers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(timers, ["t.ok"]);
        assert_eq!(screened, Screened { keys_sanitized: 3, empty_keys: 1, non_finite: 4, future_gauges: 1 });
        assert_eq!(kept, 6);
    }

    #[test]
    fn the_source_tag_sits_in_sorted_place() {
        let tag = SourceTag::new("host", "web-1.example");
        let mut tagged = String::new();
        let cases = [
            ("req", "req;host=web-1.example"),
            ("req;zone=b", "req;host=web-1.example;zone=b"),
            ("req;app=x", "req;app=x;host=web-1.example"),
            ("odd;name;x=1", "odd;name;x=1;host=web-1.example"),
        ];
        for (key, want) in cases {
            assert_eq!(tag.tagged(key, &mut tagged), want);
        }
        assert_eq!(SourceTag::new("host", "a;b=c d").tagged("k", &mut tagged), "k;host=a_b_c_d");
    }
}
