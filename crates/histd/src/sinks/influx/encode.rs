//! A flush as InfluxDB line protocol, pure, in the schema Telegraf's statsd input writes (so
//! its dashboards read histd's points as they are):
//!
//! ```text
//! api_hits,metric_type=counter,route=login value=3 1700000000
//! api_latency,metric_type=timing count=4,lower=1,mean=2.5,median=2.5,stddev=1.118,sum=10,upper=4,90_percentile=4 1700000000
//! temperature,metric_type=gauge value=21.5 1700000000
//! visitors,metric_type=set value=2 1700000000
//! ```
//!
//! The measurement is the series name with `.` replaced by `influx.separator` (`_`, as
//! Telegraf's `metric_separator`); its tags (`;k=v`), `metric_type` and `influx.tags` are the
//! point's tags, sorted by key. Counters are the interval's total of `value / rate`; timers and
//! `h`/`d` histograms carry the statistics histd derives for Graphite, named as Telegraf names
//! them where it has a name (`stddev`, `<P>_percentile`), else as Etsy does (`count_ps`,
//! `mean_90`, ...). Every value is a float; one that is not finite is left out, and a point
//! left without fields is not written. Times are the flush's unix seconds (`precision=s`).

use std::fmt::Write as _;

use agg::jsfmt::{js_number, write_js_number};
use agg::{PercentileStat, Snapshot, TimerStat};
use bytes::Bytes;

use crate::sinks::delivery::Request;

/// How points are named and packed.
#[derive(Debug, Clone)]
pub struct Layout {
    /// What `.` in a series name becomes in its measurement.
    pub separator: String,
    /// Tags added to every point (`influx.tags`), a series' own taking precedence.
    pub tags: Vec<(String, String)>,
    /// One request's size: a flush larger than this is split.
    pub max_request_bytes: usize,
}

/// The requests of a flush, each at most `max_request_bytes` (a single line larger than that
/// goes alone).
pub fn encode(snapshot: &Snapshot, layout: &Layout) -> Vec<Request> {
    let mut requests = Requests { max: layout.max_request_bytes, body: String::new(), points: 0, done: Vec::new() };
    let time = snapshot.timestamp;
    let mut line = String::new();
    let mut point = |key: &str, kind: &str, fields: &[(&str, f64)]| {
        line.clear();
        if write_line(&mut line, layout, key, kind, fields, time) {
            requests.add(&line);
        }
    };
    for counter in &snapshot.counters {
        point(counter.key, "counter", &[("value", counter.count)]);
    }
    for gauge in &snapshot.gauges {
        point(&gauge.key, "gauge", &[("value", gauge.value)]);
    }
    for set in &snapshot.sets {
        point(&set.key, "set", &[("value", set.count as f64)]);
    }
    // Field names are made once a flush: every timer has the same statistics.
    let names = snapshot.stat_names();
    let mut field_names: Vec<(TimerStat, String)> = Vec::new();
    for (stat, _) in snapshot.timers.iter().flat_map(|timer| &timer.stats) {
        if !field_names.iter().any(|(known, _)| *known == stat) {
            field_names.push((stat, field_name(stat, &names, snapshot)));
        }
    }
    let mut fields: Vec<(&str, f64)> = Vec::new();
    for timer in snapshot.timers.iter().filter(|timer| timer.totals.received > 0) {
        fields.clear();
        for (stat, value) in &timer.stats {
            let name = field_names.iter().find(|(known, _)| *known == stat).map_or("", |(_, name)| name.as_str());
            fields.push((name, value));
        }
        point(&timer.key, "timing", &fields);
    }
    requests.finish()
}

/// A timer statistic's field: Telegraf's name where it has one, else Etsy's.
fn field_name(stat: TimerStat, names: &agg::StatNames, snapshot: &Snapshot) -> String {
    match stat {
        TimerStat::Std => "stddev".into(),
        TimerStat::Percentile(PercentileStat::Bound, index) => {
            match snapshot.thresholds.get(usize::from(index)).map(|threshold| threshold.percent) {
                Some(percent) if percent > 0.0 => format!("{}_percentile", js_number(percent)),
                _ => names.of(stat).to_string(),
            }
        }
        other => names.of(other).to_string(),
    }
}

/// Appends one point's line; false (nothing kept) when none of its fields is finite.
pub(super) fn write_line(
    out: &mut String,
    layout: &Layout,
    key: &str,
    kind: &str,
    fields: &[(&str, f64)],
    time: u64,
) -> bool {
    let (name, series_tags) = proto::key::split_series_key(key);
    escape(out, &name.replace('.', &layout.separator), Part::Measurement);
    let mut tags: Vec<(&str, &str)> = vec![("metric_type", kind)];
    tags.extend(series_tags.filter(|(tag, value)| !tag.is_empty() && !value.is_empty()));
    tags.extend(layout.tags.iter().map(|(tag, value)| (tag.as_str(), value.as_str())));
    // The first of a key wins: metric_type, then the series' own, then influx.tags.
    tags.sort_by(|a, b| a.0.cmp(b.0));
    tags.dedup_by(|later, first| later.0 == first.0);
    for (tag, value) in tags {
        out.push(',');
        escape(out, tag, Part::Key);
        out.push('=');
        escape(out, value, Part::Key);
    }
    let mut separator = ' ';
    for (field, value) in fields.iter().filter(|(_, value)| value.is_finite()) {
        out.push(separator);
        separator = ',';
        escape(out, field, Part::Key);
        out.push('=');
        write_js_number(out, *value);
    }
    if separator == ' ' {
        return false;
    }
    let _ = writeln!(out, " {time}");
    true
}

/// Where a name goes in a line: the measurement escapes commas and spaces; tag keys, tag
/// values and field keys escape equal signs too.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Measurement,
    Key,
}

impl Part {
    fn escapes(self, c: char) -> bool {
        matches!(c, ',' | ' ') || (c == '=' && self == Part::Key)
    }
}

/// Appends `text` escaped for `part` (control characters and bidirectional controls written
/// `_`). InfluxDB reads a backslash as it is (it undoes only
/// `\,`, `\=` and `\ `; the real one keeps `\\` as two): one that would stand before an
/// escaped character or at the end, where it would escape the delimiter, is written `/`.
fn escape(out: &mut String, text: &str, part: Part) {
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_none_or(|&next| part.escapes(next)) => out.push('/'),
            c if part.escapes(c) => {
                out.push('\\');
                out.push(c);
            }
            // keyNameSanitize: false lets them through; no line carries them raw (P15).
            c if crate::printable::unprintable(c) => out.push('_'),
            c => out.push(c),
        }
    }
}

/// Lines packed into requests under a byte budget.
struct Requests {
    max: usize,
    body: String,
    points: u64,
    done: Vec<Request>,
}

impl Requests {
    fn add(&mut self, line: &str) {
        if self.points > 0 && self.body.len() + line.len() > self.max {
            self.cut();
        }
        self.body.push_str(line);
        self.points += 1;
    }

    fn cut(&mut self) {
        if self.points > 0 {
            self.done.push(Request { body: Bytes::from(std::mem::take(&mut self.body)), points: self.points });
            self.points = 0;
        }
    }

    fn finish(mut self) -> Vec<Request> {
        self.cut();
        self.done
    }
}
