//! A reader's table: what one reader received during the current interval.
//!
//! Owned by one thread; the flusher takes each interval ([`Table::take`]: a swap that leaves
//! the counter keys with the reader) and hands it to the [`crate::Aggregator`]. Keys already
//! seen are found by borrowed `&str`, so a line for a known series allocates nothing.
//!
//! A packet is read in runs of up to 32 lines ([`crate::run`]): each line the one-pass scanner
//! reads is hashed (its key built first when it has tags) and its series' slot prefetched;
//! then the run is applied in order. The cache misses of a run overlap, which is what
//! high-cardinality traffic costs.

use hashbrown::HashSet;
use proto::{Kind, Line, Metric, ParseError, Scanned, Value};

use crate::counters::{CounterDelta, ReaderCounters};
use crate::run::{Pending, Run};
use crate::series::{hash_key, SeriesMap};
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

/// A timer's (or `h`/`d` histogram's) samples in one interval: exact count, sum, sum of
/// squares, min and max of everything received; the raw values while there are at most the
/// sample limit of them (for Etsy's exact percentiles); and a circllhist of every value,
/// weighted by its sample rate, so memory stays bounded however many samples arrive.
///
/// The reader does not bin a value it keeps at rate 1: the first `waiting` kept values wait for
/// the flush, which sorts the values anyway for Etsy's statistics and then bins them in runs,
/// one histogram insert per bin instead of one per sample (and no histogram cache misses on the
/// reader's hot path). Values past the limit or at a sample rate are binned on arrival, so the
/// reader never bins a backlog at once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimerSamples {
    /// Values received, unweighted.
    pub received: u64,
    /// The values, unweighted, in arrival order, at most the sample limit of them; all of them
    /// while [`TimerSamples::is_complete`], emptied at the flush (or a merge) otherwise.
    pub values: Vec<f64>,
    /// How many of the first `values` are not in `histogram` yet (each weighs 1).
    waiting: usize,
    /// The sample-rate-weighted count: the sum of `1 / rate`.
    pub count: f64,
    /// The sum of every value received, unweighted.
    pub sum: f64,
    /// The sum of squares of every value received, unweighted.
    pub sum_squares: f64,
    /// The smallest value received (meaningless when `received` is 0).
    pub min: f64,
    /// The largest value received (meaningless when `received` is 0).
    pub max: f64,
    weight_carry: f64,
    /// True once a value came as a statsd timer (`ms`) rather than an `h`/`d` histogram:
    /// exporters that convert units (Prometheus: seconds) convert this series.
    pub milliseconds: bool,
    /// Every value, each counted `1 / rate` times (fractions carried to the next sample),
    /// except the first `waiting` of `values` (see [`TimerSamples::settle`]). Allocated at its
    /// first bin.
    pub histogram: LazyHistogram,
}

/// A circllhist allocated when its first bin is added: most timers at rate 1 bin nothing in
/// the reader (their values wait for the flush), and a timer that received nothing in an
/// interval keeps no empty histogram (56 bytes) in the flusher.
#[derive(Debug, Clone, Default)]
pub struct LazyHistogram(Option<Box<circllhist::Histogram>>);

/// What an unallocated [`LazyHistogram`] reads as.
static EMPTY_HISTOGRAM: circllhist::Histogram = circllhist::Histogram::empty();

impl LazyHistogram {
    /// The histogram, moved out (empty when none was allocated).
    pub fn into_histogram(self) -> circllhist::Histogram {
        self.0.map_or_else(circllhist::Histogram::new, |boxed| *boxed)
    }
}

impl From<circllhist::Histogram> for LazyHistogram {
    fn from(histogram: circllhist::Histogram) -> Self {
        LazyHistogram((!histogram.is_empty()).then(|| Box::new(histogram)))
    }
}

impl std::ops::Deref for LazyHistogram {
    type Target = circllhist::Histogram;

    fn deref(&self) -> &circllhist::Histogram {
        self.0.as_deref().unwrap_or(&EMPTY_HISTOGRAM)
    }
}

impl std::ops::DerefMut for LazyHistogram {
    /// Allocates the histogram if it was not yet.
    fn deref_mut(&mut self) -> &mut circllhist::Histogram {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for LazyHistogram {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl TimerSamples {
    /// Adds one value sampled at `rate`, keeping raw values while at most `limit` arrived.
    #[inline]
    pub fn add(&mut self, value: f64, rate: f64, limit: usize) {
        let complete = self.is_complete();
        self.received += 1;
        self.count += 1.0 / rate;
        (self.min, self.max) =
            if self.received == 1 { (value, value) } else { (self.min.min(value), self.max.max(value)) };
        self.sum += value;
        self.sum_squares += value * value;
        let whole = self.carry_weight(rate);
        if complete && self.values.len() < limit {
            // A value of weight 1 can wait for the flush, which bins it at weight 1.
            let waits = whole == 1.0 && self.waiting == self.values.len();
            self.values.push(value);
            if waits {
                self.waiting += 1;
                return;
            }
        }
        if whole >= 1.0 {
            insert_exactly(&mut self.histogram, value, whole as u64);
        }
    }

    /// Adds `1 / rate` to the carried weight and takes its whole part: the weight this value
    /// is binned with (at rate 1, 1: the carry stays below 1).
    #[inline]
    fn carry_weight(&mut self, rate: f64) -> f64 {
        let next = self.weight_carry + 1.0 / rate;
        let whole = floor_of_non_negative(next);
        self.weight_carry = next - whole;
        whole
    }

    /// The samples of `values` received at rate 1, in this order, all of them waiting for the
    /// flush to bin them: what adding them one by one gives.
    pub(crate) fn waiting(values: Vec<f64>) -> TimerSamples {
        let (received, waiting, count) = (values.len() as u64, values.len(), values.len() as f64);
        let mut samples = TimerSamples { received, waiting, count, ..Default::default() };
        if let Some(&first) = values.first() {
            (samples.min, samples.max) = (first, first);
        }
        for &value in &values {
            (samples.min, samples.max) = (samples.min.min(value), samples.max.max(value));
            samples.sum += value;
            samples.sum_squares += value * value;
        }
        samples.values = values;
        samples
    }

    /// True while every value received is still kept.
    pub fn is_complete(&self) -> bool {
        self.values.len() as u64 == self.received
    }

    /// Readies the interval for its statistics: the kept values sorted as Etsy sorts them
    /// (ascending, equal values in arrival order), every value in `histogram`, and the values
    /// dropped when they are not all of them.
    pub fn settle(&mut self) {
        if !self.is_complete() {
            self.bin_waiting_sorted();
            self.values = Vec::new();
            return;
        }
        if self.waiting < self.values.len() {
            self.bin_waiting_in_order();
        }
        sort_like_etsy(&mut self.values);
        bin_sorted(&mut self.histogram, &self.values[..self.waiting]); // all of them, or none
        self.waiting = 0;
    }

    /// Bins the waiting values after sorting them (their order is lost).
    fn bin_waiting_sorted(&mut self) {
        let waiting = &mut self.values[..self.waiting];
        sort_like_etsy(waiting);
        bin_sorted(&mut self.histogram, waiting);
        self.waiting = 0;
    }

    /// Bins the waiting values one by one, keeping their order.
    fn bin_waiting_in_order(&mut self) {
        for &value in &self.values[..self.waiting] {
            insert_exactly(&mut self.histogram, value, 1);
        }
        self.waiting = 0;
    }

    /// Adds `other` after `self`; raw values stay only if both kept theirs and together they
    /// fit in `limit`.
    pub fn merge(&mut self, mut other: TimerSamples, limit: usize) {
        if other.received == 0 {
            return;
        }
        if self.received == 0 {
            *self = other;
            self.keep_values_within(limit);
            return;
        }
        let keep = self.is_complete() && other.is_complete() && self.values.len() + other.values.len() <= limit;
        if keep {
            if self.waiting < self.values.len() {
                // Waiting values must stay a prefix of the values.
                other.bin_waiting_in_order();
            }
            self.waiting += other.waiting;
            self.values.extend(other.values);
        } else {
            self.bin_waiting_sorted();
            other.bin_waiting_sorted();
            self.values = Vec::new();
        }
        self.received += other.received;
        self.count += other.count;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if !other.histogram.is_empty() {
            self.histogram.merge(&other.histogram); // allocates ours only when there is something to add
        }
        self.milliseconds |= other.milliseconds;
        self.weight_carry += other.weight_carry;
    }

    /// A timer interval from its parts, as another histd forwards it: `histogram` holds every
    /// value (weighted), `values` the raw values when all `totals.received` of them were kept,
    /// else none. `None` when the parts disagree (some values but not all, a count below
    /// zero, min above max).
    pub fn from_parts(
        totals: &crate::TimerTotals,
        values: Vec<f64>,
        histogram: circllhist::Histogram,
        milliseconds: bool,
    ) -> Option<TimerSamples> {
        let consistent = (values.is_empty() || values.len() as u64 == totals.received)
            && totals.count >= 0.0
            && (totals.received == 0 || totals.min <= totals.max)
            && values.iter().all(|v| v.is_finite());
        consistent.then(|| TimerSamples {
            received: totals.received,
            // Raw values stand for the whole interval only when there is one per value received.
            values,
            count: totals.count,
            sum: totals.sum,
            sum_squares: totals.sum_squares,
            min: totals.min,
            max: totals.max,
            milliseconds,
            histogram: histogram.into(),
            ..TimerSamples::default()
        })
    }

    fn keep_values_within(&mut self, limit: usize) {
        if self.values.len() > limit || !self.is_complete() {
            self.bin_waiting_sorted();
            self.values = Vec::new();
        }
    }
}

/// `value.floor()` for a non-negative `value`, without the library call LLVM would otherwise
/// make on every line (it computes `floor` speculatively, and without SSE4.1 that is a call):
/// below 2^52 truncation is the floor; from 2^52 on every double is an integer.
#[inline]
fn floor_of_non_negative(value: f64) -> f64 {
    if value < 4_503_599_627_370_496.0 {
        (value as u64) as f64
    } else {
        value
    }
}

/// Etsy's order (`values.sort((a, b) => a - b)`, a stable sort): ascending, equal values (0 and
/// -0) in arrival order. Values without a sign bit (no negative value, no -0: most timers)
/// are ordered by their bits, which for them is their numeric order, by an unstable sort:
/// equal values are then the same bits, so no order among them shows.
fn sort_like_etsy(values: &mut [f64]) {
    if values.iter().all(|value| value.is_sign_positive()) {
        values.sort_unstable_by_key(|value| value.to_bits());
    } else {
        values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    }
}

/// Bins sorted values at weight 1: a value equal to the one before reuses its bin, and the
/// histogram appends bins that arrive in order without a search.
fn bin_sorted(histogram: &mut circllhist::Histogram, sorted: &[f64]) {
    let mut previous: Option<(u64, circllhist::Bucket)> = None;
    for &value in sorted {
        let bucket = match previous {
            Some((bits, bucket)) if bits == value.to_bits() => bucket,
            _ => bucket_exactly(value),
        };
        previous = Some((value.to_bits(), bucket));
        histogram.insert_bucket(bucket, 1);
    }
}

/// Integral values take the histogram's exact integer path; others the f64 path.
fn insert_exactly(histogram: &mut circllhist::Histogram, value: f64, count: u64) {
    histogram.insert_bucket(bucket_exactly(value), count);
}

/// The bin of `value`: by the exact integer path when it is integral, else the f64 path.
fn bucket_exactly(value: f64) -> circllhist::Bucket {
    if value.fract() == 0.0 && value.abs() < 9.0e18 {
        circllhist::Bucket::of_int_scale(value as i64, 0)
    } else {
        circllhist::Bucket::of_f64(value)
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
        for line in proto::scan_lines(packet) {
            self.ingest.lines += 1;
            match line {
                Scanned::Simple(metric) => {
                    let built = (!metric.tags.is_empty()).then(|| run.build_key(&metric));
                    let hash = hash_key(run.key_of(metric.name, built));
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
            let key = run.key_of(metric.name, built);
            let number = match metric.value {
                Value::Number(number) | Value::GaugeDelta(number) => number,
                Value::Member(_) => unreachable!("the scanner reads no set lines"),
            };
            match metric.kind {
                Kind::Counter => self.counters.add(hash, key, number / metric.sample_rate),
                Kind::Gauge => {
                    let gauge = self.gauges.get_or_insert_with(hash, key, GaugeInterval::default);
                    gauge.last_unix_s = self.now_unix_s;
                    match metric.value {
                        Value::GaugeDelta(delta) => gauge.update.add_delta(delta),
                        _ => gauge.update = GaugeUpdate::Set(number),
                    }
                }
                Kind::Timer | Kind::Histogram | Kind::Distribution => {
                    let (rate, limit) = (metric.sample_rate, self.timer_sample_limit);
                    self.timers.add(hash, key, number, rate, limit, metric.kind == Kind::Timer);
                }
                Kind::Set => unreachable!("the scanner reads no set lines"),
            }
        }
        run.clear();
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
        let hash = hash_key(key);
        match (metric.kind, metric.value) {
            (Kind::Counter, Value::Number(number)) => {
                self.counters.add(hash, key, number / metric.sample_rate);
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
    fn values_sort_as_etsys_stable_sort_does() {
        let spread: Vec<f64> = (0..500u64).map(|i| (i.wrapping_mul(2_654_435_761) % 997) as f64 / 4.0).collect();
        let cases: &[&[f64]] = &[
            &[3.0, 1.0, 2.0, 1.0],
            &[0.5, 1e-310, 0.0, 5e-324, 1e300, 7.25],
            &[2.0, -0.0, 0.0, -0.0, -1.0, 0.0],
            &[0.0, -0.0, 1.0],
            &[-5.5, 3.0, -5.5, 0.0],
            &spread,
        ];
        for case in cases {
            let mut got = case.to_vec();
            sort_like_etsy(&mut got);
            let mut want = case.to_vec();
            want.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let bits = |values: &[f64]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{case:?}");
        }
    }

    #[test]
    fn sorted_values_bin_as_one_insert_per_value_does() {
        let many: Vec<f64> = (0..3000u64).map(|i| (i.wrapping_mul(2_654_435_761) % 1300) as f64 / 7.0).collect();
        let cases: &[&[f64]] = &[&[], &[5.0], &[1.0, 1.0, 1.0], &[-3.5, -0.0, 0.0, 0.0, 0.01, 1.0, 1.04, 1.05], &many];
        for case in cases {
            let mut sorted = case.to_vec();
            sort_like_etsy(&mut sorted);
            let mut want = circllhist::Histogram::new();
            sorted.iter().for_each(|&value| insert_exactly(&mut want, value, 1));
            let mut got = circllhist::Histogram::new();
            bin_sorted(&mut got, &sorted);
            assert_eq!(got, want, "{case:?}");
        }
    }

    #[test]
    fn floors_non_negative_numbers_like_floor() {
        for value in [0.0, 0.3, 1.0, 1.9999999999999998, 2.5, 1e15 + 0.5, 4503599627370495.5, 4503599627370496.0, 1e300]
        {
            assert_eq!(floor_of_non_negative(value), value.floor(), "{value:e}");
        }
    }

    #[test]
    fn timers_keep_values_and_weighted_count() {
        let timer = timer_of(table_of("t:1|ms|@0.5\nt:2|h\nt:3|d|@0.25"), "t");
        assert_eq!(timer.values, [1.0, 2.0, 3.0]);
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
    fn binning_late_gives_the_histogram_binning_on_arrival_gives() {
        let values = |seed: u64, n: usize| -> Vec<f64> {
            (0..n as u64).map(|i| ((seed + i) * 7919 % 5003) as f64 / if i % 3 == 0 { 10.0 } else { 1.0 }).collect()
        };
        // (first reader's values, second's, limit, rate of one value of each: (index, rate))
        let cases = [
            (values(1, 50), values(2, 40), 100, None),
            (values(3, 50), values(4, 60), 100, None),
            (values(5, 150), values(6, 10), 100, None),
            (values(7, 30), values(8, 30), 100, Some((29, 0.5))),
            (values(7, 30), values(8, 30), 100, Some((0, 0.25))),
            (values(13, 30), values(14, 30), 100, Some((10, 0.5))),
            (values(9, 0), values(10, 30), 100, None),
            (values(11, 30), values(12, 0), 10, None),
            (values(15, 8), values(16, 8), 12, Some((3, 0.5))),
        ];
        for (index, (first, second, limit, rated)) in cases.into_iter().enumerate() {
            let mut want = circllhist::Histogram::new();
            let mut fed = |samples: &mut TimerSamples, values: &[f64]| {
                for (i, &value) in values.iter().enumerate() {
                    let rate = rated.filter(|(at, _)| *at == i).map_or(1.0, |(_, rate)| rate);
                    samples.add(value, rate, limit);
                    insert_exactly(&mut want, value, (1.0 / rate) as u64);
                }
            };
            let (mut a, mut b) = (TimerSamples::default(), TimerSamples::default());
            fed(&mut a, &first);
            fed(&mut b, &second);
            let arrival: Vec<f64> = first.iter().chain(&second).copied().collect();
            a.merge(b, limit);
            assert_eq!(a.received as usize, arrival.len(), "case {index}");
            if a.is_complete() {
                assert_eq!(a.values, arrival, "case {index}: arrival order until the flush");
            }
            a.settle();
            assert_eq!(*a.histogram, want, "case {index}");
            if a.is_complete() {
                let mut sorted = arrival.clone();
                sorted.sort_by(f64::total_cmp);
                assert_eq!(a.values, sorted, "case {index}");
            } else {
                assert!(a.values.is_empty(), "case {index}");
            }
        }
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
        for packet in packets {
            let mut fast = Table::new(true, 4);
            fast.insert_packet(1, packet.as_bytes());
            let mut full = Table::new(true, 4);
            full.ingest.packets += 1;
            full.ingest.last_packet_unix_s = 1;
            full.now_unix_s = 1;
            for line in proto::lines(packet.as_bytes()) {
                full.ingest.lines += 1;
                full.insert_line(line);
            }
            assert_eq!(fast.ingest, full.ingest, "{packet:?}");
            assert_eq!(fast.counters.interval_values(), full.counters.interval_values(), "{packet:?}");
            assert_eq!(sorted(fast.timers.take()), sorted(full.timers.take()), "{packet:?}");
            assert_eq!(sorted(fast.gauges), sorted(full.gauges), "{packet:?}");
            assert_eq!(sorted(fast.sets), sorted(full.sets), "{packet:?}");
        }
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
