//! A flush as Circonus HTTPTrap JSON or IRONdb `/raw` records, pure.
//!
//! ```text
//! HTTPTrap: {"api.hits|ST[route:login]":{"_type":"n","_value":3,"_ts":1700000000000},
//!            "api.latency":{"_type":"h","_value":"AAIKAQAA...","_ts":1700000000000}}
//! IRONdb:   M<TAB>1700000000.000<TAB>web1`histd`c_1_1::histd`<uuid><TAB>api.hits|ST[route:login]<TAB>n<TAB>3
//!           H1<TAB>1700000000.000<TAB>web1`histd`c_1_1::histd`<uuid><TAB>api.latency<TAB>AAIKAQAA...
//! ```
//!
//! Counters are the interval's total of `value / rate` (`n`), gauges their value (`n`), sets
//! their distinct members (`L`), timers and `h`/`d` histograms the interval's circllhist, the
//! bytes histd keeps and stores (`h`: one period, not cumulative). A timer without values this
//! interval is left out (an empty period). A series' tags become stream tags, base64-wrapped
//! (`b"…"`) when they hold characters Circonus does not take as they are.

use std::fmt::Write as _;

use agg::jsfmt::write_js_number;
use agg::Snapshot;
use bytes::Bytes;

use super::config::CirconusFormat;
use crate::sinks::delivery::Request;

/// One measurement of a flush.
enum Value<'a> {
    /// A double (`n`).
    Number(f64),
    /// A count (`L`).
    Count(u64),
    /// A serialized circllhist, base64.
    Histogram(&'a circllhist::Histogram),
}

/// The requests of a flush, each at most `max_request_bytes` (a single record larger than
/// that goes alone).
pub fn encode(snapshot: &Snapshot, format: &CirconusFormat, max_request_bytes: usize) -> Vec<Request> {
    let mut requests = Requests { format, max_request_bytes, body: String::new(), points: 0, done: Vec::new() };
    let time_ms = snapshot.flushed_at_ms;
    let mut record = String::new();
    let mut each = |key: &str, value: Value<'_>| {
        record.clear();
        write_record(&mut record, format, time_ms, key, &value);
        requests.add(&record);
    };
    for counter in &snapshot.counters {
        each(counter.key, Value::Number(counter.count));
    }
    for gauge in snapshot.gauges.iter().filter(|gauge| gauge.value.is_finite()) {
        each(&gauge.key, Value::Number(gauge.value));
    }
    for set in &snapshot.sets {
        each(&set.key, Value::Count(set.count));
    }
    for timer in snapshot.timers.iter().filter(|timer| !timer.histogram.is_empty()) {
        each(&timer.key, Value::Histogram(&timer.histogram));
    }
    requests.finish()
}

impl Value<'_> {
    /// The type letter Circonus gives it (`n`, `L`, `h`).
    fn kind(&self) -> &'static str {
        match self {
            Value::Number(_) => "n",
            Value::Count(_) => "L",
            Value::Histogram(_) => "h",
        }
    }

    /// Appends the value as text (a histogram as base64, in quotes when `quoted`).
    fn write(&self, out: &mut String, quoted: bool) {
        match self {
            Value::Number(number) => write_js_number(out, *number),
            Value::Count(count) => {
                let _ = write!(out, "{count}");
            }
            Value::Histogram(histogram) if quoted => {
                let _ = write!(out, "\"{}\"", histogram.to_base64());
            }
            Value::Histogram(histogram) => out.push_str(&histogram.to_base64()),
        }
    }
}

/// Appends one record: a JSON member (`"name":{...}`) or a TSV line.
fn write_record(out: &mut String, format: &CirconusFormat, time_ms: u64, key: &str, value: &Value<'_>) {
    let mut name = String::with_capacity(key.len() + 16);
    circonus_name(&mut name, key);
    match format {
        CirconusFormat::HttpTrap => {
            let _ = write!(out, "{}:{{\"_type\":\"{}\",\"_value\":", serde_json::Value::from(name), value.kind());
            value.write(out, true);
            let _ = write!(out, ",\"_ts\":{time_ms}}}");
        }
        CirconusFormat::Irondb { check } => {
            let stamp = format!("{}.{:03}", time_ms / 1000, time_ms % 1000);
            match value {
                Value::Histogram(_) => {
                    let _ = write!(out, "H1\t{stamp}\t{check}\t{name}\t");
                }
                _ => {
                    let _ = write!(out, "M\t{stamp}\t{check}\t{name}\t{}\t", value.kind());
                }
            }
            value.write(out, false);
            out.push('\n');
        }
    }
}

/// A series key as a Circonus metric name: `name`, then its tags as `|ST[cat:value,...]`.
pub fn circonus_name(out: &mut String, key: &str) {
    let (name, tags) = proto::key::split_series_key(key);
    out.push_str(name);
    let mut first = true;
    for (category, value) in tags {
        out.push_str(if first { "|ST[" } else { "," });
        first = false;
        tag_part(out, category, false);
        out.push(':');
        tag_part(out, value, true);
    }
    if !first {
        out.push(']');
    }
}

/// A tag category or value as it is when Circonus takes its characters (a value may also
/// hold `:` and `=`), else base64-wrapped as `b"…"`.
fn tag_part(out: &mut String, text: &str, is_value: bool) {
    let plain =
        |c: char| c.is_ascii_alphanumeric() || "`+!@#$%^&\"'/?._-".contains(c) || (is_value && (c == ':' || c == '='));
    if !text.is_empty() && text.chars().all(plain) {
        out.push_str(text);
    } else {
        let _ = write!(out, "b\"{}\"", circllhist::encode_base64(text.as_bytes()));
    }
}

/// Records packed into requests under a byte budget.
struct Requests<'a> {
    format: &'a CirconusFormat,
    max_request_bytes: usize,
    body: String,
    points: u64,
    done: Vec<Request>,
}

impl Requests<'_> {
    fn add(&mut self, record: &str) {
        if self.points > 0 && self.body.len() + record.len() + 2 > self.max_request_bytes {
            self.cut();
        }
        match self.format {
            CirconusFormat::HttpTrap => self.body.push(if self.points == 0 { '{' } else { ',' }),
            CirconusFormat::Irondb { .. } => {}
        }
        self.body.push_str(record);
        self.points += 1;
    }

    fn cut(&mut self) {
        if self.points == 0 {
            return;
        }
        if *self.format == CirconusFormat::HttpTrap {
            self.body.push('}');
        }
        let body = Bytes::from(std::mem::take(&mut self.body));
        self.done.push(Request { body, points: self.points });
        self.points = 0;
    }

    fn finish(mut self) -> Vec<Request> {
        self.cut();
        self.done
    }
}
