//! A flush as the text appended to the file, pure (the flush's time is in the snapshot).
//!
//! `statsd` (Net::Statsd::Server's File backend, one line per value, tab-separated):
//!
//! ```text
//! c<TAB>api.hits<TAB>42
//! g<TAB>heap<TAB>1024.5
//! s<TAB>users<TAB>ann;bob
//! t<TAB>api.latency.count<TAB>3
//! t<TAB>api.latency.mean_90<TAB>120.5
//! ```
//!
//! Numbers are written as Etsy writes them to Graphite (a counter keeps its fraction where
//! sample rates give one; Net::Statsd::Server printed `%d`). A set whose members are not kept
//! (past `maxSetMembers`, a HyperLogLog) is written as `#<estimated count>`. histd's own
//! series (under `prefixStats`) are left out, as Net::Statsd::Server left out `statsd.*`.
//!
//! `jsonl`: one object per series, every series of the flush:
//!
//! ```text
//! {"time":1700000000,"type":"counter","key":"hits;route=a","name":"hits","tags":{"route":"a"},"count":3,"rate":0.3}
//! {"time":1700000000,"type":"timer","key":"lat","name":"lat","tags":{},"unit":"ms","count":2,"sum":300,"min":100,"max":200,"stats":{"mean":150,...},"circllhist":"AAIKAQAA..."}
//! ```

use std::fmt::Write as _;

use agg::jsfmt::write_js_number;
use agg::{Distinct, Snapshot};
use serde_json::{json, Map, Value};

use super::config::FileFormat;

/// The text of one flush in `format`, and the series it holds.
pub fn encode(snapshot: &Snapshot, format: FileFormat, prefix_stats: &str) -> (String, u64) {
    match format {
        FileFormat::Statsd => statsd(snapshot, prefix_stats),
        FileFormat::Jsonl => jsonl(snapshot),
    }
}

/// Whether `key` is one of histd's own series (`<prefixStats>.…`).
fn own(key: &str, prefix_stats: &str) -> bool {
    key.strip_prefix(prefix_stats).is_some_and(|rest| rest.starts_with('.'))
}

fn statsd(snapshot: &Snapshot, prefix_stats: &str) -> (String, u64) {
    let mut out = String::new();
    let mut series = 0;
    // A name's control characters (keyNameSanitize: false) are written `_`: a tab or a
    // newline in one would add a field or a line (P15).
    let line = |out: &mut String, kind: char, name: &str, value: &dyn Fn(&mut String)| {
        out.push(kind);
        out.push('\t');
        crate::printable::push_replaced(out, name);
        out.push('\t');
        value(out);
        out.push('\n');
    };
    for counter in snapshot.counters.iter().filter(|c| !own(c.key, prefix_stats)) {
        line(&mut out, 'c', counter.key, &|out| write_js_number(out, counter.count));
        series += 1;
    }
    for gauge in snapshot.gauges.iter().filter(|g| !own(&g.key, prefix_stats)) {
        line(&mut out, 'g', &gauge.key, &|out| write_js_number(out, gauge.value));
        series += 1;
    }
    for set in snapshot.sets.iter().filter(|s| !own(&s.key, prefix_stats)) {
        line(&mut out, 's', &set.key, &|out| match &set.distinct {
            Some(Distinct::Members(members)) => {
                let mut sorted: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
                sorted.sort_unstable();
                for (index, member) in sorted.into_iter().enumerate() {
                    if index > 0 {
                        out.push(';');
                    }
                    crate::printable::push_replaced(out, &String::from_utf8_lossy(member));
                }
            }
            _ => {
                let _ = write!(out, "#{}", set.count);
            }
        });
        series += 1;
    }
    let names = snapshot.stat_names();
    let mut name = String::new();
    for timer in snapshot.timers.iter().filter(|t| !own(&t.key, prefix_stats)) {
        for (stat, value) in &timer.stats {
            name.clear();
            let _ = write!(name, "{}.{}", timer.key, names.of(stat));
            line(&mut out, 't', &name, &|out| write_js_number(out, value));
        }
        if let Some(bins) = &timer.bins {
            let rule = &snapshot.histograms[bins.rule];
            for (index, &count) in bins.counts.iter().enumerate() {
                name.clear();
                let _ = write!(name, "{}.histogram.{}", timer.key, rule.bin_name(index));
                line(&mut out, 't', &name, &|out| {
                    let _ = write!(out, "{count}");
                });
            }
        }
        series += 1;
    }
    (out, series)
}

/// A series' common fields: the flush time, its type, key, name and tags.
fn head(time: u64, kind: &str, key: &str) -> Map<String, Value> {
    let (name, tags) = proto::key::split_series_key(key);
    let tags: Map<String, Value> = tags.map(|(k, v)| (k.to_string(), Value::from(v))).collect();
    let mut object = Map::new();
    object.insert("time".into(), time.into());
    object.insert("type".into(), kind.into());
    object.insert("key".into(), key.into());
    object.insert("name".into(), name.into());
    object.insert("tags".into(), Value::Object(tags));
    object
}

/// A number, or null when it is not finite (JSON has no NaN).
fn number(value: f64) -> Value {
    serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
}

fn jsonl(snapshot: &Snapshot) -> (String, u64) {
    let time = snapshot.timestamp;
    let mut out = String::new();
    let mut series = 0;
    let mut push = |out: &mut String, object: Map<String, Value>| {
        out.push_str(&Value::Object(object).to_string());
        out.push('\n');
        series += 1;
    };
    for counter in &snapshot.counters {
        let mut object = head(time, "counter", counter.key);
        object.insert("count".into(), number(counter.count));
        object.insert("rate".into(), number(counter.rate));
        push(&mut out, object);
    }
    for gauge in &snapshot.gauges {
        let mut object = head(time, "gauge", &gauge.key);
        object.insert("value".into(), number(gauge.value));
        push(&mut out, object);
    }
    for set in &snapshot.sets {
        let mut object = head(time, "set", &set.key);
        object.insert("count".into(), set.count.into());
        object.insert("estimated".into(), set.estimated.into());
        if let Some(Distinct::Members(members)) = &set.distinct {
            let mut sorted: Vec<String> = members.iter().map(|m| String::from_utf8_lossy(m).into_owned()).collect();
            sorted.sort_unstable();
            object.insert("members".into(), sorted.into());
        }
        push(&mut out, object);
    }
    let names = snapshot.stat_names();
    for timer in &snapshot.timers {
        let mut object = head(time, "timer", &timer.key);
        object.insert("unit".into(), if timer.milliseconds { "ms".into() } else { Value::Null });
        let totals = &timer.totals;
        object.insert("count".into(), number(totals.count));
        object.insert("sum".into(), number(totals.sum));
        object.insert("min".into(), number(totals.min));
        object.insert("max".into(), number(totals.max));
        let stats: Map<String, Value> =
            timer.stats.iter().map(|(stat, value)| (names.of(stat).to_string(), number(value))).collect();
        object.insert("stats".into(), Value::Object(stats));
        if let Some(bins) = &timer.bins {
            let rule = &snapshot.histograms[bins.rule];
            let counts: Map<String, Value> =
                bins.counts.iter().enumerate().map(|(index, &count)| (rule.bin_name(index), json!(count))).collect();
            object.insert("histogram".into(), Value::Object(counts));
        }
        object.insert("circllhist".into(), timer.histogram.to_base64().into());
        push(&mut out, object);
    }
    (out, series)
}
