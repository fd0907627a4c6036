//! A reader's timers (and `h`/`d` histograms): keys numbered like the counters' and kept across
//! intervals, values appended to a short log and moved to their timers' lists in batches.
//!
//! A timer line touches three things: its key's slot in the index (a `u32`), its id's state in
//! an array of `u64` (values received, whether one came as `ms`, its place in this interval's
//! lists) and the end of the log, where its place and value are appended.
//! Every [`LOG_VALUES`] values the reader moves the log's values to the ends of their timers'
//! lists in one pass. Adding each value to its timer's list as it arrived cost two or three
//! cache misses a line at 100k timer names (a 128-byte state and the end of a list, among
//! 100k of each), interleaved with the scan of the next lines; the pass does nothing but
//! those stores, from a log still in cache (what they cost is measured in BENCHMARKS.md).
//!
//! Values within `timerSampleLimit` go to the lists, whatever their sample rate (a rate is kept
//! beside its value's place, rare enough to cost the common line nothing); a value past the
//! limit is counted on arrival in its timer's bins, a decade's counts side by side
//! (`PastLimit`), so memory stays bounded by the limit however many values arrive. Taking an
//! interval moves the lists out ([`TimerDelta`]); the flusher then makes each timer's
//! samples, the ones adding its values one by one in arrival order gives
//! ([`TimerSamples::add`], tested below).
//!
//! Like the counters' readers ([`crate::counters`]), a reader whose keys outnumber twice those
//! it saw in the interval plus [`CHURN_SLACK`] starts over, so names that churn cannot grow
//! memory without bound.

use compact_str::CompactString;
use hashbrown::HashMap;

use crate::counters::CHURN_SLACK;
use crate::key_index::{KeyIndex, KeyList};
use crate::timer_samples::{PastLimit, TimerSamples};
use crate::values::Values;

/// A state's count of values received this interval (saturating: past `timerSampleLimit`
/// only "past it" matters, and the limit is at most 1e9).
const RECEIVED: u32 = (1 << 30) - 1;
/// A state's flag: a value came as a statsd timer (`ms`), not an `h`/`d` histogram.
const MILLISECONDS: u32 = 1 << 31;
/// Values logged before they move to their lists: 384 KiB of log, which stays in the core's
/// cache between its writes and the pass that reads it.
const LOG_VALUES: usize = 1 << 15;
/// How many values ahead of the one being moved the move prefetches where it goes.
const PREFETCH_AHEAD: usize = 8;
/// The most values reserved at a timer's first value of an interval (it reserves as many as
/// it received in its last interval, up to this): enough for most timers at once; a busier
/// one grows from there, so a reader does not hold a whole interval's room from its start.
const RESERVED_VALUES_AT_MOST: u32 = 1024;

/// The values to reserve for a timer that had `expected` values in its last interval: those
/// and an eighth more (and 2), so that a timer receiving a few more than last time does not
/// double its list (a list one value past its room holds twice the room: half the reader's
/// values memory idle, at a steady rate), up to [`RESERVED_VALUES_AT_MOST`]; none for a timer
/// new or idle last time.
fn room_for(expected: u32) -> u32 {
    match expected {
        0 => 0,
        _ => (expected + expected / 8 + 2).min(RESERVED_VALUES_AT_MOST),
    }
}

/// A reader's timers: every key seen (until it starts over), this interval's values of each.
#[derive(Debug, Default)]
pub struct ReaderTimers {
    index: KeyIndex,
    /// By id: values received this interval and whether one came as `ms` (low half), its
    /// place in this interval's lists (high half; meaningful once a value was received).
    states: Vec<u64>,
    /// By id: values received in the last interval that had any.
    expected: Vec<u32>,
    interval: Interval,
    log: ValueLog,
}

/// One interval's values, by place: timers in order of their first value.
#[derive(Debug, Default)]
struct Interval {
    /// The id at each place.
    ids: Vec<u32>,
    /// Each place's values moved out of the log, in arrival order (2 bytes a value while
    /// they are whole milliseconds, 4 while whole thousandths).
    lists: Vec<Values>,
    /// The rates other than 1 of listed values, by place: (index in the list, rate), in order.
    rated: HashMap<u32, Vec<(usize, f64)>>,
    /// Values past the limit, counted on arrival, by place (as long as the last place that had
    /// one): found by index for every value past the limit, a third of a 1k-timer load's at
    /// 6M lines/s.
    past_limit: Vec<Option<Box<PastLimit>>>,
}

impl Interval {
    /// The values past the limit of the timer at `place`, made at its first.
    fn past_limit_of(&mut self, place: u32) -> &mut PastLimit {
        let place = place as usize;
        if place >= self.past_limit.len() {
            self.past_limit.resize_with(place + 1, || None);
        }
        self.past_limit[place].get_or_insert_with(Box::default)
    }
}

/// Values not yet in their lists, in arrival order.
#[derive(Debug, Default)]
struct ValueLog {
    places: Vec<u32>,
    values: Vec<f64>,
}

impl ValueLog {
    /// Appends a value for the timer at `place`; true when the log is full.
    #[inline]
    fn push(&mut self, place: u32, value: f64) -> bool {
        self.places.push(place);
        self.values.push(value);
        self.places.len() == LOG_VALUES
    }

    /// Moves every value to the end of its place's list, leaving the log empty.
    fn drain_into(&mut self, lists: &mut [Values]) {
        let places = &self.places;
        for (index, (&place, &value)) in places.iter().zip(&self.values).enumerate() {
            // Two stages ahead: a list's header, then (once it has likely arrived) its end.
            if let Some(&ahead) = places.get(index + 2 * PREFETCH_AHEAD) {
                crate::series::prefetch_read(&lists[ahead as usize]);
            }
            if let Some(&ahead) = places.get(index + PREFETCH_AHEAD) {
                crate::series::prefetch_address(lists[ahead as usize].end_address());
            }
            lists[place as usize].push(value);
        }
        self.places.clear();
        self.values.clear();
    }
}

impl ReaderTimers {
    /// Starts loading the slot where the key with `hash` is looked for first.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// True when the timers' slots are too many to stay in the nearest caches.
    #[inline]
    pub fn is_large(&self) -> bool {
        self.index.is_large()
    }

    /// Second stage, after [`ReaderTimers::prefetch`]: starts loading the key and the state
    /// the first probed slot points at.
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(id) = self.index.likely_id(hash) {
            self.index.prefetch_key(id);
            if let Some(state) = self.states.get(id as usize) {
                crate::series::prefetch_read(state);
            }
        }
    }

    /// Adds `value`, sampled at `rate`, to the timer `key` (whose hash is `hash`); a value
    /// past the first `limit` of the interval is binned at once. `milliseconds`: it came as a
    /// statsd timer (`ms`).
    #[inline]
    pub fn add(&mut self, hash: u64, key: &str, value: f64, rate: f64, limit: usize, milliseconds: bool) {
        self.add_short(hash, key, None, value, rate, limit, milliseconds);
    }

    /// [`ReaderTimers::add`] with the key's short form, when the caller has it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_short(
        &mut self,
        hash: u64,
        key: &str,
        short: Option<proto::ShortKey>,
        value: f64,
        rate: f64,
        limit: usize,
        milliseconds: bool,
    ) {
        let id = self.index.id_or_insert(hash, key, short) as usize;
        if id >= self.states.len() {
            self.states.resize(id + 1, 0);
            self.expected.resize(id + 1, 0);
        }
        let state = self.states[id];
        let received = state as u32 & RECEIVED;
        let place = match received {
            0 => self.open(id),
            _ => (state >> 32) as u32,
        };
        let flag = (state as u32 & MILLISECONDS) | if milliseconds { MILLISECONDS } else { 0 };
        if (received as usize) < limit {
            if rate != 1.0 {
                // Every value before this one went to the list too: this one's index is theirs.
                self.interval.rated.entry(place).or_default().push((received as usize, rate));
            }
            if self.log.push(place, value) {
                self.log.drain_into(&mut self.interval.lists);
            }
        } else {
            self.interval.past_limit_of(place).add(value, rate);
        }
        self.states[id] = u64::from(place) << 32 | u64::from(flag | (received + 1).min(RECEIVED));
    }

    /// Gives the timer `id` the next place of the interval, with room for as many values as
    /// it had last time and an eighth more (up to [`RESERVED_VALUES_AT_MOST`]).
    fn open(&mut self, id: usize) -> u32 {
        let place = self.interval.ids.len() as u32;
        self.interval.ids.push(id as u32);
        let room = room_for(self.expected[id]);
        self.interval.lists.push(Values::with_capacity(room as usize));
        place
    }

    /// The interval so far, leaving the keys (or none, when most of them were idle).
    pub fn take(&mut self) -> TimerDelta {
        self.log.drain_into(&mut self.interval.lists);
        let keys = self.index.keys().clone();
        let interval = std::mem::take(&mut self.interval);
        let milliseconds = interval
            .ids
            .iter()
            .map(|&id| {
                let state = std::mem::take(&mut self.states[id as usize]) as u32;
                self.expected[id as usize] = state & RECEIVED;
                state & MILLISECONDS != 0
            })
            .collect();
        let reset = self.index.len() > 2 * interval.ids.len() + CHURN_SLACK;
        if reset {
            (self.index, self.states, self.expected) = Default::default();
        }
        self.interval.ids.reserve(interval.ids.len());
        self.interval.lists.reserve(interval.ids.len());
        TimerDelta { keys, milliseconds, interval, reset }
    }

    /// The number of keys held.
    #[cfg(test)]
    fn key_count(&self) -> usize {
        self.index.len()
    }
}

/// One reader's interval of timers, as taken: each timer's samples are made when it is
/// iterated (on the flusher's thread, not the reader's).
#[derive(Debug, Default)]
pub struct TimerDelta {
    keys: KeyList,
    /// By place: a value came as `ms`.
    milliseconds: Vec<bool>,
    interval: Interval,
    /// The reader started over at this take: its ids are numbered anew from the next one.
    reset: bool,
}

impl TimerDelta {
    /// The number of timers that received a value.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.interval.ids.len()
    }

    /// True when no timer received a value.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.interval.ids.is_empty()
    }

    /// The reader's keys by id; whether the reader started over at this take (its next
    /// take numbers its keys anew); and each timer's id in the reader and samples, in order
    /// of first arrival.
    pub(crate) fn into_parts(self) -> (KeyList, bool, impl Iterator<Item = (u32, TimerSamples)>) {
        let TimerDelta { keys, milliseconds, interval, reset } = self;
        let Interval { ids, lists, mut rated, mut past_limit } = interval;
        let samples =
            ids.into_iter().zip(lists).zip(milliseconds).enumerate().map(move |(place, ((id, mut values), ms))| {
                let place = place as u32;
                // The flusher holds these until the flush: not with the room a busy timer's
                // doubling left.
                values.shrink_spare();
                let mut samples = match rated.remove(&place) {
                    None => TimerSamples::waiting(values),
                    Some(rates) => replayed(&values, &rates),
                };
                if let Some(past) = past_limit.get_mut(place as usize).and_then(Option::take) {
                    samples.merge(past.into_samples(), usize::MAX);
                }
                samples.milliseconds = ms;
                (id, samples)
            });
        (keys, reset, samples)
    }

    /// Each timer's key and samples, in order of first arrival.
    fn samples(self) -> impl Iterator<Item = (CompactString, TimerSamples)> {
        let (keys, _, samples) = self.into_parts();
        samples.map(move |(id, samples)| (CompactString::from(&keys[id as usize]), samples))
    }
}

/// The samples of values added one by one, in order, those at `rated` places with their rate
/// and the others at 1.
fn replayed(values: &Values, rated: &[(usize, f64)]) -> TimerSamples {
    let mut samples = TimerSamples::default();
    let mut rates = rated.iter().copied().peekable();
    for (place, value) in values.iter().enumerate() {
        let rate = match rates.peek() {
            Some(&(at, rate)) if at == place => {
                rates.next();
                rate
            }
            _ => 1.0,
        };
        samples.add(value, rate, usize::MAX);
    }
    samples
}

impl IntoIterator for TimerDelta {
    type Item = (CompactString, TimerSamples);
    type IntoIter = Box<dyn Iterator<Item = (CompactString, TimerSamples)> + Send>;

    /// Each timer's key and samples, in order of first arrival.
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.samples())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::hash_key;

    fn add(timers: &mut ReaderTimers, key: &str, value: f64) {
        timers.add(hash_key(key), key, value, 1.0, 100, true);
    }

    fn values_of(delta: TimerDelta) -> Vec<(String, Vec<f64>)> {
        delta.into_iter().map(|(key, samples)| (key.to_string(), samples.values.into_doubles())).collect()
    }

    #[test]
    fn a_timer_reserves_what_it_had_last_time_and_an_eighth_more() {
        for (expected, room) in [(0, 0), (1, 3), (8, 11), (75, 86), (900, 1014), (1000, 1024), (50_000, 1024)] {
            assert_eq!(room_for(expected), room, "{expected} values last time");
        }
        let mut timers = ReaderTimers::default();
        (0..75).for_each(|i| add(&mut timers, "steady", f64::from(i)));
        timers.take();
        (0..80).for_each(|i| add(&mut timers, "steady", f64::from(i)));
        assert_eq!(timers.interval.lists[0].capacity(), 86, "a few more values than last time fit in the room");
    }

    #[test]
    fn at_a_steady_rate_the_lists_hold_little_more_room_than_values() {
        // 2000 timers, each 75 values an interval, one more or one less as intervals cut the
        // stream: room reserved over values held, in the fourth interval.
        let mut timers = ReaderTimers::default();
        let keys: Vec<String> = (0..2000).map(|i| format!("steady.{i}")).collect();
        for interval in 0..4 {
            for (i, key) in keys.iter().enumerate() {
                let count = 75 + (i + interval) % 3 - 1;
                (0..count).for_each(|v| add_unlimited(&mut timers, key, v as f64));
            }
            timers.log.drain_into(&mut timers.interval.lists);
            let lists = &timers.interval.lists;
            let (room, held): (usize, usize) =
                (lists.iter().map(Values::capacity).sum(), lists.iter().map(Values::len).sum());
            if interval == 3 {
                assert!(room * 100 <= held * 120, "{room} values of room for {held} values");
            }
            timers.take();
        }
    }

    fn add_unlimited(timers: &mut ReaderTimers, key: &str, value: f64) {
        timers.add(hash_key(key), key, value, 1.0, usize::MAX, true);
    }

    #[test]
    fn takes_only_the_interval_and_keeps_the_keys() {
        let mut timers = ReaderTimers::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("timer.{i}")).collect();
        keys.iter().enumerate().for_each(|(i, key)| add(&mut timers, key, i as f64));
        add(&mut timers, "timer.7", 1.5);
        let first = values_of(timers.take());
        assert_eq!(first.len(), 5000);
        assert_eq!(first[7], ("timer.7".to_string(), vec![7.0, 1.5]), "in order of first arrival");
        assert_eq!(timers.key_count(), 5000, "keys stay");
        add(&mut timers, "timer.9", 2.0);
        add(&mut timers, "new", 3.0);
        let second = values_of(timers.take());
        assert_eq!(second, [("timer.9".to_string(), vec![2.0]), ("new".to_string(), vec![3.0])]);
        assert!(timers.take().is_empty());
    }

    #[test]
    fn a_reader_whose_keys_went_idle_starts_over() {
        let mut timers = ReaderTimers::default();
        (0..CHURN_SLACK + 10).for_each(|i| add(&mut timers, &format!("t{i}"), 1.0));
        assert_eq!(timers.take().len(), CHURN_SLACK + 10);
        add(&mut timers, "t1", 1.0);
        assert_eq!(timers.take().len(), 1);
        assert_eq!(timers.key_count(), 0, "started over");
        add(&mut timers, "t2", 2.0);
        assert_eq!(values_of(timers.take()), [("t2".to_string(), vec![2.0])]);
    }

    /// Lines of three timers interleaved, each (value, rate, is `ms`), against a limit: the
    /// grouped samples are those of adding each timer's values one by one in arrival order,
    /// settled (past the limit the histogram is compared, as the values are dropped).
    #[test]
    fn grouped_samples_are_those_of_adding_in_arrival_order() {
        type Lines = &'static [(&'static str, f64, f64, bool)];
        let cases: &[(&str, usize, Lines)] = &[
            ("rate 1, within the limit", 10, &[("a", 3.0, 1.0, true), ("b", 1.5, 1.0, false), ("a", 1.0, 1.0, true)]),
            (
                "a sample rate among rate-1 values",
                10,
                &[("a", 3.0, 1.0, true), ("a", 2.0, 0.5, true), ("b", 7.0, 0.1, true), ("a", 5.0, 1.0, true)],
            ),
            (
                "rates that carry fractions",
                10,
                &[("a", 1.0, 0.3, true), ("a", 2.0, 0.3, true), ("a", 3.0, 0.3, true), ("a", 4.0, 1.0, true)],
            ),
            (
                "past the limit",
                2,
                &[("a", 1.0, 1.0, true), ("b", 9.0, 1.0, false), ("a", 2.0, 1.0, true), ("a", 3.0, 1.0, true)],
            ),
            (
                "past the limit at a rate",
                2,
                &[("a", 1.0, 0.5, true), ("a", 2.0, 1.0, true), ("a", 3.0, 0.25, true), ("a", 0.5, 1.0, true)],
            ),
            ("zero limit", 0, &[("a", 1.0, 1.0, false), ("a", 2.0, 0.5, false)]),
            ("ms and h under one name", 10, &[("a", 1.0, 1.0, false), ("a", 2.0, 1.0, true)]),
        ];
        for &(case, limit, lines) in cases {
            let mut timers = ReaderTimers::default();
            let mut expected: Vec<(&str, TimerSamples)> = Vec::new();
            for &(key, value, rate, milliseconds) in lines {
                timers.add(hash_key(key), key, value, rate, limit, milliseconds);
                let place = match expected.iter().position(|(k, _)| *k == key) {
                    Some(place) => place,
                    None => {
                        expected.push((key, TimerSamples::default()));
                        expected.len() - 1
                    }
                };
                let samples = &mut expected[place].1;
                samples.add(value, rate, limit);
                samples.milliseconds |= milliseconds;
            }
            let grouped: Vec<_> = timers.take().into_iter().collect();
            assert_eq!(grouped.len(), expected.len(), "{case}");
            for ((key, mut got), (want_key, mut want)) in grouped.into_iter().zip(expected) {
                assert_eq!(key, want_key, "{case}");
                assert_eq!(got.is_complete(), want.is_complete(), "{case}: {key}");
                got.settle();
                want.settle();
                assert_eq!(got, want, "{case}: {key}");
            }
        }
    }

    /// Enough lines to move the log to the lists twice mid-interval, rates among them and
    /// across those moves, one timer past the limit: the same samples as adding one by one.
    #[test]
    fn values_moved_from_the_log_in_batches_keep_their_rates_and_order() {
        let (limit, keys) = (30_000, ["x", "y", "z"]);
        let mut timers = ReaderTimers::default();
        let mut expected: Vec<TimerSamples> = vec![TimerSamples::default(); 3];
        for line in 0..(3 * LOG_VALUES + 12_345) {
            // x gets most lines (past the limit), y and z fewer; every 7th line at rate 0.5.
            let which = [0, 0, 0, 1, 0, 2][line % 6];
            let (value, rate) = ((line % 1000) as f64, if line % 7 == 0 { 0.5 } else { 1.0 });
            timers.add(hash_key(keys[which]), keys[which], value, rate, limit, which != 2);
            expected[which].add(value, rate, limit);
            expected[which].milliseconds |= which != 2;
        }
        let grouped: Vec<_> = timers.take().into_iter().collect();
        assert_eq!(grouped.iter().map(|(key, _)| key.as_str()).collect::<Vec<_>>(), keys);
        for ((key, mut got), mut want) in grouped.into_iter().zip(expected) {
            assert_eq!((got.received, got.is_complete()), (want.received, want.is_complete()), "{key}");
            got.settle();
            want.settle();
            assert_eq!(got, want, "{key}");
        }
    }

    #[test]
    fn the_log_starts_each_interval_empty() {
        let mut timers = ReaderTimers::default();
        (0..1000).for_each(|i| add(&mut timers, "a", f64::from(i)));
        let (_, busy) = timers.take().into_iter().next().unwrap();
        assert_eq!((busy.received, busy.values.len(), busy.histogram.count()), (1000, 0, 1000), "past the limit");
        add(&mut timers, "a", 5.0);
        let (_, samples) = timers.take().into_iter().next().unwrap();
        assert_eq!((samples.values.into_doubles(), samples.received), (vec![5.0], 1));
    }
}
