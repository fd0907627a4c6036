//! A reader's table: what one reader received during the current interval.
//!
//! Owned by one thread; the flusher takes it whole ([`Table::take`]) and hands it to the
//! [`crate::Aggregator`]. Keys already seen are found by borrowed `&str`, so a line for a known
//! series allocates nothing.

use hashbrown::{HashMap, HashSet};
use proto::{Kind, Line, Metric, ParseError, Value};

/// A map from series key to state.
pub(crate) type KeyMap<V> = HashMap<Box<str>, V>;

/// Counts about the input itself, for the internal metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IngestCounts {
    /// Packets (datagrams, or stream reads holding at least one line).
    pub packets: u64,
    /// Non-empty lines, good or bad (Etsy's `metrics_received`).
    pub lines: u64,
    /// Rejected values (Etsy's `bad_lines_seen`), by reason in [`ParseError::ALL`] order.
    pub bad_by_reason: [u64; ParseError::ALL.len()],
    /// DogStatsD events and service checks: recognised and not aggregated.
    pub ignored_events: u64,
    /// Unix seconds of the last packet, 0 if none.
    pub last_packet_unix_s: u64,
}

impl IngestCounts {
    /// Rejected values, all reasons together.
    pub fn bad_lines(&self) -> u64 {
        self.bad_by_reason.iter().sum()
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &IngestCounts) {
        self.packets += other.packets;
        self.lines += other.lines;
        for (total, more) in self.bad_by_reason.iter_mut().zip(other.bad_by_reason) {
            *total += more;
        }
        self.ignored_events += other.ignored_events;
        self.last_packet_unix_s = self.last_packet_unix_s.max(other.last_packet_unix_s);
    }
}

/// A gauge's updates within one interval, to apply to its value from earlier intervals.
#[derive(Debug, Clone, PartialEq)]
pub enum GaugeUpdate {
    /// Set to this value (later deltas already applied to it).
    Set(f64),
    /// Only deltas arrived, in order; they apply to the earlier value.
    Deltas(Vec<f64>),
}

impl GaugeUpdate {
    /// The gauge after these updates, given its earlier value.
    pub fn apply(&self, earlier: Option<f64>) -> f64 {
        match self {
            GaugeUpdate::Set(value) => *value,
            GaugeUpdate::Deltas(deltas) => deltas.iter().fold(earlier.unwrap_or(0.0), |v, &d| apply_delta(v, d)),
        }
    }

    fn push(&mut self, value: Value<'_>) {
        match (self, value) {
            (this, Value::Number(number)) => *this = GaugeUpdate::Set(number),
            (GaugeUpdate::Set(current), Value::GaugeDelta(delta)) => *current = apply_delta(*current, delta),
            (GaugeUpdate::Deltas(deltas), Value::GaugeDelta(delta)) => deltas.push(delta),
            (_, Value::Member(_)) => {}
        }
    }

    fn from_value(value: Value<'_>) -> Self {
        match value {
            Value::GaugeDelta(delta) => GaugeUpdate::Deltas(vec![delta]),
            Value::Number(number) => GaugeUpdate::Set(number),
            Value::Member(_) => GaugeUpdate::Deltas(Vec::new()),
        }
    }
}

/// Etsy's rule: a signed value moves a gauge whose value is truthy (not 0, not NaN) and sets
/// any other, which is the same as adding it to 0.
pub fn apply_delta(current: f64, delta: f64) -> f64 {
    if current != 0.0 && !current.is_nan() {
        current + delta
    } else {
        delta
    }
}

/// A timer's (or histogram's) samples in one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimerSamples {
    /// The values, unweighted, in arrival order.
    pub values: Vec<f64>,
    /// The sample-rate-weighted count: the sum of `1 / rate`.
    pub count: f64,
}

impl TimerSamples {
    /// Adds `other` after `self`.
    pub fn merge(&mut self, other: TimerSamples) {
        self.values.extend(other.values);
        self.count += other.count;
    }
}

/// One reader's interval of metrics.
#[derive(Debug, Default)]
pub struct Table {
    pub(crate) counters: KeyMap<f64>,
    pub(crate) timers: KeyMap<TimerSamples>,
    pub(crate) gauges: KeyMap<GaugeUpdate>,
    pub(crate) sets: KeyMap<HashSet<Box<[u8]>>>,
    pub(crate) ingest: IngestCounts,
    sanitize: bool,
    key_scratch: String,
}

impl Table {
    /// An empty table; `sanitize` applies Etsy's `keyNameSanitize` to keys.
    pub fn new(sanitize: bool) -> Self {
        Table { sanitize, ..Table::default() }
    }

    /// Takes what was received so far, leaving an empty table with the same settings.
    pub fn take(&mut self) -> Table {
        let empty = Table::new(self.sanitize);
        std::mem::replace(self, empty)
    }

    /// The input counts so far.
    pub fn ingest(&self) -> &IngestCounts {
        &self.ingest
    }

    /// True when nothing at all was received.
    pub fn is_empty(&self) -> bool {
        self.ingest.packets == 0
    }

    /// Parses one packet (one datagram, or the complete lines of a stream read) received at
    /// `now_unix_s` and aggregates every good value; bad values are counted by reason.
    pub fn insert_packet(&mut self, now_unix_s: u64, packet: &[u8]) {
        self.ingest.packets += 1;
        self.ingest.last_packet_unix_s = now_unix_s;
        for line in proto::lines(packet) {
            self.ingest.lines += 1;
            match proto::parse_line(line) {
                Line::Metrics(values) => {
                    for value in values {
                        match value {
                            Ok(metric) => {
                                if let Err(reason) = self.insert(&metric) {
                                    self.ingest.bad_by_reason[reason.index()] += 1;
                                }
                            }
                            Err(reason) => self.ingest.bad_by_reason[reason.index()] += 1,
                        }
                    }
                }
                Line::Event | Line::ServiceCheck => self.ingest.ignored_events += 1,
            }
        }
    }

    /// Aggregates one good value; rejects a name that sanitises to nothing.
    pub fn insert(&mut self, metric: &Metric<'_>) -> Result<(), ParseError> {
        let key = series_key(&mut self.key_scratch, metric, self.sanitize);
        if key.is_empty() {
            return Err(ParseError::EmptyName);
        }
        match (metric.kind, metric.value) {
            (Kind::Counter, Value::Number(number)) => {
                *entry(&mut self.counters, key, || 0.0) += number / metric.sample_rate;
            }
            (Kind::Timer | Kind::Histogram | Kind::Distribution, Value::Number(number)) => {
                let samples = entry(&mut self.timers, key, TimerSamples::default);
                samples.values.push(number);
                samples.count += 1.0 / metric.sample_rate;
            }
            (Kind::Gauge, value) => match self.gauges.get_mut(key) {
                Some(update) => update.push(value),
                None => {
                    self.gauges.insert(key.into(), GaugeUpdate::from_value(value));
                }
            },
            (Kind::Set, Value::Member(member)) => {
                let members = entry(&mut self.sets, key, HashSet::new);
                if !members.contains(member) {
                    members.insert(member.into());
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The value for `key`, inserted by `make` if absent; the key is copied only then.
fn entry<'m, V>(map: &'m mut KeyMap<V>, key: &str, make: impl FnOnce() -> V) -> &'m mut V {
    map.entry_ref(key).or_insert_with(make)
}

/// The metric's series key, borrowed from the line when it needs no change.
fn series_key<'a>(scratch: &'a mut String, metric: &Metric<'a>, sanitize: bool) -> &'a str {
    if metric.tags.is_empty() && sanitize {
        if let Some(clean) = proto::key::already_clean(metric.name) {
            return clean;
        }
    }
    scratch.clear();
    proto::key::push_series_key(scratch, metric.name, metric.tags, sanitize);
    scratch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(packet: &str) -> Table {
        let mut table = Table::new(true);
        table.insert_packet(1, packet.as_bytes());
        table
    }

    #[test]
    fn counters_scale_by_rate() {
        let table = table_of("k:1|c:2|c:3|c|@0.5\nk:10|c|@0.1\ntg2:1|c|@0.5|#a:b");
        assert_eq!(table.counters["k"], 1.0 + 2.0 + 6.0 + 100.0);
        assert_eq!(table.counters["tg2;a=b"], 2.0);
    }

    #[test]
    fn gauges_follow_etsy_delta_rules() {
        let cases: &[(&str, Option<f64>, f64)] = &[
            ("g:10|g\ng:+5|g\ng:-3|g", None, 12.0),
            ("g:-5|g", None, -5.0),
            ("g:-5|g", Some(0.0), -5.0),
            ("g:+2|g", Some(7.0), 9.0),
            ("g:0|g\ng:-7|g", Some(7.0), -7.0),
            ("g:+1|g\ng:+1|g", Some(1.0), 3.0),
            ("g:Infinity|g\ng:-Infinity|g\ng:+5|g", None, 5.0),
        ];
        for (packet, earlier, want) in cases {
            let table = table_of(packet);
            assert_eq!(table.gauges["g"].apply(*earlier), *want, "packet {packet:?} on {earlier:?}");
        }
    }

    #[test]
    fn timers_keep_values_and_weighted_count() {
        let table = table_of("t:1|ms|@0.5\nt:2|h\nt:3|d|@0.25");
        assert_eq!(table.timers["t"].values, [1.0, 2.0, 3.0]);
        assert_eq!(table.timers["t"].count, 2.0 + 1.0 + 4.0);
    }

    #[test]
    fn sets_count_distinct_members_as_bytes() {
        let table = table_of("u:1|s\nu:01|s\nu:1|s\nu:|s");
        assert_eq!(table.sets["u"].len(), 3);
    }

    #[test]
    fn counts_bad_lines_by_reason_and_keeps_the_rest() {
        let table = table_of("foo\nfoo:abc|c\nok:1|c\nk:1:2|zz\n_e{1,1}:a|b\n\n");
        assert_eq!(table.ingest.lines, 5);
        assert_eq!(table.ingest.bad_lines(), 4);
        assert_eq!(table.ingest.bad_by_reason[ParseError::UnknownType.index()], 2);
        assert_eq!(table.ingest.ignored_events, 1);
        assert_eq!(table.counters["ok"], 1.0);
    }

    #[test]
    fn sanitises_keys() {
        let table = table_of("a b/c!d:1|c\ntg:1|c|#env:prod,role;x\n\u{1}!:1|c");
        assert!(table.counters.contains_key("a_b-cd"));
        assert_eq!(table.ingest.bad_by_reason[ParseError::EmptyName.index()], 1);
        assert!(table.counters.contains_key("tg;env=prod;role_x"));
    }
}
