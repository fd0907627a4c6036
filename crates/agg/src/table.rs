//! A reader's table: what one reader received during the current interval.
//!
//! Owned by one thread; the flusher takes each interval ([`Table::take`]: a swap that leaves
//! the counter keys with the reader) and hands it to the [`crate::Aggregator`]. Keys already
//! seen are found by borrowed `&str`, so a line for a known series allocates nothing.
//!
//! A line of a type whose map stays in the nearest caches is applied as soon as it is scanned.
//! A line of a larger map waits in a run of up to 32 lines ([`crate::run`]): each line the
//! one-pass scanner reads is hashed (its key built first when it has tags) and its series'
//! slot prefetched; then the run is applied in order (lines scanned while a run waits join it,
//! whatever their map, so lines are applied in the order they came). The cache misses of a run
//! overlap, which is what high-cardinality traffic costs; below that size, the run's copies
//! and prefetches were a tenth of a line's cost for nothing.

use hashbrown::HashSet;
use proto::{Kind, Line, Metric, ParseError, Scanned, SimpleMetric, Value};

use crate::counters::{CounterDelta, ReaderCounters};
use crate::run::{Pending, Run};
use crate::series::{hash_key_with, hash_short, shared_hasher, SeriesMap};
use crate::timers::ReaderTimers;

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
    /// Datagrams the kernel dropped because the socket's receive buffer was full
    /// (`SO_RXQ_OVFL`).
    pub kernel_drops: u64,
    /// Datagrams longer than the reader's buffer, cut short.
    pub truncated_datagrams: u64,
    /// Unix seconds of the last packet, 0 if none.
    pub last_packet_unix_s: u64,
    /// The last rejected line of each reason.
    pub bad_examples: crate::bad_line::BadLines,
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
        self.kernel_drops += other.kernel_drops;
        self.truncated_datagrams += other.truncated_datagrams;
        self.last_packet_unix_s = self.last_packet_unix_s.max(other.last_packet_unix_s);
        self.bad_examples.add(&other.bad_examples);
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

    /// A signed value: applied at once after a set, else kept for the earlier value.
    fn add_delta(&mut self, delta: f64) {
        match self {
            GaugeUpdate::Set(current) => *current = apply_delta(*current, delta),
            GaugeUpdate::Deltas(deltas) => deltas.push(delta),
        }
    }
}

/// A gauge's updates within one interval, and when the last of them arrived (what a global
/// histd compares when several hosts set the same gauge: the latest wins).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GaugeInterval {
    /// The updates.
    pub update: GaugeUpdate,
    /// Unix seconds of the packet that brought the last update.
    pub last_unix_s: u64,
}

impl Default for GaugeUpdate {
    /// No update yet.
    fn default() -> Self {
        GaugeUpdate::Deltas(Vec::new())
    }
}

/// A kind's bit in a set of kinds.
#[inline(always)]
fn kind_bit(kind: Kind) -> u8 {
    1 << kind as u8
}

/// Etsy's rule: a signed value moves a gauge whose value is truthy (not 0, not NaN) and sets
/// any other, which is the same as adding it to 0. A sum past the largest double stays at it
/// (Etsy's becomes Infinity, which no later delta brings back).
pub fn apply_delta(current: f64, delta: f64) -> f64 {
    let moved = if current != 0.0 && !current.is_nan() { current + delta } else { delta };
    if moved.is_infinite() {
        f64::MAX.copysign(moved)
    } else {
        moved
    }
}

/// One reader's interval of metrics.
#[derive(Debug)]
pub struct Table {
    pub(crate) counters: ReaderCounters,
    pub(crate) timers: ReaderTimers,
    pub(crate) gauges: SeriesMap<GaugeInterval>,
    pub(crate) sets: SeriesMap<HashSet<Box<[u8]>>>,
    pub(crate) ingest: IngestCounts,
    /// Unix seconds of the packet being read (a gauge update's time).
    now_unix_s: u64,
    sanitize: bool,
    timer_sample_limit: usize,
    key_scratch: String,
    /// The keys of a run's tagged lines (kept for its capacity).
    run_keys: String,
    /// Who sends to this table (a stream connection's peer), for the bad lines' examples.
    source: Option<std::net::IpAddr>,
    /// The process's series hasher ([`crate::series::hash_key`]'s), copied once.
    hasher: hashbrown::DefaultHashBuilder,
}

impl Table {
    /// An empty table: `sanitize` applies Etsy's `keyNameSanitize` to keys; each timer keeps
    /// at most `timer_sample_limit` raw values.
    pub fn new(sanitize: bool, timer_sample_limit: usize) -> Self {
        Table {
            counters: ReaderCounters::default(),
            timers: ReaderTimers::default(),
            gauges: SeriesMap::default(),
            sets: SeriesMap::default(),
            ingest: IngestCounts::default(),
            now_unix_s: 0,
            sanitize,
            timer_sample_limit,
            key_scratch: String::new(),
            run_keys: String::new(),
            source: None,
            hasher: shared_hasher(),
        }
    }

    /// Names who sends to this table (a stream connection's peer): rejected lines' examples
    /// say it.
    pub fn set_source(&mut self, source: Option<std::net::IpAddr>) {
        self.source = source;
    }

    /// Takes what was received so far, leaving an empty interval. Counter keys stay (their
    /// values are handed over by id); `reset_counters` forgets them too.
    pub fn take(&mut self, reset_counters: bool) -> TakenInterval {
        TakenInterval {
            counters: self.counters.take(reset_counters),
            timers: self.timers.take(),
            gauges: std::mem::take(&mut self.gauges),
            sets: std::mem::take(&mut self.sets),
            ingest: std::mem::take(&mut self.ingest),
        }
    }

    /// The input counts so far.
    pub fn ingest(&self) -> &IngestCounts {
        &self.ingest
    }

    /// Parses one packet (one datagram, or the complete lines of a stream read) received at
    /// `now_unix_s` and aggregates every good value; bad values are counted by reason.
    pub fn insert_packet(&mut self, now_unix_s: u64, packet: &[u8]) {
        self.ingest.packets += 1;
        self.ingest.last_packet_unix_s = now_unix_s;
        self.now_unix_s = now_unix_s;
        let mut run = Run::new(std::mem::take(&mut self.run_keys));
        let cached = self.cached_kinds();
        for line in proto::scan_lines(packet) {
            self.ingest.lines += 1;
            match line {
                Scanned::Simple(metric) if run.lines().is_empty() && cached & kind_bit(metric.kind) != 0 => {
                    self.apply_now(&mut run, &metric);
                }
                Scanned::Simple(metric) => {
                    let built = (!metric.tags.is_empty()).then(|| run.build_key(&metric));
                    let hash = self.line_hash(&metric, run.key_of(metric.name, built));
                    self.prefetch(metric.kind, hash);
                    if let Some(earlier) = run.lines().len().checked_sub(SECOND_STAGE_LAG) {
                        // Its slot was asked for SECOND_STAGE_LAG lines ago: likely arrived.
                        let Pending { metric, hash, .. } = run.lines()[earlier];
                        self.prefetch_entry(metric.kind, hash);
                    }
                    if run.push(Pending { metric, hash, built }) {
                        self.apply(&mut run);
                    }
                }
                Scanned::Other(line) => {
                    self.apply(&mut run);
                    self.insert_line(line);
                }
            }
        }
        self.apply(&mut run);
        self.run_keys = run.into_keys();
    }

    /// The kinds ([`kind_bit`]) whose map is small enough to stay in the nearest caches: a
    /// line of one gains nothing from waiting in a run to be prefetched, and is applied at
    /// once. Asked once a packet (a bit test a line, where a `match` a line became a jump).
    fn cached_kinds(&self) -> u8 {
        let maps = [
            (!self.counters.is_large(), &[Kind::Counter][..]),
            (!self.gauges.is_large(), &[Kind::Gauge]),
            (!self.sets.is_large(), &[Kind::Set]),
            (!self.timers.is_large(), &[Kind::Timer, Kind::Histogram, Kind::Distribution]),
        ];
        let cached = maps.iter().filter(|(cached, _)| *cached).flat_map(|(_, kinds)| kinds.iter());
        cached.fold(0, |bits, &kind| bits | kind_bit(kind))
    }

    /// Aggregates a scanned line at once (the run is empty: nothing waits before it), its key
    /// built in the run's buffer when it has tags.
    #[inline]
    fn apply_now(&mut self, run: &mut Run<'_>, metric: &SimpleMetric<'_>) {
        let built = (!metric.tags.is_empty()).then(|| run.build_key(metric));
        let key = run.key_of(metric.name, built);
        self.apply_line(metric, self.line_hash(metric, key), key);
        if built.is_some() {
            run.clear();
        }
    }

    /// The hash of a scanned line's series `key`: from its short form when the scanner gave it.
    #[inline(always)]
    fn line_hash(&self, metric: &SimpleMetric<'_>, key: &str) -> u64 {
        match metric.short_key {
            Some(short) => hash_short(&self.hasher, short),
            None => hash_key_with(&self.hasher, key),
        }
    }

    /// Starts loading the slot of the series `hash` names in the map of `kind`.
    #[inline]
    fn prefetch(&self, kind: Kind, hash: u64) {
        match kind {
            Kind::Counter => self.counters.prefetch(hash),
            Kind::Gauge => self.gauges.prefetch(hash),
            Kind::Set => self.sets.prefetch(hash),
            Kind::Timer | Kind::Histogram | Kind::Distribution => self.timers.prefetch(hash),
        }
    }

    /// Second stage, once the slot of the series `hash` names has likely arrived: starts
    /// loading what the slot points at (a counter's key and value, where a timer's next value
    /// goes).
    #[inline]
    fn prefetch_entry(&self, kind: Kind, hash: u64) {
        match kind {
            Kind::Counter => self.counters.prefetch_entry(hash),
            Kind::Timer | Kind::Histogram | Kind::Distribution => self.timers.prefetch_entry(hash),
            Kind::Gauge | Kind::Set => {}
        }
    }

    /// Aggregates the lines of `run`, in order, and empties it. The second prefetch stage of
    /// all but the last [`SECOND_STAGE_LAG`] lines was issued while the run was scanned.
    #[inline]
    fn apply(&mut self, run: &mut Run<'_>) {
        let lines = run.lines();
        for pending in &lines[lines.len().saturating_sub(SECOND_STAGE_LAG)..] {
            self.prefetch_entry(pending.metric.kind, pending.hash);
        }
        for &Pending { metric, hash, built } in run.lines() {
            self.apply_line(&metric, hash, run.key_of(metric.name, built));
        }
        run.clear();
    }

    /// Aggregates one scanned line under `key` (whose hash is `hash`).
    #[inline(always)]
    fn apply_line(&mut self, metric: &SimpleMetric<'_>, hash: u64, key: &str) {
        let number = match metric.value {
            Value::Number(number) | Value::GaugeDelta(number) => number,
            Value::Member(_) => unreachable!("the scanner reads no set lines"),
        };
        match metric.kind {
            Kind::Counter => self.counters.add(hash, key, metric.short_key, unsampled(number, metric.sample_rate)),
            Kind::Gauge => {
                let gauge = self.gauges.get_or_insert_with(hash, key, GaugeInterval::default);
                gauge.last_unix_s = self.now_unix_s;
                match metric.value {
                    Value::GaugeDelta(delta) => gauge.update.add_delta(delta),
                    _ => gauge.update = GaugeUpdate::Set(number),
                }
            }
            Kind::Timer | Kind::Histogram | Kind::Distribution => {
                let (rate, limit, short) = (metric.sample_rate, self.timer_sample_limit, metric.short_key);
                self.timers.add_short(hash, key, short, number, rate, limit, metric.kind == Kind::Timer);
            }
            Kind::Set => unreachable!("the scanner reads no set lines"),
        }
    }

    /// Any line but `name:value|type`: the full parser.
    fn insert_line(&mut self, line: &[u8]) {
        match proto::parse_line(line) {
            Line::Metrics(values) => values.for_each(|value| self.accept(value, line)),
            Line::Event | Line::ServiceCheck => self.ingest.ignored_events += 1,
        }
    }

    /// Aggregates a parsed value of `line`, or counts why it was rejected (keeping the line
    /// as its reason's latest example).
    fn accept(&mut self, value: Result<Metric<'_>, ParseError>, line: &[u8]) {
        if let Err(reason) = value.and_then(|metric| self.insert(&metric)) {
            self.reject(reason, line);
        }
    }

    fn reject(&mut self, reason: ParseError, line: &[u8]) {
        self.ingest.bad_by_reason[reason.index()] += 1;
        let example = crate::bad_line::BadLine::new(line, self.source, self.now_unix_s);
        self.ingest.bad_examples.record(reason, example);
    }

    /// Counts a line rejected before parsing (`TooLong`): a line received, and a bad one;
    /// `start` is what is known of it (its first bytes, or nothing).
    pub fn count_rejected_line(&mut self, reason: ParseError, start: &[u8]) {
        self.ingest.lines += 1;
        self.reject(reason, start);
    }

    /// Records datagrams lost before parsing: cut short by the buffer, dropped by the kernel.
    pub fn count_socket_losses(&mut self, truncated: u64, kernel_drops: u64) {
        self.ingest.truncated_datagrams += truncated;
        self.ingest.kernel_drops += kernel_drops;
    }

    /// Aggregates one good value; rejects a name that sanitises to nothing.
    pub fn insert(&mut self, metric: &Metric<'_>) -> Result<(), ParseError> {
        let key = series_key(&mut self.key_scratch, metric, self.sanitize);
        if key.is_empty() {
            return Err(ParseError::EmptyName);
        }
        let hash = hash_key_with(&self.hasher, key);
        match (metric.kind, metric.value) {
            (Kind::Counter, Value::Number(number)) => {
                self.counters.add(hash, key, None, unsampled(number, metric.sample_rate));
            }
            (Kind::Timer | Kind::Histogram | Kind::Distribution, Value::Number(number)) => {
                let (rate, limit) = (metric.sample_rate, self.timer_sample_limit);
                self.timers.add(hash, key, number, rate, limit, metric.kind == Kind::Timer);
            }
            (Kind::Gauge, Value::Number(number)) => {
                let gauge = self.gauges.get_or_insert_with(hash, key, GaugeInterval::default);
                (gauge.update, gauge.last_unix_s) = (GaugeUpdate::Set(number), self.now_unix_s);
            }
            (Kind::Gauge, Value::GaugeDelta(delta)) => {
                let gauge = self.gauges.get_or_insert_with(hash, key, GaugeInterval::default);
                gauge.update.add_delta(delta);
                gauge.last_unix_s = self.now_unix_s;
            }
            (Kind::Set, Value::Member(member)) => {
                let members = self.sets.get_or_insert_with(hash, key, HashSet::new);
                if !members.contains(member) {
                    members.insert(member.into());
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Lines scanned between the prefetch of a line's slot and the prefetch of what that slot
/// points at: enough for the slot to arrive from memory, so reading it does not stall.
const SECOND_STAGE_LAG: usize = 10;

/// A reader's interval, taken by the flusher for [`crate::Aggregator::absorb_taken`].
#[derive(Debug)]
pub struct TakenInterval {
    pub(crate) counters: CounterDelta,
    pub(crate) timers: crate::timers::TimerDelta,
    pub(crate) gauges: SeriesMap<GaugeInterval>,
    pub(crate) sets: SeriesMap<HashSet<Box<[u8]>>>,
    pub(crate) ingest: IngestCounts,
}

/// A counter's `number` sent at `sample_rate`, scaled back: `number / sample_rate`, without
/// the division (a dozen cycles on the line's path) for the rate nearly every line has, 1,
/// where it changes nothing.
#[inline(always)]
fn unsampled(number: f64, sample_rate: f64) -> f64 {
    if sample_rate == 1.0 {
        number
    } else {
        number / sample_rate
    }
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
    use crate::timer_samples::TimerSamples;
    use compact_str::CompactString;

    fn table_of(packet: &str) -> Table {
        let mut table = Table::new(true, 4);
        table.insert_packet(1, packet.as_bytes());
        table
    }

    /// The interval's samples of the timer `key`, grouped as the flusher takes them.
    fn timer_of(mut table: Table, key: &str) -> TimerSamples {
        let found = table.take(false).timers.into_iter().find(|(k, _)| k == key);
        found.unwrap_or_else(|| panic!("no timer {key:?}")).1
    }

    #[test]
    fn counters_scale_by_rate() {
        let table = table_of("k:1|c:2|c:3|c|@0.5\nk:10|c|@0.1\ntg2:1|c|@0.5|#a:b");
        assert_eq!(table.counters.get("k"), Some(1.0 + 2.0 + 6.0 + 100.0));
        assert_eq!(table.counters.get("tg2;a=b"), Some(2.0));
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
            // B11: overflowing deltas stay at the largest double, and a delta brings them back.
            ("g:1e308|g\ng:+1e308|g", None, f64::MAX),
            ("g:-1e308|g\ng:-1e308|g", None, -f64::MAX),
            ("g:+1e308|g\ng:-1e308|g", Some(1e308), f64::MAX - 1e308),
        ];
        for (packet, earlier, want) in cases {
            let table = table_of(packet);
            assert_eq!(table.gauges["g"].update.apply(*earlier), *want, "packet {packet:?} on {earlier:?}");
        }
    }

    #[test]
    fn timers_keep_values_and_weighted_count() {
        let timer = timer_of(table_of("t:1|ms|@0.5\nt:2|h\nt:3|d|@0.25"), "t");
        assert_eq!(timer.values.clone().into_doubles(), [1.0, 2.0, 3.0]);
        assert_eq!(timer.count, 2.0 + 1.0 + 4.0);
        assert_eq!(timer.histogram.count(), 7, "the histogram is weighted by 1/rate");
        assert_eq!((timer.min, timer.max, timer.sum, timer.sum_squares), (1.0, 3.0, 6.0, 14.0));
    }

    #[test]
    fn timers_drop_raw_values_past_the_limit_and_keep_exact_totals() {
        let table = table_of("t:1|ms\nt:2|ms\nt:3|ms\nt:4|ms\nt:5|ms\nt:0.5|ms|@0.3\nt:0.5|ms|@0.3\nt:0.5|ms|@0.3");
        let mut timer = timer_of(table, "t");
        assert!(!timer.is_complete(), "past the limit of four");
        assert_eq!((timer.received, timer.min, timer.max, timer.sum), (8, 0.5, 5.0, 16.5));
        timer.settle();
        assert!(timer.values.is_empty());
        assert_eq!(timer.histogram.count(), 5 + 10, "three samples at rate 0.3 weigh 10 in all");
    }

    /// Binning waits for the flush while values arrive at rate 1 and are kept; whenever it
    /// happens (at the flush, past the limit, at a sample rate, when merging), the histogram is
    /// the one binning each value on arrival gives, and kept values stay in arrival order
    /// until the flush sorts them.
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
        assert_eq!(table.counters.get("ok"), Some(1.0));
    }

    fn sorted<V>(map: impl IntoIterator<Item = (CompactString, V)>) -> Vec<(CompactString, V)> {
        let mut all: Vec<_> = map.into_iter().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    #[test]
    fn the_fast_path_aggregates_as_the_full_parser_does() {
        let packets = [
            "a:1|c\na:2|c|@0.5\nb:3.5|c|@0.1\na:-1|c",
            "t:10|ms\nt:20|ms|@0.25\nh:1.5|h\nd:7|d|@0.5\nt:5|ms|@1",
            "g:5|g\ng:-2|g\ng:+1|g\ng:7|g|@0.5\nn:-3|g\nn:-4|g",
            "mixed:1|c\nmixed:2|ms\nmixed:3|g\nmixed:4|h\nx y:1|c\nz:1|c|#t:v\nu:1|s",
            "tg:1|c|#env:prod,host:h1\ntg:2|c|@0.5|#env:prod,host:h1\ntg:1|c|#host:h1,env:prod\ntg:4|ms|#a\ntg:3|g|#b:c",
            "tg:1|c|#role;x\ntg:1|c|#a:b:c\ntg:5|c|#a:b\ntg:1|c|#a b,c\ntg:2|h|#k:v|@0.5",
        ];
        // Lines of a type whose map is small are applied at once, of a large one through a
        // prefetched run (which the next small-map lines join, to keep the order): each packet
        // with no map large, one type's large, the others', and all of them.
        let warm_ups: [&[&str]; 5] = [&[], &["c"], &["ms"], &["g"], &["c", "ms", "g"]];
        for packet in packets {
            for warm_up in warm_ups {
                let mut fast = Table::new(true, 4);
                let mut full = Table::new(true, 4);
                for kind in warm_up {
                    for table in [&mut fast, &mut full] {
                        (0..8000).for_each(|id| table.insert_line(format!("warm.{id}:1|{kind}").as_bytes()));
                    }
                }
                fast.insert_packet(1, packet.as_bytes());
                full.ingest.packets += 1;
                full.ingest.last_packet_unix_s = 1;
                full.now_unix_s = 1;
                for line in proto::lines(packet.as_bytes()) {
                    full.ingest.lines += 1;
                    full.insert_line(line);
                }
                let case = format!("{packet:?} with {warm_up:?} large");
                assert_eq!(fast.ingest, full.ingest, "{case}");
                assert_eq!(fast.counters.interval_values(), full.counters.interval_values(), "{case}");
                assert_eq!(sorted(fast.timers.take()), sorted(full.timers.take()), "{case}");
                assert_eq!(sorted(fast.gauges), sorted(full.gauges), "{case}");
                assert_eq!(sorted(fast.sets), sorted(full.sets), "{case}");
            }
        }
    }

    #[test]
    fn a_large_map_is_one_that_leaves_the_nearest_caches() {
        let cached = |table: &Table, kind: Kind| table.cached_kinds() & kind_bit(kind) != 0;
        let mut table = Table::new(true, 4);
        assert!(cached(&table, Kind::Counter) && cached(&table, Kind::Timer) && cached(&table, Kind::Gauge));
        (0..8000).for_each(|id| table.insert_line(format!("warm.{id}:1|ms").as_bytes()));
        assert!(!cached(&table, Kind::Timer) && !cached(&table, Kind::Histogram));
        assert!(cached(&table, Kind::Counter) && cached(&table, Kind::Gauge));
        // What README says: up to 2,048 counter names (slots at most half full), 3,584 gauges
        // (at most 7/8 full) stay applied at once.
        let mut table = Table::new(true, 4);
        (0..2048).for_each(|id| table.insert_line(format!("c.{id}:1|c").as_bytes()));
        (0..3584).for_each(|id| table.insert_line(format!("g.{id}:1|g").as_bytes()));
        assert!(cached(&table, Kind::Counter) && cached(&table, Kind::Gauge));
        table.insert_line(b"c.2048:1|c");
        table.insert_line(b"g.3584:1|g");
        assert!(!cached(&table, Kind::Counter) && !cached(&table, Kind::Gauge));
        assert!(cached(&table, Kind::Set) && cached(&table, Kind::Distribution));
    }

    #[test]
    fn tags_in_any_order_name_one_series() {
        // The scanner's path, the full parser's (a set, a `/` to sanitise) and mixed orders.
        let table = table_of(
            "c:1|c|#b:2,a:1\nc:2|c|#a:1,b:2\nu:x|s|#b:2,a:1\nu:y|s|#a:1,b:2\nr:1|c|#z:/x,a:1\nr:1|c|#a:1,z:/x",
        );
        assert_eq!(table.counters.get("c;a=1;b=2"), Some(3.0));
        assert_eq!(table.sets["u;a=1;b=2"].len(), 2);
        assert_eq!(table.counters.get("r;a=1;z=-x"), Some(2.0));
    }

    #[test]
    fn sanitises_keys() {
        let table = table_of("a b/c!d:1|c\ntg:1|c|#env:prod,role;x\n\u{1}!:1|c");
        assert!(table.counters.get("a_b-cd").is_some());
        assert_eq!(table.ingest.bad_by_reason[ParseError::EmptyName.index()], 1);
        assert!(table.counters.get("tg;env=prod;role_x").is_some());
    }
}
